"""--get KEY: one value of a command's JSON alone on stdout, for a shell script with no
JSON parser; every call in a fresh process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from calls import Run
from loader import SCRIPT


def value_line(value: object) -> str:
    """What --get prints for ``value``: a string as it is, anything else as JSON."""
    return (value if isinstance(value, str) else json.dumps(value)) + "\n"


def ageless(value: object) -> object:
    """``value`` without its ``age_seconds``, which grows between two calls."""
    if isinstance(value, dict):
        return {k: ageless(v) for k, v in value.items() if k != "age_seconds"}
    if isinstance(value, list):
        return [ageless(v) for v in value]
    return value


def test_every_key_of_every_command_prints_its_value_alone(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """Each command's whole output first, then each of its keys by --get from a call
    that prints the same (a held lock's refusal, a status, a list, a release that finds
    nothing): the line is the value as jq -r prints it, with the same exit code."""
    lock = tmp_path / "locks" / "x.lock"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:holder", "--slots", "1")
    assert taken.code == 0
    calls = [
        ("acquire", "--lock", lock, "--owner", "wf:other:1"),  # refused: exit 3
        ("status", "--lock", lock),  # held: exit 3
        ("list", "--under", tmp_path / "locks"),
        ("release", "--lock", tmp_path / "none.lock", "--owner", "wf:x:1"),
    ]
    for argv in calls:
        whole = cli(*argv)
        named = cli(*argv, "--get", "nope").error.split("; its keys are ")[1]
        beside = "; and, not in its JSON, fence" if argv[0] == "acquire" else ""
        assert named == ", ".join(whole.json) + beside  # --get knows what the call prints
        for key, value in whole.json.items():
            one = cli(*argv, "--get", key)
            assert (one.code, one.out.count("\n")) == (whole.code, 1), key
            if argv[0] == "acquire":  # a refusal says why on stderr, as its JSON
                told = json.loads(one.err)
                assert list(told) == list(whole.json), key
                assert re.sub("[0-9]+", "#", told["message"]) == re.sub(
                    "[0-9]+", "#", whole.json["message"]
                )
            else:
                assert one.err == "", key
            if key == "age_seconds":
                assert 0 <= int(one.out) - value <= 5
            elif key == "message":  # it may say how long ago, or how long until
                assert re.sub("[0-9]+", "#", one.out) == re.sub("[0-9]+", "#", value + "\n")
            elif isinstance(value, list):
                assert ageless(json.loads(one.out)) == ageless(value), key
            else:
                assert one.out == value_line(value), key
    assert cli("acquire", "--lock", lock, "--owner", "wf:other:1").code == 3


def test_a_refusal_says_why_on_stderr_while_stdout_is_the_value_alone(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """The README's script on an empty lock file (what flock(1) leaves): the value is
    null, and the advice (delete it, or --empty-is-stale) is seen on stderr."""
    lock = tmp_path / "x.lock"
    lock.write_bytes(b"")
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk", "--get", "held_by")
    assert (run.code, run.out) == (3, "null\n"), run
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
    assert cli("acquire", "--lock", lock, renewed, "--get", "stale_replaced").out == "null\n"
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
