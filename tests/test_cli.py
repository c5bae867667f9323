"""The command line: JSON on stdout, JSON errors on stderr, exit codes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import UV, Run, posix_only
from loader import SCRIPT
from lockfiles import ago, beside, read_json, write_record
from stores import StoreUnderTest, planted_record, shown_time
from test_acquire import ACQUIRE_KEYS
from test_release import RELEASE_KEYS
from test_status import STATUS_KEYS
from wrapped import WrappedStore, wrap_stores


def test_acquire_renew_refuse_release_through_the_cli(cli: Callable[..., Run], lock: Path) -> None:
    first = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert first.code == 0
    taken = first.json
    assert list(taken) == ACQUIRE_KEYS and taken["acquired"] is True
    owner = taken["owner"]
    renewed = cli("acquire", "--lock", lock, "--owner", owner)
    assert renewed.code == 0 and renewed.json["refreshed"] is True
    refused = cli("acquire", "--lock", lock, "--owner", "wf:sk:other")
    assert refused.code == 3
    assert refused.json["held_by"] == owner and refused.json["acquired"] is False
    not_owner = cli("release", "--lock", lock, "--owner", "wf:sk:other")
    assert not_owner.code == 0 and not_owner.json["reason"] == "not-owner"
    released = cli("release", "--lock", lock, "--owner", owner)
    assert released.code == 0 and list(released.json) == RELEASE_KEYS
    assert released.json["released"] is True
    absent = cli("release", "--lock", lock, "--owner", owner)
    assert absent.code == 0 and absent.json["reason"] == "absent"
    assert beside(lock) == []


def test_stale_after_is_in_minutes(main: Callable[..., Run], lock: Path) -> None:
    write_record(lock, "wf:sk:old", ago(minutes=3))
    assert main("acquire", "--lock", lock, "--owner", "wf:sk:new", "--stale-after", "5").code == 3
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:new", "--stale-after", "2.5")
    assert run.code == 0
    assert run.json["stale_replaced"]["held_by"] == "wf:sk:old"
    assert run.json["stale_after_minutes"] == 2.5


def test_run_id_prints_one_run_id(cli: Callable[..., Run], skf: ModuleType) -> None:
    run = cli("run-id")
    assert run.code == 0 and list(run.json) == ["run_id"]
    assert skf.RUN_ID_RE.match(run.json["run_id"])


def test_version_prints_the_version(
    cli: Callable[..., Run], main: Callable[..., Run], skf: ModuleType
) -> None:
    run = cli("--version")
    assert run.code == 0 and run.json == {"version": skf.__version__}
    assert main("--version").code == 0


def test_status_through_the_cli(cli: Callable[..., Run], lock: Path) -> None:
    free = cli("status", "--lock", lock)
    assert free.code == 0 and list(free.json) == STATUS_KEYS and free.json["state"] == "free"
    write_record(lock, "wf:sk:r1", ago(minutes=2))
    held = cli("status", "--lock", lock)
    assert held.code == 3 and held.json["state"] == "held" and held.json["age_seconds"] >= 120
    stale = cli("status", "--lock", lock, "--stale-after", "1")
    assert stale.code == 0 and stale.json["state"] == "stale"
    assert beside(lock) == ["run.lock"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["acquire"],
        ["acquire", "--lock", "L"],
        ["acquire", "--owner", "wf:sk"],
        ["release", "--lock", "L"],
        ["status"],
        ["acquire", "--lock", "L", "--owner", "wf:sk", "--stale-after", "soon"],
        ["acquire", "--lock", "L", "--owner", "wf:sk", "--stale-after"],
        ["acquire", "--lock", "L", "--owner", "wf:sk", "--wait", "x"],
        ["acquire", "--lock", "L", "--owner", "wf:sk", "--stale"],
        ["acquire", "--lock", "L", "--owner", "wf:sk", "extra"],
        ["run-id", "--lock", "L"],
        ["--version", "extra"],
        ["--lock", "L"],
    ],
)
def test_usage_error_is_json_exit_1(
    main: Callable[..., Run], argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run = main(*argv)
    assert run.code == 1
    assert run.error.startswith("usage error: ")
    assert list(tmp_path.iterdir()) == []


def test_usage_error_through_a_real_process(cli: Callable[..., Run]) -> None:
    run = cli("acquire", "--lock", "x")
    assert run.code == 1 and run.error.startswith("usage error: ") and "--owner" in run.error


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        (["--stale-after", "0"], "stale-after"),
        (["--stale-after", "-5"], "stale-after"),
        (["--stale-after", "nan"], "stale-after"),
        (["--stale-after", "inf"], "stale-after"),
        (["--stale-after", "525600.1"], "stale-after"),
        (["--stale-after", "0.00004"], "too small"),
        (["--wait", "-1"], "wait"),
        (["--wait", "nan"], "wait"),
        (["--wait", "inf"], "wait"),
        (["--wait", "86400.5"], "wait"),
    ],
)
def test_bad_numbers_are_exit_1_and_touch_nothing(
    main: Callable[..., Run], lock: Path, extra: list[str], word: str
) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk", *extra)
    assert run.code == 1 and word in run.error
    assert not lock.parent.exists()


def test_largest_stale_after_is_accepted(main: Callable[..., Run], lock: Path) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", "525600")
    assert run.code == 0 and run.json["stale_after_minutes"] == 525600


@pytest.mark.parametrize("owner", ["nocolon", "wf::r", "wf:sk:a b", ""])
def test_bad_owner_is_exit_1(main: Callable[..., Run], lock: Path, owner: str) -> None:
    run = main("acquire", "--lock", lock, "--owner", owner)
    assert run.code == 1 and "owner" in run.error
    assert not lock.parent.exists()


def test_release_without_run_id_is_exit_1(main: Callable[..., Run], lock: Path) -> None:
    run = main("release", "--lock", lock, "--owner", "wf:sk")
    assert run.code == 1 and "run id" in run.error


@pytest.mark.parametrize("command", ["acquire", "release", "status"])
def test_folder_as_lock_is_exit_1_and_says_folder(
    main: Callable[..., Run], tmp_path: Path, command: str
) -> None:
    argv = [command, "--lock", tmp_path]
    if command != "status":
        argv += ["--owner", "wf:sk:r"]
    run = main(*argv)
    assert run.code == 1 and "folder" in run.error
    assert list(tmp_path.iterdir()) == []


def test_unwritable_folder_is_exit_2(main: Callable[..., Run], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = main("acquire", "--lock", blocker / "sub" / "x.lock", "--owner", "wf:sk:r")
    assert run.code == 2 and str(blocker) in run.error
    assert blocker.read_text() == "x"


def test_main_returns_instead_of_raising_system_exit(
    skf: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert skf.main(["nope"]) == 1
    assert skf.main(["acquire", "--help"]) == 0
    capsys.readouterr()


def test_output_is_one_ascii_line_for_a_non_ascii_lock_path(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    lock = tmp_path / "verrou-é" / "ロック.lock"
    run = cli("acquire", "--lock", lock, "--owner", "wf:skïll")
    assert run.code == 0 and run.json["lock"] == str(lock)
    assert run.json["owner"].startswith("wf:skïll:")
    for argv in (("status", "--lock", lock), ("release", "--lock", lock, "--owner", "a:b:c")):
        assert cli(*argv).json["lock"] == str(lock)
    assert read_json(lock)["owner"] == run.json["owner"]


def test_refusal_message_gives_the_release_command_to_clear_it(
    cli: Callable[..., Run], lock: Path
) -> None:
    write_record(lock, "wf:sk:holder", ago(minutes=1))
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:me")
    assert run.code == 3
    message = run.json["message"]
    assert "stale" in message and str(lock) in message
    assert f"release --lock {shlex.quote(str(lock))} --owner wf:sk:holder" in message
    assert "delete" not in message


def test_wait_takes_the_lock_once_it_goes_stale(cli: Callable[..., Run], lock: Path) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=59))
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:me", "--stale-after", "1", "--wait", "9")
    assert run.code == 0
    assert run.json["stale_replaced"]["held_by"] == "wf:sk:holder"
    assert run.json["message"].startswith("after waiting ")


def test_wait_gives_up_with_exit_3_and_says_how_long(cli: Callable[..., Run], lock: Path) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=1))
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:me", "--wait", "0.3")
    assert run.code == 3
    assert run.json["held_by"] == "wf:sk:holder"
    assert run.json["message"].startswith("gave up after waiting ")
    assert run.json["owner"] == "wf:sk:me"


def test_wait_adds_one_run_id_for_all_tries(
    main: Callable[..., Run], lock: Path, skf: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=1))
    owners: list[str] = []

    class Seen(WrappedStore):
        def join(self, look: Any, place: Any, now: float) -> None:
            owners.append(place.owner)  # each try refused puts its place in line
            self.real.join(look, place, now)

    wrap_stores(skf, monkeypatch, Seen)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk", "--wait", "0.2")
    assert run.code == 3 and skf.RUN_ID_RE.match(run.json["run_id"])
    assert len(owners) >= 2 and set(owners) == {run.json["owner"]}


def test_script_runs_alone_when_copied_elsewhere(tmp_path: Path) -> None:
    """Copied alone into another folder, it runs isolated (-I -S) and from any cwd."""
    copy = tmp_path / "elsewhere" / "skf-run-lock.py"
    copy.parent.mkdir()
    copy.write_bytes(SCRIPT.read_bytes())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            cwd=copy.parent,
            env=env,
            check=False,
        )

    proc = run("-I", "-S", str(copy), "run-id")
    assert proc.returncode == 0 and json.loads(proc.stdout)["run_id"]
    proc = run(str(copy), "acquire", "--lock", str(tmp_path / "l"), "--owner", "wf:sk")
    assert proc.returncode == 0 and json.loads(proc.stdout)["acquired"]


def clearing_command(message: str) -> str:
    """The command a refusal says to clear the lock with, as printed."""
    assert message.count("clear it with: ") == 1, message
    return message.split("clear it with: ", 1)[1]


def run_in_shell(command: str) -> Run:
    """Run ``command`` exactly as printed, in a POSIX shell, with python3 on PATH."""
    proc = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


@posix_only("runs the advice in a POSIX shell")
def test_the_clearing_command_in_a_refusal_works_as_printed(
    cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    """On every store, for a lock whose name a shell would split or expand."""
    odd = "dir with space/it's $HOME/run.lock"
    where = str(tmp_path / odd) if store.kind == "file" else f"{store.lock}/{odd}"
    gone = StoreUnderTest(store.kind, where)
    gone.plant(planted_record("wf:sk:gone-run", shown_time(60)))
    message = cli("acquire", "--lock", where, "--owner", "wf:sk:me").json["message"]
    command = clearing_command(message)
    assert shlex.split(command)[:2] == ["python3", str(SCRIPT)]
    assert shlex.split(command)[2:] == ["release", "--lock", where, "--owner", "wf:sk:gone-run"]
    cleared = run_in_shell(command)
    assert cleared.code == 0 and cleared.json["released"] is True
    assert gone.value() is None
    assert cli("acquire", "--lock", where, "--owner", "wf:sk:me").code == 0


@pytest.mark.parametrize("command", ["acquire", "run"])
def test_a_refusal_by_a_run_of_the_callers_workflow_and_skill_says_first_it_may_be_its_own(
    cli: Callable[..., Run], lock: Path, command: str
) -> None:
    """An agent in a fresh shell that forgot its run id is never pointed at clearing its
    own lock before being told it may be its own, and how to keep it."""
    assert cli("acquire", "--lock", lock, "--owner", "wf:pub:first").code == 0
    tail = ["--", sys.executable, "-V"] if command == "run" else []
    refused = cli(command, "--lock", lock, "--owner", "wf:pub", *tail)
    assert refused.code == 3
    message = json.loads(refused.err.splitlines()[-1] if command == "run" else refused.out)
    said = message["message"]
    own = said.index("This may be this run's own hold: if this run took it earlier, pass its")
    assert "full owner (--owner wf:pub:first) to keep it;" in said
    assert "if another run of wf:pub is running, wait for it (--wait)" in said
    assert own < said.index("clear it with: ")
    other = cli("acquire", "--lock", lock, "--owner", "wf:other").json["message"]
    assert "may be this run's own" not in other and "clear it with: " in other


@posix_only("runs the advice in a POSIX shell")
def test_the_clearing_command_of_a_call_under_uv_run_runs_the_file_with_uv(
    lock: Path, tmp_path: Path
) -> None:
    """Where the call ran under uv run, python3 may be older than 3.11 (or missing):
    the advice runs the file as the call did, and works as printed."""
    assert UV is not None, "the suite runs under uv run, which names itself in UV"
    write_record(lock, "wf:sk:gone-run", ago(minutes=1))
    path = os.pathsep.join([os.path.dirname(UV), os.environ.get("PATH", "")])
    under_uv = {**os.environ, "UV": UV, "PATH": path}
    refusal = subprocess.run(
        [sys.executable, str(SCRIPT), "acquire", "--lock", str(lock), "--owner", "wf:sk:me"],
        env=under_uv,
        capture_output=True,
        text=True,
        check=False,
    )
    command = clearing_command(json.loads(refusal.stdout)["message"])
    assert shlex.split(command)[:3] == ["uv", "run", str(SCRIPT)]
    cleared = subprocess.run(
        ["/bin/sh", "-c", command],
        env=under_uv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cleared.returncode == 0 and json.loads(cleared.stdout)["released"] is True
    assert not lock.exists()


@posix_only("runs the advice in a POSIX shell")
def test_the_clearing_command_never_removes_a_newer_runs_lock(
    cli: Callable[..., Run], lock: Path
) -> None:
    """Unlike rm, the printed command is safe even if another run took the lock meanwhile."""
    write_record(lock, "wf:sk:old-run", ago(minutes=61))
    message = cli("acquire", "--lock", lock, "--owner", "wf:sk:me", "--stale-after", "120")
    command = clearing_command(message.json["message"])
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:newer").code == 0  # old one went stale
    late = run_in_shell(command)
    assert late.code == 0 and late.json["reason"] == "not-owner"
    assert read_json(lock)["owner"] == "wf:sk:newer"
