"""Faults injected at each step: exit 2, one JSON error, the old lock intact, no litter."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, posix_only
from lockfiles import ago, beside, write_record


class FailingOs:
    """The os module, but one function fails with ``code`` when ``hits(args)`` is true."""

    def __init__(self, name: str, hits: Callable[[tuple[Any, ...]], bool], code: int) -> None:
        self.name, self.hits, self.code = name, hits, code
        self.failed = 0

    def __getattr__(self, attr: str) -> Any:
        real = getattr(os, attr)
        if attr != self.name:
            return real

        def failing(*args: Any, **kwargs: Any) -> Any:
            if self.hits(args):
                self.failed += 1
                path = args[0] if args and isinstance(args[0], str) else None
                raise OSError(self.code, os.strerror(self.code), path)
            return real(*args, **kwargs)

        return failing


def _path_ends(suffix: str) -> Callable[[tuple[Any, ...]], bool]:
    return lambda args: isinstance(args[0], str) and args[0].endswith(suffix)


def _always(args: tuple[Any, ...]) -> bool:
    return True


STEPS = {
    "guard open": ("open", _path_ends(".skf-guard")),
    "read": ("read", _always),
    "temp open": ("open", _path_ends("-tmp")),
    "temp write": ("write", _always),
    "fsync": ("fsync", _always),
    "rename": ("replace", _always),
    "unlink": ("unlink", _path_ends("run.lock")),
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
    failing = FailingOs(name, hits, code)
    monkeypatch.setattr(skf, "os", failing)
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
    monkeypatch.setattr(skf, "os", FailingOs("makedirs", _always, errno.EACCES))
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
    failing = FailingOs("listdir", _always, errno.EIO)
    monkeypatch.setattr(skf, "os", failing)
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

    class Interrupting(FailingOs):
        def __getattr__(self, attr: str) -> Any:
            if attr == "fsync":

                def interrupt(fd: int) -> None:
                    raise KeyboardInterrupt

                return interrupt
            return getattr(os, attr)

    monkeypatch.setattr(skf, "os", Interrupting("", _always, 0))
    with pytest.raises(KeyboardInterrupt):
        skf.acquire(lock, "wf:sk:new", 60.0)
    monkeypatch.undo()
    assert lock.read_bytes() == before and beside(lock) == ["run.lock"]


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
        pid = os.fork()
        if pid == 0:  # child: report the exit code of main() as its own
            code = 99
            try:
                if os.geteuid() == 0:
                    os.setuid(65534)
                with open(os.devnull, "w") as sink:
                    os.dup2(sink.fileno(), 1)
                    os.dup2(sink.fileno(), 2)
                code = skf.main(["acquire", "--lock", str(lock), "--owner", "wf:sk:new"])
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 2
        assert lock.read_bytes() == before and beside(lock) == ["run.lock"]
    finally:
        (top / "locks").chmod(0o755)
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
def test_a_sharing_refusal_is_waited_out(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(skf, "_SHARING_REFUSALS", frozenset({5, 32}))
    write_record(lock, "wf:sk:r", ago(seconds=5))
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(os, name, refusing(getattr(os, name), lock, 3, calls))
    if name == "replace":
        assert skf.acquire(lock, "wf:sk:r", 60.0)["refreshed"] is True
        assert lock.read_text().startswith('{"owner": "wf:sk:r"')
    else:
        assert skf.release(lock, "wf:sk:r")["released"] is True
        assert not lock.exists()
    assert len(calls) == 4
    assert beside(lock) == (["run.lock"] if name == "replace" else [])


@pytest.mark.parametrize("name", ["replace", "unlink"])
def test_a_lasting_sharing_refusal_is_exit_2_leaving_the_lock(
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    monkeypatch.setattr(skf, "_SHARING_REFUSALS", frozenset({5, 32}))
    monkeypatch.setattr(skf, "_SHARING_RETRY_SEC", 0.2)
    write_record(lock, "wf:sk:r", ago(seconds=5))
    before = lock.read_bytes()
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(os, name, refusing(getattr(os, name), lock, 10**9, calls))
    command = ["acquire"] if name == "replace" else ["release"]
    run = main(*command, "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2 and "could not be read or written" in run.error
    assert len(calls) > 2  # tried again, then gave up
    assert lock.read_bytes() == before
    assert beside(lock) == ["run.lock"]


def test_a_refusal_that_is_not_about_sharing_is_not_retried(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(skf, "_SHARING_REFUSALS", frozenset({5, 32}))
    write_record(lock, "wf:sk:r", ago(seconds=5))
    calls: list[tuple[Any, ...]] = []

    def denied(*args: Any) -> None:
        calls.append(args)
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        skf.acquire(lock, "wf:sk:r", 60.0)
    assert len(calls) == 1
