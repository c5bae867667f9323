#!/usr/bin/env python3
# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""A run lock kept in a file, for workflows made of many separate processes.

An OS lock held by a process ends with that process, so it cannot serialize a
workflow run whose every step is a fresh shell command. This module keeps the
holder's name and the time in the lock file instead, and treats a lock older
than a timeout as abandoned. Each call takes a short OS lock on a guard file
beside the lock (``<lock>.skf-guard``) while it reads and changes the lock, and
every record is written whole to a temp file and renamed into place.

Command line::

    skf-run-lock.py acquire --lock PATH --owner WORKFLOW:SKILL[:RUN_ID]
                            [--stale-after MINUTES] [--wait SECONDS]
    skf-run-lock.py release --lock PATH --owner WORKFLOW:SKILL:RUN_ID
    skf-run-lock.py status  --lock PATH [--stale-after MINUTES]
    skf-run-lock.py run-id
    skf-run-lock.py --version

Each prints one line of JSON on stdout; errors are one line of JSON on stderr.
Exit codes: 0 done, 1 bad arguments, 2 the lock could not be read or written,
3 the lock is held by another run.

Library use (load this file by path with importlib): ``acquire``,
``acquire_within``, ``release``, ``status``, ``new_run_id``, ``LockBusy``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # these imports cost start-up time that a CLI call does not need
    from collections.abc import Callable
    from datetime import datetime
    from typing import Any

# --- Constants: the contract's names and limits ------------------------------

__version__ = "1.0.0"

TOOL = "skf-run-lock"
OWNER_MAX_LEN = 200
DEFAULT_STALE_AFTER_MIN = 60
MAX_STALE_AFTER_MIN = 525600
MAX_STALE_AFTER_SEC = MAX_STALE_AFTER_MIN * 60
GUARD_WAIT_SEC = 10.0
MAX_WAIT_SEC = 86400
RECORD_MAX_BYTES = 64 * 1024
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")

EXIT_OK, EXIT_BAD_ARGS, EXIT_OS_ERROR, EXIT_HELD = 0, 1, 2, 3

GUARD_SUFFIX = ".skf-guard"
_TEMP_NAME_RE = re.compile(r"\.skf-[0-9a-f]{8}-tmp")
_TIME_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_MIN_TIME = -62135596800  # 0001-01-01T00:00:00Z
_MAX_TIME = 253402300799  # 9999-12-31T23:59:59Z

# Flags that exist on only some systems are 0 elsewhere, so one expression serves all.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_COMMON_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | _NOFOLLOW
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _COMMON_FLAGS
_GUARD_FLAGS = os.O_RDWR | os.O_CREAT | _COMMON_FLAGS
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _COMMON_FLAGS
_LOCKS_UNSUPPORTED = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOLCK}

# --- Owner and time helpers --------------------------------------------------


def split_owner(owner: str) -> tuple[str, str, str | None]:
    """Split ``owner`` into workflow, skill and run id, checking the owner rules.

    The run id is everything after the second colon ('' for ``wf:skill:``) and
    None when there is no second colon; joining the parts that are not None
    with ':' gives ``owner`` back. Raises ValueError for a bad owner.
    """
    if not isinstance(owner, str):
        raise ValueError(f"owner must be a string, not {type(owner).__name__}")
    parts = owner.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(
            f"owner {owner!r} must be workflow:skill[:run_id] with a non-empty workflow and skill"
        )
    # Every whitespace character but " " is non-printable, so this finds them all.
    if " " in owner or not owner.isprintable():
        raise ValueError(f"owner {owner!r} must not contain whitespace or non-printable characters")
    if len(owner) > OWNER_MAX_LEN:
        raise ValueError(f"owner is {len(owner)} characters long; at most {OWNER_MAX_LEN} allowed")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def _owner_with_run_id(owner: str, now: float | None = None) -> tuple[str, str]:
    """Return ``(owner, run_id)``, adding a fresh run id when the owner has none."""
    workflow, skill, run_id = split_owner(owner)
    if run_id:
        return owner, run_id
    run_id = _run_id_at(time.time() if now is None else now)
    full = f"{workflow}:{skill}:{run_id}"
    if len(full) > OWNER_MAX_LEN:
        raise ValueError(
            f"owner {full!r} with its new run id is {len(full)} characters long;"
            f" at most {OWNER_MAX_LEN} allowed"
        )
    return full, run_id


