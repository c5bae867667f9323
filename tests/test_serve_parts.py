"""serve and parts of a tree: the acquire tool takes parts, the holds (and the holds a
session lost) show them, the check tool answers what the CLI's check does, bad parts
and paths are tool errors saying what the CLI says, and a place kept between calls is
resumed only by an acquire of the same set of parts; real servers over stdio."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, posix_only, reaped
from sessions import Served, serve_with
from stores import THREE_STORES, StoreUnderTest
from test_serve import CUT, HOLD_VIEW, LEASE, _cut_with_a_later_waiter, _in_line, _line_becomes

pytestmark = posix_only("sessions over POSIX pipes; the Windows lane installs no MCP SDK")


def _keys(skf: ModuleType, parts: list[str]) -> set[str]:
    return {skf._part_key(part) for part in parts}


@THREE_STORES
@pytest.mark.timeout(120)
def test_a_session_holds_parts_shows_them_and_checks_paths_as_the_cli_does(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    store: StoreUnderTest,
) -> None:
    """On the three stores: the acquire tool takes parts (a CLI run takes another part
    beside); holds shows them after the kind; check answers the CLI's check JSON, then
    lost_holds, leaving out the parts of the owner it names; a hold the CLI released
    is told once in lost_holds with its parts."""
    lock = store.lock
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    taken = served.tool("acquire", lock=lock, owner="wf:agent", parts=["src/**", "./docs/"])
    assert taken["acquired"] is True, taken
    assert taken["message"].startswith(f"acquired the parts docs, 'src/**' of {lock} for ")
    owner = taken["owner"]
    beside = cli("acquire", "--lock", lock, "--owner", "wf:cli:1", "--part", "tests")
    assert beside.code == 0, beside
    refused = served.tool("acquire", lock=lock, owner="wf:other", parts=["src/api"])
    assert refused["acquired"] is False and refused["held_by"] == owner, refused

    [view] = served.tool("holds")["holds"]
    assert list(view) == HOLD_VIEW
    assert (view["owner"], view["kind"], view["parts"], view["state"]) == (
        owner,
        "exclusive",
        ["docs", "src/**"],
        "held",
    )

    paths = ["src/a.py", "tests/x", "README"]
    checked = served.tool("check", lock=lock, paths=paths)
    printed = cli("check", "--lock", lock, *paths)
    assert printed.code == 3

    def renewal_aside(answer: dict[str, Any]) -> dict[str, Any]:
        """The answer, the session hold's stale_at set aside: it may renew between."""
        reserved = [
            {**entry, "stale_at": None} if entry["held_by"] == owner else entry
            for entry in answer["reserved"]
        ]
        return {**answer, "reserved": reserved}

    assert renewal_aside(checked) == renewal_aside({**printed.json, "lost_holds": []})
    assert [(e["path"], e["held_by"]) for e in checked["reserved"]] == [
        ("src/a.py", owner),
        ("tests/x", "wf:cli:1"),
    ]
    mine = served.tool("check", lock=lock, paths=paths, owner=owner)
    assert mine == {**cli("check", "--lock", lock, "--owner", owner, *paths).json, "lost_holds": []}
    assert [e["held_by"] for e in mine["reserved"]] == ["wf:cli:1"]

    assert cli("release", "--lock", lock, "--owner", owner).json["released"] is True
    told: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while not told:  # found released at its next renewal, told once
        assert time.monotonic() < deadline, "the release was never seen"
        told = served.tool("holds")["lost_holds"]
        time.sleep(0.1)
    [lost] = told
    assert list(lost) == HOLD_VIEW
    assert (lost["owner"], lost["parts"], lost["state"]) == (owner, ["docs", "src/**"], "released")
    served.end_input()
    assert served.exit_code() == 0, served.err()


