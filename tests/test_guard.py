"""The guard protocol: identity check, hardened paths, orphan clean-up, and the Windows branch."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if sys.platform != "win32":
    import fcntl
import subprocess
from collections.abc import Callable

from calls import Run, Started, pipe, posix_only
from loader import PACKAGE, SCRIPT
from lockfiles import NOW, ago, beside, write_record
from windows_rules import FakeMsvcrt
from wrapped import WrappedPlatform, follow_rules


@posix_only("removing a file that is open and locked")
def test_guard_is_removed_while_still_held(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_open, real_unlink, real_close = os.open, os.unlink, os.close
    guard = str(lock) + ".skf-guard"
    fds: dict[int, str] = {}

    def open_(path: str, *a: Any, **k: Any) -> int:
        fd = real_open(path, *a, **k)
        if path == guard:
            fds[fd] = "guard"
        return fd

    def unlink(path: str, *a: Any, **k: Any) -> None:
        if path == guard:
            events.append("unlink guard")
        real_unlink(path, *a, **k)

    def close(fd: int) -> None:
        if fds.pop(fd, None):
            events.append("close guard")
        real_close(fd)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "close", close)
    skf.acquire(lock, "wf:sk:r", 60.0)
    assert events == ["unlink guard", "close guard"]


# Rounds each of eight processes makes: under Wine a Windows file call costs about ten
# times a Linux one, and 2000 rounds would take minutes there (300 took 30 s of both
# cores in CI; 150 still pass the guard between the eight over a thousand times).
GUARD_ROUNDS = 150 if sys.platform == "win32" else 2000


@pytest.mark.timeout(120)
def test_guard_admits_one_process_at_a_time_8_processes_many_rounds(
    lock: Path, worker: Callable[..., Started]
) -> None:
    """Take guard -> create a marker with O_EXCL -> remove it -> drop guard, in 8 real
    processes at once: a second process inside the guard finds the marker."""
    lock.parent.mkdir()
    marker = lock.parent / "inside"
    procs = [worker("guard-stress", lock, marker, GUARD_ROUNDS) for _ in range(8)]
    for proc in procs:
        assert pipe(proc.stdout).readline() == "ready\n"
    for proc in procs:
        pipe(proc.stdin).write("go\n")
        pipe(proc.stdin).flush()
    codes = [proc.wait(timeout=110) for proc in procs]
    assert codes == [0] * 8, [pipe(proc.stderr).read() for proc in procs]
    assert beside(lock) == []


@posix_only("symbolic links and O_NOFOLLOW")
def test_guard_replaced_by_a_link_to_itself_is_not_taken(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity check must not follow links: a link at the guard path to the very file
    this call locked does not make it the guard (lstat, not stat)."""
    lock.parent.mkdir()
    guard = str(lock) + ".skf-guard"

    class SwappedThenLocked(WrappedPlatform):
        def try_lock(self, fd: int) -> bool:
            if not os.path.islink(guard):
                os.rename(guard, guard + ".moved")
                os.symlink(guard + ".moved", guard)
            return bool(self.real.try_lock(fd))

    follow_rules(skf, monkeypatch, SwappedThenLocked(skf._SEAMS.platform))
    with pytest.raises(OSError, match="symbolic link"):
        skf.acquire(lock, "wf:sk:r", 60.0)
    assert not lock.exists()


OWN_TEMP = "run.lock.skf-00000000-tmp"  # the one temp name this version writes through


def unlink_watched(monkeypatch: pytest.MonkeyPatch, first: Callable[[str], None]) -> None:
    """``os.unlink`` calls ``first(path)`` before it unlinks: to note the call, or to
    refuse it by raising as Windows does."""
    real_unlink = os.unlink

    def unlink(path: str, *args: Any, **kwargs: Any) -> None:
        first(path)
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)


def refused(path: str, why: str) -> None:
    raise PermissionError(errno.EACCES, why, path)