def _owner_for_release(owner: str) -> str:
    """Return ``owner`` if it names a run id; raise ValueError otherwise."""
    if not split_owner(owner)[2]:
        raise ValueError(f"release needs the whole owner with its run id, not {owner!r}")
    return owner


def _seconds_of(now: datetime | None) -> float:
    """Return ``now`` (an aware datetime, or None for the clock) as POSIX seconds."""
    if now is None:
        return time.time()
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.timestamp()


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) that is ``days`` after 1970-01-01 (H. Hinnant's civil_from_days)."""
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def format_time(seconds: float) -> str:
    """Return POSIX ``seconds`` as ``YYYY-MM-DDTHH:MM:SSZ`` (rounded down, years 1-9999)."""
    whole = min(max(int(seconds // 1), _MIN_TIME), _MAX_TIME)
    days, second = divmod(whole, 86400)
    year, month, day = _civil_from_days(days)
    hour, second = divmod(second, 3600)
    minute, second = divmod(second, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


def parse_time(text: str) -> int | None:
    """Return the POSIX seconds of a ``YYYY-MM-DDTHH:MM:SSZ`` time, or None if it is not one."""
    match = _TIME_RE.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = map(int, match.groups())
    if not (year >= 1 and 1 <= month <= 12 and hour < 24 and minute < 60 and second < 60):
        return None
    days = _days_from_civil(year, month, day)
    if _civil_from_days(days) != (year, month, day):  # a day past the month's end
        return None
    return days * 86400 + hour * 3600 + minute * 60 + second


def _run_id_at(seconds: float) -> str:
    compact = format_time(seconds).replace("-", "").replace(":", "")
    return f"{compact}-{os.urandom(4).hex()}"


def new_run_id(now: datetime | None = None) -> str:
    """Return a run id ``YYYYMMDDTHHMMSSZ-xxxxxxxx``: the UTC time and 8 random hex digits."""
    return _run_id_at(_seconds_of(now))


def _require_number(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")


def _checked_stale_after(stale_after: float, name: str = "the timeout") -> float:
    """Return ``stale_after`` (seconds) if it is a usable timeout; raise ValueError otherwise,
    calling it ``name`` and counting it in minutes, as the CLI does."""
    _require_number(stale_after, "stale_after")
    if not 0 < stale_after <= MAX_STALE_AFTER_SEC:  # also false for NaN
        raise ValueError(
            f"{name} must be a finite number of minutes > 0 and <= {MAX_STALE_AFTER_MIN},"
            f" not {stale_after / 60:g}"
        )
    if round(stale_after / 60, 4) == 0:
        # It would print as 0 minutes and make every lock stale at once.
        raise ValueError(f"{name} of {stale_after / 60:g} minutes is too small (at least 0.0001)")
    return float(stale_after)


def _minutes_for_output(stale_after: float) -> int | float:
    minutes = round(stale_after / 60, 4)
    return int(minutes) if minutes.is_integer() else minutes


def _stale_at(since: int, stale_after: float) -> str:
    """The first whole second at which a lock taken at ``since`` is stale, capped at year 9999."""
    return format_time(-(-(since + stale_after) // 1))  # format_time caps it


def _is_stale(since: int, stale_after: float, now: float) -> bool:
    return now - since >= stale_after


# --- The guard: a short OS lock beside the lock file -------------------------
# The only platform branch. POSIX removes the guard while still holding it, so a
# waiter that opened the old file sees, once it gets the lock, that the path no
# longer names what it locked. Windows cannot delete an open file, so it unlocks
# first and then removes the guard, leaving it to whoever still has it open.

if sys.platform == "win32":
    import msvcrt

    _REMOVE_GUARD_WHILE_HELD = False
    # A guard that another process is deleting cannot be opened for a moment.
    _GUARD_OPEN_BUSY: tuple[type[OSError], ...] = (PermissionError,)
    _LOCK_BUSY_ERRNOS = {errno.EACCES, errno.EDEADLK, getattr(errno, "EDEADLOCK", errno.EDEADLK)}

    def _try_lock(fd: int) -> bool:
        """Take the guard's 1-byte lock without waiting; False if another process has it."""
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            if exc.errno in _LOCK_BUSY_ERRNOS:
                return False
            raise
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    _REMOVE_GUARD_WHILE_HELD = True
    _GUARD_OPEN_BUSY: tuple[type[OSError], ...] = ()

    def _try_lock(fd: int) -> bool:
        """Take an exclusive flock without waiting; False if another process has it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        pass  # closing the descriptor releases the flock


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # best effort: whoever comes next cleans up


def _names_same_file(fd: int, path: str) -> bool:
    """True if ``path`` still names the file open as ``fd`` (and is not a link to it)."""
    try:
        here = os.lstat(path)
    except OSError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _open_or_create(guard: str) -> tuple[int, bool]:
    """Open the guard, creating it; also say whether it was already there."""
    try:
        return os.open(guard, _GUARD_FLAGS | os.O_EXCL, 0o666), False
    except FileExistsError:
        return os.open(guard, _GUARD_FLAGS, 0o666), True


class NoFolder(Exception):
    """The lock's folder does not exist (or a parent is a file), and was not to be created."""


def _open_guard(guard: str, make_parents: bool) -> tuple[int, bool] | None:
    """Open (creating) the guard file: ``(fd, it was already there)``, or None while it is
    busy being removed.

    With ``make_parents`` the lock's missing folders are created; without it a
    missing folder raises NoFolder and nothing is created.
    """
    try:
        return _open_or_create(guard)
    except (FileNotFoundError, NotADirectoryError):
        if not make_parents:
            raise NoFolder(os.path.dirname(guard)) from None
        os.makedirs(os.path.dirname(guard), exist_ok=True)
        return _open_or_create(guard)
    except _GUARD_OPEN_BUSY:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(
                exc.errno,
                f"the guard {guard} is a symbolic link; refusing to follow it"
                " (remove the link if no run is active)",
            ) from None
        raise


def _locked_guard(fd: int, guard: str) -> bool:
    """Try to lock the open guard ``fd``; True once it is locked and still at ``guard``."""
    try:
        if not _try_lock(fd):
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
    _unlock(fd)  # we locked a guard that its holder has already removed
    return False


def take_guard(lock: str, make_parents: bool = False) -> tuple[int, bool]:
    """Lock ``<lock>.skf-guard``, waiting up to GUARD_WAIT_SEC; return its descriptor and
    whether the guard file was there before this call (left by a call that died, or by
    the call this one waited for).

    Raises TimeoutError (an OSError) when another call holds it longer than that, and
    NoFolder when the lock's folder is missing and ``make_parents`` is false.
    """
    guard = lock + GUARD_SUFFIX
    deadline = time.monotonic() + GUARD_WAIT_SEC
    pause = 0.001
    while True:
        opened = _open_guard(guard, make_parents)
        if opened is not None:
            fd, existed = opened
            try:
                if _locked_guard(fd, guard):
                    return fd, existed
            except OSError:
                # The lock call itself failed, so nobody can be holding this
                # file: do not leave it behind.
                if _names_same_file(fd, guard):
                    _remove_quietly(guard)
                os.close(fd)
                raise
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        if time.monotonic() >= deadline:
            raise TimeoutError(
                errno.ETIMEDOUT,
                f"the guard {guard} stayed locked for {GUARD_WAIT_SEC:g} s;"
                " another call is stuck holding it",
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def drop_guard(fd: int, lock: str) -> None:
    """Unlock and remove the guard taken by ``take_guard``."""
    guard = lock + GUARD_SUFFIX
    if _REMOVE_GUARD_WHILE_HELD:
        _remove_quietly(guard)
    try:
        _unlock(fd)
    finally:
        os.close(fd)
    if not _REMOVE_GUARD_WHILE_HELD:
        _remove_quietly(guard)


class _Guarded:
    """Context manager: the guard of one lock held for the ``with`` block."""

    def __init__(self, lock: str, make_parents: bool) -> None:
        self.lock = lock
        self.make_parents = make_parents
        self.fd = -1

    def __enter__(self) -> None:
        self.fd, existed = take_guard(self.lock, self.make_parents)
        if existed:
            # A call killed between creating its temp file and the rename died
            # holding the guard, so it always leaves the guard file too: only
            # then can there be orphans to look for.
            _remove_orphan_temps(self.lock)

    def __exit__(self, *exc_info: object) -> None:
        drop_guard(self.fd, self.lock)


def _remove_orphan_temps(lock: str) -> None:
    """Delete ``<lock>.skf-<8 hex>-tmp`` files: temps are made only under the guard,
    so any found by the guard's holder were left by a call that died."""
    folder, base = os.path.split(lock)
    start = len(base)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(base) and _TEMP_NAME_RE.fullmatch(name, start):
            _remove_quietly(os.path.join(folder, name))


# --- The record: reading and writing the lock file ---------------------------


class Record:
    """What a lock file says: its holder (None if it names none) and since when."""

    __slots__ = ("empty", "owner", "since")

    def __init__(self, owner: str | None, since: int, empty: bool = False) -> None:
        self.owner = owner
        self.since = since
        self.empty = empty

    def __repr__(self) -> str:
        return f"Record(owner={self.owner!r}, since={self.since!r}, empty={self.empty!r})"


def parse_record(data: bytes, mtime: int) -> Record:
    """Read the holder and time out of a lock file's bytes (``mtime`` when it gives no time).

    A JSON object names its ``owner`` (if a non-empty string) and its
    ``acquired_at``; anything else (an old PID + time file, an empty file,
    garbage, a file over RECORD_MAX_BYTES) names no owner and is dated by its
    second line if that is a time. Never raises.
    """
    if len(data) > RECORD_MAX_BYTES:
        return Record(None, mtime)
    try:
        content = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        content = None
    if isinstance(content, dict):
        owner = content.get("owner")
        when = content.get("acquired_at")
        since = parse_time(when) if isinstance(when, str) else None
        return Record(
            owner if isinstance(owner, str) and owner else None,
            mtime if since is None else since,
        )
    lines = data.split(b"\n", 2)
    since = parse_time(lines[1].strip().decode("ascii", "replace")) if len(lines) > 1 else None
    return Record(None, mtime if since is None else since, empty=not data)


_FILE_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


def _refuse_unless_regular(lock: str, mode: int) -> None:
    """Raise ValueError if ``mode`` is a folder's, OSError if it is not a regular file's."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise _folder_error(lock)
    kind = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
    raise OSError(errno.EINVAL, f"the lock path {lock} is {kind}; a lock must be a regular file")


def read_record(lock: str) -> Record | None:
    """Return what the lock file says, or None when there is no lock file.

    A symbolic link at the lock path is never followed: it names no owner and
    is dated by the link itself. A folder raises ValueError; a FIFO, device or
    socket raises OSError without blocking.
    """
    try:
        fd = os.open(lock, _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _record_of_unopened(lock, exc)
    try:
        info = os.fstat(fd)
        _refuse_unless_regular(lock, info.st_mode)
        # One read: a regular file gives all it has, up to the limit, at once.
        data = os.read(fd, RECORD_MAX_BYTES + 1)
    finally:
        os.close(fd)
    return parse_record(data, int(info.st_mtime // 1))


def _record_of_unopened(lock: str, exc: OSError) -> Record:
    """The record of a lock path that could not be opened: a link, or an error."""
    try:
        info = os.lstat(lock)
    except OSError:
        raise exc from None
    if stat.S_ISLNK(info.st_mode):
        return Record(None, int(info.st_mtime // 1))
    _refuse_unless_regular(lock, info.st_mode)
    raise exc


def record_bytes(owner: str, acquired_at: str) -> bytes:
    """The bytes of a record naming ``owner`` since ``acquired_at`` (a formatted time)."""
    record = {"owner": owner, "acquired_at": acquired_at, "tool": TOOL}
    return (json.dumps(record) + "\n").encode("ascii")


def _create_temp(lock: str) -> tuple[int, str]:
    """Create a new ``<lock>.skf-<8 hex>-tmp`` exclusively; return its fd and path."""
    while True:
        path = f"{lock}.skf-{os.urandom(4).hex()}-tmp"
        try:
            return os.open(path, _TEMP_FLAGS, 0o666), path
        except FileExistsError:
            continue


def write_record(lock: str, owner: str, acquired_at: str) -> None:
    """Replace the lock file with a record, atomically: temp file, fsync, rename.

    A reader sees the old record or the new one, never part of one; on any
    failure the old lock file is untouched and the temp file is gone.
    """
    data = record_bytes(owner, acquired_at)
    fd, temp = _create_temp(lock)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, lock)
    except BaseException:
        _remove_quietly(temp)
        raise


# --- Acquire, release, status ------------------------------------------------


def _folder_error(lock: str) -> ValueError:
    return ValueError(f"the lock path {lock} is a folder; give the path of a file")


def lock_path(lock: str | os.PathLike[str]) -> str:
    """The absolute path of a lock, ``~`` expanded. (A folder is refused when it is read.)"""
    path = os.fspath(lock)
    if not isinstance(path, str):
        raise ValueError(f"the lock path must be text, not {path!r}")
    if path.startswith("~"):
        path = os.path.expanduser(path)
    return os.path.abspath(path)


def _clear_command(lock: str, owner: str) -> str:
    import shlex  # only a refusal needs it

    return f"skf-run-lock.py release --lock {shlex.quote(lock)} --owner {shlex.quote(owner)}"


def _refusal_message(lock: str, holder: str | None, held_since: str, stale_at: str) -> str:
    if holder is None:
        return (
            f"lock {lock} is held by a lock file that names no owner (since {held_since});"
            f" it goes stale at {stale_at}. If no run is active, delete {lock}"
        )
    return (
        f"lock {lock} is held by {holder} since {held_since}; it goes stale at {stale_at}."
        f" If that run is no longer active, clear it with: {_clear_command(lock, holder)}"
    )


def _acquire_result(
    lock: str,
    owner: str,
    run_id: str,
    stale_after: float,
    *,
    acquired: bool,
    held_by: str | None,
    since: int,
    refreshed: bool = False,
    replaced: Record | None = None,
) -> dict[str, Any]:
    """The acquire output for a lock held by ``held_by`` since ``since``; its message is
    still to be written."""
    return {
        "acquired": acquired,
        "refreshed": refreshed,
        "lock": lock,
        "owner": owner,
        "run_id": run_id,
        "held_by": held_by,
        "held_since": format_time(since),
        "stale_at": _stale_at(since, stale_after),
        "stale_after_minutes": _minutes_for_output(stale_after),
        "stale_replaced": None
        if replaced is None
        else {"held_by": replaced.owner, "held_since": format_time(replaced.since)},
        "message": "",
    }


def acquire(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    now: datetime | None = None,
    *,
    empty_is_stale: bool = False,
) -> dict[str, Any]:
    """Take or renew the run lock at ``lock`` for ``owner``; return the acquire output.

    The lock is taken when there is no lock file, renewed when its record names
    ``owner``, and replaced when it is stale (``stale_after`` seconds old, or
    empty with ``empty_is_stale``); otherwise nothing changes and the result
    names the holder with ``acquired`` false. A missing run id in ``owner`` is
    added. Raises ValueError for a bad owner, timeout or folder and OSError
    when the lock cannot be read or written.
    """
    fixed_now = None if now is None else _seconds_of(now)
    owner, run_id = _owner_with_run_id(owner, fixed_now)
    stale_after = _checked_stale_after(stale_after)
    path = lock_path(lock)
    with _Guarded(path, make_parents=True):
        seconds = time.time() if fixed_now is None else fixed_now
        record = read_record(path)
        if (
            record is not None
            and record.owner != owner
            and not _is_stale(record.since, stale_after, seconds)
            and not (empty_is_stale and record.empty)
        ):
            return _refused(path, owner, run_id, stale_after, record)
        result = _taken(path, owner, run_id, stale_after, record, since=int(seconds // 1))
        write_record(path, owner, result["held_since"])
    return result


def _refused(
    path: str, owner: str, run_id: str, stale_after: float, record: Record
) -> dict[str, Any]:
    """The acquire output when ``record`` keeps the lock from ``owner``."""
    result = _acquire_result(
        path, owner, run_id, stale_after, acquired=False, held_by=record.owner, since=record.since
    )
    result["message"] = _refusal_message(
        path, record.owner, result["held_since"], result["stale_at"]
    )
    return result


def _taken(
    path: str, owner: str, run_id: str, stale_after: float, before: Record | None, *, since: int
) -> dict[str, Any]:
    """The acquire output when ``owner`` takes the lock at ``since`` over ``before``
    (None: there was no lock file)."""
    renewed = before is not None and before.owner == owner
    if before is None:
        message = f"acquired {path} for {owner}"
    elif renewed:
        message = f"renewed {path} for {owner}"
    else:
        holder = f"of {before.owner}" if before.owner else "file that named no owner"
        message = f"acquired {path} for {owner}, replacing the stale lock {holder}"
    result = _acquire_result(
        path,
        owner,
        run_id,
        stale_after,
        acquired=True,
        held_by=owner,
        since=since,
        refreshed=renewed,
        replaced=None if before is None or renewed else before,
    )
    result["message"] = f"{message}; it goes stale at {result['stale_at']} unless renewed"
    return result


class LockBusy(Exception):
    """Raised by ``acquire_within`` when the lock stayed held; ``.result`` is the last answer."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result["message"])
        self.result = result


def _checked_wait(wait: float) -> float:
    _require_number(wait, "wait")
    if not 0 <= wait < float("inf"):  # also false for NaN
        raise ValueError(f"wait must be a finite number of seconds >= 0, not {wait!r}")
    return float(wait)


def acquire_within(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    wait: float,
    *,
    empty_is_stale: bool = False,
) -> dict[str, Any]:
    """Retry ``acquire`` with a growing, jittered pause for up to ``wait`` seconds.

    Returns the output of the call that took the lock; raises LockBusy (with
    the last output) when ``wait`` passes first. A missing run id is added
    once, so every try uses the same owner. ValueError and OSError as acquire.
    """
    import random  # only a waiter needs it

    wait = _checked_wait(wait)
    owner, _ = _owner_with_run_id(owner)
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        result = acquire(lock, owner, stale_after, empty_is_stale=empty_is_stale)
        left = deadline - time.monotonic()
        if result["acquired"]:
            return result
        if left <= 0:
            raise LockBusy(result)
        # Jitter keeps many waiters from polling in lockstep.
        time.sleep(min(left, pause * random.uniform(0.5, 1.0)))
        pause = min(pause * 1.5, 0.1)


def release(lock: str | os.PathLike[str], owner: str) -> dict[str, Any]:
    """Delete the lock at ``lock`` if its record names ``owner``; return the release output.

    ``released`` is false with ``reason`` "absent" when there is no lock file
    (no folder is created) and "not-owner" when another owner, or none, holds
    it, which is left in place. Raises ValueError for an owner without a run id
    or a folder, and OSError when the lock cannot be read or removed.
    """
    owner = _owner_for_release(owner)
    path = lock_path(lock)
    record: Record | None = None
    try:
        with _Guarded(path, make_parents=False):
            record = read_record(path)
            if record is not None and record.owner == owner:
                os.unlink(path)
    except NoFolder:
        pass  # no folder, so no lock: absent, and nothing is created
    result: dict[str, Any] = {
        "released": False,
        "reason": None,
        "lock": path,
        "owner": owner,
        "held_by": None,
        "held_since": None,
        "message": "",
    }
    if record is None:
        result["reason"] = "absent"
        result["message"] = f"no lock at {path}; nothing to release"
    elif record.owner == owner:
        result["released"] = True
        result["message"] = f"released {path} held by {owner}"
    else:
        result["reason"] = "not-owner"
        result["held_by"] = record.owner
        result["held_since"] = format_time(record.since)
        holder = record.owner or "a lock file naming no owner"
        result["message"] = f"left {path} in place: it is held by {holder}, not {owner}"
    return result


def status(
    lock: str | os.PathLike[str], stale_after: float, now: datetime | None = None
) -> dict[str, Any]:
    """Say who holds the lock at ``lock`` without taking it; return the status output.

    Read-only: no guard, no file or folder created. ``state`` is "free" (no
    lock file, or no folder), "held" or "stale". ValueError and OSError as acquire.
    """
    seconds = _seconds_of(now)
    stale_after = _checked_stale_after(stale_after)
    path = lock_path(lock)
    record = read_record(path)
    result: dict[str, Any] = {
        "state": "free",
        "lock": path,
        "held_by": None,
        "held_since": None,
        "stale_at": None,
        "age_seconds": None,
        "stale_after_minutes": _minutes_for_output(stale_after),
        "message": f"no lock at {path}; it is free",
    }
    if record is None:
        return result
    held_since = format_time(record.since)
    stale_at = _stale_at(record.since, stale_after)
    holder = record.owner or "a lock file naming no owner"
    stale = _is_stale(record.since, stale_after, seconds)
    result.update(
        state="stale" if stale else "held",
        held_by=record.owner,
        held_since=held_since,
        stale_at=stale_at,
        age_seconds=int((seconds - record.since) // 1),
        message=f"{path} is held by {holder} since {held_since};"
        + (
            f" it went stale at {stale_at}, so the next acquire takes it"
            if stale
            else f" it goes stale at {stale_at}"
        ),
    )
    return result


# --- CLI ---------------------------------------------------------------------

HELP = f"""\
usage: skf-run-lock.py acquire --lock PATH --owner WORKFLOW:SKILL[:RUN_ID]
                               [--stale-after MINUTES] [--wait SECONDS]
       skf-run-lock.py release --lock PATH --owner WORKFLOW:SKILL:RUN_ID
       skf-run-lock.py status --lock PATH [--stale-after MINUTES]
       skf-run-lock.py run-id
       skf-run-lock.py --version

A run lock kept in a file, for workflows made of many separate processes.

commands:
  acquire   take the lock, or renew it if this owner holds it; a missing run id
            is added and the whole owner printed
  release   delete the lock if this owner holds it
  status    say who holds the lock, without taking it
  run-id    print a new run id

options:
  --lock PATH             the lock file (~ expanded, made absolute)
  --owner OWNER           workflow:skill[:run_id]; release needs the run id
  --stale-after MINUTES   a lock this old is abandoned (default {DEFAULT_STALE_AFTER_MIN},
                          at most {MAX_STALE_AFTER_MIN})
  --wait SECONDS          acquire: keep trying this long while another run
                          holds the lock (default 0, at most {MAX_WAIT_SEC})
  -h, --help              show this help
  --version               print the version

Prints one line of JSON. Exit 0 done, 1 bad arguments, 2 the lock could not
be read or written, 3 held by another run.
"""

# Each command's options, and whether each is required.
_OPTIONS: dict[str, dict[str, bool]] = {
    "acquire": {"--lock": True, "--owner": True, "--stale-after": False, "--wait": False},
    "release": {"--lock": True, "--owner": True},
    "status": {"--lock": True, "--stale-after": False},
    "run-id": {},
}


class _UsageError(Exception):
    pass


def parse_args(argv: list[str]) -> tuple[str, dict[str, str]]:
    """Return the command (or "help" / "version") and its ``{option: value}``.

    Options take ``--name value`` or ``--name=value``. Raises _UsageError for
    anything else, so that a usage error is JSON like every other error.
    """
    if not argv:
        raise _UsageError("a command is required: acquire, release, status or run-id")
    command, *rest = argv
    if command in ("-h", "--help") or "-h" in rest or "--help" in rest:
        return "help", {}
    if command == "--version":
        if rest:
            raise _UsageError(f"--version takes nothing more, not {rest[0]!r}")
        return "version", {}
    allowed = _OPTIONS.get(command)
    if allowed is None:
        raise _UsageError(f"unknown command {command!r}; use acquire, release, status or run-id")
    options: dict[str, str] = {}
    args = iter(rest)
    for arg in args:
        name, has_value, value = arg.partition("=")
        if name not in allowed:
            raise _UsageError(f"{command} does not take {arg!r}")
        if not has_value:
            following = next(args, None)
            if following is None:
                raise _UsageError(f"{name} needs a value")
            value = following
        options[name] = value
    missing = [name for name, required in allowed.items() if required and name not in options]
    if missing:
        raise _UsageError(f"{command} needs {' and '.join(missing)}")
    return command, options


def _number(options: dict[str, str], name: str, default: float) -> float:
    text = options.get(name)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise _UsageError(f"{name} must be a number, not {text!r}") from None


def _stale_after_seconds(options: dict[str, str]) -> float:
    minutes = _number(options, "--stale-after", DEFAULT_STALE_AFTER_MIN)
    return _checked_stale_after(minutes * 60, "--stale-after")


def _wait_seconds(options: dict[str, str]) -> float:
    wait = _number(options, "--wait", 0)
    if not 0 <= wait <= MAX_WAIT_SEC:  # also false for NaN
        raise ValueError(
            f"--wait must be a number of seconds >= 0 and <= {MAX_WAIT_SEC}, not {wait:g}"
        )
    return wait


def _cli_acquire(options: dict[str, str]) -> tuple[dict[str, Any], int]:
    stale_after = _stale_after_seconds(options)
    wait = _wait_seconds(options)
    lock, owner = options["--lock"], options["--owner"]
    if not wait:
        result = acquire(lock, owner, stale_after)
    else:
        started = time.monotonic()
        try:
            result = acquire_within(lock, owner, stale_after, wait)
        except LockBusy as busy:
            result = busy.result
        waited = time.monotonic() - started
        outcome = "after waiting" if result["acquired"] else "gave up after waiting"
        result["message"] = f"{outcome} {waited:.1f} s (of up to {wait:g} s): {result['message']}"
    return result, EXIT_OK if result["acquired"] else EXIT_HELD


def _cli_release(options: dict[str, str]) -> tuple[dict[str, Any], int]:
    return release(options["--lock"], options["--owner"]), EXIT_OK


def _cli_status(options: dict[str, str]) -> tuple[dict[str, Any], int]:
    result = status(options["--lock"], _stale_after_seconds(options))
    return result, EXIT_HELD if result["state"] == "held" else EXIT_OK


def _cli_run_id(options: dict[str, str]) -> tuple[dict[str, Any], int]:
    return {"run_id": new_run_id()}, EXIT_OK


def _cli_version(options: dict[str, str]) -> tuple[dict[str, Any], int]:
    return {"version": __version__}, EXIT_OK


_COMMANDS: dict[str, Callable[[dict[str, str]], tuple[dict[str, Any], int]]] = {
    "acquire": _cli_acquire,
    "release": _cli_release,
    "status": _cli_status,
    "run-id": _cli_run_id,
    "version": _cli_version,
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _describe_os_error(exc: OSError) -> str:
    text = exc.strerror or str(exc)
    if exc.filename:
        text += f": {exc.filename}"
    return text


def _fail(message: str) -> None:
    sys.stderr.write(json.dumps({"status": "error", "message": _one_line(message)}) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the command line in ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Prints one JSON line on stdout, or one JSON error line on stderr. Never
    raises SystemExit: usage errors return 1 like any bad argument.
    """
    try:
        command, options = parse_args(sys.argv[1:] if argv is None else list(argv))
        if command == "help":
            sys.stdout.write(HELP)
            return EXIT_OK
        result, code = _COMMANDS[command](options)
    except _UsageError as exc:
        _fail(f"usage error: {exc}")
        return EXIT_BAD_ARGS
    except ValueError as exc:
        _fail(str(exc))
        return EXIT_BAD_ARGS
    except OSError as exc:
        _fail(f"the lock could not be read or written: {_describe_os_error(exc)}")
        return EXIT_OS_ERROR
    sys.stdout.write(json.dumps(result) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