def test_bad_parts_and_paths_are_tool_errors_saying_what_the_cli_says(
    cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """Parts that are no list, an empty list, a bad part, parts with slots; a check
    with no paths, too many, a bad one, an owner without its run id, a relative lock:
    each a tool error (the CLI's message, its options named as the tool names them),
    nothing made; ten thousand paths are one call's."""
    served = serving(cwd=tmp_path)
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")

    def clis(*args: str) -> str:
        return cli(*args).error.replace("--", "")

    def acquiring(**more: Any) -> str:
        return served.tool_error("acquire", {"lock": lock, "owner": "wf:s", **more})

    assert acquiring(parts=["/src"]) == clis(
        "acquire", "--lock", lock, "--owner", "wf:s", "--part", "/src"
    )
    assert acquiring(parts=["ok", "a[b]"]) == clis(
        "acquire", "--lock", lock, "--owner", "wf:s", "--part", "ok", "--part", "a[b]"
    )
    assert acquiring(parts=["src"], slots=2) == (
        "usage error: parts have no count of slots: give parts or slots 2, not both"
    )
    assert acquiring(parts="src") == (
        "parts must be a list of strings, not a string: put one part in a list"
    )
    assert acquiring(parts=[]) == "parts is empty: leave parts out to hold the lock whole"
    assert acquiring(parts=["a", 7]) == "a part must be a string, not int"

    def checking(**given: Any) -> str:
        return served.tool_error("check", {"lock": lock, **given})

    assert checking(paths=["ok", "a/../b"]) == cli("check", "--lock", lock, "a/../b").error
    assert (
        checking(paths=["a"], owner="wf:s")
        == cli("check", "--lock", lock, "--owner", "wf:s", "a").error
    )
    assert checking() == "usage error: paths is required: a list of paths, as git prints them"
    assert checking(paths="src") == (
        "paths must be a list of strings, not a string: put one path in a list"
    )
    assert checking(paths=[f"p/{n}" for n in range(10_001)]) == (
        "usage error: paths holds 10001 paths; a call takes at most 10000: check the rest in"
        " another call"
    )
    relative = served.tool_error("check", {"lock": "locks/run.lock", "paths": ["a"]})
    assert "is a relative path" in relative
    assert served.tool_error("check", {"lock": lock, "paths": [], "part": "x"}) == (
        "usage error: check takes lock, paths, owner, not 'part'"
    )
    many = served.tool("check", lock=lock, paths=[f"p/{n}" for n in range(10_000)])
    assert many["free"] is True and many["message"].startswith("none of the 10000 paths")
    assert served.tool("holds") == {"holds": [], "lost_holds": []}
    assert list(tmp_path.iterdir()) == []
    served.end_input()
    assert served.exit_code() == 0, served.err()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("again", ["same-parts", "other-parts", "whole"])
def test_a_kept_place_is_resumed_only_by_the_same_set_of_parts(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    tmp_path: Path,
    again: str,
) -> None:
    """A waiting acquire of parts cut at the call limit keeps its place ahead of a later
    CLI waiter. The same set of parts, spelled another way and in another order,
    resumes it: the lock, once freed, is the agent's, as the same owner. Other parts,
    or the lock whole, join at the end of the line instead, as a new take."""
    served = serving(argv=serve_with("--lease", f"{LEASE:g}s", longest_call_wait_sec=CUT))
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    parts = ["src/**", "docs"]
    with reaped() as started:
        _, answer, waiter = _cut_with_a_later_waiter(
            skf, cli, served, lock, started, parts=parts, past_a_lapse=False
        )
        owner = answer["owner"]

        if again == "same-parts":
            assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
            same = ["./DOCS/", "src/***"]  # one set of keys with parts
            resumed = served.tool("acquire", lock=lock, owner="wf:agent", wait="2m", parts=same)
            assert resumed["acquired"] is True and resumed["owner"] == owner, resumed
            assert resumed["message"].startswith("after waiting "), resumed
            [view] = served.tool("holds")["holds"]
            assert _keys(skf, view["parts"]) == _keys(skf, parts)
            assert waiter.poll() is None and _in_line(skf, lock) == ["wf:later:1"]
        else:
            other = {"parts": ["tests"]} if again == "other-parts" else {}
            served.call("acquire", {"lock": lock, "owner": "wf:agent", "wait": "2m", **other}, "b")
            served.await_progress("b", 1)
            [new] = [n for n in _in_line(skf, lock) if n not in (owner, "wf:later:1")]
            assert new.startswith("wf:agent:") and new != owner, new  # a new take
            _line_becomes(skf, lock, ["wf:later:1", new], within=5)
    served.end_input()
    assert served.exit_code() == 0, served.err()


def test_check_is_one_of_the_tools_listed(serving: Callable[..., Served]) -> None:
    served = serving()
    served.initialize()
    listed = served.reply(served.request("tools/list"))["result"]["tools"]
    [check] = [tool for tool in listed if tool["name"] == "check"]
    schema = check["inputSchema"]
    assert schema["required"] == ["lock", "paths"]
    assert schema["properties"]["paths"]["maxItems"] == 10_000
    assert "reserved" in check["description"]
    served.end_input()
    assert served.exit_code() == 0, served.err()
