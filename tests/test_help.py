"""--help: the whole tool's, and each command's own (its usage, only its options, an
example that runs as shown, its exit codes); every call in a fresh process."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from calls import Run, posix_only
from loader import SCRIPT

# Each command's options, as its help must list them, and none other.
OPTIONS = {
    "acquire": ["--lock", "--owner", "--stale-after", "--wait", "--slots", "--empty-is-stale"],
    "release": ["--lock", "--owner"],
    "status": ["--lock", "--stale-after", "--slots", "--empty-is-stale"],
    "check": ["--lock", "--owner", "--null"],
    "run": ["--lock", "--owner", "--stale-after", "--wait", "--slots", "--empty-is-stale"],
    "list": ["--under", "--stale-after", "--table"],
    "run-id": [],
}
EVERY_OPTION = {option for options in OPTIONS.values() for option in options} | {"--get"}


def options_shown(text: str) -> set[str]:
    """The options a help text names (``--help`` aside)."""
    words = text.replace("[", " ").replace("]", " ").replace("=", " ").split()
    return {word for word in words if word in EVERY_OPTION}


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", list(OPTIONS))
def test_each_command_has_a_help_of_its_own(
    cli: Callable[..., Run], command: str, flag: str
) -> None:
    run = cli(command, flag)
    assert run.code == 0 and run.err == "", run
    assert run.out.startswith(f"usage: skf-run-lock.py {command} ")
    expected = set(OPTIONS[command]) | ({"--get"} if command != "run" else set())
    assert options_shown(run.out) == expected
    assert "\nexample:\n  " in run.out and "\nexit: " in run.out
    assert max(len(line) for line in run.out.splitlines() if "example" not in line) <= 92


def test_run_help_comes_before_the_separator_only(cli: Callable[..., Run], tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    before = cli("run", "--lock", lock, "--owner", "wf:sk", "--help", "--", "false")
    assert before.code == 0 and before.out.startswith("usage: skf-run-lock.py run ")
    after = cli(
        "run",
        "--lock",
        lock,
        "--owner",
        "wf:sk",
        "--",
        sys.executable,
        "-c",
        "import sys; print(sys.argv[1:])",
        "--help",
    )
    assert (after.code, after.out) == (0, "['--help']\n"), after
    assert list(tmp_path.iterdir()) == []


def test_the_tools_help_names_every_command_and_where_each_ones_help_is(
    cli: Callable[..., Run],
) -> None:
    run = cli("--help")
    assert run.code == 0 and run.err == ""
    assert "COMMAND --help" in run.out
    for command in OPTIONS:
        assert f"\n  {command} " in run.out


@pytest.mark.parametrize("argv", [(), ("nope",)])
def test_a_call_without_a_command_says_where_help_is(
    cli: Callable[..., Run], argv: tuple[str, ...]
) -> None:
    run = cli(*argv)
    assert run.code == 1 and run.error.startswith("usage error: ")
    assert "--help shows how to use each" in run.error


@posix_only("runs each example in a POSIX shell")
@pytest.mark.parametrize("command", [c for c in OPTIONS if c != "run"])
def test_each_commands_example_runs_as_shown(
    cli: Callable[..., Run], tmp_path: Path, command: str
) -> None:
    """The example, its program name turned into this file, in a POSIX shell with a
    home of its own: it exits 0 (release's releases what its acquire took)."""
    example = cli(command, "--help").out.split("\nexample:\n", 1)[1].split("\n\n", 1)[0]
    program = f"{shlex.quote(sys.executable)} {shlex.quote(str(SCRIPT))}"
    script = example.replace("skf-run-lock.py", program)
    if command == "release":
        script += '\n[ "$(' + program + ' status --lock ~/.locks/demo.lock --get state)" = free ]'
    if command == "list":
        script = f"{program} acquire --lock ~/.locks/demo.lock --owner demo:x\n" + script
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run(
        ["sh", "-ec", script], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, (script, done)


@pytest.mark.parametrize(
    ("typed", "same_as"),
    [
        (["help"], ["--help"]),
        (["help", "acquire"], ["acquire", "--help"]),
        (["help", "run"], ["run", "--help"]),
        (["version"], ["--version"]),
        (["-V"], ["--version"]),
    ],
)
def test_the_forms_people_type_for_help_and_version_work(
    cli: Callable[..., Run], typed: list[str], same_as: list[str]
) -> None:
    asked = cli(*typed)
    expected = cli(*same_as)
    assert (asked.code, asked.out, asked.err) == (0, expected.out, expected.err)
    assert asked.out


@pytest.mark.parametrize("typed", [["help", "nope"], ["help", "acquire", "x"], ["-V", "x"]])
def test_help_or_version_with_words_they_do_not_take_is_exit_1(
    cli: Callable[..., Run], typed: list[str]
) -> None:
    asked = cli(*typed)
    assert (asked.code, asked.out) == (1, "") and asked.error.startswith("usage error:")


def test_acquire_help_says_a_run_id_names_one_run_and_must_be_unique(
    cli: Callable[..., Run],
) -> None:
    """Two runs given deploy:site:main both believe they hold the lock: help says so."""
    said = " ".join(cli("acquire", "--help").out.split())
    assert "The run id names one run and must be unique to it" in said
    assert "two runs given deploy:site:main both hold the lock as one" in said
