"""POSIX's rules (Linux, macOS, the BSDs): what the tool does there that it does not on
Windows, as one value, ``_Posix``, with the names ``platforms._Platform`` lists (windows.py
gives the same). Chosen in one place (platforms.py); nothing here imports what only
POSIX has until a method runs, so that this module imports anywhere."""

from __future__ import annotations

import os
import sys

from .quoting import _quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Linux's prctl option that gives a process a signal when its parent dies.
_PR_SET_PDEATHSIG = 1


def _fcntl() -> Any:
    """The fcntl module, imported as a method needs it (on POSIX alone), typed loosely,
    as mypy sees none of its names on Windows."""
    import fcntl

    return fcntl


class _Posix:
    """The rules of a POSIX system."""

    # A guard is removed while still locked: no call can lock it between its removal
    # and its holder's close.
    remove_guard_while_held = True
    # Opening a guard is refused by nothing that passes: a refusal is an error.
    guard_open_busy: tuple[type[OSError], ...] = ()
    # Unlink frees a name at once, however many programs have the file open.
    delete_keeps_the_name = False
    # A file name may hold a colon (./redis:x.lock is a file).
    colon_in_a_file_name = True
    # Names differ in case (a folder that folds them, as macOS's may, is not told).
    names_fold_case = False

    def try_lock(self, fd: int) -> bool:
        """Take an exclusive flock without waiting; False if another process has it."""
        fcntl = _fcntl()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(self, fd: int) -> None:
        pass  # closing releases the flock

    def refused_by_sharing(self, exc: PermissionError) -> bool:
        """Never: POSIX lets a file that others have open be read, replaced and deleted."""
        return False

    def refuse_reserved_names(self, path: str) -> None:
        """Nothing: POSIX reserves no name but ``.`` and ``..``."""

    def interpreter(self) -> str:
        """The interpreter that runs this call, as a command a shell runs as printed."""
        return _quoted(sys.executable)

    def script_runner(self) -> str:
        """The command that runs the file users copy: python3."""
        return "python3"

    def runnable_path(self, path: str) -> str:
        """``path`` quoted as a command."""
        return _quoted(path)

    def end_lines_in_lf(self) -> None:
        """Nothing: lines printed end in LF already."""

    def dies_with_run(self) -> Callable[[], None] | None:
        """On Linux, what the command's process runs before the command: it asks for
        SIGTERM when run dies, however it dies (SIGKILL included), so that the command
        never goes on without the lock unnoticed; if run died already, it ends at once.
        None elsewhere (macOS has no such request: there a command outlives a killed
        run, and the lock goes stale). prctl is found here, before the fork, so the
        child only calls it. (The one test of the platform outside platforms.py: Linux
        among the POSIX systems.)"""
        if sys.platform != "linux":
            return None
        import ctypes
        import signal

        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return None
        run_pid = os.getpid()

        def ask() -> None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != run_pid:  # run died before the request was in place
                os.kill(os.getpid(), signal.SIGTERM)

        return ask
