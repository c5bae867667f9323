"""What differs on Windows, proven where it differs: each test runs on every platform and
asserts what that platform does (the Windows lane runs them under Windows CPython).

Windows refuses to replace or delete a file that another process has open, and to open
one that is being deleted; it reserves device names in every folder; its C runtime's
lock call may fail with any errno under Wine; and it has no ``python3``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, Started
from contenders import turns_taken
from lockfiles import ago, beside, read_json, write_record

WINDOWS = sys.platform == "win32"

# Another program that keeps a file open (an editor, a scanner, an indexer): Python's
# open() on Windows shares reading and writing, not deleting, as most programs do.
KEEP_OPEN = (
    "import sys, time\n"
    "kept = open(sys.argv[1], 'rb')\n"
    "print('open', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
)

# A program that lets others delete the file it has open (FILE_SHARE_DELETE), as
# scanners and indexers do; POSIX lets every program do so.
KEEP_OPEN_SHARING_DELETE = (
    "import ctypes, sys, time\n"
    "from ctypes import wintypes as w\n"
    "kernel = ctypes.WinDLL('kernel32', use_last_error=True)\n"
    "kernel.CreateFileW.restype = w.HANDLE\n"
    "kernel.CreateFileW.argtypes = [w.LPCWSTR, w.DWORD, w.DWORD, w.LPVOID, w.DWORD,"
    " w.DWORD, w.HANDLE]\n"
    "read, share_all, existing, normal = 0x80000000, 7, 3, 0x80\n"
    "handle = kernel.CreateFileW(sys.argv[1], read, share_all, None, existing, normal, None)\n"
    "assert handle not in (None, w.HANDLE(-1).value), ctypes.get_last_error()\n"
    "print('open', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
    "kernel.CloseHandle(handle)\n"
)


def kept_open(path: Path, seconds: float, program: str = KEEP_OPEN) -> subprocess.Popen[str]:
    """A process that has ``path`` open for ``seconds``, once it has it open."""
    proc = subprocess.Popen(
        [sys.executable, "-c", program, str(path), str(seconds)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "open\n"
    return proc


def test_four_processes_taking_turns_never_crash_nor_share_the_lock(
    worker: Callable[..., Started], tmp_path: Path
) -> None:
    """Four real processes wait in line (10 s at most) for one lock, hold it, release
    it, again and again: none crashes (a refused guard, a record being replaced or
    deleted while a waiter reads it), none finds another inside, no wait runs out,
    and nothing but the folder's own marks is left."""
    lock = tmp_path / "locks" / "run.lock"
    workers = [("share-slots", str(lock), f"wf:turn{n}", "1") for n in range(4)]
    entries = turns_taken(worker, tmp_path, workers, 8)
    assert all(any(line.startswith("took") for line in lines) for lines in entries), entries
    assert beside(lock) == []


def test_a_record_being_replaced_or_deleted_is_read_once_the_change_is_done(
    skf: ModuleType, worker: Callable[..., Started], tmp_path: Path
) -> None:
    """status, which reads the lock without its guard as a waiter does, never fails
    while two processes take and release the lock for 6 s. (Windows refuses to open a
    file while it is being deleted; under Wine this race did not show, so the retry of
    such a read is proven by test_faults' simulated refusal, not here.)"""
    lock = tmp_path / "locks" / "run.lock"
    (tmp_path / "inside").mkdir()
    logs = [tmp_path / "out0", tmp_path / "out1"]
    procs = [
        worker("share-slots", lock, f"wf:turn{n}", "1", tmp_path, log) for n, log in enumerate(logs)
    ]
    states = set()
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        states.add(skf.status(lock, 60.0)["state"])
    (tmp_path / "stop").touch()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    assert states == {"free", "held"}
    assert beside(lock) == []


# How long eight processes take turns: 30 s on Windows, a Windows user's first
# contended half-minute; 10 s elsewhere, where the slots tests load a lock longer.
EIGHT_TAKE_TURNS_SEC = 30 if WINDOWS else 10


@pytest.mark.slow
def test_eight_processes_take_turns_with_nothing_left_behind(
    worker: Callable[..., Started], tmp_path: Path
) -> None:
    """Eight processes take turns on one lock: never two inside, no wait runs out."""
    lock = tmp_path / "locks" / "run.lock"
    workers = [("share-slots", str(lock), f"wf:turn{n}", "1") for n in range(8)]
    entries = turns_taken(worker, tmp_path, workers, EIGHT_TAKE_TURNS_SEC)
    assert all(any(line.startswith("took") for line in lines) for lines in entries), entries
    assert beside(lock) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("call", ["renew", "take over", "release"])
