"""The platform: POSIX's rules (posix.py) or Windows' (windows.py), each one value with
the names of ``_Platform``, and ``_PLATFORM``, the one this system follows, chosen here
once. Everything else asks the rules in force, ``_SEAMS.platform`` (seams.py: this one),
and tests no platform itself (the built file's boot code aside: it finds the cache folder
before this is compiled). Both modules import on any system, so the tests set
``_WINDOWS`` in force on Linux to drive Windows' rules."""

from __future__ import annotations

import sys

from .posix import _Posix
from .windows import _Windows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class _Platform(Protocol):
        """What differs between POSIX and Windows. mypy checks both against it."""

        # Whether a guard is removed while still locked (POSIX), or unlocked and closed
        # first (Windows cannot remove a file that is open).
        remove_guard_while_held: bool
        # What a guard refuses to open with for a moment (Windows: one being deleted,
        # or open in another program): the guard is tried again.
        guard_open_busy: tuple[type[OSError], ...]
        # Whether a deleted file's name stays while another program has it open
        # (Windows): a lock file is then renamed away first, freeing its name at once.
        delete_keeps_the_name: bool
        # Whether a file's name may hold a colon (POSIX: ./redis:x.lock is a file), or a
        # backslash: a path git names with one is a file's, not a folder's.
        colon_in_a_file_name: bool
        # Whether the system's file names ignore case (Windows, macOS): UV.LOCK is then
        # the file a package manager writes as uv.lock.
        names_fold_case: bool

        def try_lock(self, fd: int) -> bool:
            """Lock the open guard ``fd`` without waiting: False if another process has it."""

        def unlock(self, fd: int) -> None:
            """Unlock the guard ``fd`` before it is closed."""

        def refused_by_sharing(self, exc: PermissionError) -> bool:
            """Whether ``exc`` says another process has the file open (Windows), which
            a call waits out for a moment."""

        def refuse_reserved_names(self, path: str) -> None:
            """ValueError for a lock path the system would take for another thing (a
            device, a stream), before abspath changes it."""

        def interpreter(self) -> str:
            """The interpreter that runs this call, as a command to run as printed."""

        def script_runner(self) -> str:
            """The command that runs the file users copy, as advice prints it."""

        def runnable_path(self, path: str) -> str:
            """``path`` quoted as a command that the system's shells run as printed."""

        def end_lines_in_lf(self) -> None:
            """Make every line printed end in LF alone."""

        def hold_clock(self) -> Callable[[], float]:
            """The clock every deadline of a hold counts on (seconds, from any start):
            one that goes on counting while the machine sleeps, where the system has
            one, so that a hold that lapsed in its sleep is found lost on waking."""

        def dies_with_run(self) -> Callable[[], None] | None:
            """What run's command runs before the command, so that it ends when run dies;
            None where the system has no such request."""


_POSIX: _Platform = _Posix()
_WINDOWS: _Platform = _Windows()
# The one test of the platform in the modules (posix.py tells Linux and macOS from the
# other POSIX systems; the built file's boot code, which runs first, finds its cache).
_PLATFORM: _Platform = _WINDOWS if sys.platform == "win32" else _POSIX
