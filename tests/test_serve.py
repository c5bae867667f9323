"""serve: the MCP server of an agent session, driven as clients drive it, in real
processes: line by line over its stdio (one JSON-RPC message a line) and with the MCP
SDK's own client. Its holds are the session's: renewed while it lives, freed when it
ends (stdin closed, SIGTERM, SIGINT, SIGHUP, its parent gone), lapsed within the lease
when it is killed outright; a hold its owner had before is kept, and one the session
lost is told, never taken back.

What a store keeps (renewal, the end of a session, the lapse, turns, a CLI release, a
place kept between calls) is proven on the three stores, the renewal and the end of a
session through a Redis Cluster too; the server's own mechanics (each
signal, the parent gone, a closed stdout, uv, bad input, the schemas, progress and
cancelling) on a file.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import UV, Run, Started, linux_only, posix_only, reaped
from loader import SCRIPT
from servers import start_redis
from sessions import (
    FREED_WITHIN,
    SDK,
    SERVE,
    SESSIONS,
    TOOLS,
    Served,
    answer_of,
    freed,
    held_throughout,
    sdk_answer,
    sdk_session,
    serve_with,
    taken_by_another,
)
from signals import freeze_outside_the_guard
from stores import THREE_STORES, StoreUnderTest
from windows_rules import follow_windows_rules

pytestmark = posix_only(
    "sessions ended by POSIX signals and SIGKILL; the Windows lane installs no MCP SDK"
)

LEASE = 3.0  # the shortest lease there is: renewed every second
# A killed session's hold lapses within its lease of its last renewal; another run sees
# it free within this more (a status poll, a server's expiry).
LAPSE_MARGIN = 2.0
# What the holds tool shows of each hold.
HOLD_VIEW = [
    "lock",
    "owner",
    "fence",
    "kind",
    "parts",
    "state",
    "kept",
    "last_renewal",
    "message",
]


def _under(store: StoreUnderTest) -> str:
    """A place to list that holds ``store``'s lock: its folder, or its key as a prefix."""
    return os.path.dirname(store.lock) if store.kind == "file" else store.lock


def _session_record(store: StoreUnderTest, owner: str) -> dict[str, Any]:
    """The record of a session hold of ``owner``: marked as the session's, with the
    lease for its timeout."""
    record = store.record()
    assert record["owner"] == owner, record
    assert record["session"] is True, record
    assert record["stale_after_seconds"] == LEASE, record
    return record


# --- On the stores ------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_session_hold_is_renewed_while_the_session_lives_and_freed_when_its_stdin_closes(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    store: StoreUnderTest,
) -> None:
    """A hold taken through the server outlives three leases, its fence unchanged; a
    CLI release of another of its holds stands (told once as released, never undone);
    each tool answers the CLI's keys for its command (acquire's with its fence), then
    the holds the session lost; once stdin closes another run takes the lock within
    2 s, and the server exits 0."""
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    began = time.monotonic()
    taken = served.tool("acquire", lock=store.lock, owner="wf:session")
    assert taken["acquired"] is True and taken["lost_holds"] == [], taken
    owner, fence = taken["owner"], taken["fence"]
    assert owner.startswith("wf:session:") and isinstance(fence, int)
    _session_record(store, owner)

    # Each tool's keys are the CLI's for that command, outcome for outcome.
    refused = served.tool("acquire", lock=store.lock, owner="wf:other:1")
    cli_refused = cli("acquire", "--lock", store.lock, "--owner", "wf:cli:1")
    assert refused["acquired"] is False and refused["fence"] is None
    assert list(refused) == [*cli_refused.json, "fence", "lost_holds"]
    not_released = served.tool("release", lock=store.lock, owner="wf:other:1")
    cli_not_released = cli("release", "--lock", store.lock, "--owner", "wf:cli:1")
    assert not_released["released"] is False
    assert list(not_released) == [*cli_not_released.json, "lost_holds"]

    # Another hold of the session, released by the CLI: it stays released.
    second = StoreUnderTest(store.kind, store.lock + "-2")
    other = served.tool("acquire", lock=second.lock, owner="wf:session")
    assert other["acquired"] is True
    released = cli("release", "--lock", second.lock, "--owner", other["owner"]).json
    assert released["released"] is True

    # Past three leases: held by the session all along (renewed), the other free.
    until = began + 3.5 * LEASE
    while time.monotonic() < until:
        held_throughout(skf, store.lock, owner, fence, time.monotonic() + 0.5)
        assert skf.status(second.lock, 60.0)["state"] == "free"
    status = cli("status", "--lock", store.lock).json
    assert status["held_by"] == owner and status["fence"] == fence
    _session_record(store, owner)

    answer = served.tool("status", lock=store.lock)
    assert list(answer) == [*status, "lost_holds"]
    assert answer["held_by"] == owner and answer["fence"] == fence
    [told] = answer["lost_holds"]
    assert list(told) == HOLD_VIEW
    assert (told["lock"], told["owner"], told["state"], told["kept"]) == (
        second.lock,
        other["owner"],
        "released",
        False,
    )
    holds = served.tool("holds")
    assert list(holds) == ["holds", "lost_holds"] and holds["lost_holds"] == []  # told once
    states = {(h["lock"], h["owner"], h["fence"]): h["state"] for h in holds["holds"]}
    assert states == {
        (store.lock, owner, fence): "held",
        (second.lock, other["owner"], other["fence"]): "released",
    }
    listed = served.tool("list", under=_under(store))
    cli_listed = cli("list", "--under", _under(store)).json
    assert list(listed) == [*cli_listed, "lost_holds"]
    assert store.lock in [lock["lock"] for lock in listed["locks"]]
    assert skf.status(second.lock, 60.0)["state"] == "free"

    ended = served.end_input()
    another = freed(skf, cli, store.lock, ended)
    assert list(taken) == [*another, "fence", "lost_holds"]
    assert served.exit_code() == 0, served.err()


