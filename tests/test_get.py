"""--get KEY: one value of a command's JSON alone on stdout, for a shell script with no
JSON parser; every call in a fresh process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from calls import Run, posix_only
from loader import SCRIPT


def value_line(value: object) -> str:
    """What --get prints for ``value``: a string as it is, null as nothing, anything
    else as JSON."""
    if value is None:
        return "\n"
    return (value if isinstance(value, str) else json.dumps(value)) + "\n"


def ageless(value: object) -> object:
    """``value`` without its ``age_seconds``, which grows between two calls."""
    if isinstance(value, dict):
        return {k: ageless(v) for k, v in value.items() if k != "age_seconds"}
    if isinstance(value, list):
        return [ageless(v) for v in value]
    return value


def test_every_key_of_every_command_prints_its_value_alone(
    main: Callable[..., Run], tmp_path: Path
) -> None:
    """Each command's whole output first, then each of its keys by --get from a call
    that prints the same (a held lock's refusal, a status, a list, a release that finds
    nothing): the line is the value as jq -r prints it, with the same exit code."""
    lock = tmp_path / "locks" / "x.lock"
    taken = main("acquire", "--lock", lock, "--owner", "wf:holder", "--slots", "1")
    assert taken.code == 0
    calls = [
        ("acquire", "--lock", lock, "--owner", "wf:other:1"),  # refused: exit 3
        ("status", "--lock", lock),  # held: exit 3
        ("list", "--under", tmp_path / "locks"),
        ("release", "--lock", tmp_path / "none.lock", "--owner", "wf:x:1"),
    ]
    for argv in calls:
        asked = time.monotonic()
        whole = main(*argv)
        named = main(*argv, "--get", "nope").error.split("; its keys are ")[1]
        beside = "; and, not in its JSON, fence" if argv[0] == "acquire" else ""
        assert named == ", ".join(whole.json) + beside  # --get knows what the call prints
        for key, value in whole.json.items():
            one = main(*argv, "--get", key)
            assert (one.code, one.out.count("\n")) == (whole.code, 1), key
            if argv[0] == "acquire":  # a refusal says why on stderr, as its JSON
                told = json.loads(one.err)
                assert list(told) == list(whole.json), key
                assert re.sub("[0-9]+", "#", told["message"]) == re.sub(
                    "[0-9]+", "#", whole.json["message"]
                )
            else:
                assert one.err == "", key
            if key == "age_seconds":  # older by no more than the calls since took
                assert 0 <= int(one.out) - value <= time.monotonic() - asked + 1
            elif key == "message":  # it may say how long ago, or how long until
                assert re.sub("[0-9]+", "#", one.out) == re.sub("[0-9]+", "#", value + "\n")
            elif isinstance(value, list):
                assert ageless(json.loads(one.out)) == ageless(value), key
            else:
                assert one.out == value_line(value), key
    assert main("acquire", "--lock", lock, "--owner", "wf:other:1").code == 3


def test_a_refusal_says_why_on_stderr_while_stdout_is_the_value_alone(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """The README's script on an empty lock file (what flock(1) leaves): the value is
    null, and the advice (delete it, or --empty-is-stale) is seen on stderr."""
    lock = tmp_path / "x.lock"
    lock.write_bytes(b"")
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk", "--get", "held_by")
    assert (run.code, run.out) == (3, "\n"), run
    told = json.loads(run.err)
    assert (told["acquired"], told["held_by"]) == (False, None)
    assert "--empty-is-stale" in told["message"]
    assert lock.read_bytes() == b""


def test_each_kind_of_value_is_printed_as_jq_r_prints_it(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    lock = tmp_path / "x.lock"
    owner = cli("acquire", "--lock", lock, "--owner", "wf:sk", "--get", "owner")
    assert owner.code == 0 and owner.out.startswith("wf:sk:") and owner.out.count("\n") == 1
    run_id = owner.out.strip().rsplit(":", 1)[1]
    renewed = f"--owner={owner.out.strip()}"
    assert cli("acquire", "--lock", lock, renewed, "--get", "refreshed").out == "true\n"
    assert cli("acquire", "--lock", lock, renewed, "--get", "stale_replaced").out == "\n"
    assert cli("acquire", "--lock", lock, renewed, "--get=stale_after_minutes").out == "60\n"
    assert cli("acquire", "--lock", lock, renewed, "--get", "run_id").out == run_id + "\n"
    assert cli("status", "--lock", lock, "--get", "waiting").out == "[]\n"
    fresh = cli("run-id", "--get", "run_id")
    assert fresh.code == 0 and len(fresh.out.strip()) == 25 and fresh.out.count("\n") == 1


def test_a_run_id_from_get_makes_an_owner_the_shell_can_use(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    run_id = cli("run-id", "--get", "run_id").out.strip()
    taken = cli("acquire", "--lock", tmp_path / "x.lock", "--owner", f"demo:x:{run_id}")
    assert taken.code == 0 and taken.json["run_id"] == run_id


@pytest.mark.parametrize(
    "argv",
    [
        ("acquire", "--owner", "wf:sk"),
        ("status",),
        ("release", "--owner", "wf:sk:1"),
    ],
)
def test_a_key_the_command_does_not_print_is_exit_1_naming_its_keys_and_changes_nothing(
    cli: Callable[..., Run], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    lock = tmp_path / "locks" / "x.lock"
    run = cli(argv[0], "--lock", lock, *argv[1:], "--get", "held")
    assert run.code == 1 and run.out == "", run
    assert run.error.startswith(f"usage error: {argv[0]} prints no key 'held'; its keys are ")
    whole_keys = {"acquire": "acquired, refreshed", "status": "state, lock", "release": "released"}
    ends = "message; and, not in its JSON, fence" if argv[0] == "acquire" else "message"
    assert whole_keys[argv[0]] in run.error and run.error.endswith(ends)
    assert list(tmp_path.iterdir()) == []  # no folder, no lock


def test_get_is_refused_where_nothing_is_printed_as_json(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    table = cli("list", "--under", tmp_path, "--table", "--get", "locks")
    assert table.code == 1 and "--table" in table.error and table.out == ""
    run = cli(
        "run", "--lock", tmp_path / "x.lock", "--owner", "a:b", "--get", "owner", "--", "true"
    )
    assert run.code == 1, run
    assert run.error == "usage error: run does not take '--get'; run --help shows its options"
    assert cli("run-id", "--get").code == 1
    assert list(tmp_path.iterdir()) == []


def test_a_string_stdout_cannot_encode_is_printed_escaped_never_a_traceback(
    tmp_path: Path,
) -> None:
    """On a console of a narrower code page (here ASCII), a non-ASCII owner comes out as
    JSON writes it; on UTF-8, as it is."""
    lock = tmp_path / "x.lock"
    argv = [
        sys.executable,
        str(SCRIPT),
        "acquire",
        "--lock",
        str(lock),
        "--owner",
        "wf:sk\u00efll:1",
    ]
    for encoding, printed in (("ascii", '"wf:sk\\u00efll:1"\n'), ("utf-8", "wf:sk\u00efll:1\n")):
        env = {**os.environ, "PYTHONIOENCODING": encoding}
        done = subprocess.run(
            [*argv, "--get", "owner"], capture_output=True, env=env, timeout=60, check=False
        )
        assert (done.returncode, done.stderr) == (0, b""), done
        assert done.stdout.decode(encoding) == printed


# --- --get given more than once: each value on a line of its own, in the order given ---


def test_two_and_three_gets_print_each_value_on_its_own_line_in_the_order_given(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """One call gives a script both its owner and its fence (a string and a number),
    then a renewal gives three values, as a single --get prints each."""
    lock = tmp_path / "x.lock"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk", "--get", "owner", "--get", "fence")
    assert (taken.code, taken.err) == (0, ""), taken
    owner, fence = taken.out.splitlines()
    assert taken.out == f"{owner}\n{fence}\n" and owner.startswith("wf:sk:")
    shown = cli("status", "--lock", lock).json
    assert (shown["held_by"], shown["fence"]) == (owner, int(fence))
    renewed = cli(
        "acquire", "--lock", lock, f"--owner={owner}", "--get=fence", "--get", "refreshed",
        "--get", "owner",
    )  # fmt: skip
    assert (renewed.code, renewed.err) == (0, ""), renewed
    assert renewed.out == f"{fence}\ntrue\n{owner}\n"  # a renewal keeps its fence
    released = cli(
        "release", "--lock", lock, "--owner", owner, "--get", "reason", "--get", "released"
    )
    assert (released.code, released.out) == (0, "\ntrue\n"), released
    assert cli("status", "--lock", lock, "--get", "state").out == "free\n"


def test_a_key_given_twice_is_printed_twice(cli: Callable[..., Run], tmp_path: Path) -> None:
    got = cli("run-id", "--get", "run_id", "--get", "run_id")
    assert got.code == 0 and got.err == "", got
    first, second = got.out.splitlines()
    assert first == second and len(first) == 25
    lock = tmp_path / "x.lock"
    taken = cli(
        "acquire", "--lock", lock, "--owner", "wf:sk", "--get", "fence", "--get", "owner",
        "--get", "fence",
    )  # fmt: skip
    fence, owner, again = taken.out.splitlines()
    assert (taken.code, fence) == (0, again) and owner.startswith("wf:sk:"), taken


def test_each_kind_of_value_among_several_is_printed_as_alone(
    main: Callable[..., Run], tmp_path: Path
) -> None:
    """A string, a number, true and false, null, a list, and acquire's fence (null for
    a refusal), each line exactly what a single --get of that key prints; a refusal
    still says why on stderr, once."""
    lock = tmp_path / "locks" / "x.lock"
    holder = main("acquire", "--lock", lock, "--owner", "wf:holder", "--get", "owner").out.strip()
    calls = [
        ("acquire", "--lock", lock, "--owner", holder),
        ("acquire", "--lock", lock, "--owner", "wf:other:1"),  # refused: exit 3
        ("status", "--lock", lock),
        ("list", "--under", tmp_path / "locks"),
        ("release", "--lock", tmp_path / "none.lock", "--owner", "wf:x:1"),
    ]
    for argv in calls:
        whole = main(*argv)
        keys = [*whole.json, *(["fence"] if argv[0] == "acquire" else [])]
        keys = [key for key in keys if key not in ("age_seconds", "message", "locks", "run_id")]
        alone = [main(*argv, "--get", key) for key in keys]
        together = main(*argv, *[part for key in keys for part in ("--get", key)])
        assert together.code == whole.code, (argv, together)
        timeless = re.compile("[0-9T:-]{19}Z")  # a renewal's stale_at moves on
        assert timeless.sub("<t>", together.out) == timeless.sub(
            "<t>", "".join(one.out for one in alone)
        ), argv
        assert together.out.count("\n") == len(keys)
        if argv[0] == "acquire" and whole.code == 3:
            assert json.loads(together.err)["held_by"] == holder
            assert together.out.splitlines()[-1] == ""  # a refusal has no fence
        else:
            assert together.err == ""
    kinds = main(
        "status", "--lock", lock, "--get", "held_by", "--get", "slots", "--get", "waiting",
        "--get", "mode", "--get", "holders",
    )  # fmt: skip
    held_by, slots, waiting, mode, holders = kinds.out.splitlines()
    assert (held_by, slots, waiting, mode) == (holder, "1", "[]", "exclusive")
    assert [entry["owner"] for entry in json.loads(holders)] == [holder]
    gone = main(
        "release", "--lock", lock, "--owner", "wf:other:1", "--get", "released",
        "--get", "reason", "--get", "held_by",
    )  # fmt: skip
    assert gone.out == f"false\nnot-owner\n{holder}\n", gone


@pytest.mark.parametrize(
    "argv",
    [
        ("acquire", "--owner", "wf:sk", "--get", "owner", "--get", "held", "--get", "fence"),
        ("status", "--get", "state", "--get", "held"),
        ("release", "--owner", "wf:sk:1", "--get", "released", "--get", "held"),
    ],
)
def test_an_unknown_key_among_known_ones_is_exit_1_and_changes_nothing(
    cli: Callable[..., Run], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """The same one-line error as a single unknown key, before the command runs: no
    lock is taken (nor a folder made), and a held lock is not released."""
    lock = tmp_path / "locks" / "x.lock"
    run = cli(argv[0], "--lock", lock, *argv[1:])
    assert run.code == 1 and run.out == "", run
    assert run.error.startswith(f"usage error: {argv[0]} prints no key 'held'; its keys are ")
    assert list(tmp_path.iterdir()) == []
    if argv[0] == "release":
        owner = cli("acquire", "--lock", lock, "--owner", "wf:sk:1", "--get", "owner").out
        assert owner == "wf:sk:1\n"
        assert cli(argv[0], "--lock", lock, *argv[1:]).code == 1
        assert cli("status", "--lock", lock, "--get", "held_by").out == owner  # still held


def test_several_keys_are_refused_with_table_and_on_run(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    table = cli("list", "--under", tmp_path, "--table", "--get", "under", "--get", "locks")
    assert table.code == 1 and "--table" in table.error, table
    run = cli(
        "run", "--lock", tmp_path / "x.lock", "--owner", "a:b", "--get", "owner", "--get",
        "fence", "--", "true",
    )  # fmt: skip
    assert run.code == 1 and "run does not take '--get'" in run.error, run
    assert cli("status", "--lock", tmp_path / "x.lock", "--get", "state", "--get").code == 1
    assert list(tmp_path.iterdir()) == []


@posix_only("a line break in a file's name, which Windows refuses")
def test_among_several_keys_a_string_holding_a_line_break_is_written_as_json(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A path may hold a line break: alone, --get prints it as it is (as today); among
    several, as JSON, so that each value keeps a line of its own for ``read``."""
    lock = tmp_path / "two\nlines" / "x.lock"
    alone = cli("acquire", "--lock", lock, "--owner", "wf:sk:1", "--get", "lock")
    assert alone.out == f"{lock}\n", alone
    several = cli("status", "--lock", lock, "--get", "lock", "--get", "held_by")
    assert several.out == f"{json.dumps(str(lock))}\nwf:sk:1\n", several
