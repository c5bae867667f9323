"""Faults injected at each step: exit 2, one JSON error, the old lock intact, no litter."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, linux_only, posix_only, root_only
from lockfiles import ago, beside, write_record


class FailingOs:
    """One function of the os module failing with ``code`` when ``hits(args)`` is true,
    in the thread that set it (the call under test), until ``monkeypatch`` is undone;
    ``failed``: how often it failed."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        name: str,
        hits: Callable[[tuple[Any, ...]], bool],
        code: int,
    ) -> None:
        self.hits, self.code = hits, code
        self.failed = 0
        real = getattr(os, name)
        mine = threading.current_thread()

        def failing(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is mine and self.hits(args):
                self.failed += 1
                path = args[0] if args and isinstance(args[0], str) else None
                raise OSError(self.code, os.strerror(self.code), path)
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, failing)


def _path_ends(suffix: str) -> Callable[[tuple[Any, ...]], bool]:
    return lambda args: isinstance(args[0], str) and args[0].endswith(suffix)


def _always(args: tuple[Any, ...]) -> bool:
    return True


# How a release deletes the lock file: Windows renames it away first (a deleted file's
# name stays while another program has it open), so there that rename is the step.
WINDOWS_DELETES_BY = "replace"
DELETED_BY = WINDOWS_DELETES_BY if sys.platform == "win32" else "unlink"

STEPS = {
    "guard open": ("open", _path_ends(".skf-guard")),
    "read": ("read", _always),
    "temp open": ("open", _path_ends("-tmp")),
    "temp write": ("write", _always),
    "fsync": ("fsync", _always),
    "rename": ("replace", _always),
    "unlink": (DELETED_BY, _path_ends("run.lock")),
}
ERRORS = [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EIO]
# Which steps each call reaches.
SCENARIOS = {
    "take stale": ["guard open", "read", "temp open", "temp write", "fsync", "rename"],
    "renew": ["guard open", "read", "temp open", "temp write", "fsync", "rename"],
    "release": ["guard open", "read", "unlink"],
}


def _argv(scenario: str, lock: Path) -> list[str]:
    owner = "wf:sk:new" if scenario == "take stale" else "wf:sk:old"
    command = "release" if scenario == "release" else "acquire"
    return [command, "--lock", str(lock), "--owner", owner]


@pytest.mark.parametrize("code", ERRORS, ids=errno.errorcode.get)
@pytest.mark.parametrize(
    ("scenario", "step"),
    [(scenario, step) for scenario, steps in SCENARIOS.items() for step in steps],
)
def test_fault_leaves_the_old_lock_and_no_litter(  # noqa: PLR0917
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    monkeypatch: pytest.MonkeyPatch,
    scenario: str,
    step: str,
    code: int,
) -> None:
    write_record(lock, "wf:sk:old", ago(hours=2))
    before = (lock.read_bytes(), os.stat(lock).st_mtime_ns)
    name, hits = STEPS[step]
    failing = FailingOs(monkeypatch, name, hits, code)
    run = main(*_argv(scenario, lock))
    monkeypatch.undo()
    assert failing.failed >= 1, f"{step} was never reached"
    assert run.code == 2
    assert os.strerror(code) in run.error
    assert (lock.read_bytes(), os.stat(lock).st_mtime_ns) == before
    assert beside(lock) == ["run.lock"]