@THREE_STORES
@pytest.mark.timeout(120)
def test_sessions_take_turns_and_a_killed_session_lapses_within_its_lease(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    store: StoreUnderTest,
) -> None:
    """Session B waits in line while A holds, told its place each beat; A's stdin
    closes and B has the lock within 2 s. A CLI renewal under B's owner keeps the
    session's lease (a session's promise holds whoever renews), so once B is killed
    outright its hold lapses within the lease."""
    first, second = serving("--lease", f"{LEASE:g}s"), serving("--lease", f"{LEASE:g}s")
    first.initialize()
    second.initialize()
    assert first.tool("acquire", lock=store.lock, owner="wf:first")["acquired"] is True
    waiting = second.call(
        "acquire", {"lock": store.lock, "owner": "wf:second", "wait": "30s"}, token="turn"
    )
    told = second.await_progress("turn", 2)  # in line, and again a beat later
    for progress in told:
        assert progress["total"] == 30 and "1st in line: " in progress["message"]
    assert second.progress("turn") and waiting not in second.replies

    ended = first.end_input()
    result = second.result(waiting, within=ended + FREED_WITHIN - time.monotonic())
    answer = answer_of(result)
    assert answer["acquired"] is True and answer["owner"].startswith("wf:second:")
    assert answer["message"].startswith("after waiting ")
    assert first.exit_code() == 0, first.err()
    _session_record(store, answer["owner"])

    owner = answer["owner"]
    renewed = cli("acquire", "--lock", store.lock, "--owner", owner, "--stale-after", "60m")
    assert renewed.json["acquired"] is True and renewed.json["refreshed"] is True
    assert list(answer) == [*renewed.json, "fence", "lost_holds"]
    _session_record(store, answer["owner"])  # the lease, not 60 minutes

    killed = second.signal(signal.SIGKILL)
    taken_by_another(skf, cli, store.lock, killed + LEASE + LAPSE_MARGIN)


# --- The server's own mechanics, on a file ----------------------------------------------