def test_the_temp_file_is_created_exclusively_under_one_name(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record goes through <lock>.skf-00000000-tmp, opened with O_EXCL."""
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def spying_open(path: str, flags: int, *args: int) -> int:
        opened.append((os.path.basename(path), flags))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", spying_open)
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    temps = [(name, flags) for name, flags in opened if name.endswith("-tmp")]
    assert [name for name, _ in temps] == [OWN_TEMP]
    assert temps[0][1] & os.O_EXCL and temps[0][1] & os.O_CREAT
    assert beside(lock) == ["run.lock"]


def test_an_orphan_at_the_temp_name_is_replaced_without_a_listing(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call of this version killed mid-write left its temp and no guard (another call,
    of an older version, took and removed the guard): the next write takes the name."""
    lock.parent.mkdir()
    (lock.parent / OWN_TEMP).write_text("partial")
    monkeypatch.setattr(os, "listdir", _no_listing)
    monkeypatch.setattr(os, "scandir", _no_listing)
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    monkeypatch.undo()
    assert beside(lock) == ["run.lock"]


def test_a_temp_name_that_cannot_be_freed_gives_way_to_random_ones(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock.parent.mkdir()
    (lock.parent / OWN_TEMP).write_text("someone has me open")
    draws = iter([b"\x01" * 4, b"\x02" * 4])
    monkeypatch.setattr(skf.os, "urandom", lambda n: next(draws))
    (lock.parent / "run.lock.skf-01010101-tmp").write_text("taken too")

    def in_use(path: str) -> None:
        if path.endswith("-tmp") and os.path.basename(path) != "run.lock.skf-02020202-tmp":
            refused(path, "in use")

    unlink_watched(monkeypatch, in_use)
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert beside(lock) == sorted(["run.lock", OWN_TEMP, "run.lock.skf-01010101-tmp"])


def test_temp_name_search_is_bounded(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock.parent.mkdir()
    (lock.parent / OWN_TEMP).write_text("x")
    (lock.parent / "run.lock.skf-00000001-tmp").write_text("x")
    monkeypatch.setattr(skf.os, "urandom", lambda n: b"\x00\x00\x00\x01")
    unlink_watched(
        monkeypatch, lambda path: refused(path, "in use") if path.endswith("-tmp") else None
    )
    with pytest.raises(FileExistsError, match="no free temp file name"):
        skf.acquire(lock, "wf:sk:r", 60.0)
    monkeypatch.undo()
    assert beside(lock) == sorted([OWN_TEMP, "run.lock.skf-00000001-tmp"])


def _no_listing(path: object = None) -> list[str]:
    raise AssertionError("the lock's folder was listed")


@posix_only("removing a file that is open")
def test_guard_replaced_after_opening_is_retried(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter that locks a guard file its holder already removed must not go on."""
    lock.parent.mkdir()
    guard = str(lock) + ".skf-guard"
    locked: list[bool] = []

    class RemovedOnce(WrappedPlatform):
        def try_lock(self, fd: int) -> bool:
            locked.append(bool(self.real.try_lock(fd)))
            if len(locked) == 1:
                os.unlink(guard)  # the holder removes the file between our open and our check
            return locked[-1]

    follow_rules(skf, monkeypatch, RemovedOnce(skf._SEAMS.platform))
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    # The file it locked first was gone: it made the guard anew and locked that.
    assert locked == [True, True]
    assert not os.path.exists(guard)


@posix_only("symbolic links and O_NOFOLLOW")
def test_symlink_planted_at_the_guard_is_refused(
    main: Callable[..., Run], lock: Path, tmp_path: Path
) -> None:
    lock.parent.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep me")
    os.symlink(target, str(lock) + ".skf-guard")
    for argv in (("acquire", "--owner", "wf:sk:r"), ("release", "--owner", "wf:sk:r")):
        run = main(argv[0], "--lock", lock, *argv[1:])
        assert run.code == 2 and "symbolic link" in run.error
    assert target.read_text() == "keep me"
    assert beside(lock) == ["run.lock.skf-guard"] and not lock.exists()


@posix_only("symbolic links and O_NOFOLLOW")
def test_dangling_symlink_at_the_guard_creates_nothing(
    main: Callable[..., Run], lock: Path, tmp_path: Path
) -> None:
    lock.parent.mkdir()
    target = tmp_path / "would-be-created"
    os.symlink(target, str(lock) + ".skf-guard")
    assert main("acquire", "--lock", lock, "--owner", "wf:sk:r").code == 2
    assert not target.exists()


@posix_only("symbolic links")
def test_a_folder_that_loops_is_named_as_a_loop_not_as_a_link_at_the_guard(
    main: Callable[..., Run], lock: Path
) -> None:
    """The lock's folder is a link to itself: the guard is no link, so the error must
    not tell an agent to remove one; it names the loop and the path."""
    os.symlink(lock.parent.name, lock.parent)
    for argv in (("acquire", "--owner", "wf:sk:r"), ("release", "--owner", "wf:sk:r")):
        run = main(argv[0], "--lock", lock, *argv[1:])
        assert run.code == 2, run
        assert run.error == (
            f"the lock could not be read or written: {os.strerror(errno.ELOOP)}: {lock}.skf-guard"
        )
    assert os.readlink(lock.parent) == lock.parent.name


@pytest.mark.parametrize("code", [errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK])
@posix_only("fcntl.flock")
def test_filesystem_without_locks_is_exit_2_naming_the_folder(
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
) -> None:
    def no_flock(fd: int, op: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2
    assert "does not support file locks" in run.error and str(lock.parent) in run.error
    assert beside(lock) == []


@pytest.mark.parametrize("call", ["take", "refusal", "release", "absent-release"])
def test_a_guard_left_behind_has_its_orphans_removed_by_any_call(
    skf: ModuleType, lock: Path, call: str
) -> None:
    """A call that died mid-write leaves the guard it held and its temp file (of any
    version, under any random name): whichever call takes that guard next lists the
    folder once and removes them, whether it then writes or not."""
    lock.parent.mkdir()
    if call not in {"take", "absent-release"}:
        write_record(lock, "wf:sk:holder", ago(seconds=5))
    (lock.parent / "run.lock.skf-guard").touch()
    orphans = ["run.lock.skf-0123abcd-tmp", "run.lock.skf-ffffffff-tmp", OWN_TEMP]
    # Windows takes names that differ only in case for one file: no upper-case name there.
    upper = [] if sys.platform == "win32" else ["run.lock.skf-0123ABCD-tmp"]
    kept = [
        *upper,
        "run.lock.skf-0123abc-tmp",
        "other.lock.skf-0123abcd-tmp",
        "run.lock.skf-0123abcd-tmpx",
        "xrun.lock.skf-0123abcd-tmp",
        "run.lock.bak",
    ]
    for name in orphans + kept:
        (lock.parent / name).write_text("partial")
    if call == "take":
        assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    elif call == "refusal":
        assert not skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    elif call == "release":
        assert skf.release(lock, "wf:sk:holder")["released"]
    else:
        assert skf.release(lock, "wf:sk:r:1")["reason"] == "absent"
    lock_left = ["run.lock"] if call in ("take", "refusal") else []
    assert beside(lock) == sorted([*kept, *lock_left])


def test_no_call_lists_the_folder_on_the_common_path(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking a free lock, renewing, being refused, releasing, status: none lists the
    lock's folder, so a crowded folder costs a call nothing."""
    monkeypatch.setattr(os, "listdir", _no_listing)
    monkeypatch.setattr(os, "scandir", _no_listing)
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert skf.acquire(lock, "wf:sk:r", 60.0)["refreshed"]
    assert not skf.acquire(lock, "wf:sk:other", 60.0)["acquired"]
    assert skf.release(lock, "wf:sk:other")["reason"] == "not-owner"
    assert skf.status(lock, 60.0)["state"] == "held"
    assert skf.release(lock, "wf:sk:r")["released"]
    assert skf.release(lock, "wf:sk:r")["reason"] == "absent"
    write_record(lock, "wf:sk:old", ago(hours=2))
    assert skf.acquire(lock, "wf:sk:r", 60.0)["stale_replaced"]["held_by"] == "wf:sk:old"
    monkeypatch.undo()
    assert beside(lock) == ["run.lock"]


def test_the_listing_comes_only_with_a_guard_left_behind(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[str] = []
    real_listdir = os.listdir

    def listdir(path: str) -> list[str]:
        listed.append(path)
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", listdir)
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert listed == []
    (lock.parent / "run.lock.skf-guard").touch()
    assert skf.acquire(lock, "wf:sk:r", 60.0)["refreshed"]
    assert listed == [str(lock.parent)]
    assert beside(lock) == ["run.lock"]


@posix_only("SIGKILL")
def test_call_killed_mid_write_leaves_guard_and_temp_for_the_next_call(
    cli: Callable[..., Run], lock: Path, worker: Callable[..., Started]
) -> None:
    holder = worker("die-mid-write", lock)
    holder.wait(timeout=60)
    assert holder.returncode == -9
    left = beside(lock)
    assert len(left) == 2 and "run.lock.skf-guard" in left
    temp = next(name for name in left if name != "run.lock.skf-guard")
    assert temp.startswith("run.lock.skf-") and temp.endswith("-tmp")
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:next").code == 0
    assert beside(lock) == ["run.lock"]


def test_status_leaves_orphans_alone(skf: ModuleType, lock: Path) -> None:
    """status takes no guard, so it cannot know that a temp file is an orphan."""
    lock.parent.mkdir()
    (lock.parent / "run.lock.skf-0123abcd-tmp").write_text("maybe in flight")
    skf.status(lock, 60.0)
    assert beside(lock) == ["run.lock.skf-0123abcd-tmp"]


# --- The Windows branch, run here against a fake msvcrt ----------------------


# The script following Windows' rules (conftest's windows_rules), and the fake msvcrt
# it locks through.
Windows = tuple[ModuleType, FakeMsvcrt]


@pytest.fixture
def windows(skf: ModuleType, windows_rules: FakeMsvcrt | None) -> Windows:
    assert windows_rules is not None  # these tests run on POSIX
    return skf, windows_rules


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_rules_are_the_ones_followed(windows: Windows, lock: Path) -> None:
    module, fake = windows
    assert module._SEAMS.platform is module._WINDOWS
    assert module._SEAMS.platform.remove_guard_while_held is False
    assert module.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert fake.calls == ["lock", "unlock"]  # through msvcrt


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_unlocks_then_removes_the_guard(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fake = windows
    guard = str(lock) + ".skf-guard"
    unlink_watched(
        monkeypatch, lambda path: fake.calls.append("remove guard") if path == guard else None
    )
    result = module.acquire(lock, "wf:sk:r", 60.0, now=NOW)
    assert result["acquired"]
    assert fake.calls == ["lock", "unlock", "remove guard"]
    fake.calls.clear()
    assert module.release(lock, "wf:sk:r")["released"]
    assert fake.calls == ["lock", "unlock", "remove guard"]
    assert beside(lock) == []


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_retries_while_another_process_holds_the_byte(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fake = windows
    fake.busy_times = 3
    monkeypatch.setattr(module.time, "sleep", lambda s: None)
    assert module.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert fake.calls[:4] == ["busy", "busy", "busy", "lock"]
    assert beside(lock) == ["run.lock"]


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_retries_while_the_guard_is_being_deleted(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fake = windows
    lock.parent.mkdir()
    guard = str(lock) + ".skf-guard"
    denied = [2]
    real_open = os.open

    def open_(path: str, flags: int, mode: int = 0o777, *a: Any, **k: Any) -> int:
        if path == guard and denied[0]:
            denied[0] -= 1
            raise PermissionError(errno.EACCES, "delete pending", path)
        return real_open(path, flags, mode, *a, **k)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(module.time, "sleep", lambda s: None)
    assert module.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert denied == [0] and fake.calls == ["lock", "unlock"]


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_guard_still_open_elsewhere_is_left_to_its_opener(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fake = windows
    guard = str(lock) + ".skf-guard"
    with monkeypatch.context() as patched:
        in_use = "in use by another process"
        unlink_watched(patched, lambda path: refused(path, in_use) if path == guard else None)
        assert module.acquire(lock, "wf:sk:r", 60.0)["acquired"]
        assert fake.calls == ["lock", "unlock"]
    assert module.release(lock, "wf:sk:r")["released"]  # the next call cleans up
    assert beside(lock) == []


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_guard_wait_times_out_with_an_os_error(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, fake = windows
    fake.busy_times = 10**6
    monkeypatch.setattr(module._SEAMS, "guard_wait_sec", 0.05)
    with pytest.raises(TimeoutError, match="guard"):
        module.acquire(lock, "wf:sk:r", 60.0)
    assert beside(lock) == ["run.lock.skf-guard"]  # its holder's: only the holder removes it


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
@pytest.mark.parametrize("code", [errno.EACCES, 0, errno.EEXIST, errno.EIO])
def test_windows_a_refused_lock_is_busy_whatever_its_errno(
    windows: Windows, lock: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The guard's errno rule: a refusal on a descriptor still open means another
    process has the byte, whatever errno says (Wine leaves it 0, or 17 from before)."""
    module, fake = windows
    real = fake.locking
    refusals: list[int] = []

    def refusing_twice(fd: int, mode: int, nbytes: int) -> None:
        if mode == fake.LK_NBLCK and len(refusals) < 2:
            refusals.append(code)
            raise OSError(code, "Error")
        real(fd, mode, nbytes)

    monkeypatch.setattr(fake, "locking", refusing_twice)
    assert module.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert refusals == [code, code]
    assert beside(lock) == ["run.lock"]


@posix_only("fakes msvcrt with POSIX record locks (fcntl.lockf)")
def test_windows_branch_passes_the_record_tests(windows: Windows, lock: Path) -> None:
    module, _ = windows
    write_record(lock, "wf:sk:old", NOW)
    result = module.acquire(lock, "wf:sk:new", 60.0, now=NOW)
    assert not result["acquired"] and result["held_by"] == "wf:sk:old"
    assert module.release(lock, "wf:sk:old")["released"]


# A caller's script: it loads the file by path as a sibling script does, or imports the
# installed package, sets GUARD_WAIT_SEC on what it loaded, and calls twice, once from
# the library and once through main(), each after setting another wait.
SETS_THE_GUARDS_WAIT = """
import importlib.util, sys
where, lock = sys.argv[1:]
if where == "package":
    import skf_run_lock as skf
else:
    spec = importlib.util.spec_from_file_location("sibling", where)
    skf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(skf)
skf.GUARD_WAIT_SEC = 0.05
try:
    skf.acquire(lock, "wf:sk:r", 60.0)
except TimeoutError as exc:
    print(exc)
skf.GUARD_WAIT_SEC = 0.25
print(skf.main(["acquire", "--lock", lock, "--owner", "wf:sk:r"]))
"""


@pytest.mark.parametrize("loaded", ["file", "package"])
def test_guard_wait_sec_set_on_the_loaded_file_or_the_package_governs_the_next_call(
    lock: Path, worker: Callable[..., Started], loaded: str
) -> None:
    """The contract reads GUARD_WAIT_SEC when a call runs: each call waits as long as the
    caller last set it (not the 10 s of the import), as its error says."""
    holder = worker("hold-guard", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    where = "package" if loaded == "package" else str(SCRIPT)
    caller = subprocess.run(
        [sys.executable, "-c", SETS_THE_GUARDS_WAIT, where, str(lock)],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
    )
    said = caller.stdout.splitlines()
    assert len(said) == 2 and said[1] == "2", caller
    assert said[0].endswith("stayed locked for 0.05 s; another call is stuck holding it")
    assert "stayed locked for 0.25 s" in caller.stderr
    assert beside(lock) == ["run.lock.skf-guard"]  # still the holder's