def test_fault_creating_the_folder_is_exit_2(
    skf: ModuleType, main: Callable[..., Run], lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FailingOs(monkeypatch, "makedirs", _always, errno.EACCES)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2 and "Permission denied" in run.error
    assert not lock.parent.exists()


@pytest.mark.parametrize("call", ["take", "renew", "release"])
def test_failing_clean_up_listing_does_not_fail_the_call(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    write_record(lock, "wf:sk:r", ago(seconds=5))
    if call == "take":
        lock.unlink()
    (lock.parent / "run.lock.skf-guard").touch()  # left by a call that died: a listing is due
    failing = FailingOs(monkeypatch, "listdir", _always, errno.EIO)
    if call == "release":
        assert skf.release(lock, "wf:sk:r")["released"]
    else:
        assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert failing.failed == 1  # the listing was reached, failed, and did not matter


def test_interrupt_during_the_write_removes_the_temp(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_record(lock, "wf:sk:old", ago(hours=2))
    before = lock.read_bytes()

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        skf.acquire(lock, "wf:sk:new", 60.0)
    monkeypatch.undo()
    assert lock.read_bytes() == before and beside(lock) == ["run.lock"]


def main_as_nobody(skf: ModuleType, *argv: str) -> Run:
    """``skf.main(argv)`` in a forked child, as nobody when this is root, so that a
    permission failure is real: its exit code, and what it wrote."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # child: report the exit code of main() as its own
            code = 99
            try:
                if os.geteuid() == 0:
                    os.setuid(65534)
                sys.stdout, sys.stderr = out, err
                code = skf.main(list(argv))
                out.flush()
                err.flush()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return Run(os.waitstatus_to_exitcode(status), out.read(), err.read())


@posix_only("fork and setuid")
def test_read_only_folder_for_real_is_exit_2(skf: ModuleType) -> None:
    """A real permission failure (as root, the call runs as nobody in a forked child)."""
    top = Path(tempfile.mkdtemp(prefix="skf-ro-"))
    try:
        top.chmod(0o755)
        lock = top / "locks" / "run.lock"
        write_record(lock, "wf:sk:old", ago(hours=2))
        before = lock.read_bytes()
        lock.parent.chmod(0o555)
        run = main_as_nobody(skf, "acquire", "--lock", str(lock), "--owner", "wf:sk:new")
        assert run.code == 2, run
        assert lock.read_bytes() == before and beside(lock) == ["run.lock"]
    finally:
        (top / "locks").chmod(0o755)
        shutil.rmtree(top)


# --- Errors that name their cause, at once ----------------------------------------------


@linux_only("/proc, which makes no files")
@pytest.mark.parametrize(
    ("lock", "words"),
    [
        ("/proc/skf-x.lock", "no file can be made in the folder /proc"),
        ("/proc/skf-sub/x.lock", "the lock's folder /proc/skf-sub cannot be made in /proc"),
    ],
)
def test_a_folder_where_no_file_can_be_made_is_exit_2_with_the_systems_reason(
    cli: Callable[..., Run], lock: str, words: str
) -> None:
    """Not the guard's 10 s wait, then blaming another call."""
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert run.code == 2 and words in run.error and "No such file or directory" in run.error
    assert "guard" not in run.error and "another call" not in run.error


@linux_only("a filesystem mounted read-only")
@root_only("mounts a filesystem")
def test_a_read_only_filesystem_is_exit_2_saying_so(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    mounted = tmp_path / "ro"
    mounted.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mounted)], check=True)
    try:
        for lock in (mounted / "x.lock", mounted / "sub" / "x.lock"):
            run = cli("acquire", "--lock", lock, "--owner", "wf:sk")
            assert run.code == 2 and "Read-only file system" in run.error, run
        assert list(mounted.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@posix_only("fork and setuid")
def test_a_folder_that_cannot_be_made_names_the_one_that_is_not_writable(skf: ModuleType) -> None:
    """ro/ is not writable: the lock ro/sub/deeper/x.lock names ro, which exists, not
    ro/sub, which does not (as root, the call runs as nobody)."""
    top = Path(tempfile.mkdtemp(prefix="skf-ro-"))
    try:
        top.chmod(0o755)
        (top / "ro").mkdir(mode=0o555)
        for lock in (top / "ro" / "sub" / "x.lock", top / "ro" / "sub" / "deeper" / "x.lock"):
            run = main_as_nobody(skf, "acquire", "--lock", str(lock), "--owner", "wf:sk")
            assert run.code == 2, run
            assert f"the folder {top / 'ro'} is not writable by this user" in run.error
        assert list((top / "ro").iterdir()) == []
    finally:
        shutil.rmtree(top)


# --- Windows: a file another process has open cannot be replaced or deleted at once ----


def sharing_refusal() -> PermissionError:
    """What Windows raises when another process has the file open (ERROR_SHARING_VIOLATION)."""
    refusal = PermissionError(errno.EACCES, "The process cannot access the file")
    refusal.winerror = 32  # type: ignore[attr-defined]  # set by the OS on Windows only
    return refusal


def refusing(
    real: Callable[..., None], lock: Path, times: int, calls: list[tuple[Any, ...]]
) -> Callable[..., None]:
    """``real``, but refused as Windows refuses it for its first ``times`` calls on
    ``lock`` (replaced or deleted) while a reader has the lock file open."""

    def stand_in(*args: Any) -> None:
        if str(lock) in map(str, args):
            calls.append(args)
            if len(calls) <= times:
                raise sharing_refusal()
        real(*args)

    return stand_in


@pytest.mark.parametrize("name", ["replace", "unlink"])
@pytest.mark.usefixtures("windows_rules")
def test_a_sharing_refusal_is_waited_out(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    write_record(lock, "wf:sk:r", ago(seconds=5))
    calls: list[tuple[Any, ...]] = []
    refused = WINDOWS_DELETES_BY if name == "unlink" else name
    monkeypatch.setattr(os, refused, refusing(getattr(os, refused), lock, 3, calls))
    if name == "replace":
        assert skf.acquire(lock, "wf:sk:r", 60.0)["refreshed"] is True
        assert lock.read_text().startswith('{"owner": "wf:sk:r"')
    else:
        assert skf.release(lock, "wf:sk:r")["released"] is True
        assert not lock.exists()
    assert len(calls) == 4
    assert beside(lock) == (["run.lock"] if name == "replace" else [])


@pytest.mark.parametrize("call", ["status", "acquire"])
@pytest.mark.usefixtures("windows_rules")
def test_a_record_being_replaced_or_deleted_is_read_once_windows_opens_it(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """Windows refuses to open a file while another process replaces or deletes it,
    and os.open says only EACCES (the C runtime gives no Windows code): a read of the
    record is tried again until it opens, as a waiter's, status's and a change's are."""
    write_record(lock, "wf:sk:r", ago(seconds=5))
    real_open = os.open
    refused: list[str] = []

    def opening(path: str, flags: int, *mode: int) -> int:
        if path == str(lock) and len(refused) < 3:
            refused.append(path)
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *mode)

    monkeypatch.setattr(os, "open", opening)
    if call == "status":
        assert skf.status(lock, 60.0)["held_by"] == "wf:sk:r"
    else:
        assert skf.acquire(lock, "wf:sk:r", 60.0)["refreshed"] is True
    assert len(refused) == 3


@pytest.mark.parametrize("name", ["replace", "unlink"])
@pytest.mark.usefixtures("windows_rules")
def test_a_lasting_sharing_refusal_is_exit_2_leaving_the_lock(
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    monkeypatch.setattr(skf._SEAMS, "sharing_retry_sec", 0.2)
    write_record(lock, "wf:sk:r", ago(seconds=5))
    before = lock.read_bytes()
    calls: list[tuple[Any, ...]] = []
    refused = WINDOWS_DELETES_BY if name == "unlink" else name
    monkeypatch.setattr(os, refused, refusing(getattr(os, refused), lock, 10**9, calls))
    command = ["acquire"] if name == "replace" else ["release"]
    run = main(*command, "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2 and "could not be read or written" in run.error
    assert len(calls) > 2  # tried again, then gave up
    assert lock.read_bytes() == before
    assert beside(lock) == ["run.lock"]


@pytest.mark.usefixtures("windows_rules")
def test_a_release_that_renames_the_lock_away_first_leaves_nothing(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows' way of deleting, run everywhere: the lock's name is free at once, and a
    renamed file that cannot be deleted stays under a temp file's name, which no lock,
    listing or line reads."""
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert skf.release(lock, "wf:sk:r")["released"] is True
    assert beside(lock) == []
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    real_unlink = os.unlink

    def held_open(path: str) -> None:  # the renamed file cannot go yet
        if path.endswith("-tmp"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", held_open)
    assert skf.release(lock, "wf:sk:r")["released"] is True
    (renamed,) = beside(lock)
    assert renamed.startswith("run.lock.skf-") and renamed.endswith("-tmp")
    assert skf.status(lock, 60.0)["state"] == "free"
    assert skf.list_locks(lock.parent)["locks"] == []
    monkeypatch.undo()
    assert skf.acquire(lock, "wf:sk:r2", 60.0)["acquired"]
    assert beside(lock) == ["run.lock", renamed]


@pytest.mark.usefixtures("windows_rules")
def test_a_refusal_that_is_not_about_sharing_is_not_retried(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_record(lock, "wf:sk:r", ago(seconds=5))
    calls: list[tuple[Any, ...]] = []

    def denied(*args: Any) -> None:
        calls.append(args)
        # A refusal Windows gives its own code for (ERROR_PRIVILEGE_NOT_HELD), as
        # os.replace's are (set by the OS on Windows only).
        refusal = PermissionError(errno.EACCES, "Permission denied")
        refusal.winerror = 1314  # type: ignore[attr-defined]
        raise refusal

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        skf.acquire(lock, "wf:sk:r", 60.0)
    assert len(calls) == 1
