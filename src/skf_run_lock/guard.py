"""The guard: a file beside a lock on which each call takes an exclusive, non-blocking
OS lock while it reads and changes the lock. How it locks, and what differs between
POSIX and Windows, are the platform's (platforms.py): POSIX removes the guard while
still holding it; Windows cannot, and retries what a file that another process has open
refuses for a moment."""

from __future__ import annotations

import errno
import os
import time

from .interrupts import _SIGNALS_HELD, _Interrupts
from .public_surface import _NoFolder
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    _T = TypeVar("_T")

_GUARD_SUFFIX = ".skf-guard"
# A guard is held for one change, about a millisecond: a call polls it every ms while
# others take their turns (on a busy lock, many a second), and backs off to 50 ms only
# once it has waited longer than a busy lock would make it wait.
_GUARD_POLL_SEC = 0.001
_GUARD_BUSY_SEC = 0.2
_GUARD_POLL_MAX_SEC = 0.05

# Flags that only some systems have are 0 elsewhere.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_COMMON_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | _NOFOLLOW
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _COMMON_FLAGS
_GUARD_FLAGS = os.O_RDWR | _COMMON_FLAGS
_GUARD_READ_ONLY_FLAGS = os.O_RDONLY | _COMMON_FLAGS
_LOCKS_UNSUPPORTED = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOLCK}
_NOT_WRITABLE = {errno.EACCES, errno.EPERM}


class _SharingRefused(PermissionError):
    """Windows refused a file for as long as a call waits: its message names the lock
    file and the likely cause."""


def _despite_sharing(action: Callable[[], _T], lock: str) -> _T:
    """``action()`` on ``lock`` or a file beside it, tried again for up to 5 s while
    Windows refuses it because another program has the file open; past that, an error
    that names the lock file and the cause (the system's own names a temp file)."""
    try:
        return action()
    except PermissionError as exc:
        if not _SEAMS.platform.refused_by_sharing(exc):
            raise
    # Refused once: the clock is read only now (each file call passes here).
    deadline = _SEAMS.clock() + _SEAMS.sharing_retry_sec
    pause = 0.001
    while True:
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
        try:
            return action()
        except PermissionError as exc:
            if not _SEAMS.platform.refused_by_sharing(exc):
                raise
            if _SEAMS.clock() >= deadline:
                raise _SharingRefused(
                    exc.errno,
                    f"another program has the lock file {lock} open (an editor, a virus"
                    " scanner, an indexer or a sync client), or this user may not change"
                    f" it: it was refused for {_SEAMS.sharing_retry_sec:g} s ({exc.strerror});"
                    " close that program or keep the lock in a folder it does not watch",
                ) from None


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # whoever comes next cleans up


def _names_same_file(fd: int, path: str) -> bool:

    try:
        here = os.lstat(path)
    except OSError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class _NothingCanBeMade(OSError):
    """The filesystem makes no file or folder where the lock would be (/proc, /sys): an
    OSError, but not a FileNotFoundError, which a call tries again."""


def _nearest_folder(path: str) -> str:
    """``path``'s nearest folder that exists: itself, or a parent."""
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _not_writable_error(folder: str, exc: OSError) -> OSError:
    """The folder that refused to have a file or folder made in it: ``folder``, or, where
    ``folder`` was still to be made, the nearest one that exists."""
    folder = _nearest_folder(folder)
    return OSError(
        exc.errno,
        f"the folder {folder} is not writable by this user ({exc.strerror}); a lock's folder"
        " must let every user of the lock create and delete files in it",
    )


def _file_in_the_way(folder: str) -> str | None:
    path = folder
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None if os.path.isdir(path) else path


