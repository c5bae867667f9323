"""Windows' rules: what the tool does there that it does not on POSIX, as one value,
``_Windows``, with the names ``platforms._Platform`` lists (posix.py gives the same).
Chosen in one place (platforms.py); msvcrt is imported only when a method runs, so that
this module imports anywhere and the tests drive these rules on Linux too."""

from __future__ import annotations

import errno
import os
import re
import sys

from .quoting import _quoted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# A file another process has open cannot be replaced or deleted (ERROR_ACCESS_DENIED,
# ERROR_SHARING_VIOLATION), nor opened while it is being deleted (ERROR_DELETE_PENDING,
# which Windows reports as ERROR_ACCESS_DENIED).
_SHARING_REFUSALS = frozenset({5, 32})

# Names Windows gives to devices in every folder, whatever follows a dot (NUL.lock is
# NUL), and the characters it refuses in a name (":" names a file's stream).
_DEVICE_NAMES = re.compile(r"(?i)(?:CON|PRN|AUX|NUL|CONIN\$|CONOUT\$|(?:COM|LPT)[0-9\xb9\xb2\xb3])")
_NOT_IN_A_WINDOWS_NAME = set('<>:"|?*') | {chr(code) for code in range(32)}


def _msvcrt() -> Any:
    """The msvcrt module, imported as a method needs it (on Windows alone: the tests
    put a fake in its place on Linux), typed loosely, as mypy sees none of its names
    elsewhere."""
    import msvcrt

    return msvcrt


class _Windows:
    """The rules of Windows."""

    # A guard cannot be removed while it is open: it is unlocked and closed first.
    remove_guard_while_held = False
    # A guard being deleted, or open in another program, refuses to open for a moment:
    # the guard is tried again.
    guard_open_busy: tuple[type[OSError], ...] = (PermissionError,)
    # Windows keeps the name of a file deleted while another program has it open,
    # sharing delete as scanners and indexers do, until that program closes it:
    # meanwhile every open and every create of that name is refused (and Wine serves the
    # old record), so a released lock would look held. A file renamed first frees its
    # name at once, and goes when that program closes it.
    delete_keeps_the_name = True
    # Windows names no file with a colon (it names a stream): an address is the only
    # way to say redis:...
    colon_in_a_file_name = False
    # RUN.lock and run.lock are one file.
    names_fold_case = True

    def try_lock(self, fd: int) -> bool:
        """Lock the guard's first byte without waiting; False if another process has it.

        The guard's errno rule: the C runtime's _locking documents EACCES (another
        process has the byte), EBADF (no such descriptor), EINVAL (a bad mode or
        length) and EDEADLOCK (LK_LOCK only, after its ten tries). This call passes a
        descriptor it just opened, LK_NBLCK and one byte, so a refusal can only mean
        that another process holds the byte, and errno is not read: Wine leaves it
        unset (0, or whatever an earlier call left, such as 17), which read as a code
        made every contended call a crash there. Only a descriptor that is no longer
        open (fstat fails and raises) is an error."""
        msvcrt = _msvcrt()
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            os.fstat(fd)
            return False
        return True

    def unlock(self, fd: int) -> None:
        msvcrt = _msvcrt()
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

    def refused_by_sharing(self, exc: PermissionError) -> bool:
        """Whether Windows refused because another process has the file open. os.open
        goes through the C runtime, which reports all three refusals as EACCES and
        gives no Windows error code (os.replace and os.unlink give the code)."""
        code = getattr(exc, "winerror", None)
        if code is None:
            return exc.errno == errno.EACCES
        return code in _SHARING_REFUSALS

    def refuse_reserved_names(self, path: str) -> None:
        """ValueError for a path Windows would take for a device, a stream or another
        file: a device name (CON, NUL, COM1, ...), a name with a character Windows
        refuses (``x.lock:stream``), or one ending in a dot or a space, which Windows
        drops."""
        for part in os.path.splitdrive(path)[1].replace("/", "\\").split("\\"):
            if part in ("", ".", ".."):
                continue
            stem = part.split(".", 1)[0].rstrip(" ")
            if _DEVICE_NAMES.fullmatch(stem):
                why = f"{stem.upper()} names a device on Windows"
            elif not _NOT_IN_A_WINDOWS_NAME.isdisjoint(part):
                why = 'Windows allows none of < > : " | ? * in a name (a colon names a stream)'
            elif part.endswith((".", " ")):
                why = f"the name {part!r} ends in a dot or a space, which Windows drops"
            else:
                continue
            raise ValueError(
                f"the lock path {path} cannot be a lock file: {why}; choose another name"
            )

    def interpreter(self) -> str:
        """The interpreter that runs this call, as a command agents' shells run as
        printed: the bare name where PATH finds this very interpreter by it, else its
        path with forward slashes, which Git Bash and PowerShell both run (PowerShell
        runs a quoted path only after ``&``, and Git Bash takes a backslash for an
        escape)."""
        from shutil import which

        for name in ("python", "python3"):
            found = which(name)
            if found is not None and os.path.normcase(found) == os.path.normcase(sys.executable):
                return name
        return self.runnable_path(sys.executable)

    def script_runner(self) -> str:
        """The command that runs the file users copy: the interpreter (Windows has no
        python3)."""
        return self.interpreter()

    def runnable_path(self, path: str) -> str:
        """``path`` quoted as a command, with forward slashes, which Git Bash and
        PowerShell both run."""
        return _quoted(path.replace("\\", "/"))

    def end_lines_in_lf(self) -> None:
        """End each line printed with LF alone, as on every other system. Python writes
        CR LF here, and Git Bash's ``$(...)`` keeps the CR: a value read with ``--get``
        would carry it into the next command. PowerShell takes either."""
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(newline="\n")

    def dies_with_run(self) -> Callable[[], None] | None:
        """None: Windows has no request for a signal when a parent dies, so a command
        outlives a killed run, and the lock goes stale."""
        return None
