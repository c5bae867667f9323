"""Windows' rules, driven on any system: the script's ``_WINDOWS`` the platform in
force for one test (``_SEAMS.platform``), and on POSIX a fake msvcrt that locks
through POSIX record locks, with failures to inject."""

from __future__ import annotations

import errno
import os
import sys
import types
from types import ModuleType

import pytest
from wrapped import follow_rules

if sys.platform != "win32":
    import fcntl


class FakeMsvcrt(types.ModuleType):
    """msvcrt.locking on top of POSIX record locks, with failures to inject."""

    LK_UNLCK, LK_LOCK, LK_NBLCK, LK_RLCK, LK_NBRLCK = 0, 1, 2, 3, 4

    def __init__(self) -> None:
        super().__init__("msvcrt")
        self.calls: list[str] = []
        self.busy_times = 0

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        position = os.lseek(fd, 0, os.SEEK_CUR)
        assert (position, nbytes) == (0, 1)
        if mode == self.LK_NBLCK:
            if self.busy_times:
                self.busy_times -= 1
                self.calls.append("busy")
                raise PermissionError(errno.EACCES, "Permission denied")
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, os.SEEK_SET)
            except OSError:
                raise PermissionError(errno.EACCES, "Permission denied") from None
            self.calls.append("lock")
        elif mode == self.LK_UNLCK:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)
            self.calls.append("unlock")
        else:
            raise AssertionError(f"unexpected mode {mode}")


def follow_windows_rules(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> FakeMsvcrt | None:
    """Make ``skf`` follow Windows' rules until ``monkeypatch`` is undone: on POSIX
    through a fake msvcrt (returned; None on Windows, whose own is used)."""
    follow_rules(skf, monkeypatch, skf._WINDOWS)
    if sys.platform == "win32":
        return None
    fake = FakeMsvcrt()
    monkeypatch.setitem(sys.modules, "msvcrt", fake)
    return fake