def _make_folders(folder: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except FileNotFoundError as exc:
        blocker = _file_in_the_way(folder)
        if blocker is not None:  # Windows says "path not found" where POSIX says ENOTDIR
            raise _NothingCanBeMade(  # not FileNotFoundError, which a call tries again
                exc.errno, f"the lock's folder {folder} cannot be made: {blocker} is a file"
            ) from None
        # Every missing parent was made but one: the filesystem makes none there.
        raise _NothingCanBeMade(
            exc.errno,
            f"the lock's folder {folder} cannot be made in {_nearest_folder(folder)}"
            f" ({exc.strerror})",
        ) from None
    except (FileExistsError, NotADirectoryError) as exc:
        blocker = _file_in_the_way(folder)
        if blocker is None:
            raise
        raise OSError(
            exc.errno, f"the lock's folder {folder} cannot be made: {blocker} is a file"
        ) from None


def _open_existing_guard(guard: str) -> int:
    """Open the guard to lock it: read-only if this user may not write it."""
    try:
        return os.open(guard, _GUARD_FLAGS | os.O_CREAT, 0o666)
    except PermissionError:
        if _SEAMS.platform.guard_open_busy:
            raise
        return os.open(guard, _GUARD_READ_ONLY_FLAGS)


def _create_guard(guard: str, make_parents: bool) -> int:
    try:
        return os.open(guard, _GUARD_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
    except (FileNotFoundError, NotADirectoryError):
        if not make_parents:
            raise _NoFolder(os.path.dirname(guard)) from None
    folder = os.path.dirname(guard)
    _make_folders(folder)
    try:
        return os.open(guard, _GUARD_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
    except FileNotFoundError as exc:
        if not os.path.isdir(folder):
            raise  # removed since it was made: try again
        # The folder is there, yet no file can be made in it (/proc, /sys): trying
        # again would only wait for the guard's deadline to say less.
        raise _NothingCanBeMade(
            exc.errno, f"no file can be made in the folder {folder} ({exc.strerror})"
        ) from None


def _open_guard(guard: str, make_parents: bool) -> tuple[int, bool] | None:
    """The guard's descriptor, and whether this call created it; None to try again."""
    try:
        try:
            return _create_guard(guard, make_parents), True
        except FileExistsError:
            return _open_existing_guard(guard), False
    except FileNotFoundError:
        return None
    except _SEAMS.platform.guard_open_busy:
        raise  # Windows: a guard being deleted or open elsewhere; _take_guard tries again
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(guard):  # not a loop
            raise OSError(
                exc.errno,
                f"the guard {guard} is a symbolic link; refusing to follow it"
                " (remove the link if no run is active)",
            ) from None
        if exc.errno in _NOT_WRITABLE and not os.path.lexists(guard):
            raise _not_writable_error(os.path.dirname(guard), exc) from None
        raise


def _locked_guard(fd: int, guard: str) -> bool:
    """True once the open guard ``fd`` is locked and still at ``guard``."""
    try:
        if not _SEAMS.platform.try_lock(fd):
            return False
    except OSError as exc:
        if exc.errno in _LOCKS_UNSUPPORTED:
            folder = os.path.dirname(guard)
            raise OSError(
                exc.errno,
                f"the filesystem of {folder} does not support file locks ({exc.strerror});"
                " put the lock on a local filesystem",
            ) from None
        raise
    if _names_same_file(fd, guard):
        return True
    _SEAMS.platform.unlock(fd)  # a guard its holder has already removed
    return False


def _close_guard(fd: int, guard: str, remove: bool) -> None:
    if remove and _SEAMS.platform.remove_guard_while_held:
        _remove_quietly(guard)
    try:
        _SEAMS.platform.unlock(fd)
    except OSError:
        pass  # closing releases it anyway
    try:
        os.close(fd)
    except OSError:
        pass  # closed by a drop an interrupt cut short
    if remove and not _SEAMS.platform.remove_guard_while_held:
        _remove_quietly(guard)


def _still_names(fd: int, guard: str) -> bool:
    try:
        return _names_same_file(fd, guard)
    except OSError:
        return False  # the descriptor is closed already


def _abandon_guard(fd: int, guard: str) -> None:
    """Close a guard not fully taken, removing it unless another call holds it."""
    try:
        held_elsewhere = not _SEAMS.platform.try_lock(fd)
    except OSError:
        held_elsewhere = False  # nobody can hold it
    _close_guard(fd, guard, remove=not held_elsewhere and _names_same_file(fd, guard))


def _abandon_guard_at(guard: str) -> None:
    try:
        fd = os.open(guard, _GUARD_READ_ONLY_FLAGS)
    except OSError:
        return
    _abandon_guard(fd, guard)


def _guard_wait_sec() -> float:
    """How long a call waits for a guard: ``_SEAMS.guard_wait_sec`` if a test set it,
    else GUARD_WAIT_SEC as it is now on the module the caller loaded. Callers set it
    there (the contract reads it when a call runs): in the built file that name is this
    namespace's own, which the build leaves this import out for; in the package it is
    the package's, which no module's copy of the number would follow."""
    if _SEAMS.guard_wait_sec is not None:
        return _SEAMS.guard_wait_sec
    from . import GUARD_WAIT_SEC

    return GUARD_WAIT_SEC


def _take_guard(guard: str, make_parents: bool, until: float) -> tuple[int, bool]:
    """Lock the guard (TimeoutError after _guard_wait_sec(), or at ``until``, a call's
    deadline on ``_SEAMS.clock``: a renewal that must stop its work by then); see
    _open_guard."""
    # The clock and the wait are read once the first try fails: most guards are free.
    wait = start = 0.0
    deadline: float | None = None
    pause = _GUARD_POLL_SEC
    refused: OSError | None = None  # Windows: the last refusal to open the guard
    while True:
        _Interrupts.raise_pending()  # nothing is held here
        fd = None
        try:
            opened = _open_guard(guard, make_parents)
            if opened is not None:
                refused = None  # opened: whatever keeps it now is a lock
                fd, created = opened
                if _locked_guard(fd, guard):
                    return fd, created
        except _SEAMS.platform.guard_open_busy as exc:
            refused = exc
        except BaseException as exc:
            if fd is not None:
                _abandon_guard(fd, guard)
            elif not isinstance(exc, Exception):
                # An interrupt after os.open made it.
                _abandon_guard_at(guard)
            raise
        if fd is not None:
            os.close(fd)
        if deadline is None:
            wait = _guard_wait_sec()
            start = _SEAMS.clock()
            deadline = min(start + wait, until)
        if _SEAMS.clock() >= deadline:
            if refused is not None:
                raise _SharingRefused(
                    refused.errno,
                    f"the guard {guard} could not be opened for {wait:g} s"
                    f" ({refused.strerror}): another program has it open, or this user may"
                    f" not create files in {os.path.dirname(guard)}",
                )
            raise TimeoutError(
                errno.ETIMEDOUT,
                f"the guard {guard} stayed locked for {deadline - start:.3g} s;"
                " another call is stuck holding it",
            )
        time.sleep(pause)
        if _SEAMS.clock() - start >= _GUARD_BUSY_SEC:
            pause = min(pause * 2, _GUARD_POLL_MAX_SEC)


_NEVER = float("inf")  # no call's deadline: the guard's own wait alone


class _Guard:
    """The guard of one lock, held for a ``with`` block and removed however it ends."""

    def __init__(
        self, lock: str | os.PathLike[str], make_parents: bool = True, deadline: float = _NEVER
    ) -> None:
        self.guard = os.fspath(lock) + _GUARD_SUFFIX
        self.make_parents = make_parents
        self.deadline = deadline  # a call's, on _SEAMS.clock (inf: none)
        self.fd = -1
        self.dropping = False
        self.created = True  # False: left by a dead call

    def __enter__(self) -> _Guard:
        _SIGNALS_HELD.__enter__()
        try:
            self.fd, self.created = _take_guard(self.guard, self.make_parents, self.deadline)
        except BaseException as exc:
            _SIGNALS_HELD.__exit__(type(exc))
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.drop()
        except BaseException as exc:
            _SIGNALS_HELD.__exit__(type(exc))
            raise
        _SIGNALS_HELD.__exit__(None)

    def drop(self) -> None:
        """Unlock and remove the guard if held; again after an interrupt cut it short."""
        fd = self.fd
        if fd < 0:
            return
        if self.dropping:
            _close_guard(fd, self.guard, remove=_still_names(fd, self.guard))
        else:
            self.dropping = True
            _close_guard(fd, self.guard, remove=True)
        self.fd = -1