@pytest.mark.timeout(120)
def test_the_tools_their_schemas_and_waits_told_answered_beside_and_cancelled(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """With the SDK's client: the five tools, each schema closed to other arguments.
    While more acquires wait in line than any default pool has threads, each is told
    its place a beat at a time (of a wait cut to 50 s) and a status call is answered;
    cancelled, they leave the line within a few seconds."""
    import anyio

    lock = str(tmp_path / "locks" / "run.lock")
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    waiters = 33  # more at once than a default pool of threads runs (32 at most)
    told: dict[int, list[tuple[float, float | None, str | None]]] = {}

    async def told_of(n: int, done: float, total: float | None, message: str | None) -> None:
        told.setdefault(n, []).append((done, total, message))

    async def session() -> None:
        with (tmp_path / "serve.err").open("w") as errlog:
            async with sdk_session(errlog=errlog) as client:
                listed = await client.list_tools()
                schemas = {tool.name: tool.input_schema for tool in listed.tools}
                assert list(schemas) == TOOLS
                assert {name: s.get("required", []) for name, s in schemas.items()} == {
                    "acquire": ["lock", "owner"],
                    "release": ["lock", "owner"],
                    "status": ["lock"],
                    "check": ["lock", "paths"],
                    "list": ["under"],
                    "holds": [],
                }
                assert {name: list(s["properties"]) for name, s in schemas.items()} == {
                    "acquire": ["lock", "owner", "wait", "slots", "shared", "parts"],
                    "release": ["lock", "owner"],
                    "status": ["lock"],
                    "check": ["lock", "paths", "owner"],
                    "list": ["under"],
                    "holds": [],
                }
                for schema in schemas.values():
                    assert schema["type"] == "object"
                    assert schema["additionalProperties"] is False
                holds = sdk_answer(await client.call_tool("holds", {}))
                assert holds == {"holds": [], "lost_holds": []}

                async with anyio.create_task_group() as waiting:
                    for n in range(waiters):
                        arguments = {"lock": lock, "owner": f"wf:waiter{n}", "wait": "2m"}
                        call = functools.partial(
                            client.call_tool,
                            "acquire",
                            arguments,
                            progress_callback=functools.partial(told_of, n),
                        )
                        waiting.start_soon(call)
                    with anyio.fail_after(40):
                        while len(told) < waiters or len(told[0]) < 2:
                            await anyio.sleep(0.05)
                    status = await client.call_tool("status", {"lock": lock}, 30)
                    waiting_now = sdk_answer(status)["waiting"]
                    in_line = [place["owner"].rpartition(":")[0] for place in waiting_now]
                    assert sorted(in_line) == sorted(f"wf:waiter{n}" for n in range(waiters))
                    waiting.cancel_scope.cancel()

                line = StoreUnderTest("file", lock)
                with anyio.fail_after(10):  # left, not lapsed: a lapsed place stays listed
                    while line.line_tickets():
                        await anyio.sleep(0.05)
                status = sdk_answer(await client.call_tool("status", {"lock": lock}))
                assert status["waiting"] == [] and status["held_by"] == "wf:holder:1"

    anyio.run(session)
    for n in range(waiters):
        for done, total, message in told[n]:
            assert 0 <= done <= 50 and total == 50  # 2 minutes asked, 50 s a call at most
            assert message is not None and " in line: lock " in message


@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_ends_the_session_and_frees_its_holds(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    tmp_path: Path,
    name: str,
) -> None:
    """SIGTERM, SIGINT or SIGHUP: another run takes the session's lock within 2 s and
    the server exits 0."""
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    assert served.tool("acquire", lock=lock, owner="wf:session")["acquired"] is True
    sent = served.signal(getattr(signal, name))
    freed(skf, cli, lock, sent)
    assert served.exit_code() == 0, served.err()


@pytest.mark.timeout(90)
@linux_only("a subreaper (prctl), to see how a server whose parent was killed ends")
def test_a_session_ends_when_its_client_is_killed(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """A client process (the SDK's) that started the server dies by SIGKILL: the
    server's stdin ends and its parent is gone. Another run takes the lock within 2 s
    and the server exits 0."""
    lock = str(tmp_path / "locks" / "run.lock")
    client = [sys.executable, SESSIONS, "client", lock, "wf:session", f"{LEASE:g}s"]
    reaper = serving(argv=[sys.executable, SESSIONS, "reap", str(tmp_path / "log"), *client])
    pid = reaper.report("started")["started"]
    answer = reaper.line(time.monotonic() + 60)
    assert answer["acquired"] is True and answer["owner"].startswith("wf:session:"), answer
    killed = _kill(pid)
    freed(skf, cli, lock, killed)
    _both_ended(reaper, pid, tmp_path / "log")


@pytest.mark.timeout(120)
@linux_only("a subreaper (prctl), to see how a server whose parent was killed ends")
def test_a_session_under_uv_run_ends_when_uv_alone_is_killed(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """The server as a client starts it, under ``uv run --with 'mcp...'``; the client
    kills uv alone, leaving the server's stdin open: the server finds its parent gone,
    another run takes the lock within 2 s, and the server exits 0."""
    uv = UV or shutil.which("uv")
    assert uv is not None, "the suite runs under uv run, which names itself in UV"
    # This Python: uv brings the SDK for it (the compiled parts are per version, and the
    # cache may hold none yet for it: so not --offline).
    python = ["--python", sys.executable]
    serve = [uv, "run", *python, "--with", SDK, str(SCRIPT), "serve", "--lease", "3s"]
    environment = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    reaper = serving(
        argv=[sys.executable, SESSIONS, "reap", str(tmp_path / "log"), *serve],
        cwd=tmp_path,
        env=environment,
    )
    pid = reaper.report("started")["started"]
    reaper.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    assert reaper.tool("acquire", lock=lock, owner="wf:session")["acquired"] is True
    killed = _kill(pid)
    freed(skf, cli, lock, killed)
    _both_ended(reaper, pid, tmp_path / "log")


def _kill(pid: int) -> float:
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def _both_ended(reaper: Served, killed: int, log: Path) -> None:
    """The reaper saw ``killed`` die by SIGKILL and every other process under it (the
    server) exit 0, and then ended, none left."""
    codes: dict[int, int] = {}
    while True:
        report = reaper.report("exited", within=30)
        codes[report["exited"]] = report["code"]
        if len(codes) >= 2 and killed in codes:
            break
    assert codes.pop(killed) == -signal.SIGKILL
    assert set(codes.values()) == {0}, (codes, log.read_text())
    reaper.report("done")
    assert reaper.exit_code() == 0


@pytest.mark.timeout(90)
def test_a_session_keeps_what_its_owner_held_and_ends_while_a_call_waits(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """A hold its owner had (the CLI's, 60 minutes) taken through the server is kept:
    renewed as it was, never shortened, and still held after the session ends. As
    stdin closes while an acquire waits, what the session took is freed within 2 s
    all the same, and its place does not stand in line."""
    locks = tmp_path / "locks"
    kept_lock, own_lock, busy_lock = (str(locks / n) for n in ("kept", "own", "busy"))
    assert cli("acquire", "--lock", kept_lock, "--owner", "wf:keeper:1").code == 0
    assert cli("acquire", "--lock", busy_lock, "--owner", "wf:holder:1").code == 0
    kept_store = StoreUnderTest("file", kept_lock)
    before = kept_store.record()
    assert before["stale_after_seconds"] == 3600

    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    kept = served.tool("acquire", lock=kept_lock, owner="wf:keeper:1")
    assert kept["acquired"] is True and kept["refreshed"] is True
    assert kept["owner"] == "wf:keeper:1" and kept["stale_after_minutes"] == 60
    [view] = served.tool("holds")["holds"]
    assert (view["lock"], view["state"], view["kept"]) == (kept_lock, "held", True)
    record, deadline = kept_store.record(), time.monotonic() + 10
    while record["acquired_at"] == kept_store.record()["acquired_at"]:  # until a renewal
        assert time.monotonic() < deadline, "the kept hold was never renewed"
        time.sleep(0.1)
    assert kept_store.record()["stale_after_seconds"] == 3600
    assert "session" not in kept_store.record()

    assert served.tool("acquire", lock=own_lock, owner="wf:session")["acquired"] is True
    waiting = served.call("acquire", {"lock": busy_lock, "owner": "wf:waiter", "wait": 40}, "w")
    served.await_progress("w", 1)
    assert len(StoreUnderTest("file", busy_lock).line_tickets()) == 1

    ended = served.end_input()
    freed(skf, cli, own_lock, ended)
    assert served.exit_code() == 0, served.err()
    assert waiting not in served.replies
    deadline = time.monotonic() + 10  # left the line, or at worst lapsed from it
    while skf.status(busy_lock, 60.0)["waiting"]:
        assert time.monotonic() < deadline, "the ended session's place stands in line"
        time.sleep(0.05)
    status = cli("status", "--lock", kept_lock).json
    assert status["held_by"] == "wf:keeper:1" and status["stale_after_minutes"] == 60
    assert kept_store.record()["stale_after_seconds"] == 3600


@pytest.mark.timeout(90)
def test_a_hold_lost_to_another_run_is_told_and_never_taken_back(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """The server frozen (SIGSTOP) past its lease, another run takes the lock; woken,
    the session tells the hold lost, in lost_holds once and in holds, and leaves it to
    the other run through several renewal periods, and free once that run releases."""
    lock = str(tmp_path / "locks" / "run.lock")
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    taken = served.tool("acquire", lock=lock, owner="wf:session")
    assert taken["acquired"] is True
    freeze_outside_the_guard(served.pid, lock)
    try:
        another = taken_by_another(skf, cli, lock, time.monotonic() + LEASE + 30)
    finally:
        os.kill(served.pid, signal.SIGCONT)
    assert another["owner"] == "wf:another:1"
    fence = skf.status(lock, 60.0)["fence"]
    assert fence != taken["fence"]

    told: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while True:
        answer = served.tool("holds")
        told += answer["lost_holds"]
        [view] = answer["holds"]
        if view["state"] != "held":
            break
        assert time.monotonic() < deadline, "the loss was never seen"
        time.sleep(0.1)
    assert view["state"] == "lost" and view["fence"] == taken["fence"]
    assert [(h["lock"], h["owner"], h["state"]) for h in told] == [(lock, taken["owner"], "lost")]
    held_throughout(skf, lock, "wf:another:1", fence, time.monotonic() + LEASE)
    released = cli("release", "--lock", lock, "--owner", "wf:another:1").json
    assert released["released"] is True
    free_until = time.monotonic() + LEASE  # free, three renewal periods: not taken back
    while time.monotonic() < free_until:
        assert skf.status(lock, 60.0)["state"] == "free"
        time.sleep(0.1)
    assert served.tool("holds")["lost_holds"] == []
    served.end_input()
    assert served.exit_code() == 0, served.err()


def test_bad_input_is_a_tool_error_saying_what_the_cli_says(
    cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """Line by line: the tools listed; a relative lock path, an unknown tool or
    argument, a bad owner or wait, slots with shared: each a tool error (isError) with
    the CLI's message, naming the argument as the tool does. Nothing is taken, and the
    session goes on."""
    served = serving(cwd=tmp_path)  # where a relative path taken by mistake would land
    served.initialize()
    listed = served.reply(served.request("tools/list"))["result"]["tools"]
    assert [tool["name"] for tool in listed] == TOOLS
    lock = str(tmp_path / "locks" / "run.lock")

    for name, arguments in [
        ("acquire", {"lock": "locks/run.lock", "owner": "wf:s"}),
        ("release", {"lock": "run.lock", "owner": "wf:s:1"}),
        ("status", {"lock": "./run.lock"}),
        ("list", {"under": "locks"}),
    ]:
        message = served.tool_error(name, arguments)
        assert "is a relative path" in message and "give it as an absolute path" in message
    assert served.tool_error("steal", {"lock": lock}) == (
        "unknown tool 'steal'; the tools are acquire, release, status, check, list, holds"
    )
    assert served.tool_error("acquire", {"lock": lock, "owner": "wf:s", "stale_after": 60}) == (
        "usage error: acquire takes lock, owner, wait, slots, shared, parts, not 'stale_after'"
    )
    missing = served.tool_error("acquire", {"lock": lock})
    assert missing == "usage error: owner is required: a string"

    def clis(*args: str) -> str:
        """The CLI's message for ``args``, its options named as the tool names them."""
        return cli("acquire", "--lock", lock, *args).error.replace("--", "")

    assert served.tool_error("acquire", {"lock": lock, "owner": "nobody"}) == clis(
        "--owner", "nobody"
    )
    assert served.tool_error("acquire", {"lock": lock, "owner": "wf:s", "wait": "soon"}) == clis(
        "--owner", "wf:s", "--wait", "soon"
    )
    assert served.tool_error(
        "acquire", {"lock": lock, "owner": "wf:s", "slots": 2, "shared": True}
    ) == clis("--owner", "wf:s", "--slots", "2", "--shared")
    negative = served.tool_error("acquire", {"lock": lock, "owner": "wf:s", "wait": -1})
    assert negative == "wait must be a finite number of seconds >= 0 and <= 86400, not -1"

    assert served.tool("holds") == {"holds": [], "lost_holds": []}
    assert os.listdir(tmp_path) == []
    served.end_input()
    assert served.exit_code() == 0, served.err()


@pytest.mark.parametrize(
    ("lease", "message"),
    [
        (
            "1s",
            "--lease of '1s' is too short to renew the lock safely while work runs;"
            " give at least 3 seconds",
        ),
        (
            "x",
            "usage error: --lease must be a number of seconds or a duration such as 90s,"
            " 10m, 2h, 1.5h, 1d or 1h30m, not 'x'",
        ),
    ],
)
def test_serve_refuses_a_lease_it_cannot_keep(
    cli: Callable[..., Run], lease: str, message: str
) -> None:
    run = cli("serve", "--lease", lease)
    assert run.code == 1 and run.error == message


def test_serve_without_the_sdk_says_how_to_run_it(tmp_path: Path) -> None:
    """A Python that lacks the MCP SDK (this one, blind to its site-packages): exit 1,
    one JSON error line naming the command that brings the SDK."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    run = Run(done.returncode, done.stdout, done.stderr)
    assert run.code == 1
    assert run.error == (
        "serve needs the MCP Python SDK (mcp>=2.3,<3), which this Python lacks: run it as"
        f" uv run --with 'mcp>=2.3,<3' {shlex.quote(str(SCRIPT))} serve"
    )


@pytest.mark.timeout(90)
def test_an_acquire_cancelled_as_the_lock_frees_never_keeps_it(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """A waiting acquire the client cancels, and whose turn comes a moment later (before
    its next beat could see the cancel), takes nothing the client would not know of: a
    hold taken as the call was cancelled is released at once, never kept by the session."""
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    for round_ in range(3):
        lock = str(tmp_path / "locks" / f"busy-{round_}")
        assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
        token = f"c{round_}"
        waiting = served.call("acquire", {"lock": lock, "owner": "wf:waiter", "wait": 30}, token)
        served.await_progress(token, 1)
        served.notify("notifications/cancelled", {"requestId": waiting})
        time.sleep(0.05 * round_)
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        deadline = time.monotonic() + 5  # past several beats: the waiter has acted on it
        while time.monotonic() < deadline:
            status = skf.status(lock, 60.0)
            assert status["state"] == "free" or not status["waiting"], status
            time.sleep(0.1)
        assert skf.status(lock, 60.0)["state"] == "free", skf.status(lock, 60.0)
        assert served.tool("holds")["holds"] == []
        assert waiting not in served.replies
    ended = served.end_input()
    assert served.exit_code() == 0, (ended, served.err())


# --- Cancels, the clock, stores apart, places kept, spellings, a closed stdout


@pytest.mark.timeout(120)
def test_a_cancelled_acquire_never_leaves_a_hold(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """150 acquires, each cancelled 0 to 5 ms after it was sent (before its answer or
    after it), and one cancelled once answered: none leaves a hold nor a place in line
    once the server has acted on the cancels, and none is held again over a lease.
    Among them, renewals of holds the owner had (one from the CLI, one from an earlier
    call of the session), cancelled too, leave those as they were: the CLI's held for
    its hour (and not the session's to renew), the session's renewed."""
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    locks = tmp_path / "locks"
    cli_lock, session_lock = str(locks / "cli"), str(locks / "session")
    assert cli("acquire", "--lock", cli_lock, "--owner", "wf:agent:1").code == 0
    earlier = served.tool("acquire", lock=session_lock, owner="wf:agent:2")
    assert earlier["acquired"] is True
    rng = random.Random(72)
    fresh = [str(locks / f"run-{n}") for n in range(150)]
    for n, lock in enumerate(fresh):
        sent = served.call("acquire", {"lock": lock, "owner": "wf:agent"})
        time.sleep(rng.uniform(0, 0.005))
        served.notify("notifications/cancelled", {"requestId": sent})
        if n % 30 == 0:  # a renewal of each hold the owner had, cancelled as well
            for had, owner in ((cli_lock, "wf:agent:1"), (session_lock, "wf:agent:2")):
                sent = served.call("acquire", {"lock": had, "owner": owner})
                time.sleep(rng.uniform(0, 0.005))
                served.notify("notifications/cancelled", {"requestId": sent})

    # And a cancel that comes after the answer, for sure: the fresh take is released,
    # the renewal of the CLI's hold leaves it as it was.
    fresh.append(str(locks / "answered"))
    for had, owner in ((fresh[-1], "wf:agent"), (cli_lock, "wf:agent:1")):
        sent = served.call("acquire", {"lock": had, "owner": owner})
        assert answer_of(served.result(sent))["acquired"] is True
        served.notify("notifications/cancelled", {"requestId": sent})

    deadline = time.monotonic() + 20
    while held := [lock for lock in fresh if skf.status(lock, 60.0)["state"] != "free"]:
        assert time.monotonic() < deadline, f"{len(held)} cancelled acquires left a hold"
        time.sleep(0.1)
    free_until = time.monotonic() + LEASE  # and never taken again by the session
    while time.monotonic() < free_until:
        for lock in fresh[::10]:
            status = skf.status(lock, 60.0)
            assert status["state"] == "free" and status["waiting"] == [], status
        time.sleep(0.1)
    assert [skf.status(lock, 60.0)["state"] for lock in fresh] == ["free"] * len(fresh)
    views = served.tool("holds")["holds"]
    assert [(v["lock"], v["owner"], v["state"]) for v in views] == [
        (session_lock, earlier["owner"], "held")
    ]
    kept = cli("status", "--lock", cli_lock).json
    assert kept["held_by"] == "wf:agent:1" and kept["stale_after_minutes"] == 60, kept
    held_throughout(skf, session_lock, earlier["owner"], earlier["fence"], time.monotonic() + 1)
    served.end_input()
    assert served.exit_code() == 0, served.err()


def test_a_session_keeps_the_ids_it_answered_for_ten_seconds_and_no_longer(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel may name a call answered within the last 10 s; older ones are let go as
    each new call starts, but never a call whose id the client has used again."""
    skf._compile_carried("serve")  # as a call of serve compiles it
    now = [1000.0]
    monkeypatch.setattr(skf._SEAMS, "clock", lambda: now[0])
    session = skf._Session(LEASE, os.getpid())

    def report(done: float, total: float, message: str) -> None:
        raise AssertionError("no progress here")

    first = session.start(1, report)
    session.answered(first, 1)
    now[0] = 1006.0
    second = session.start(2, report)
    session.answered(second, 2)
    again = session.start(1, report)  # id 1 used again, under way
    now[0] = 1010.5
    session.start(3, report)
    assert sorted(session.calls) == [1, 2, 3] and session.calls[1] is again
    now[0] = 1016.5
    session.start(4, report)
    assert sorted(session.calls) == [1, 3, 4] and session.calls[1] is again
    session.cancel(2)  # forgotten: nothing to do
    assert not second.cancelled.is_set()


@pytest.mark.timeout(90)
def test_a_cancel_of_an_answered_take_spares_its_renewal_under_way(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """A client that sends an acquire again (the same lock and owner: a renewal of the
    hold its first call took, itself not cancelled) and cancels the first call while
    the second is under way holds what the second answers: the lock stays held by its
    owner, the session says so, and another run cannot take it."""
    served = serving("--lease", "30s")
    served.initialize()
    for round_ in range(3):
        lock = str(tmp_path / "locks" / f"run-{round_}")
        first = served.call("acquire", {"lock": lock, "owner": "wf:agent:1"})
        taken = answer_of(served.result(first))
        assert taken["acquired"] is True, taken
        again = served.call("acquire", {"lock": lock, "owner": "wf:agent:1"})
        served.notify("notifications/cancelled", {"requestId": first})
        answer = answer_of(served.result(again))
        assert answer["acquired"] is True and answer["owner"] == "wf:agent:1", answer
        views = served.tool("holds")["holds"]  # a later call: the cancel was acted on
        assert [(v["lock"], v["state"]) for v in views if v["lock"] == lock] == [(lock, "held")]
        held_throughout(skf, lock, "wf:agent:1", answer["fence"], time.monotonic() + 2)
        other = cli("acquire", "--lock", lock, "--owner", "wf:other:1")
        assert other.code == 3, other.out
    served.end_input()
    assert served.exit_code() == 0, served.err()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("stuck_in", ["name-lookup", "store-read"])
def test_a_hold_whose_renewal_is_stuck_is_told_lost_by_the_clock(
    *,
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    redis_lock: str,
    tmp_path: Path,
    stuck_in: str,
) -> None:
    """A session hold on Redis whose renewal is stuck (each lookup of its server's name
    held up, as by a name server that stopped answering; or each read of its store, a
    wait no network deadline cuts): once the hold lapsed on the server and another run
    took it, holds says it lost ("renewals failed"), and that answer's lost_holds tells
    it, while the renewal is still stuck."""
    marker = tmp_path / "stuck"
    lock = redis_lock
    if stuck_in == "name-lookup":
        name = "names.test"  # 127.0.0.1 for this server, until the stall begins
        argv = serve_with("--lease", f"{LEASE:g}s", stalled=f"{name}={marker}")
        lock = redis_lock.replace("127.0.0.1", name)
    else:
        argv = serve_with("--lease", f"{LEASE:g}s", stuck=str(marker))
    served = serving(argv=argv)
    served.initialize()
    taken = served.tool("acquire", lock=lock, owner="wf:session")
    assert taken["acquired"] is True, taken
    marker.touch()  # every renewal is held up from now on
    try:
        another = taken_by_another(skf, cli, redis_lock, time.monotonic() + LEASE + 30)
        assert another["owner"] == "wf:another:1"
        answer = served.tool("holds")
        assert marker.exists()  # the renewal is still stuck
    finally:
        marker.unlink()
    [view] = answer["holds"]
    assert (view["lock"], view["owner"], view["state"]) == (lock, taken["owner"], "lost")
    assert view["message"].startswith(f"lost the lock {lock}: renewals failed"), view
    assert [(h["lock"], h["state"]) for h in answer["lost_holds"]] == [(lock, "lost")]
    served.end_input()
    assert served.exit_code() == 0, served.err()


def _at_second(fraction: float) -> None:
    """Sleep until the clock is ``fraction`` of the way into a second (a file's record
    is dated in whole seconds, and its renewals counted from there)."""
    time.sleep((fraction - time.time()) % 1.0)


@pytest.mark.timeout(120)
def test_a_renewal_stuck_on_a_frozen_redis_costs_no_hold_on_a_file(
    skf: ModuleType, serving: Callable[..., Served], tmp_path: Path
) -> None:
    """Holds on a file and on a Redis that is then frozen (SIGSTOP; its timeout 20 s),
    in turn: the first Redis hold, the file's renewed a second later, the second Redis
    hold a second after that. Each stuck renewal waits for its hold's stop point, the
    second's past the file hold's; yet for three leases the file hold stays the
    session's, renewed, while another run waits in line for it (one thread renewing
    every hold in turn let it go stale behind the two); the waiter takes it once the
    session ends."""
    lease = 9.0  # renewed every 3 s; a renewal stuck gives up 6.9 s after the last
    (tmp_path / "redis").mkdir()
    server = start_redis(tmp_path / "redis")
    assert server.proc is not None
    environment = {**os.environ, "SKF_REDIS_TIMEOUT": "20"}
    served = serving("--lease", f"{lease:g}s", env=environment)
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    waiting = [*SERVE[:-1], "acquire", "--lock", lock, "--owner", "wf:waiter:1", "--wait", "90s"]
    with reaped() as started:
        try:
            assert served.tool("acquire", lock=lock, owner="wf:s:1")["acquired"]
            _at_second(0.1)
            assert served.tool("acquire", lock=server.url("first"), owner="wf:s:1")["acquired"]
            _at_second(0.02)
            taken = served.tool("acquire", lock=lock, owner="wf:s:1")  # due after the first
            assert taken["refreshed"] is True, taken
            _at_second(0.0)  # the first renews 2 s later, and sticks
            assert served.tool("acquire", lock=server.url("second"), owner="wf:s:1")["acquired"]
            os.kill(server.proc.pid, signal.SIGSTOP)
            waiter = subprocess.Popen(waiting, stdout=subprocess.PIPE, text=True)
            started.append(waiter)
            until = time.monotonic() + 3 * lease
            held_throughout(skf, lock, taken["owner"], taken["fence"], until)
            assert waiter.poll() is None
            states = {v["lock"]: v["state"] for v in served.tool("holds")["holds"]}
            assert states[lock] == "held", states
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
            server.stop()
        served.end_input()
        assert served.exit_code() == 0, served.err()
        out, _ = waiter.communicate(timeout=30)
        assert waiter.returncode == 0 and json.loads(out)["owner"] == "wf:waiter:1", out


CUT = 2.0  # the call limit of these tests' servers, for 50 s


def _in_line(skf: ModuleType, lock: str) -> list[str]:
    return [place["owner"] for place in skf.status(lock, 60.0)["waiting"]]


def _line_becomes(skf: ModuleType, lock: str, line: list[str], within: float) -> None:
    deadline = time.monotonic() + within
    while (now := _in_line(skf, lock)) != line:
        assert time.monotonic() < deadline, now
        time.sleep(0.05)


def _cut_with_a_later_waiter(
    skf: ModuleType,
    cli: Callable[..., Run],
    served: Served,
    lock: str,
    started: list[Started],
    *,
    parts: list[str] | None = None,
    past_a_lapse: bool = True,
) -> tuple[int, dict[str, Any], subprocess.Popen[str]]:
    """The line ``[the agent (wf:agent), a later CLI waiter (wf:later:1)]`` for ``lock``,
    held by wf:holder:1; the agent's call (for ``parts``) cut at the call limit (its id
    and answer), and its place kept (``past_a_lapse``: past the time a place lapses):
    the waiter."""
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    arguments: dict[str, Any] = {"lock": lock, "owner": "wf:agent", "wait": "2m"}
    if parts is not None:
        arguments["parts"] = parts
    first = served.call("acquire", arguments, "agent")
    served.await_progress("agent", 1)
    later = [*SERVE[:-1], "acquire", "--lock", lock, "--owner", "wf:later:1", "--wait", "60s"]
    waiter = subprocess.Popen(later, stdout=subprocess.PIPE, text=True)
    started.append(waiter)
    answer = answer_of(served.result(first, within=CUT + 30))
    owner = answer["owner"]
    assert answer["acquired"] is False and owner.startswith("wf:agent:"), answer
    assert answer["message"].endswith(
        "; your place in line is kept 10 s: call acquire again within them, with this"
        " lock and owner and the same slots, shared and parts, to wait on from it"
    ), answer
    _line_becomes(skf, lock, [owner, "wf:later:1"], within=10)
    kept_until = time.monotonic() + (4 if past_a_lapse else 0)  # a place lapses in 3 s
    while time.monotonic() < kept_until:
        assert _in_line(skf, lock) == [owner, "wf:later:1"]
        time.sleep(0.1)
    return first, answer, waiter


@THREE_STORES
@pytest.mark.timeout(120)
def test_a_waiting_acquire_cut_at_the_call_limit_keeps_its_place(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    store: StoreUnderTest,
) -> None:
    """On the three stores: an acquire that asked to wait longer than a call may, cut at the
    limit, keeps its place in line between calls, ahead of a CLI waiter that came
    later: the lock freed meanwhile is taken by nobody, and the agent's next acquire
    (its owner as it gave it, no run id) takes it, as the same owner; the later waiter
    goes next."""
    served = serving(argv=serve_with("--lease", f"{LEASE:g}s", longest_call_wait_sec=CUT))
    served.initialize()
    lock = store.lock
    with reaped() as started:
        _, answer, waiter = _cut_with_a_later_waiter(skf, cli, served, lock, started)
        owner = answer["owner"]
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        free_until = time.monotonic() + 1
        while time.monotonic() < free_until:  # the agent's turn: the later waiter waits
            status = skf.status(lock, 60.0)
            assert status["state"] == "free", status
            assert [p["owner"] for p in status["waiting"]] == [owner, "wf:later:1"]
            time.sleep(0.05)
        resumed = served.tool("acquire", lock=lock, owner="wf:agent", wait="2m")
        assert resumed["acquired"] is True and resumed["owner"] == owner, resumed
        assert resumed["message"].startswith("after waiting "), resumed
        assert waiter.poll() is None and _in_line(skf, lock) == ["wf:later:1"]
        assert served.tool("release", lock=lock, owner=owner)["released"] is True
        out, _ = waiter.communicate(timeout=30)
        assert waiter.returncode == 0 and json.loads(out)["owner"] == "wf:later:1"
    served.end_input()
    assert served.exit_code() == 0, served.err()


@THREE_STORES
@pytest.mark.timeout(120)
def test_a_kept_place_lasts_its_ten_seconds_past_a_server_calls_timeout(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    store: StoreUnderTest,
) -> None:
    """On the three stores, the place of an acquire cut at the call limit is kept the 10 s
    promised, past a server call's own timeout (5 s by default): eight and a half
    seconds after the cut the lock freed meanwhile is nobody's, the agent is still
    first in line, ahead of a CLI waiter that came later, and its next acquire takes
    the lock."""
    served = serving(argv=serve_with("--lease", f"{LEASE:g}s", longest_call_wait_sec=CUT))
    served.initialize()
    lock = store.lock
    with reaped() as started:
        assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
        first = served.call("acquire", {"lock": lock, "owner": "wf:agent", "wait": "2m"}, "a")
        served.await_progress("a", 1)
        later = [*SERVE[:-1], "acquire", "--lock", lock, "--owner", "wf:later:1", "--wait", "60s"]
        waiter = subprocess.Popen(later, stdout=subprocess.PIPE, text=True)
        started.append(waiter)
        answer = answer_of(served.result(first, within=CUT + 30))
        cut = time.monotonic()  # the server kept the place a moment before
        owner = answer["owner"]
        assert answer["acquired"] is False and owner.startswith("wf:agent:"), answer
        _line_becomes(skf, lock, [owner, "wf:later:1"], within=5)
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        while time.monotonic() < cut + 8.5:  # within the 10 s promised
            status = skf.status(lock, 60.0)
            assert status["state"] == "free", status
            assert [p["owner"] for p in status["waiting"]] == [owner, "wf:later:1"], status
            time.sleep(0.1)
        resumed = served.tool("acquire", lock=lock, owner="wf:agent", wait="2m")
        assert resumed["acquired"] is True and resumed["owner"] == owner, resumed
        assert served.tool("release", lock=lock, owner=owner)["released"] is True
        out, _ = waiter.communicate(timeout=30)
        assert waiter.returncode == 0 and json.loads(out)["owner"] == "wf:later:1"
    served.end_input()
    assert served.exit_code() == 0, served.err()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["release", "cancel", "other-kind", "session-end", "no-call"])
def test_a_kept_place_is_dropped_when_nobody_will_come_back_for_it(
    skf: ModuleType,
    cli: Callable[..., Run],
    serving: Callable[..., Served],
    tmp_path: Path,
    how: str,
) -> None:
    """A place kept after the cut leaves the line, the later waiter moving up: at the
    agent's release (its whole owner), at a cancel of the call that was cut (after its
    answer), at the session's end, and once 10 s pass with no call; an acquire of
    another kind (shared) joins at the end of the line instead."""
    served = serving(argv=serve_with("--lease", f"{LEASE:g}s", longest_call_wait_sec=CUT))
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    with reaped() as started:
        first, answer, _ = _cut_with_a_later_waiter(skf, cli, served, lock, started)
        owner = answer["owner"]
        if how == "release":
            released = served.tool("release", lock=lock, owner=owner)
            assert released["released"] is False and released["reason"] == "not-owner"
        elif how == "cancel":
            served.notify("notifications/cancelled", {"requestId": first})
        elif how == "other-kind":
            call = {"lock": lock, "owner": "wf:agent", "wait": "2m", "shared": True}
            served.call("acquire", call, "shared")
            served.await_progress("shared", 1)
            [shared] = [n for n in _in_line(skf, lock) if n not in (owner, "wf:later:1")]
            assert shared.startswith("wf:agent:"), shared  # a new take: a new run id
            _line_becomes(skf, lock, ["wf:later:1", shared], within=FREED_WITHIN)
            return
        elif how == "session-end":
            served.end_input()
            assert served.exit_code() == 0, served.err()
        within = 10.0 if how == "no-call" else FREED_WITHIN
        _line_becomes(skf, lock, ["wf:later:1"], within=within)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("spelling", ["symlinked-folder", "redis-user", "new-folder"])
def test_a_hold_is_the_sessions_whatever_its_locks_spelling(
    skf: ModuleType,
    serving: Callable[..., Served],
    tmp_path: Path,
    redis_lock: str,
    spelling: str,
) -> None:
    """One lock spelled two ways (a file through a symlinked folder; a Redis address
    that names its user; a file in a folder the first take makes, through a link):
    taken through one, taken again through the other, it is one hold of the session,
    shown as last given; released through the first, it is released by the session's
    own call, never told lost over two leases."""
    if spelling == "symlinked-folder":
        (tmp_path / "locks").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "locks")
        lock, other = str(tmp_path / "locks" / "run.lock"), str(tmp_path / "link" / "run.lock")
    elif spelling == "new-folder":  # made by the first take: the link dangles till then
        (tmp_path / "link").symlink_to(tmp_path / "new")
        lock, other = str(tmp_path / "new" / "run.lock"), str(tmp_path / "link" / "run.lock")
    else:
        lock, other = redis_lock, redis_lock.replace("redis://", "redis://default@")
    served = serving("--lease", f"{LEASE:g}s")
    served.initialize()
    taken = served.tool("acquire", lock=lock, owner="wf:session")
    owner = taken["owner"]
    again = served.tool("acquire", lock=other, owner=owner)
    assert again["refreshed"] is True and again["lock"] == other, again
    [view] = served.tool("holds")["holds"]
    assert (view["lock"], view["owner"], view["state"]) == (other, owner, "held")

    released = served.tool("release", lock=lock, owner=owner)
    assert released["released"] is True and released["lock"] == lock, released
    until = time.monotonic() + 2 * LEASE  # past several renewals: none finds it lost
    while time.monotonic() < until:
        answer = served.tool("holds")
        assert answer["lost_holds"] == [], answer
        [view] = answer["holds"]
        assert view["state"] == "released", view
        assert view["message"] == "released by this session's release call", view
        time.sleep(0.2)
    assert skf.status(lock, 60.0)["state"] == "free"
    served.end_input()
    assert served.exit_code() == 0, served.err()


@pytest.mark.timeout(90)
def test_a_client_that_closes_the_servers_stdout_ends_the_session(
    skf: ModuleType, cli: Callable[..., Run], serving: Callable[..., Served], tmp_path: Path
) -> None:
    """A client that closes the server's stdout (its stdin left open) while the session
    is idle: nobody can hear the server any more, so the session ends as at stdin's
    close: another run takes its lock within 2 s, and the server exits 0."""
    served = serving("--lease", f"{LEASE:g}s", read_ahead=False)
    served.initialize()
    lock = str(tmp_path / "locks" / "run.lock")
    assert served.tool("acquire", lock=lock, owner="wf:session")["acquired"] is True
    closed = served.close_output()
    freed(skf, cli, lock, closed)
    assert served.exit_code() == 0, served.err()


def test_a_locks_identity_is_its_folder_and_name_or_its_server_and_key(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What names a lock, however spelled (the registry asks its store): a file by its
    folder (through a symlink, ``..`` or a second slash alike) and its name, which
    Windows' rules fold to one case; a server's lock by its scheme, its set of endpoints
    (the default port filled in, the user and their order aside) and its key."""
    (tmp_path / "locks").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "locks")
    identity = skf._lock_identity
    same = [f"{tmp_path}/locks/run.lock", f"{tmp_path}/link/run.lock"]
    same += [f"{tmp_path}/link/../locks/run.lock", f"{tmp_path}//locks/run.lock"]
    assert len({identity(spelled) for spelled in same}) == 1
    assert identity(f"{tmp_path}/locks/RUN.lock") != identity(same[0])
    assert identity(f"{tmp_path}/locks/other.lock") != identity(same[0])
    servers = [
        "redis://127.0.0.1/k",
        "redis://127.0.0.1:6379/k",
        "redis://someone@127.0.0.1:6379/k",
    ]
    assert len({identity(address) for address in servers}) == 1
    assert identity("rediss://127.0.0.1/k") != identity(servers[0])
    assert identity("redis://127.0.0.1/k2") != identity(servers[0])
    etcd = ["etcd://127.0.0.1:1,127.0.0.2:2/k", "etcd://127.0.0.2:2,127.0.0.1:1/k"]
    assert identity(etcd[0]) == identity(etcd[1]) != identity("etcd://127.0.0.1:1/k")

    follow_windows_rules(skf, monkeypatch)
    assert identity(f"{tmp_path}/locks/RUN.lock") == identity(same[0])