def test_a_lock_file_another_program_has_open_for_2_s_delays_a_change_never_fails_it(
    cli: Callable[..., Run], tmp_path: Path, call: str
) -> None:
    lock = tmp_path / "run.lock"
    if call == "take over":
        write_record(lock, "wf:sk:gone", ago(hours=2), stale_after_seconds=60)
    else:
        assert cli("acquire", "--lock", lock, "--owner", "wf:sk:r").code == 0
    other = kept_open(lock, 2)
    if call == "release":
        run = cli("release", "--lock", lock, "--owner", "wf:sk:r")
        assert (run.code, run.json["released"]) == (0, True), run
    else:
        run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r")
        assert (run.code, run.json["acquired"]) == (0, True), run
        assert run.json["refreshed"] is (call == "renew")
        assert read_json(lock)["owner"] == "wf:sk:r"
    other.wait(timeout=60)
    assert beside(lock) == ([] if call == "release" else ["run.lock"])


@pytest.mark.timeout(120)
def test_a_lock_released_while_another_program_has_it_open_is_free_at_once(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A release deletes the lock file while a scanner has it open, sharing delete.
    Windows keeps a deleted file's name until the scanner closes it (refusing every
    open, or under Wine still serving the old record): the lock must be free at once,
    to status and to the next acquire, and nothing is left once the scanner is done."""
    lock = tmp_path / "run.lock"
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:a").code == 0
    other = kept_open(lock, 3, KEEP_OPEN_SHARING_DELETE if WINDOWS else KEEP_OPEN)
    assert cli("release", "--lock", lock, "--owner", "wf:sk:a").json["released"] is True
    status = cli("status", "--lock", lock)
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk:b")
    other.wait(timeout=60)
    assert (status.code, status.json["state"]) == (0, "free"), status
    assert (taken.code, taken.json["held_by"]) == (0, "wf:sk:b"), taken
    assert read_json(lock)["owner"] == "wf:sk:b"
    assert beside(lock) == ["run.lock"]


@pytest.mark.timeout(120)
def test_a_lock_file_another_program_keeps_open_is_exit_2_naming_it_on_windows(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """Past 5 s the call gives up, naming the lock file (not its temp file) and the
    cause, and leaves the record as it was. POSIX lets the change through at once."""
    lock = tmp_path / "run.lock"
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", "30").code == 0
    before = lock.read_bytes()
    other = kept_open(lock, 9)
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", "60")
    other.wait(timeout=60)
    if WINDOWS:
        assert run.code == 2, run
        assert f"another program has the lock file {lock} open" in run.error, run
        assert "-tmp" not in run.error
        assert lock.read_bytes() == before
    else:
        assert run.code == 0, run
        assert read_json(lock)["stale_after_seconds"] == 3600
    assert beside(lock) == ["run.lock"]


@pytest.mark.parametrize(
    "name", ["CON", "nul.lock", "com1.lock", "Lpt9", "x.lock:stream", "x.lock.", "x.lock "]
)
def test_a_name_windows_reserves_is_exit_1_there_and_a_plain_name_elsewhere(
    cli: Callable[..., Run], tmp_path: Path, name: str
) -> None:
    run = cli("acquire", "--lock", tmp_path / "locks" / name, "--owner", "wf:sk:r")
    if WINDOWS:
        assert run.code == 1, run
        assert "cannot be a lock file" in run.error and "Windows" in run.error, run
        assert not (tmp_path / "locks").exists()
    else:
        assert run.code == 0, run
        assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [name]


def test_a_lock_name_too_long_for_the_files_beside_it_is_exit_2_naming_the_cause(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A name the lock's own files (guard, line, temp files) would take past the 255
    characters a filesystem keeps; Windows would say "no such file" later."""
    longest = tmp_path / ("n" * 224 + ".lock")
    assert cli("acquire", "--lock", longest, "--owner", "wf:sk:r").code == 0
    too_long = tmp_path / ("n" * 225 + ".lock")
    run = cli("acquire", "--lock", too_long, "--owner", "wf:sk:r")
    assert run.code == 2, run
    assert "the lock name is too long: 230 characters" in run.error, run
    assert "give a name of at most 229" in run.error
    assert sorted(p.name for p in tmp_path.iterdir()) == [longest.name]


def test_the_clearing_command_runs_as_printed_with_no_shell(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """The refusal's advice, split as Git Bash and PowerShell split single quotes, runs
    as it stands: its interpreter is the one that ran the call (Windows has no
    python3 unless someone made one)."""
    lock = tmp_path / "a folder" / "run.lock"
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:gone").code == 0
    refusal = cli("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert refusal.code == 3, refusal
    advice = refusal.json["message"].split("clear it with: ", 1)[1]
    argv = shlex.split(advice)
    if WINDOWS:
        assert argv[0] != "python3"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (advice, done.stderr)
    assert json.loads(done.stdout)["released"] is True
    assert beside(lock) == []
