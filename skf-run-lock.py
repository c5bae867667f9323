#!/usr/bin/env python3
# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
# skf-run-lock 1.12.1. This file is BUILT by tools/bundle.py from the modules of
# src/skf_run_lock/, one chapter each, every chapter headed by its module's name: do
# not edit it by hand. Edit the modules, then run `python3 tools/bundle.py`.
"""A run lock kept in a file, etcd or Redis, for workflows made of many separate processes:
it names its holder, and is abandoned once older than the holder's timeout. CLI:
``--help``; library: ``__all__``."""

from __future__ import annotations

import sys as _sys

if _sys.version_info < (3, 11):  # told what to use, in the contract's one JSON line
    _NEEDED = (
        "skf-run-lock needs Python 3.11 or later; this is Python %d.%d.%d:"
        " run it with python3.11 or newer, or with uv run" % _sys.version_info[:3]
    )
    if __name__ != "__main__":
        raise ImportError(_NEEDED)
    _sys.stderr.write('{"status": "error", "message": "%s"}\n' % _NEEDED)
    raise SystemExit(1)

import errno
import json
import marshal
import os
import re
import stat
import sys
import time
from functools import partial as _partial
from types import CodeType as _CodeType


# --------------------------------------------------------------------------------------
# tools/boot.py
# The built file's boot code: the build's own first chapter of the one file users
# copy (tools/bundle.py puts it there), no module of the package. Python compiles a
# script run as ``python3 FILE`` whole on every call, and caches bytecode only for
# imported modules, so the build puts every module into that file as text, compiled
# here: those every call runs at once, the rest (each server store, the listings,
# --help) only when a function imports one (``from .etcd_store import _open_etcd``).
#
# What is compiled is kept, as Python keeps an imported module's bytecode, in a cache of
# this user's own (``$XDG_CACHE_HOME/skf-run-lock``, else ``~/.cache/skf-run-lock``; on
# Windows under ``%LOCALAPPDATA%``; where that cannot be made, ``skf-run-lock-UID`` in the
# temp folder), so that the next call loads it instead. A cache entry
# is used only when it names this very build, this Python and this file as it stands (its
# size and time), and only from a folder and a file that this user owns and nobody else
# may write: another user's files are never run. Any failure of the cache falls back to
# compiling. ``SKF_RUN_LOCK_NO_CACHE=1`` turns the cache off. The package has none of
# this: Python compiles and caches its modules itself.
# --------------------------------------------------------------------------------------

# Filled by the build in the file users copy: a carried text's name -> the line of that
# file its text starts at, the carried texts it needs compiled first, and the text; and
# the build's own name for its texts, which a cache entry must carry. Empty here.
_CARRIED: dict[str, tuple[int, tuple[str, ...], str]] = {}
_COMPILED: set[str] = set()
_BUILD = ""

_FOLDER: list[str | None] = []  # the cache folder, once looked for (a call compiles several)
_CACHE_ENTRIES_KEPT = 64  # a cache holds this many entries at most: the newest
_NOT_OTHERS_WRITABLE = stat.S_IWGRP | stat.S_IWOTH
# The cache folder is found before the modules are compiled, so before platforms.py
# chooses the platform's rules: this boot code tests the platform itself, here alone.
_ON_WINDOWS = os.name == "nt"


def _compile_carried(module: str) -> None:
    """Run a carried module's text in this namespace (once): its code from this user's
    cache, or compiled, numbered as its lines stand in this file so that tracebacks,
    coverage and ``inspect`` point at them."""
    if module in _COMPILED:
        return
    first, needs, source = _CARRIED[module]
    for need in needs:
        _compile_carried(need)
    where = globals().get("__file__", "<skf-run-lock>")
    entry = _cache_entry(module, where)
    code = _cached_code(entry) if entry is not None else None
    if code is None:
        import __future__

        # Its own future flags, not a caller's.
        flags = __future__.annotations.compiler_flag
        code = compile("\n" * (first - 1) + source, where, "exec", flags, dont_inherit=True)
        if entry is not None:
            _keep_code(entry, code)
    exec(code, globals())
    _COMPILED.add(module)


def _cache_folder() -> str | None:
    """This user's cache folder for this tool (made if missing), or None where there is
    no such folder this user alone may write; looked for once a process."""
    if not _FOLDER:
        _FOLDER.append(_found_cache_folder())
    return _FOLDER[0]


def _found_cache_folder() -> str | None:
    """This user's cache folder, else (HOME read-only, as agents' sandboxes keep it)
    one of this user's own under the temp folder, checked alike."""
    if _ON_WINDOWS:
        base = os.environ.get("LOCALAPPDATA")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = _private_folder(base, "skf-run-lock")
    if folder is None:
        folder = _private_folder(_temp_folder(), _temp_cache_name())
    return folder


def _private_folder(base: str | None, name: str) -> str | None:
    """``base``/``name``, made if missing, if it is a folder this user alone may write."""
    if not base or not os.path.isabs(base):
        return None
    folder = os.path.join(base, name)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not _own_and_private(info):
        return None
    return folder


def _temp_folder() -> str | None:
    """The temp folder, as the tempfile module finds it but without importing it (a
    call that finds its cache pays for no more)."""
    for variable in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(variable):
            return os.environ[variable]
    return None if _ON_WINDOWS else "/tmp"


def _temp_cache_name() -> str:
    """A name of this user's own in a temp folder every user shares (POSIX): a folder of
    that name that another user made first is not this user's, so it is never used."""
    return "skf-run-lock" if _ON_WINDOWS else f"skf-run-lock-{os.geteuid()}"


def _own_and_private(info: os.stat_result) -> bool:
    """True for a file or folder of this user's that no one else may write."""
    if _ON_WINDOWS:
        return True  # %LOCALAPPDATA% is the user's own
    return info.st_uid == os.geteuid() and not info.st_mode & _NOT_OTHERS_WRITABLE


def _cache_entry(module: str, where: str) -> tuple[str, bytes] | None:
    """Where ``module``'s code is kept, and the header that names what it was compiled
    from (this build, this Python, this file's size and time); None: no cache."""
    if not _BUILD or os.environ.get("SKF_RUN_LOCK_NO_CACHE") == "1":
        return None
    try:
        script = os.stat(where)
    except OSError:
        return None
    folder = _cache_folder()
    if folder is None:
        return None
    name = f"{_BUILD[:16]}-{module}-{sys.implementation.cache_tag}.code"
    header = f"{_BUILD} {sys.hexversion} {script.st_size} {script.st_mtime_ns}\n".encode()
    return os.path.join(folder, name), header


def _cached_code(entry: tuple[str, bytes]) -> _CodeType | None:
    """The code kept at ``entry``, if it is this user's own and names what it must;
    else None."""
    path, header = entry
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _own_and_private(info):
            return None
        with os.fdopen(fd, "rb") as kept:
            fd = -1
            data = kept.read()
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if not data.startswith(header):
        return None
    try:
        code = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, _CodeType) else None


def _keep_code(entry: tuple[str, bytes], code: _CodeType) -> None:
    """Keep ``code`` at ``entry``: written whole to a file of its own, then renamed into
    place, so that no call reads half of it; the oldest entries beyond the kept number
    go. A failure keeps nothing."""
    path, header = entry
    temporary = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temporary, flags | getattr(os, "O_BINARY", 0), 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as kept:
            kept.write(header + marshal.dumps(code))
        os.replace(temporary, path)
    except (OSError, ValueError):
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return
    _prune(os.path.dirname(path))


def _prune(folder: str) -> None:
    """Remove the oldest entries beyond the number kept (other builds' and Pythons')."""
    try:
        with os.scandir(folder) as listing:
            entries = [entry for entry in listing if entry.name.endswith(".code")]
        entries.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
        for entry in entries[:-_CACHE_ENTRIES_KEPT]:
            os.unlink(entry.path)
    except OSError:
        pass

_CARRIED['core'] = (237, (), r'''
TYPE_CHECKING = False  # typing is imported by type checkers alone
__all__ = [
    "DEFAULT_STALE_AFTER_MIN",
    "GUARD_WAIT_SEC",
    "MAX_SLOTS",
    "MAX_STALE_AFTER_MIN",
    "OWNER_MAX_LEN",
    "RUN_ID_RE",
    "LockBusy",
    "LockLost",
    "acquire",
    "acquire_within",
    "check",
    "fence_of",
    "held",
    "list_locks",
    "main",
    "new_run_id",
    "release",
    "status",
]


# --------------------------------------------------------------------------------------
# src/skf_run_lock/public_surface.py
# The contract's names: the version, the limits callers may read, the exit codes, the
# exceptions, and the shapes of the outputs (docs/reference.md says what each key means).
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:  # typing costs a CLI call time it need not pay
    from collections.abc import Mapping
    from typing import Literal, TypedDict

    class StaleReplaced(TypedDict):
        held_by: str | None
        held_since: str

    class AcquireResult(TypedDict):
        acquired: bool
        refreshed: bool
        lock: str
        owner: str
        run_id: str
        held_by: str | None
        held_since: str | None  # None only when too many parts are refused on a free lock
        stale_at: str | None
        stale_after_minutes: int | float
        stale_replaced: StaleReplaced | None
        message: str

    class ReleaseResult(TypedDict):
        released: bool
        reason: Literal["absent", "not-owner"] | None
        lock: str
        owner: str
        held_by: str | None
        held_since: str | None
        message: str

    class Waiter(TypedDict):
        owner: str
        since: str

    class Holder(TypedDict):
        owner: str | None
        since: str
        stale_at: str
        fence: int | None
        parts: list[str] | None

    class ListedLock(TypedDict):
        """One lock of a listing: a status output's keys but ``message``."""

        state: Literal["free", "held", "stale"]
        lock: str
        held_by: str | None
        held_since: str | None
        stale_at: str | None
        age_seconds: int | None
        stale_after_minutes: int | float
        waiting: list[Waiter]
        slots: int
        holders: list[Holder]
        mode: Literal["shared", "exclusive"] | None
        fence: int | None

    class StatusResult(ListedLock):
        message: str

    class ListResult(TypedDict):
        under: str
        locks: list[ListedLock]
        message: str

    class Reservation(TypedDict):
        """A path that lies in a part of another's live hold, that holder and that part
        (None: a hold of the whole lock)."""

        path: str
        held_by: str | None
        part: str | None
        kind: Literal["shared", "exclusive"]
        stale_at: str

    class CheckResult(TypedDict):
        free: bool
        reserved: list[Reservation]
        message: str

    Output = (
        AcquireResult | ReleaseResult | StatusResult | ListResult | CheckResult | dict[str, str]
    )


__version__ = "1.12.1"

OWNER_MAX_LEN = 200
DEFAULT_STALE_AFTER_MIN = 60
MAX_STALE_AFTER_MIN = 525600
GUARD_WAIT_SEC = 10.0
MAX_SLOTS = 1000  # a lock counts to at most this many holders at once
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")

_TOOL = "skf-run-lock"
_MAX_STALE_AFTER_SEC = MAX_STALE_AFTER_MIN * 60
_MAX_SLOTS = MAX_SLOTS
# The smallest timeout that prints as a non-zero stale_after_minutes.
_MIN_STALE_AFTER_SEC = 0.006
_MAX_WAIT_SEC = 86400
_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}

# The keys each command's JSON object has, in order (the TypedDicts above spell their
# types); --get takes one of them, checked before the command runs.
_OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "acquire": (
        "acquired",
        "refreshed",
        "lock",
        "owner",
        "run_id",
        "held_by",
        "held_since",
        "stale_at",
        "stale_after_minutes",
        "stale_replaced",
        "message",
    ),
    "release": ("released", "reason", "lock", "owner", "held_by", "held_since", "message"),
    "status": (
        "state",
        "lock",
        "held_by",
        "held_since",
        "stale_at",
        "age_seconds",
        "stale_after_minutes",
        "waiting",
        "slots",
        "holders",
        "mode",
        "fence",
        "message",
    ),
    "list": ("under", "locks", "message"),
    "check": ("free", "reserved", "message"),
    "run-id": ("run_id",),
}

# What a command's output carries beside its keys, which --get prints too: acquire's
# fence (a _Taken's; callers compare the JSON whole).
_BESIDE_KEYS: dict[str, tuple[str, ...]] = {"acquire": ("fence",)}

_EXIT_OK = 0
_EXIT_BAD_ARGS = 1
_EXIT_OS_ERROR = 2
_EXIT_HELD = 3


class LockBusy(Exception):
    """Raised by :func:`acquire_within` when the wait ran out.

    :ivar result: the last acquire output, which names the holder.
    """

    def __init__(self, result: AcquireResult) -> None:
        super().__init__(result["message"])
        self.result = result

    def __reduce__(self) -> tuple[type[LockBusy], tuple[AcquireResult]]:
        # Built again from its result, where a process that has the module unpickles
        # it (a pool's worker raising it to its caller), not from its message.
        return type(self), (self.result,)


_NO_FENCE = object()  # what fence_of finds on a mapping that carries none


class _Taken(dict):  # type: ignore[type-arg]
    """An acquire output that carries its hold's fence beside the dict, not in it: its
    keys and values stay exactly acquire's, which callers compare whole.

    A copy (``.copy()``, ``copy.copy``, ``copy.deepcopy``) is a ``_Taken`` with the same
    fence; a pickle is a plain dict (1.8's outputs were), so that a process that never
    loaded this file (a multiprocessing or concurrent.futures worker, a sibling that
    loaded it under another name) unpickles it; the fence stays behind (fence_of says so).
    """

    fence: int | None = None

    def copy(self) -> _Taken:
        twin = _Taken(self)
        twin.fence = self.fence
        return twin

    def __copy__(self) -> _Taken:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, object]) -> _Taken:
        import copy

        twin = _Taken(copy.deepcopy(dict(self), memo))
        twin.fence = self.fence
        return twin

    def __reduce__(self) -> tuple[type[dict], tuple[dict]]:  # type: ignore[type-arg]
        return dict, (dict(self),)


def _fenced(result: AcquireResult, fence: int | None) -> AcquireResult:
    """``result``, carrying ``fence`` beside its keys (fence_of reads it)."""
    taken = _Taken(result)
    taken.fence = fence
    # A dict with one attribute more: what the type says of its keys still holds
    # (typing.cast would cost every call the import of typing).
    return taken  # type: ignore[return-value]


def fence_of(result: Mapping[str, object]) -> int | None:
    """The fence of the hold an acquire output took or renewed: a number larger than
    that of every earlier take of the lock, to pass along with each write so that the
    resource can refuse a smaller one. None for a refusal (or a take that got none).

    The output carries it beside its keys, as does its ``.copy()``, ``copy.copy`` and
    ``copy.deepcopy``; a ``dict()`` copy or an output unpickled in another process
    does not: pass the fence itself along instead.

    :param result: what :func:`acquire` or :func:`acquire_within` gave, or a lease's ``result``.
    :raises ValueError: ``result`` says it acquired the lock but does not carry the fence.
    """
    fence = getattr(result, "fence", _NO_FENCE)
    if fence is not _NO_FENCE:
        return fence if isinstance(fence, int) else None
    if result.get("acquired") is True:
        raise ValueError(
            "fence_of: this acquire output does not carry its fence (a dict() copy, or a"
            " result pickled from another process); pass the fence itself along: read it"
            " with fence_of where acquire returned, or with --get fence in a shell"
        )
    return None


class LockLost(Exception):
    """The lock a :func:`held` block holds is no longer its own (taken over, cleared, or
    stale).

    :ivar lock: the lock.
    :ivar held_by: who holds it now, or None.
    :ivar held_since: since when, or None.
    """

    def __init__(self, lock: str, held_by: str | None, held_since: str | None, why: str) -> None:
        super().__init__(f"lost the lock {lock}: {why}")
        self.lock = lock
        self.held_by = held_by
        self.held_since = held_since

    def __reduce__(self) -> tuple[type[LockLost], tuple[str, str | None, str | None, str]]:
        why = str(self)[len(f"lost the lock {self.lock}: ") :]  # built again, as LockBusy
        return type(self), (self.lock, self.held_by, self.held_since, why)


class _NoFolder(Exception):
    """The lock's folder is missing, and was not to be created."""


class _UsageError(Exception):
    """The command line does not parse (exit 1)."""


class _OutcomeUnknown(OSError):
    """A server write failed after it was sent: whether it happened is unknown."""


# --------------------------------------------------------------------------------------
# src/skf_run_lock/times.py
# Times as the contract writes them: UTC, ``YYYY-MM-DDTHH:MM:SSZ``, whole seconds,
# years 1 to 9999; and a duration as a message says it to a person.
# --------------------------------------------------------------------------------------

_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")
_MIN_TIME = -62135596800  # 0001-01-01T00:00:00Z
_MAX_TIME = 253402300799  # 9999-12-31T23:59:59Z

# Dates are counted here, not by datetime: importing datetime cost a CLI call 1.5 ms,
# and each call formats a time or two. The Gregorian calendar repeats every 400 years
# (146,097 days); counted from March, a leap day ends its year. 1970-01-01 is day
# 719,468 from 0000-03-01.
_DAYS_IN_400_YEARS = 146097
_EPOCH_FROM_MARCH_0000 = 719468


def _date_of(days: int) -> tuple[int, int, int]:
    """The year, month and day of ``days`` after 1970-01-01 (before it if negative)."""
    era, day_of_era = divmod(days + _EPOCH_FROM_MARCH_0000, _DAYS_IN_400_YEARS)
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_from_march = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_from_march + 2) // 5 + 1
    month = month_from_march + 3 if month_from_march < 10 else month_from_march - 9
    return era * 400 + year_of_era + (month <= 2), month, day


def _days_of(year: int, month: int, day: int) -> int:
    """The days from 1970-01-01 to a date (_date_of's inverse)."""
    year -= month <= 2
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    day_of_era = 365 * year_of_era + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * _DAYS_IN_400_YEARS + day_of_era - _EPOCH_FROM_MARCH_0000


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


# The texts of the seconds formatted last: a take writes its time, then says it and
# when it goes stale, and the next call does so again within the same few seconds.
_FORMATTED: dict[int, str] = {}
_FORMATTED_MAX = 64


def _format_time(seconds: float) -> str:
    """POSIX ``seconds`` as ``YYYY-MM-DDTHH:MM:SSZ`` (rounded down, years 1-9999)."""
    whole = min(max(int(seconds // 1), _MIN_TIME), _MAX_TIME)
    text = _FORMATTED.get(whole)
    if text is None:
        days, second = divmod(whole, 86400)
        year, month, day = _date_of(days)
        hour, second = divmod(second, 3600)
        minute, second = divmod(second, 60)
        # Not strftime: "%Y" pads years before 1000 on some platforms only.
        text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"
        if len(_FORMATTED) >= _FORMATTED_MAX:
            _FORMATTED.clear()  # a long-lived process keeps it small
        _FORMATTED[whole] = text
    return text


def _stale_at(since: int, holder_timeout: float) -> str:
    """When a hold taken at ``since`` for ``holder_timeout`` s goes stale, as written."""
    return _format_time(-(-(since + holder_timeout) // 1))  # _format_time caps it


def _parse_time(text: str) -> int | None:
    """The POSIX seconds of a ``YYYY-MM-DDTHH:MM:SSZ`` time; None if it is not one."""
    fields = _TIME.fullmatch(text)
    if fields is None:
        return None
    year, month, day, hour, minute, second = map(int, fields.groups())
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= _month_days(year, month)):
        return None  # no such date (year 0, February 30, ...)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return _days_of(year, month, day) * 86400 + hour * 3600 + minute * 60 + second


def _duration_text(seconds: float) -> str:
    """A short human duration: ``45 s``, ``12 min 5 s``, ``3 h 20 min``, ``2 d 4 h``."""
    whole = int(abs(seconds) // 1)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


# --------------------------------------------------------------------------------------
# src/skf_run_lock/quoting.py
# Text a message may carry safely: a value quoted so that a command runs as printed in
# a POSIX shell, and an address shown without its credentials (no message shows a
# secret).
# --------------------------------------------------------------------------------------

def _quoted(text: str) -> str:
    """``text`` as a POSIX shell takes it literally."""
    from shlex import quote

    return quote(text)


def _shown_address(address: str) -> str:
    """``address`` as a message may show it: what stands before an ``@`` is left out."""
    scheme, sep, rest = address.partition("://")
    if "@" not in rest:
        return address
    return f"{scheme}{sep}<credentials left out>@{rest.rpartition('@')[2]}"


# --------------------------------------------------------------------------------------
# src/skf_run_lock/posix.py
# POSIX's rules (Linux, macOS, the BSDs): what the tool does there that it does not on
# Windows, as one value, ``_Posix``, with the names ``platforms._Platform`` lists (windows.py
# gives the same). Chosen in one place (platforms.py); nothing here imports what only
# POSIX has until a method runs, so that this module imports anywhere.
# --------------------------------------------------------------------------------------

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
    # Names ignore case on macOS (as its file systems are made by default), not on the
    # others.
    names_fold_case = sys.platform == "darwin"

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

    def hold_clock(self) -> Callable[[], float]:
        """The clock that counts the machine's sleep: Linux's CLOCK_BOOTTIME, and
        macOS's CLOCK_MONOTONIC (time.monotonic reads mach_absolute_time there, which
        stops while the machine sleeps, as CLOCK_MONOTONIC does on Linux). Elsewhere
        (the BSDs) time.monotonic, which may not count sleep: the docs say so."""
        clock_id = getattr(time, "CLOCK_BOOTTIME", None)
        if sys.platform == "darwin":
            clock_id = getattr(time, "CLOCK_MONOTONIC", None)
        if sys.platform not in ("linux", "darwin") or clock_id is None:
            return time.monotonic
        return _partial(time.clock_gettime, clock_id)

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


# --------------------------------------------------------------------------------------
# src/skf_run_lock/windows.py
# Windows' rules: what the tool does there that it does not on POSIX, as one value,
# ``_Windows``, with the names ``platforms._Platform`` lists (posix.py gives the same).
# Chosen in one place (platforms.py); msvcrt is imported only when a method runs, so that
# this module imports anywhere and the tests drive these rules on Linux too.
# --------------------------------------------------------------------------------------

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
    # File names ignore case (NTFS, as Windows opens them).
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

    def hold_clock(self) -> Callable[[], float]:
        """time.monotonic, which counts the machine's sleep here: Python reads
        GetTickCount64 (3.11, 3.12) or QueryPerformanceCounter (3.13 on), and Windows
        counts the time asleep or hibernating in both."""
        return time.monotonic

    def dies_with_run(self) -> Callable[[], None] | None:
        """None: Windows has no request for a signal when a parent dies, so a command
        outlives a killed run, and the lock goes stale."""
        return None


# --------------------------------------------------------------------------------------
# src/skf_run_lock/platforms.py
# The platform: POSIX's rules (posix.py) or Windows' (windows.py), each one value with
# the names of ``_Platform``, and ``_PLATFORM``, the one this system follows, chosen here
# once. Everything else asks the rules in force, ``_SEAMS.platform`` (seams.py: this one),
# and tests no platform itself (the built file's boot code aside: it finds the cache folder
# before this is compiled). Both modules import on any system, so the tests set
# ``_WINDOWS`` in force on Linux to drive Windows' rules.
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# src/skf_run_lock/inputs.py
# What a caller gives, checked in one place each: owners and run ids, times, the timeout
# and the wait, each refused in the caller's own unit.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from datetime import datetime


_PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _split_owner(owner: str) -> tuple[str, str, str | None]:
    """Workflow, skill and run id (None: no second colon); ValueError for a bad owner."""
    if not isinstance(owner, str):
        raise ValueError(f"owner must be a string, not {type(owner).__name__}")
    parts = owner.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(
            f"owner {owner!r} must be workflow:skill[:run_id] with a non-empty workflow and skill"
        )
    # Every whitespace character but " " is non-printable.
    if " " in owner or not owner.isprintable():
        raise ValueError(f"owner {owner!r} must not contain whitespace or non-printable characters")
    if len(owner) > OWNER_MAX_LEN:
        raise ValueError(f"owner is {len(owner)} characters long; at most {OWNER_MAX_LEN} allowed")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def _owner_with_run_id(owner: str, now: float | None = None) -> tuple[str, str]:
    """``(owner, run_id)``, a fresh run id added when the owner has none."""
    workflow, skill, run_id = _split_owner(owner)
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


def _checked_slots(slots: object, name: str = "slots", given: object = None) -> int:
    """``slots``, a plain integer from 1 to MAX_SLOTS; ValueError for anything else.
    ``given``: what the caller wrote, if not ``slots`` itself (a flag's text), which
    the message quotes as written."""
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= _MAX_SLOTS:
        shown = slots if given is None else given
        raise ValueError(
            f"{name} must be a whole number of slots from 1 to {_MAX_SLOTS}, not {shown!r}"
        )
    return slots


def _checked_shared(shared: object, slots: int) -> bool:
    """``shared``, True or False, and never with several slots: shared holds are any
    number at once, so a count of slots means nothing to them."""
    if not isinstance(shared, bool):
        raise ValueError(f"shared must be True or False, not {shared!r}")
    if shared and slots != 1:
        raise ValueError(
            f"a shared hold has no count of slots: give --shared or --slots {slots}, not"
            " both (shared=True or slots=N)"
        )
    return shared


def _checked_parts_of(parts: object, slots: int) -> tuple[str, ...] | None:
    """``parts`` checked as a set (parts.py; None: the lock whole), and never with
    several slots: a hold of parts conflicts by its paths, a slot by its count."""
    if parts is None:
        return None
    if slots != 1:
        raise ValueError(
            f"parts have no count of slots: give --part or --slots {slots}, not both"
            " (parts=[...] or slots=N)"
        )
    _compile_carried('parts')

    return _checked_parts(parts)


def _has_run_id(owner: str) -> bool:
    """Whether ``owner`` is whole, as a release must name it; ValueError if malformed."""
    return bool(_split_owner(owner)[2])


def _releasable(holder: str) -> bool:
    try:
        return bool(_split_owner(holder)[2])
    except ValueError:
        return False


def _seconds_of(now: datetime | None) -> float:
    if now is None:
        return time.time()
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.timestamp()


def _run_id_at(seconds: float) -> str:
    compact = _format_time(seconds).replace("-", "").replace(":", "")
    return f"{compact}-{os.urandom(4).hex()}"


def new_run_id(now: datetime | None = None) -> str:
    """A new run id, ``YYYYMMDDTHHMMSSZ-xxxxxxxx`` (``now``: an aware datetime, or the
    clock): UTC time and 8 random hex digits."""
    return _run_id_at(_seconds_of(now))


# --- Inputs: each checked in one place, reported in the caller's unit


def _checked_stale_after(value: object, name: str = "stale_after", unit: str = "seconds") -> float:
    """The timeout ``value`` (in ``unit``) in seconds; ValueError in the caller's unit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of {unit}, not {value!r}")
    return _stale_after_within(value * _UNIT_SECONDS[unit], name, unit, repr(value))


def _stale_after_within(seconds: float, name: str, unit: str, shown: str) -> float:
    """``seconds`` if a timeout may be that long; ValueError in ``unit``, quoting what
    the caller gave as ``shown``."""
    scale = _UNIT_SECONDS[unit]
    if not 0 < seconds <= _MAX_STALE_AFTER_SEC:  # also false for NaN
        raise ValueError(
            f"{name} must be a finite number of {unit} > 0 and"
            f" <= {_MAX_STALE_AFTER_SEC // scale}, not {shown}"
        )
    if seconds < _MIN_STALE_AFTER_SEC:
        # It would print as 0 minutes, and be stale at once.
        raise ValueError(
            f"{name} of {shown} is too small: at least {_MIN_STALE_AFTER_SEC / scale:g} {unit}"
        )
    return float(seconds)


def _checked_wait(value: object, name: str = "wait", limit: float = float("inf")) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    return _wait_within(value, name, limit, "seconds", repr(value))


def _wait_within(seconds: float, name: str, limit: float, unit: str, shown: str) -> float:
    """``seconds`` if a call may wait that long; ValueError in ``unit``, quoting ``shown``."""
    if not 0 <= seconds <= limit or seconds == float("inf"):  # also false for NaN
        most = "" if limit == float("inf") else f" and <= {limit / _UNIT_SECONDS[unit]:g}"
        raise ValueError(f"{name} must be a finite number of {unit} >= 0{most}, not {shown}")
    return float(seconds)


# --- Durations on the command line: a number and a unit, several units largest first
# (1h30m), or a bare number in the option's own unit (minutes for --stale-after,
# seconds for --wait). A bound is stated in the unit the caller wrote.

# Compiled by re only when a duration with a unit is given (1.2 ms: a call given bare
# numbers, or none, never pays it).
_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_CLI_DURATION = "".join(f"(?:{_NUMBER}{suffix})?" for suffix in "dhms")
_SUFFIX_UNITS = ("days", "hours", "minutes", "seconds")
_DURATION_FORMS = "90s, 10m, 2h, 1.5h, 1d or 1h30m"


def _duration_seconds(text: str, name: str, unit: str) -> tuple[float, str]:
    """The seconds of a duration given on the command line, and the unit to state its
    bounds in (the smallest it names, or ``unit`` for a bare decimal number of it):
    ``90s``, ``10m``, ``2h``, ``1.5h``, ``1d``, ``1h30m``; _UsageError for anything else."""
    if _PLAIN_DECIMAL.fullmatch(text):
        return float(text) * _UNIT_SECONDS[unit], unit
    with_units = re.fullmatch(_CLI_DURATION, text) if text else None
    if with_units is not None:
        seconds = 0.0
        smallest = unit
        for number, named in zip(with_units.groups(), _SUFFIX_UNITS, strict=True):
            if number is not None:
                seconds += float(number) * _UNIT_SECONDS[named]
                smallest = named
        return seconds, smallest
    raise _UsageError(
        f"{name} must be a number of {unit} or a duration such as {_DURATION_FORMS}, not {text!r}"
    )


# --- What a call asks, gathered into one value where it is checked


class _Query:
    """What a call that judges a lock asks (status, each lock of a listing, and every
    take): the lock (a path or an address, checked by its store), ``stale_after``, the
    caller's timeout in seconds, which judges a record without one of its own, a fixed
    time (``fixed_now``, a test's; None: the clock), whether an empty record is stale,
    and the count of ``slots`` it names. Each part is checked where it is given."""

    __slots__ = ("empty_is_stale", "fixed_now", "lock", "slots", "stale_after")

    def __init__(
        self,
        lock: str | os.PathLike[str],
        stale_after: float,
        *,
        fixed_now: float | None = None,
        empty_is_stale: bool = False,
        slots: int = 1,
    ) -> None:
        self.lock = lock
        self.stale_after = stale_after
        self.fixed_now = fixed_now
        self.empty_is_stale = empty_is_stale
        self.slots = slots


class _Release:
    """What a release asks: the lock (a path or an address, checked by its store) and
    the whole ``owner`` whose hold it ends (checked once the store has named the lock,
    which the refusal of an owner without its run id shows). A value of its own, not a
    ``_Request``: a release has no timeout, wait, count of slots or kind of hold.
    ``deadline``: the moment (``_SEAMS.clock``) past which it waits on nothing (held()'s:
    its hold's stop point)."""

    __slots__ = ("deadline", "lock", "owner")

    def __init__(
        self, lock: str | os.PathLike[str], owner: str, deadline: float = float("inf")
    ) -> None:
        self.lock = lock
        self.owner = owner
        self.deadline = deadline


class _Request(_Query):
    """What a call that takes a lock asks, each part checked: a query's parts, the
    whole owner and its run id, how long it may wait in line, whether it asks for a
    ``shared`` hold, the ``parts`` it holds (None: the lock whole), and for run and
    held() ``keep_longer`` (a renewal never shortens a
    hold the owner has), ``renew_only`` (a renewal that must find the hold still the
    owner's) and ``session`` (an agent session's take: its hold is marked as the
    session's and lasts its lease; see decisions._take_timeout). A new capability is a
    part here, and every layer that takes a request has it.

    Two parts are the renewer's: ``deadline``, the moment (``_SEAMS.clock``) past which
    no try waits on the network (a renewal's: its holder must stop by then), and
    ``try_began``, set by each try as it begins, before it sends anything: a hold the
    try took or renewed started no sooner, so the renewer counts the hold from it."""

    __slots__ = (
        "deadline",
        "keep_longer",
        "owner",
        "parts",
        "renew_only",
        "run_id",
        "session",
        "shared",
        "try_began",
        "wait",
    )

    def __init__(
        self,
        lock: str | os.PathLike[str],
        owner: str,
        run_id: str,
        stale_after: float,
        *,
        wait: float = 0.0,
        fixed_now: float | None = None,
        empty_is_stale: bool = False,
        slots: int = 1,
        shared: bool = False,
        parts: tuple[str, ...] | None = None,
        keep_longer: bool = False,
        renew_only: bool = False,
        session: bool = False,
    ) -> None:
        super().__init__(
            lock, stale_after, fixed_now=fixed_now, empty_is_stale=empty_is_stale, slots=slots
        )
        self.owner = owner
        self.run_id = run_id
        self.wait = wait
        self.shared = shared
        self.parts = parts
        self.keep_longer = keep_longer
        self.renew_only = renew_only
        self.session = session
        self.deadline = float("inf")  # the store's own timeout alone
        self.try_began = float("-inf")  # each try sets it as it begins

    def renewal(self, hold: _Hold) -> _Request:
        """The request that renews ``hold``, which this one took (its lock as its store
        named it, its whole owner and run id): at once, never shortening the hold, and
        only while it is still the owner's."""
        return _Request(
            hold.lock,
            hold.owner,
            hold.run_id,
            self.stale_after,
            empty_is_stale=self.empty_is_stale,
            slots=self.slots,
            shared=self.shared,
            parts=hold.parts,
            keep_longer=True,
            renew_only=True,
            session=self.session,
        )


# A library call's request is made as the caller gave it (the owner's run id yet to
# add), then checked here, each part once, in the order the call tells mistakes.


def _check_wait(request: _Request) -> None:
    request.wait = _checked_wait(request.wait)


def _check_owner_and_timeout(request: _Request) -> None:
    """The owner (a run id added if it has none), then the timeout."""
    request.owner, request.run_id = _owner_with_run_id(request.owner, request.fixed_now)
    request.stale_after = _checked_stale_after(request.stale_after)


def _check_how(request: _Request) -> None:
    """The count of slots, then a shared hold, then the parts."""
    request.slots = _checked_slots(request.slots)
    request.shared = _checked_shared(request.shared, request.slots)
    request.parts = _checked_parts_of(request.parts, request.slots)


def _checked(request: _Request) -> _Request:
    """acquire's and acquire_within's ``request``, each part checked in the order a
    caller's mistakes are told: the wait, the owner (a run id added if it has none), the
    timeout, the count of slots, a shared hold, the parts; ValueError for the first that
    is wrong."""
    _check_wait(request)
    _check_owner_and_timeout(request)
    _check_how(request)
    return request


# --------------------------------------------------------------------------------------
# src/skf_run_lock/interrupts.py
# Interrupts: the CLI ends cleanly on SIGINT, SIGTERM and SIGHUP, never halfway through
# a change. A signal is held back while a change is sent, and a call that has changed the
# lock (or has its answer) is disarmed: it finishes and answers.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

# The same numbers on every OS. SIGTERM's handler goes in last: a process seen catching
# SIGTERM catches all three, which is what the tests wait for.
_SIGNAL_NAMES = {2: "SIGINT", 1: "SIGHUP", 15: "SIGTERM"}


class _Interrupted(BaseException):
    """The CLI got a signal before it changed anything (no ``except OSError`` stops it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Interrupts:
    """The CLI's signals end a call cleanly, never halfway through a change."""

    armed = False
    shield = 0
    pending: int | None = None

    @staticmethod
    def signals() -> list[int]:
        import signal

        return [signum for signum, name in _SIGNAL_NAMES.items() if hasattr(signal, name)]

    @classmethod
    def handle(cls, handler: Any) -> None:
        import signal

        for signum in cls.signals():
            signal.signal(signum, handler)

    @classmethod
    def install(cls) -> None:
        cls.handle(cls._on_signal)
        sys.unraisablehook = cls._unraisable
        cls.armed = True

    @classmethod
    def ignore(cls) -> None:
        """Ignore signals: the answer is out (teardown would restore their default)."""
        import signal

        if not hasattr(signal, "pthread_sigmask"):  # Windows
            cls.handle(signal.SIG_IGN)
            return
        # Masked, not reported as "ignored due to race condition": the OS drops it.
        before = signal.pthread_sigmask(signal.SIG_BLOCK, cls.signals())
        try:
            cls.handle(signal.SIG_IGN)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    @staticmethod
    def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
        # Dropped in a weakref callback, it stays pending.
        if not isinstance(unraisable.exc_value, _Interrupted):
            sys.__unraisablehook__(unraisable)

    @classmethod
    def _on_signal(cls, signum: int, frame: FrameType | None) -> None:
        if cls.pending is None:
            cls.pending = signum
        if not cls.shield:
            cls.raise_pending()

    @classmethod
    def raise_pending(cls) -> None:
        """Raise _Interrupted for a pending signal (kept: a weakref callback drops it)."""
        if cls.armed and cls.pending is not None:
            raise _Interrupted(cls.pending)

    @classmethod
    def disarm(cls) -> None:
        cls.armed = False  # the call has changed the lock, or has its answer


class _SignalsHeld:
    """Signals held back for a ``with`` block (blocks nest)."""

    def __enter__(self) -> None:
        _Interrupts.shield += 1

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        _Interrupts.shield -= 1
        if exc_type is None:
            _Interrupts.raise_pending()


_SIGNALS_HELD = _SignalsHeld()


def _signal_name(signum: int) -> str:
    return _SIGNAL_NAMES.get(signum, f"signal {signum}")


def _interrupted(signum: int) -> str:
    """What the CLI says when signal ``signum`` ended it."""
    return f"interrupted by {_signal_name(signum)} before it changed anything"


# --------------------------------------------------------------------------------------
# src/skf_run_lock/seams.py
# The seams: the one value, ``_SEAMS``, whose fields the tests may set, and nothing else
# of the code. Every store a call opens passes through ``opened`` (as it is, unless a test
# wraps it in a store of its own), ``platform`` is the platform's rules in force, and the
# timings and sizes are read where they are used, so a test may shorten them for a call.
# Each is an attribute read where it is used: a call pays nothing for it.
#
# No wait on another clock (a sleep, a thread's join, an event's or a socket's timeout:
# the system's, which may stop while the machine sleeps) lasts longer than
# ``_LONGEST_BLIND_WAIT_SEC``: after that it reads ``clock`` again, so a machine that wakes
# finds a deadline that passed in its sleep within a second.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Callable


_LONGEST_BLIND_WAIT_SEC = 1.0


def _blind_wait(seconds: float) -> float:
    """How long a wait on another clock than ``_SEAMS.clock`` may last of the ``seconds``
    left: at most a second, then the deadline is read again on the clock."""
    return min(seconds, _LONGEST_BLIND_WAIT_SEC)


def _as_opened(store: _Store) -> _Store:
    """A store as its opener made it: what ``opened`` is unless a test sets it."""
    return store


class _Seams:
    """What a test may set, each field read by the code where it is used."""

    __slots__ = (
        "beat_sec",
        "clock",
        "guard_wait_sec",
        "kept_idle_sec",
        "longest_call_wait_sec",
        "name_kept_sec",
        "opened",
        "place_ttl_sec",
        "platform",
        "scan_count",
        "sharing_retry_sec",
        "survey_batch",
        "survey_page",
    )

    def __init__(self) -> None:
        # Every store a call opens (the registry's _store_for) is what this gives for it.
        self.opened: Callable[[_Store], _Store] = _as_opened
        # The platform's rules every call follows: this system's, chosen once.
        self.platform: _Platform = _PLATFORM
        # The clock every deadline counts on (a hold's, a call's, a wait's): one that
        # counts the machine's sleep where the system has one (seconds, any start).
        self.clock: Callable[[], float] = _PLATFORM.hold_clock()
        # A place in line lapses place_ttl_sec after its waiter's last beat; a waiter
        # beats every beat_sec.
        self.place_ttl_sec = 3.0
        self.beat_sec = 1.0
        # How long a call waits for a lock's guard; None: the public GUARD_WAIT_SEC, as
        # the caller has set it on the module it loaded when the call runs (guard.py).
        self.guard_wait_sec: float | None = None
        # A server's host name, once looked up, is not looked up again for this long.
        self.name_kept_sec = 60.0
        # A connection kept between calls is not used again once idle this long (a NAT
        # or a proxy may have dropped it without a word); 0: each call connects anew.
        self.kept_idle_sec = 60.0
        # How long a session's acquire waits in line in one call, at most: clients end
        # a tool call that runs longer than their own limit (Codex: 60 s).
        self.longest_call_wait_sec = 50.0
        # Windows: how long a file another program has open (a scanner, an indexer, a
        # sync client) may refuse to be read, replaced or deleted before a call says so.
        self.sharing_retry_sec = 5.0
        # A listing: the keys a range of etcd's asks for at once, the keys a Redis node
        # looks at for one SCAN, and the locks read in one round trip.
        self.survey_page = 1000
        self.scan_count = 1000
        self.survey_batch = 500


_SEAMS = _Seams()


# --------------------------------------------------------------------------------------
# src/skf_run_lock/records.py
# The record: what a lock says, read from its bytes and written as bytes; a waiter's
# place in the line; and one look at a lock, as a store read it.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal, TypeVar

    _Read = TypeVar("_Read")
    _Gave = TypeVar("_Gave")

_RECORD_MAX_BYTES = 64 * 1024
# A text as json.dumps writes it (quoted, every character past ASCII escaped).
_json_text = json.encoder.encode_basestring_ascii
_TOOL_JSON = _json_text(_TOOL)
# A memo's entries (see _remembered) before it starts afresh, and the longest text it
# keeps (a place is about 150 bytes): longer ones are read anew each time, so that no
# content makes a memo hold more than a few megabytes.
_REMEMBERED_MAX = 4096
_REMEMBERED_LONGEST = 1024


class _Record:
    """What a lock says; on a server, ``lease`` "live" or "expired" (the last holder).
    A lock of several ``slots``, one held ``shared``, or one held in parts (``parted``)
    lists its ``holders``, each a record of its own with a ``mark``: how its server ends
    it (Redis: the server's time in ms; etcd: a lease). ``fence``: the number of the
    take that made this hold (None: a record written before fences, or by another
    tool). ``session``: the hold is an agent session's (``serve``), kept for the
    session's lease by whoever renews it. A holder is ``shared`` (of a lock held shared,
    each is) and holds ``parts`` of the lock (None: the lock whole)."""

    __slots__ = (
        "empty",
        "fence",
        "form",
        "holders",
        "lease",
        "mark",
        "owner",
        "parted",
        "parts",
        "session",
        "shared",
        "since",
        "size",
        "slots",
        "stale_after",
    )

    def __init__(
        self, owner: str | None, since: int, stale_after: float | None = None, empty: bool = False
    ) -> None:
        self.owner = owner
        self.since = since
        self.stale_after = stale_after
        self.empty = empty
        self.fence: int | None = None
        self.lease: Literal["live", "expired"] | None = None
        self.slots = 1
        self.holders: list[_Record] | None = None  # None: one slot, this record's own
        self.shared = False  # True: its holders share it (shared holds), not slots
        self.parted = False  # True: its holders hold parts of it, each as it says
        self.parts: tuple[str, ...] | None = None  # a holder's parts (None: whole)
        self.mark: str | None = None
        self.session = False
        # What its bytes were, by their form (a _FORM_*), and a file's whole size: by
        # these a file is told from another program's (decisions.py).
        self.form = _FORM_NO_OWNER
        self.size = 0


class _Place:
    """A waiter's place in the line (``beat`` None: the server's expiry keeps it);
    ``shared``: it waits for a shared hold; ``parts``: for those parts (None: whole)."""

    __slots__ = ("beat", "joined", "owner", "parts", "shared", "since", "stale_after", "ticket")

    def __init__(
        self,
        ticket: str,
        owner: str,
        since: int,
        stale_after: float,
        beat: float | None,
        *,
        shared: bool = False,
        parts: tuple[str, ...] | None = None,
    ) -> None:
        self.ticket = ticket
        self.owner = owner
        self.since = since
        self.stale_after = stale_after
        self.beat = beat
        self.shared = shared
        self.parts = parts
        self.joined = False  # True while this is the caller's own place, in the line


def _remembered(memo: dict[_Read, _Gave], read: _Read, make: Callable[[_Read], _Gave]) -> _Gave:
    """What ``read`` gives, by ``make``, kept in ``memo`` for the process: a waiter's
    every look reads the places in line again, and most are as they were at its last
    look. A memo starts afresh once full, so a long-lived process keeps it small."""
    try:
        return memo[read]
    except KeyError:
        pass
    gave = make(read)
    if _kept_short(read) and _kept_short(gave):
        if len(memo) >= _REMEMBERED_MAX:
            memo.clear()
        memo[read] = gave
    return gave


def _remember(memo: dict[_Read, bytes], read: _Read, gave: bytes) -> None:
    """Keep ``gave``, which ``read`` gave another way, in ``memo`` as _remembered keeps
    what it makes: unless one is kept already, ``gave`` is longer than a memo keeps, or
    ``memo`` is full."""
    if _kept_short(gave) and len(memo) < _REMEMBERED_MAX:
        memo.setdefault(read, gave)


def _kept_short(text: object) -> bool:
    """True unless ``text`` is bytes too long for a memo to keep."""
    return not isinstance(text, bytes) or len(text) <= _REMEMBERED_LONGEST


# The times read, with the seconds each gave: every look reads every holder's and every
# place's time again, and most are as the last look read them.
_TIMES_READ: dict[str, int | None] = {}
_TIME_LENGTH = len("2026-01-01T00:00:00Z")


def _time_of(text: str) -> int | None:
    """The seconds of a time ``text``, as _parse_time gives them, remembered; a text of
    another length is no time and is never kept. ``text`` may be any value a JSON
    document held: one not a string raises TypeError, as _parse_time does."""
    if isinstance(text, str) and len(text) == _TIME_LENGTH:
        return _remembered(_TIMES_READ, text, _parse_time)
    return _parse_time(text)


class _Look:
    """One look at a lock: records, what a change compares, the line, what shows a change."""

    __slots__ = (
        "clock",
        "fence_floor",
        "file_name",
        "last",
        "lease",
        "line",
        "record",
        "remembered",
        "revision",
        "seen",
    )

    def __init__(
        self,
        record: _Record | None,
        last: _Record | None = None,
        revision: str = "0",
        lease: str | None = None,
        *,
        line: list[_Place] | None = None,
        seen: object = None,
        file_name: str | None = None,
    ) -> None:
        self.record = record
        self.last = last  # on a server: the last holder's record, once its own expired
        self.revision = revision  # what a server's change compares
        self.lease = lease
        self.line = line or []
        # What the store saw, to tell later whether the lock changed since: a value of
        # that store's own type (_FileSeen, _EtcdSeen, _RedisSeen), read by it alone.
        self.seen = seen
        # A file lock's name, by which a file may be another program's (None: a key).
        self.file_name = file_name
        self.clock: int | None = None  # the server's time at the read, in ms (Redis)
        # The least fence a take on this look may have (None: a look outside a change):
        # a file's clock and Redis's TIME in microseconds, one more than the revision
        # an etcd look was read at.
        self.fence_floor: int | None = None
        # What this process's own last change left, not read: a change on it proves it
        # (its store compares that nothing changed since); else the call reads anew.
        self.remembered = False


# What a lock's bytes are, by their form; only a file may be another program's
# (decisions.py). A record: a JSON object with an "owner" or a "tool", a lock whatever
# the file's name. A document: a JSON object or array that is no record, or a TOML
# document with a key (a uv.lock, a pyproject.toml), another program's whatever its
# size. No owner: what a lock that names none holds (nothing, an older version's PID
# and time lines, a record cut short; a link). Bytes: anything else (a short line such
# as "locked" is a lock; a data file, too large to be one, is another program's).
_FORM_RECORD = "record"
_FORM_DOCUMENT = "document"
_FORM_NO_OWNER = "no owner"
_FORM_BYTES = "bytes"

# A record begins so (this tool's, every version's): bytes that begin so are a record,
# or one cut short, never another program's.
_RECORD_START = b'{"owner"'
_NOT_JSON = object()  # what bytes that are no JSON document give


def _form_of_text(data: bytes, content: object) -> str:
    """The form of bytes that are no JSON object (``content``: the JSON they are, or
    _NOT_JSON). TOML is read (its module imported) only for bytes that are no JSON and
    none of a lock's own forms, which no call on a lock of this tool's meets."""
    if isinstance(content, list):
        return _FORM_DOCUMENT
    if not data.strip() or data.lstrip().startswith(_RECORD_START):
        return _FORM_NO_OWNER
    if data.partition(b"\n")[0].strip().isdigit():  # an older version's PID line
        return _FORM_NO_OWNER
    if content is _NOT_JSON and len(data) <= _RECORD_MAX_BYTES:
        marked = _text_after_its_mark(data)
        if marked is not None and _json_document(marked):
            return _FORM_DOCUMENT
        if _toml_with_a_key(data if marked is None else marked.encode("utf-8", "replace")):
            return _FORM_DOCUMENT
    return _FORM_BYTES


# The byte-order marks editors and Windows tools (PowerShell 5) put before a text's
# first character: this tool writes none, and json reads none.
_MARKS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _text_after_its_mark(data: bytes) -> str | None:
    """The text of ``data`` that begins with a byte-order mark, without it (None: no
    mark, or no text in that encoding)."""
    for mark, codec in _MARKS:
        if data.startswith(mark):
            try:
                return data.decode(codec)
            except UnicodeDecodeError:
                return None
    return None


def _json_document(text: str) -> bool:
    """True if ``text`` is a JSON object or array: a document, never a record of this
    tool's, which writes no byte-order mark."""
    try:
        return isinstance(json.loads(text), dict | list)
    except (ValueError, RecursionError):
        return False


def _toml_with_a_key(data: bytes) -> bool:
    """True if ``data`` is a TOML document with at least one key."""
    import tomllib

    try:
        return bool(tomllib.loads(data.decode("utf-8")))
    except (ValueError, RecursionError):  # not UTF-8, not TOML, nested past the stack
        return False


def _holder_timeout(value: object) -> float | None:
    """A record's ``stale_after_seconds`` if valid (> 0 and <= a year), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value <= _MAX_STALE_AFTER_SEC else None


def _parse_record(data: bytes, mtime: int) -> _Record:
    """The record a lock's bytes give (else no owner, dated by a second line or ``mtime``)."""
    if len(data) > _RECORD_MAX_BYTES:
        record = _Record(None, mtime)
        record.form = _form_of_text(data, _NOT_JSON)  # cut at the read: no document
        return record
    try:
        content = _RECORD_DECODER.decode(data.decode("utf-8"))
    except (ValueError, RecursionError):
        content = _NOT_JSON
    if isinstance(content, dict):
        record = _record_of(content, mtime)
        record.form = _FORM_RECORD if "owner" in content or "tool" in content else _FORM_DOCUMENT
        slots = content.get("slots")
        entries = content.get("holders")
        several = isinstance(slots, int) and _slot_count_valid(slots) and slots != 1
        mode = content.get("mode")
        shared, parted = mode == _SHARED_MODE, mode == _PARTS_MODE
        if (several or shared or parted) and isinstance(entries, list):
            holders = [_holder_of(entry, parted or shared) for entry in entries]
            record.holders = [holder for holder in holders if holder is not None]
            for holder in record.holders:
                holder.shared = holder.shared or shared
            # Shared holds of parts are kept as shared holds (see _bytes_of).
            parted = parted or any(holder.parts is not None for holder in record.holders)
            record.shared, record.parted = shared and not parted, parted
        if several and not shared and isinstance(slots, int):
            record.slots = slots
        return record
    lines = data.split(b"\n", 2)
    since = _parse_time(lines[1].strip().decode("ascii", "replace")) if len(lines) > 1 else None
    record = _Record(None, mtime if since is None else since, empty=not data)
    record.form = _form_of_text(data, content)
    return record


# The most digits a number in a record may have to be read as one: more can be no valid
# fence, count or timeout, and Python refuses to read more than 4,300.
_INT_MAX_DIGITS = 20


def _short_int(text: str) -> int | None:
    """A number of a record read by json, or None for one longer than any it may hold."""
    return int(text) if len(text) <= _INT_MAX_DIGITS else None


# Made once: json.loads given a hook makes a decoder at every call.
_RECORD_DECODER = json.JSONDecoder(parse_int=_short_int)


def _record_of(content: dict[str, object], mtime: int) -> _Record:
    """The record of a JSON object: its owner, when it was taken, its holder's timeout."""
    owner = content.get("owner")
    when = content.get("acquired_at")
    since = _time_of(when) if isinstance(when, str) else None
    record = _Record(
        owner if isinstance(owner, str) and owner else None,
        mtime if since is None else since,
        _holder_timeout(content.get("stale_after_seconds")),
    )
    record.fence = _fence_valid(content.get("fence"))
    record.session = content.get("session") is True
    return record


# The largest fence: every integer up to it is exact in a double, so JavaScript and
# every JSON reader read it as written (a clock's microseconds pass it in 2112).
_MAX_FENCE = 2**52


def _fence_valid(value: object) -> int | None:
    """A record's fence if it is one (a whole number from 1 to _MAX_FENCE), else None:
    a wild value counts as no fence, so that no later take fails or goes past it."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= _MAX_FENCE:
        return value
    return None


def _holder_of(entry: object, parted: bool = False) -> _Record | None:
    """One holder of a lock of several slots, shared or held in parts (``parted``: with
    its kind and its parts); None unless it names all a holder has."""
    if not isinstance(entry, dict):
        return None
    when = entry.get("acquired_at")
    if not isinstance(when, str) or _time_of(when) is None:
        return None  # a holder's time is its own, never a file's mtime
    holder = _record_of(entry, 0)
    if holder.owner is None or holder.stale_after is None:
        return None
    mark = entry.get("mark")
    holder.mark = mark if isinstance(mark, str) else None
    if parted:
        holder.shared = entry.get("shared") is True
        holder.parts = _parts_read(entry.get("parts"))
    return holder


def _parts_read(value: object) -> tuple[str, ...] | None:
    """A holder's parts as its record gives them: None (the lock whole) for none, and
    for any that are not parts a hold could name (written by hand): a whole hold
    conflicts with every part, the safe reading."""
    if value is None:
        return None
    _compile_carried('parts')

    try:
        return _checked_parts(value)
    except ValueError:
        return None


def _slot_count_valid(value: object) -> bool:
    """True for a count of slots a lock may have: a plain integer from 1 to 1000."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= _MAX_SLOTS


# A record of shared holds says so with this "mode"; its top-level owner, which an
# older version reads as the one holder, is never a valid owner (it has a space), so no
# older version renews or releases it as its own.
_SHARED_MODE = "shared"
_SHARED_OWNER = "shared holds"
# A record of holds of parts says so likewise: an older version sees one holder it can
# never be, holding the lock whole until the last hold goes stale.
_PARTS_MODE = "parts"
_PARTS_OWNER = "held in parts"


def _slots_record(slots: int, holders: list[_Record]) -> _Record:
    """The record of a lock of ``slots`` held by ``holders``."""
    record = _Record(None, min(h.since for h in holders))
    record.slots = slots
    record.holders = holders
    return record


def _shared_record(holders: list[_Record]) -> _Record:
    """The record of a lock held shared by ``holders``."""
    record = _slots_record(1, holders)
    record.shared = True
    return record


def _kept_record(holders: list[_Record], slots: int) -> _Record:
    """The record that keeps ``holders`` (one at least), each as it holds the lock: of
    ``slots`` (more than one), held in parts (any holder names parts), held shared
    (every one is), or the one holder's own."""
    if slots > 1:
        return _slots_record(slots, holders)
    whole = all(holder.parts is None for holder in holders)
    if whole and all(holder.shared for holder in holders):
        return _shared_record(holders)
    if whole and len(holders) == 1:
        return holders[0]  # an exclusive hold of the whole lock, alone
    record = _slots_record(1, holders)
    record.parted = True
    return record


def _taking_records(
    hold: tuple[str, int, float, int | None, bool, bool, tuple[str, ...] | None],
    kept: list[_Record],
    at: int | None,
    slots: int,
) -> tuple[_Record, _Record]:
    """A take's own hold, of ``hold`` (owner, since, timeout, fence, whether it is a
    session's, whether it is shared, and its parts), and the record it leaves: its hold
    beside the ``kept`` ones, in the place ``at`` (None: at the end), as _kept_record
    keeps them."""
    owner, since, stale_after, fence, session, shared, parts = hold
    new = _Record(owner, since, stale_after)
    new.fence = fence
    new.session = session
    new.shared = shared
    new.parts = parts
    holders = [*kept, new] if at is None else [*kept[:at], new, *kept[at + 1 :]]
    return new, _kept_record(holders, slots)


def _bytes_of(record: _Record) -> bytes:
    """The bytes that keep ``record``: one slot's as ever, or a record of several slots
    or of shared holds whose top level an older version reads as one holder it can
    never be or release, going stale when the last of the holds does."""
    if record.holders is None:
        assert record.owner is not None and record.stale_after is not None
        return _record_bytes(
            record.owner, record.since, record.stale_after, record.fence, record.session
        )
    holders = record.holders
    # Holds of parts that are all shared are written as shared holds, each with its
    # parts: an older version keeps sharing the lock with them, as it would with any
    # shared hold, where "held in parts" would take its own shared hold from it.
    all_shared = record.shared or (record.parted and all(h.shared for h in holders))
    last = max(holders, key=_holder_end)
    assert last.stale_after is not None
    entries = []
    for holder in holders:
        assert holder.stale_after is not None
        entry: dict[str, object] = {
            "owner": holder.owner,
            "acquired_at": _format_time(holder.since),
            "stale_after_seconds": _json_seconds(holder.stale_after),
        }
        if holder.mark is not None:
            entry["mark"] = holder.mark
        if holder.fence is not None:
            entry["fence"] = holder.fence
        if holder.session:
            entry["session"] = True
        if record.parted and holder.shared and not all_shared:
            entry["shared"] = True
        if record.parted and holder.parts is not None:
            entry["parts"] = list(holder.parts)
        entries.append(entry)
    owner = _slots_owner(record.slots)
    if all_shared:
        owner = _SHARED_OWNER
    elif record.parted:
        owner = _PARTS_OWNER
    content: dict[str, object] = {
        "owner": owner,
        "acquired_at": _format_time(last.since),
        "stale_after_seconds": _json_seconds(last.stale_after),
        "tool": _TOOL,
    }
    if all_shared or record.parted:
        content["mode"] = _SHARED_MODE if all_shared else _PARTS_MODE
    else:
        content["slots"] = record.slots
    content["holders"] = entries
    return (json.dumps(content) + "\n").encode("ascii")


def _slots_owner(slots: int) -> str:
    """The owner an older version reads in a lock of several slots: never a valid
    owner (it has a space), so no older version renews or releases it as its own."""
    return f"{slots} slots"


def _holder_end(holder: _Record) -> float:
    """When ``holder``'s slot goes stale by its time alone."""
    return holder.since + (holder.stale_after or 0.0)


def _json_seconds(stale_after: float) -> int | float:
    return int(stale_after) if stale_after.is_integer() else stale_after


def _record_bytes(
    owner: str, since: int, stale_after: float, fence: int | None = None, session: bool = False
) -> bytes:
    """The bytes of one holder's record: the keys every version reads, then its fence
    and whether it is a session's, which older versions pass over. As json.dumps
    writes them, without the dict and the encoder's walk it takes each call (every
    take writes one): the owner, the one text a caller gives, escaped as it escapes."""
    text = (
        f'{{"owner": {_json_text(owner)}, "acquired_at": "{_format_time(since)}",'
        f' "stale_after_seconds": {_json_seconds(stale_after)!r}, "tool": {_TOOL_JSON}'
    )
    if fence is not None:
        text += f', "fence": {fence!r}'
    if session:
        text += ', "session": true'
    return (text + "}\n").encode("ascii")


# --------------------------------------------------------------------------------------
# src/skf_run_lock/hold.py
# A hold: what one take gave (acquire, a renewal, run's, held()'s, a waiter's), as one
# value. The outputs format it at the edge; run, held() and the renewer keep it and renew
# it, never an output.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from typing import Literal


class _Hold:
    """One hold taken or renewed: the lock as its store names it, the whole owner and
    its run id, its fence (None: the take could give none), whether it ``renewed`` the
    owner's own hold, its ``holder_timeout`` (seconds), ``since`` (whole seconds), the
    stale hold of another it ``replaced`` (renewing: the first it dropped; None: none),
    the record it left (``after``), which the message describes, whether it is an
    agent session's hold (``session``: kept for the session's lease), whether it is
    ``shared``, and the ``parts`` it holds (None: the lock whole)."""

    __slots__ = (
        "after",
        "fence",
        "holder_timeout",
        "lock",
        "owner",
        "parts",
        "renewed",
        "replaced",
        "run_id",
        "session",
        "shared",
        "since",
    )

    def __init__(
        self,
        lock: str,
        owner: str,
        run_id: str,
        *,
        since: int,
        holder_timeout: float,
        renewed: bool,
        replaced: _Record | None,
        after: _Record,
        fence: int | None,
        session: bool = False,
        shared: bool = False,
        parts: tuple[str, ...] | None = None,
    ) -> None:
        self.lock = lock
        self.owner = owner
        self.run_id = run_id
        self.since = since
        self.holder_timeout = holder_timeout
        self.renewed = renewed
        self.replaced = replaced
        self.after = after
        self.fence = fence
        self.session = session
        self.shared = shared
        self.parts = parts

    @property
    def kind(self) -> Literal["exclusive", "slots", "shared"]:
        """How it holds: the lock alone, one of several slots, or shared."""
        if self.shared:
            return "shared"
        return "slots" if self.after.slots > 1 else "exclusive"


# --------------------------------------------------------------------------------------
# src/skf_run_lock/decisions.py
# The decisions, as pure functions of what a store read and the time: is a record
# stale, may an owner take the lock (one of its slots, or a shared hold), who in the line
# is alive, who goes first, what a take or a release leaves. No store decides anything;
# each only reads, applies a change atomically, and waits.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from typing import Literal


    # What a take may do (see _Take).
    _Outcome = Literal[
        "take", "held", "line", "count", "kind", "lost", "theirs", "grow", "parts", "full"
    ]


def _deciding_timeout(record: _Record, stale_after: float) -> float:
    """The timeout that decides ``record``'s staleness: its holder's, else the caller's."""
    return stale_after if record.stale_after is None else record.stale_after


def _is_stale(record: _Record, stale_after: float, now: float, empty_is_stale: bool) -> bool:
    """True if ``record``'s lock is abandoned at ``now`` (on a server, its clock decides)."""
    if record.lease is not None:
        return record.lease == "expired"
    if empty_is_stale and record.empty:
        return True
    return now - record.since >= _deciding_timeout(record, stale_after)


# --- Slots: a lock held by up to N runs at once, each under its own owner and timeout.
# A lock of one slot is its record's own holder; one of several lists its holders, as
# does one held shared: any number of holders at once, none of them exclusive.


def _holders(record: _Record | None) -> list[_Record]:
    """Who holds ``record``'s slots, live or stale."""
    if record is None:
        return []
    return [record] if record.holders is None else record.holders


def _live_holders(
    record: _Record | None, stale_after: float, now: float, empty_is_stale: bool
) -> list[_Record]:
    """The holders of ``record`` whose slots are not stale at ``now``."""
    return [
        holder
        for holder in _holders(record)
        if not _is_stale(holder, stale_after, now, empty_is_stale)
    ]


def _first_to_go(holders: list[_Record], stale_after: float) -> _Record:
    """The holder of ``holders`` whose slot goes stale first by its time."""
    return min(holders, key=lambda h: h.since + _deciding_timeout(h, stale_after))


def _still_holds(
    record: _Record | None, owner: str, stale_after: float, now: float, empty_is_stale: bool
) -> bool:
    """True if ``owner`` holds a slot of ``record`` that is not stale."""
    live = _live_holders(record, stale_after, now, empty_is_stale)
    return any(holder.owner == owner for holder in live)


def _take_timeout(record: _Record | None, request: _Request, now: float) -> tuple[float, bool]:
    """The timeout of a take by ``request``, and whether its hold is an agent session's.
    A live session hold of its owner stays the session's: whoever renews it (the CLI, run,
    held(), the session) renews it for the session's lease, never longer, so that it
    ends within that lease once the session is gone. Otherwise a session's take is
    marked with its lease, unless its owner already held the lock (then it is kept, as
    run and held() keep one); run and held() (``keep_longer``) keep the owner's hold no
    shorter than it was, the longer of the hold's and theirs (a renewal starts its time
    now, so the lock goes stale no sooner); any other take has its own timeout."""
    stale_after = request.stale_after
    own = [h for h in _holders(record) if h.owner == request.owner]
    live = [h for h in own if not _is_stale(h, stale_after, now, False)]
    sessions = [_deciding_timeout(h, stale_after) for h in live if h.session]
    if sessions:
        return min(sessions), True
    longest = max([stale_after, *(_deciding_timeout(h, stale_after) for h in own)])
    if request.session:
        return (longest, False) if live else (stale_after, True)
    return (longest if request.keep_longer else stale_after), False


def _kept_holds(
    look: _Look, request: _Request, shared: bool, now: float
) -> tuple[list[_Record], int | None, _Record | None, _Record | None]:
    """Where a take by ``request``'s owner (of its slots, or a shared hold: ``shared``)
    goes in the lock ``look`` found: the holds of the record it leaves beside its own
    (``kept``), the place of its own in them (``at``: the one it takes over; None: it is
    added at the end, or, with nothing kept, it is the record's one hold), the hold of
    its own it renews (None: none), and the stale hold of another it replaces or,
    renewing, the first of those it drops (None: none). Its own slot (or shared hold) is
    renewed, else the first stale one replaced, else a free one taken; the other
    holders' are untouched. A count or kind that changes (no hold live) starts a new
    record; ``look.last`` is a server's record that expired whole, whose holders the new
    record drops."""
    record, slots, stale_after, owner = (
        look.record,
        request.slots,
        request.stale_after,
        request.owner,
    )
    gone = _holders(record) or _holders(look.last)
    if shared:
        same_kind = record is not None and record.shared
    else:
        same_kind = record is not None and not record.shared and record.slots == slots > 1
    kept = _holders(record) if same_kind else []
    at = next((i for i, h in enumerate(kept) if h.owner == owner), None)
    if at is None:
        stale = [h for h in kept if _is_stale(h, stale_after, now, False)]
        if stale:
            at = kept.index(_first_to_go(stale, stale_after))
    if kept:
        before = None if at is None else kept[at]
        dropped = []
    else:
        # A new record: its own hold (a server's expired one) is what it renews, else a
        # stale holder is what it replaces; the others are dropped.
        own = [h for h in gone if h.owner == owner]
        before = own[0] if own else _first_to_go(gone, stale_after) if gone else None
        dropped = [h for h in gone if h is not before]
    if before is None or before.owner != owner:
        return kept, at, None, before
    return kept, at, before, _first_to_go(dropped, stale_after) if dropped else None


def _fence_of_take(look: _Look, owner: str, renewed: _Record | None) -> int | None:
    """The fence of the take by ``owner``, renewing its own hold ``renewed`` (or None).
    A renewal keeps its hold's fence while no other holder the lock shows (live or
    stale, in its record or as a server's last holder) has a larger one: else a frozen
    holder's late write could pass it. Any other take gets one more than every fence
    the lock shows, and no less than the store's floor (a file's or Redis's clock in
    microseconds, one more than the revision an etcd look was read at), so that fences
    only grow, across releases and deleted records too, unless that clock steps back.
    None without a floor (a look outside a change, a server whose clock cannot be
    read), or where the next fence would pass _MAX_FENCE (only a record written by
    hand can take a lock there)."""
    shown = [*_holders(look.record), *_holders(look.last)]
    others = [r.fence for r in shown if r.fence is not None and r.owner != owner]
    kept = None if renewed is None else renewed.fence
    if kept is not None and all(fence < kept for fence in others):
        return kept
    if look.fence_floor is None:
        return None
    highest = max((r.fence for r in shown if r.fence is not None), default=0)
    fence = max(highest + 1, look.fence_floor)
    return fence if fence <= _MAX_FENCE else None


def _released(record: _Record, owner: str, now: float) -> tuple[_Record | None, _Record | None]:
    """What a release by ``owner`` leaves (None: no record), and the slot it frees
    (None: ``owner`` holds none). The others' slots are untouched; a record left with
    no live holder is deleted, as it is stale anyway."""
    holders = _holders(record)
    mine = next((h for h in holders if h.owner == owner), None)
    if mine is None:
        return record, None
    rest = [h for h in holders if h is not mine]
    # Every holder of several slots has a timeout of its own; no caller's is needed.
    if not any(not _is_stale(h, float("inf"), now, False) for h in rest):
        return None, mine
    return _kept_record(rest, record.slots), mine


# --- The line of waiters: first come, first served


def _live(line: list[_Place], now: float) -> list[_Place]:
    """The places of ``line`` whose waiters are alive at ``now``, in order (a place
    lapses ``_SEAMS.place_ttl_sec`` after its waiter's last beat)."""
    ttl = _SEAMS.place_ttl_sec
    return [p for p in line if p.beat is None or abs(now - p.beat) < ttl]


def _ahead_of(line: list[_Place], ticket: str) -> list[_Place] | None:
    """The places before ``ticket``'s in the live ``line``; None if it has no place."""
    for at, place in enumerate(line):
        if place.ticket == ticket:
            return line[:at]
    return None


def _asks_shared(record: _Record | None, owner: str, shared: bool, keeps_kind: bool) -> bool:
    """Whether a take asks for a shared hold: as asked, or, where a renewal that names
    no kind ``keeps_kind`` (acquire; never run or held(), whose step must not run
    beside readers), as ``owner``'s own shared hold of ``record`` is."""
    if shared or not keeps_kind or record is None:
        return shared
    return any(holder.owner == owner and holder.shared for holder in _holders(record))


class _Take:
    """What one try of a take does, decided at once from the request, what the store
    read, the caller's place in line and the time: the one value the take applies and
    the outputs format. ``outcome``:

    - "take": it writes ``after``, its own hold ``new`` (with its fence, ``session``
      mark and timeout) in it, renewing ``renewed`` (its own hold it had; None: none)
      or replacing ``replaced`` (the stale hold of another it replaces or, renewing,
      the first of those it drops);
    - "held": all are held; "line": the free ones go to those ahead in line;
    - "count": it asks for another count than the one in force (of slots, or slots
      where holds are shared); "kind": for the other kind than it holds;
    - "lost": a renewal found the hold no longer its owner's (``stale``: its own record
      went stale);
    - "theirs": the file is another program's, no lock (``theirs`` says why);
    - "grow": the owner asked for other parts than it holds, and one it adds conflicts
      with another's live hold or a waiter (refused at once: two holders waiting to
      grow would wait on each other); "parts": run, held() or a session, which keep an
      owner's hold as it is, named parts it does not hold; "full": the record would
      pass the most bytes a record may hold.

    A take holds ``parts`` (None: the lock whole), shared or not (``shared``); one that
    ``changed`` its owner's parts gets a new fence. ``clash``: the pair (its part, the
    other's part; None: a whole hold) by which it conflicts with ``blocker``.

    With it, what a refusal tells: ``record``, its ``live`` holders (oldest first), the
    ``waiter`` whose turn comes before the call's (None: none), who stands in the way
    (``blocker``: the holder, of several the first to go stale, else the waiter's place
    as a record; None: nobody) with its ``holder_timeout``, and the live line but the
    caller's place (``others``); ``in_line``: the caller's place is in the line;
    ``look``: what the store read."""

    __slots__ = (
        "after",
        "blocker",
        "changed",
        "clash",
        "holder_timeout",
        "in_line",
        "live",
        "look",
        "new",
        "others",
        "outcome",
        "parts",
        "record",
        "renewed",
        "replaced",
        "shared",
        "stale",
        "theirs",
        "waiter",
    )

    def __init__(self, look: _Look, stale_after: float) -> None:
        self.outcome: _Outcome = "take"
        self.look = look
        self.record = look.record
        self.shared = False
        self.live: list[_Record] = []
        self.waiter: _Place | None = None
        self.blocker: _Record | None = None
        self.holder_timeout = stale_after
        self.others: list[_Place] = []
        self.in_line = False
        self.stale = False
        self.theirs = ""
        self.new: _Record | None = None
        self.after: _Record | None = None
        self.renewed: _Record | None = None
        self.replaced: _Record | None = None
        self.parts: tuple[str, ...] | None = None
        self.changed = False
        self.clash: tuple[str | None, str | None] | None = None


def _decide_take(request: _Request, look: _Look, ticket: str | None, now: float) -> _Take:
    """What a try of ``request``'s take does with the lock as ``look`` found it, at
    ``now``, its waiter's place in line being ``ticket`` (None: it has none): see _Take.
    The first k in line take the k free slots; a call with no place comes after them
    all. The shared waiters at the head of the line go in together, but none passes an
    exclusive waiter ahead of it. A renewal (``request.renew_only``) finds the hold lost
    unless it is still the owner's live hold."""
    record, stale_after, owner = look.record, request.stale_after, request.owner
    take = _Take(look, stale_after)
    take.theirs = _another_programs_file(look)
    if take.theirs:
        take.outcome = "theirs"
        return take
    shared = _asks_shared(record, owner, request.shared, not request.keep_longer)
    take.shared = shared
    if request.renew_only and not _still_holds(
        record, owner, stale_after, now, request.empty_is_stale
    ):
        take.outcome = "lost"
        if record is not None and record.holders is None:
            take.stale = _is_stale(record, stale_after, now, request.empty_is_stale)
            take.holder_timeout = _deciding_timeout(record, stale_after)
        return take
    line = _live(look.line, now)
    ahead = _ahead_of(line, ticket) if ticket is not None else None
    take.in_line = ahead is not None
    take.others = [place for place in line if place.ticket != ticket]
    live = _live_holders(record, stale_after, now, request.empty_is_stale)
    before = line if ahead is None else ahead
    take.live = sorted(live, key=lambda h: h.since)
    _verdict_of(take, request, before, line)
    if take.outcome == "take":
        _decide_what_it_leaves(take, look, request, now)
        if take.after is not None and take.after.parted and _too_large(take.after):
            take.outcome = "full"
        return take
    # A waiter in the way of a take in line is dated as a holder would be; one in the
    # way of a grow stays a waiter, which its refusal names as waiting.
    if take.blocker is None and take.waiter is not None and take.outcome != "grow":
        waiter = take.waiter
        take.blocker = _Record(waiter.owner, waiter.since, waiter.stale_after)
    if take.blocker is not None:
        take.holder_timeout = _deciding_timeout(take.blocker, stale_after)
    return take


# What a server may add to each holder's entry in a record (its mark), at most.
_MARK_BYTES = 48


def _too_large(record: _Record) -> bool:
    """Whether ``record``, marked by its server, passes the most bytes a lock's record
    may hold (a reader reads no more)."""
    marks = _MARK_BYTES * len(_holders(record))
    return len(_bytes_of(record)) + marks > _RECORD_MAX_BYTES


def _decide_what_it_leaves(take: _Take, look: _Look, request: _Request, now: float) -> None:
    """A take's hold, the record it leaves and the fence it gets (see _Take): decided
    first, then made into records."""
    holder_timeout, session = _take_timeout(look.record, request, now)
    in_parts = _in_parts(look.record, request, take.parts)
    if in_parts:
        kept, at, take.renewed, take.replaced = _kept_beside(look, request, now)
    else:
        kept, at, take.renewed, take.replaced = _kept_holds(look, request, take.shared, now)
    renewed = None if take.changed else take.renewed
    fence = _fence_of_take(look, request.owner, renewed)
    # A live hold of parts renewed as it stands keeps its fence, whatever the others':
    # theirs tell their own parts' writers apart, and none shares a path with it (a stale
    # one is taken anew: another may have had its parts since).
    live = renewed is not None and not _is_stale(renewed, request.stale_after, now, False)
    if in_parts and live and renewed is not None and renewed.fence is not None:
        fence = renewed.fence
    take.holder_timeout = holder_timeout
    hold = (request.owner, int(now // 1), holder_timeout, fence, session, take.shared, take.parts)
    take.new, take.after = _taking_records(hold, kept, at, request.slots)


def _in_parts(record: _Record | None, request: _Request, parts: tuple[str, ...] | None) -> bool:
    """Whether a take by ``request``, holding ``parts``, is of a lock held in parts or
    leaves one: its holders are then kept by conflict (_kept_beside)."""
    return parts is not None or (record is not None and record.parted) or request.parts is not None


def _kept_beside(
    look: _Look, request: _Request, now: float
) -> tuple[list[_Record], int | None, _Record | None, _Record | None]:
    """As _kept_holds, for a lock held in parts: every other live hold is kept beside
    the take's (none conflicts with it: the verdict saw to that); a stale one is dropped,
    and the first of those to go is the one it replaces (renewing: drops)."""
    record, stale_after, owner = look.record, request.stale_after, request.owner
    gone = _holders(record) or _holders(look.last)
    kept = [
        h
        for h in _holders(record)
        if h.owner != owner and not _is_stale(h, stale_after, now, False)
    ]
    own = [h for h in gone if h.owner == owner]
    dropped = [h for h in gone if h.owner != owner and h not in kept]
    replaced = _first_to_go(dropped, stale_after) if dropped else None
    return kept, None, own[0] if own else None, replaced


class _Turn:
    """What a waiter waits for, from one look: the places ``ahead`` of it, how many
    must leave (``away``) before its turn may come with a hold that frees (N slots: it
    is among the first N; else no place it conflicts with is ahead), those whose
    leaving it waits on (``waits_on``), and in how many seconds a live hold goes stale
    by its time, which a waiter whose turn may come wakes for (``stale_in``; inf: none
    does, or it is not such a waiter)."""

    __slots__ = ("ahead", "away", "stale_in", "waits_on")

    def __init__(
        self, ahead: list[_Place], waits_on: list[_Place], away: int, stale_in: float
    ) -> None:
        self.ahead = ahead
        self.waits_on = waits_on
        self.away = away
        self.stale_in = stale_in


def _decide_turn(request: _Request, look: _Look, place: _Place, now: float) -> _Turn | None:
    """What the waiter of ``request`` at ``place`` waits for, as ``look`` found the lock
    at ``now``; None: its turn may have come, or its place lapsed, and it tries again."""
    line = _live(look.line, now)
    ahead = _ahead_of(line, place.ticket)
    if ahead is None:
        return None
    record, stale_after = look.record, request.stale_after
    take = _Take(look, stale_after)
    take.shared = place.shared
    take.live = _live_holders(record, stale_after, now, request.empty_is_stale)
    _verdict_of(take, request, ahead, line)
    if take.outcome not in ("held", "line"):
        return None
    if _by_slots(record, take.live, request):
        away, waits_on = max(0, len(ahead) - request.slots + 1), ahead
    else:
        waits_on = [p for p in ahead if _conflict(place.shared, place.parts, p.shared, p.parts)]
        away = len(waits_on)
    stale_in = _stale_in(record, stale_after, now) if away == 0 else float("inf")
    return _Turn(ahead, waits_on, away, stale_in)


def _conflict(
    shared: bool,
    parts: tuple[str, ...] | None,
    other_shared: bool,
    other_parts: tuple[str, ...] | None,
) -> tuple[str | None, str | None] | None:
    """Whether two holds (or waiters) conflict: the pair (a part of the first, a part
    of the other; None: a whole hold) some path lies in both of, or None. Two shared
    ones never conflict; a whole hold conflicts with every part."""
    if shared and other_shared:
        return None
    if parts is None or other_parts is None:
        return (parts[0] if parts else None, other_parts[0] if other_parts else None)
    _compile_carried('parts')

    return _first_overlap(parts, other_parts)


def _by_slots(record: _Record | None, live: list[_Record], request: _Request) -> bool:
    """Whether a take is judged by counting slots (several asked, or in force), not by
    conflict: a lock of one slot, held shared or held in parts, is judged by who
    conflicts with whom, which for a lock held whole comes to one holder, or readers."""
    return request.slots > 1 or (record is not None and bool(live) and record.slots > 1)


def _verdict_of(take: _Take, request: _Request, before: list[_Place], line: list[_Place]) -> None:
    """``take``'s outcome, with its ``live`` holders (the lock's, by its look) and
    ``before`` the places ahead of the call (``line``: the whole live line), and who
    stands in the way: the parts it holds, as it asks them or keeps its owner's."""
    record, live, shared, owner = take.record, take.live, take.shared, request.owner
    in_force: int | Literal["shared"] | None = None
    if record is not None and live:
        in_force = "shared" if record.shared or record.parted else record.slots
    if in_force is not None and _counts_clash(in_force, request.slots, shared):
        take.outcome = "count"
        return
    mine = [h for h in _holders(record) if h.owner == owner]
    take.parts = request.parts
    if mine and (any(h in live for h in mine) or not _in_parts(record, request, None)):
        own = mine[0]
        if own.shared != shared:
            take.outcome = "kind"
        else:
            _own_parts(take, own, request, line)
        return
    if _by_slots(record, live, request):
        free = request.slots - len(live)
        take.outcome = "held" if free <= 0 else "take" if len(before) < free else "line"
        take.waiter = before[0] if before else None
        take.blocker = _first_to_go(live, request.stale_after) if free <= 0 else None
        if free <= 0 and record is not None and record.holders is None:
            take.blocker = record
        return
    parts = request.parts
    for holder in sorted(live, key=lambda h: h.since + _deciding_timeout(h, request.stale_after)):
        if holder.owner != owner and (
            clash := _conflict(shared, parts, holder.shared, holder.parts)
        ):
            take.outcome, take.blocker, take.clash = "held", holder, clash
            return
    for place in before:
        if clash := _conflict(shared, parts, place.shared, place.parts):
            take.outcome, take.waiter, take.clash = "line", place, clash
            return


def _own_parts(take: _Take, own: _Record, request: _Request, line: list[_Place]) -> None:
    """The parts of a take by the owner of ``own``: as it stands when it names none or
    the same; run, held() and a session (``keep_longer``) keep it whatever they name,
    which must be among its parts ("parts" if not); an acquire changes it to exactly
    those it names, unless a part it adds conflicts with another's live hold or any
    waiter ("grow": refused at once, never waiting)."""
    asked, held = request.parts, own.parts
    take.parts = held
    if asked is None or (held is not None and _keys(asked) == _keys(held)):
        return
    if held is not None and not _keys(asked) <= _keys(held) and request.keep_longer:
        # A renewal whose parts its owner changed meanwhile (an acquire of other
        # parts): the work's hold is gone, as if released.
        take.outcome = "lost" if request.renew_only else "parts"
        take.clash = (next(p for p in asked if _key(p) not in _keys(held)), None)
        return
    if request.keep_longer:
        return
    added = () if held is None else tuple(p for p in asked if _key(p) not in _keys(held))
    if added:
        for holder in take.live:
            clash = _conflict(take.shared, added, holder.shared, holder.parts)
            if holder.owner != own.owner and clash:
                take.outcome, take.blocker, take.clash = "grow", holder, clash
                return
        for place in line:
            clash = _conflict(take.shared, added, place.shared, place.parts)
            if place.owner != own.owner and clash:
                take.outcome, take.waiter, take.clash = "grow", place, clash
                return
    take.parts, take.changed = asked, True


def _key(part: str) -> str:
    _compile_carried('parts')

    return _part_key(part)


def _keys(parts: tuple[str, ...]) -> set[str]:
    """What a set of parts is compared by: each part's key."""
    return {_key(part) for part in parts}


def _counts_clash(in_force: int | Literal["shared"], slots: int, shared: bool) -> bool:
    """True if a call for ``slots`` (or a shared hold) names another count of slots than
    ``in_force``: slots where holds are shared or held in parts ("shared"), shared holds
    where there are slots, or another count. Exclusive beside shared is no clash: it
    waits its turn."""
    if in_force == "shared" or shared:
        several = slots if in_force == "shared" else in_force
        return several > 1
    return in_force != slots


def _turns(line: list[_Place], slots: int, live: list[_Record]) -> list[_Place]:
    """The waiters of the live ``line`` whose turn a change may give, ``live`` being
    the live holds after it, of a lock of ``slots`` (the count in force): the first
    ``slots - len(live)`` of several slots; else each waiter that conflicts with no live
    hold and no waiter ahead of it (for a lock held whole, the first; or the shared
    waiters at the head, while no exclusive hold is live)."""
    if slots > 1:
        return line[: max(0, slots - len(live))]
    turns = []
    for at, place in enumerate(line):
        mine = (place.shared, place.parts)
        if any(h.owner != place.owner and _conflict(*mine, h.shared, h.parts) for h in live):
            continue
        if any(_conflict(*mine, p.shared, p.parts) for p in line[:at]):
            continue
        turns.append(place)
    return turns


def _stale_in(record: _Record | None, stale_after: float, now: float) -> float:
    """Seconds until a live slot of ``record`` goes stale by its time alone (inf: never
    by time: none is live, or a server's clock ends them)."""
    ends = [
        holder.since + _deciding_timeout(holder, stale_after) - now
        for holder in _holders(record)
        if holder.lease is None
    ]
    return min((end for end in ends if end > 0), default=float("inf"))


class _Standing:
    """status's verdict on a lock at ``now``: its ``state`` ("free", "held", "stale");
    the ``case`` its report tells ("all held", "all shared stale" (held shared or in
    parts, all gone stale), "one", "slot stale",
    "some held", "no slot held", "free"); the count of ``slots`` it shows (the one in
    force, else the caller's); every holder and the ``live`` ones (oldest first); the
    holder it names (``shown``, None: none) and that holder's ``holder_timeout`` (else
    the caller's); of a lock of slots with one gone stale, the first of those
    (``gone``); how it is held (``mode``, None: no live hold; ``parted``: in parts);
    and the largest of the live holders' fences."""

    __slots__ = (
        "case",
        "fence",
        "gone",
        "holder_timeout",
        "holders",
        "live",
        "mode",
        "parted",
        "shown",
        "slots",
        "stale_after",
        "state",
    )

    def __init__(
        self, record: _Record | None, live: list[_Record], slots: int, stale_after: float
    ) -> None:
        self.parted = record is not None and record.parted
        self.stale_after = stale_after
        self.slots = slots
        self.holders = sorted(_holders(record), key=lambda h: h.since)
        self.live = sorted(live, key=lambda h: h.since)
        self.shown: _Record | None = None
        self.gone: _Record | None = None
        self.holder_timeout = stale_after
        self.state: Literal["free", "held", "stale"] = "free"
        self.case = "free"
        self.mode: Literal["shared", "exclusive"] | None = None
        if live:  # exclusive while any live hold is
            self.mode = "shared" if all(h.shared for h in live) else "exclusive"
        self.fence = max((h.fence for h in live if h.fence is not None), default=None)

    def timeout_of(self, holder: _Record) -> float:
        """The timeout that decides ``holder``'s staleness."""
        return _deciding_timeout(holder, self.stale_after)

    def naming(
        self, case: str, state: Literal["free", "held", "stale"], shown: _Record | None
    ) -> None:
        """The case the report tells, the state, and the holder it names."""
        self.case, self.state, self.shown = case, state, shown
        if shown is not None:
            self.holder_timeout = self.timeout_of(shown)


def _standing(record: _Record | None, query: _Query, now: float) -> _Standing:
    """Who holds ``record``'s lock at ``now``, by the count in force (else
    ``query.slots``, the caller's): see _Standing."""
    stale_after = query.stale_after
    live = _live_holders(record, stale_after, now, query.empty_is_stale)
    slots = record.slots if record is not None and live else query.slots
    standing = _Standing(record, live, slots, stale_after)
    several = slots > 1 or (record is not None and record.slots > 1)
    holders = _holders(record)
    # Held shared or in parts: held while any hold is live, stale once all went stale.
    shared = record is not None and (record.shared or record.parted)
    if live and (shared or (several and len(live) >= slots)):
        standing.naming("all held", "held", _first_to_go(live, stale_after))
    elif shared and holders:
        last = max(holders, key=lambda h: h.since + _deciding_timeout(h, stale_after))
        standing.naming("all shared stale", "stale", last)
    elif not several and record is not None:
        stale = _is_stale(record, stale_after, now, query.empty_is_stale)
        standing.naming("one", "stale" if stale else "held", record)
    elif record is not None and record.slots == slots and len(holders) >= slots:
        standing.naming("slot stale", "stale", None)
        standing.gone = _first_to_go([h for h in holders if h not in live], stale_after)
    elif live:
        standing.naming("some held", "free", None)
    elif several:
        standing.naming("no slot held", "free", None)
    return standing


def _reserved(
    record: _Record | None, paths: tuple[str, ...], owner: str | None, query: _Query, now: float
) -> list[tuple[str, _Record, str | None]]:
    """Which of ``paths`` (checked) lie in a live hold of ``record``'s lock at ``now``
    of another than ``owner`` (None: of anyone), shared or not (a commit is a write):
    for each path, in order, each such holder, longest held first, with each of its
    parts the path lies in (None: a hold of the whole lock, which every path lies in).
    ``query.stale_after`` judges a record without a timeout of its own."""
    live = _live_holders(record, query.stale_after, now, query.empty_is_stale)
    others = sorted((h for h in live if owner is None or h.owner != owner), key=lambda h: h.since)
    if not others or not paths:
        return []
    # Every holder's parts in one list, in order (a whole hold stands as None in it).
    held = [(h, part) for h in others for part in (h.parts or (None,))]
    whole = [at for at, (_, part) in enumerate(held) if part is None]
    parted = [at for at, (_, part) in enumerate(held) if part is not None]
    if not parted:
        return [(path, *held[at]) for path in paths for at in whole]
    _compile_carried('parts')

    index = _PartIndex([part for _, part in held if part is not None])
    reserved: list[tuple[str, _Record, str | None]] = []
    for path in paths:
        found = [parted[at] for at in index.covering(path)]
        for at in sorted(whole + found) if whole else found:
            reserved.append((path, *held[at]))
    return reserved


# A name that says it is a lock: what stands there blocks acquire, whatever it holds.
_LOCK_NAME_SUFFIX = ".lock"


# The names package managers give their lockfiles: a file so named is theirs, there
# or not, empty or not, unless it holds a record (a lock of this tool's, by its bytes).
_PACKAGE_LOCKFILES = frozenset(
    (
        "uv.lock",
        "Pipfile.lock",
        "poetry.lock",
        "pdm.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lock",
        "Cargo.lock",
        "Gemfile.lock",
        "composer.lock",
        "flake.lock",
        "go.sum",
    )
)
_PACKAGE_LOCKFILES_FOLDED = frozenset(name.casefold() for name in _PACKAGE_LOCKFILES)

# The most bytes a file may hold that is no record, no document and none of a lock's
# own forms, and still be taken as a foreign lock, as the contract has it ("locked",
# garbage): a larger one is a data file.
_OTHER_FILE_MAX_BYTES = 4096


def _named_as_a_package_lockfile(name: str) -> bool:
    """True if a file's name is a package manager's lockfile's: the very name, or, where
    the system's names ignore case, the name in any case."""
    if _SEAMS.platform.names_fold_case:
        return name.casefold() in _PACKAGE_LOCKFILES_FOLDED
    return name in _PACKAGE_LOCKFILES


_BY_ITS_NAME = "name"


def _another_programs_file(look: _Look) -> str:
    """Why ``look`` is at another program's file, no lock ("": it is a lock): its name,
    a package manager's lockfile's (_BY_ITS_NAME); its form, a document (_FORM_DOCUMENT);
    or its bytes, too many to be a lock (_FORM_BYTES). A record never is another
    program's; a server's value always is a lock's."""
    record = look.record
    if look.file_name is None or (record is not None and record.form == _FORM_RECORD):
        return ""
    if _named_as_a_package_lockfile(look.file_name):
        return _BY_ITS_NAME
    if record is None:
        return ""
    if record.form == _FORM_DOCUMENT:
        return _FORM_DOCUMENT
    large = record.form == _FORM_BYTES and record.size > _OTHER_FILE_MAX_BYTES
    return _FORM_BYTES if large else ""


def _left_out(lock: str, look: _Look) -> bool:
    """True if a listing leaves out ``lock``, a file named as a lock is but another
    program's (uv.lock, Pipfile.lock), and says so."""
    found = look.record is not None and lock.endswith(_LOCK_NAME_SUFFIX)
    return found and bool(_another_programs_file(look))


def _listed(lock: str, look: _Look, line: list[_Place]) -> bool:
    """True if a listing shows the lock ``lock`` that ``look`` saw, whose live line is
    ``line``: a record this tool wrote (a JSON object naming an owner); anything else at
    a name ending in ``.lock``, which acquire would refuse or replace (an empty file,
    foreign bytes, an older version's PID and time); or, with none, waiters in line. A
    store's other values are no locks, nor another program's file (uv.lock)."""
    record = look.record or look.last
    if record is None or _another_programs_file(look):
        return bool(line)
    return record.owner is not None or lock.endswith(_LOCK_NAME_SUFFIX) or bool(line)


# --------------------------------------------------------------------------------------
# src/skf_run_lock/outputs.py
# The outputs: each shape built once, with its message, status's report (which a listing
# gives for each lock too) among them. Every message names the lock and says what to do,
# in words safe to follow literally.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from typing import Literal


def _this_command() -> str:
    """The command that runs this very copy of the tool, to be followed literally: the
    installed command where the call came from it, else the installed package by the
    interpreter that has it, else the file itself: by ``uv run`` where the call ran
    under it (that machine's python3 may be older than 3.11, or missing), else by
    python3 (on Windows, which has no python3, by the interpreter)."""
    if __name__ == "skf_run_lock.outputs":
        return _installed_command() or f"{_SEAMS.platform.interpreter()} -m skf_run_lock"
    script = _quoted(os.path.abspath(__file__))
    if os.environ.get("UV") and _on_path("uv") is not None:
        return f"uv run {script}"
    return f"{_SEAMS.platform.script_runner()} {script}"


def _installed_command() -> str | None:
    """``skf-run-lock`` where this call came from that command and PATH finds the same
    one by that name, else its path; None for a call that did not come from it."""
    started = sys.argv[0] if sys.argv else ""
    if os.path.splitext(os.path.basename(started))[0] != "skf-run-lock":
        return None
    found = _on_path("skf-run-lock")
    try:
        if found is not None and os.path.samefile(found, started):
            return "skf-run-lock"
    except OSError:
        pass  # Windows may start it by a name that is not a file: its path then
    return _SEAMS.platform.runnable_path(os.path.abspath(started))


def _on_path(name: str) -> str | None:
    from shutil import which

    return which(name)


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _in_line_text(line: list[_Place]) -> str:
    """``; 2 runs wait in line, wf:sk:r first`` (empty if nobody waits)."""
    count = len(line)
    verb = "runs wait" if count > 1 else "run waits"
    return f"; {count} {verb} in line, {line[0].owner} first" if line else ""


def _minutes_for_output(holder_timeout: float) -> int | float:
    minutes = round(holder_timeout / 60, 4)
    return int(minutes) if minutes.is_integer() else minutes


def _lapses_at(place: _Place, now: float) -> str:
    """When ``place`` lapses unless its waiter beats again: _SEAMS.place_ttl_sec after its
    last beat (a server's expiry keeps it: at the latest that long from ``now``)."""
    beat = now if place.beat is None else place.beat
    return _stale_at(int(-(-beat // 1)), _SEAMS.place_ttl_sec)


def _maybe_the_callers_own(owner: str, holder: str | None) -> str:
    """What a refusal says first when ``holder``'s workflow and skill are ``owner``'s:
    it may be the caller's own run (an agent in a fresh shell that forgot its run id),
    which no advice to clear it must reach first."""
    if holder is None or holder.split(":")[:2] != owner.split(":")[:2]:
        return ""
    workflow_and_skill = ":".join(owner.split(":")[:2])
    return (
        f"This may be this run's own hold: if this run took it earlier, pass its full owner"
        f" (--owner {_quoted(holder)}) to keep it; if another run of {workflow_and_skill}"
        " is running, wait for it (--wait). "
    )


def _clear_advice(lock: str, holder: str | None, by_hand: str, empty: bool = False) -> str:
    """How to clear a lock whose run is gone, safe to follow literally (``empty``: the
    lock is an empty file, which flock(1) leaves)."""
    if holder is not None and _releasable(holder):
        command = f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(holder)}"
        return f"If that run is no longer active, clear it with: {command}"
    advice = (
        "No release can name this holder: wait until it goes stale, or, if no run is"
        f" active, {by_hand}"
    )
    if empty:
        advice += (
            "; an empty lock file is what flock(1) leaves: where no flock user shares"
            " this lock, --empty-is-stale (empty_is_stale=True) takes it at once"
        )
    return advice


def _whole_owner_needed(lock: str, owner: str) -> ValueError:
    """Why a release that names an owner without its run id does nothing, and where
    the whole owner is found."""
    status = f"{_this_command()} status --lock {_quoted(lock)}"
    return ValueError(
        f"release needs the whole owner with its run id (workflow:skill:run_id, as"
        f" acquire printed it), not {owner!r}: {status} --get held_by prints the holder's;"
        f" of a lock of several slots or shared holds, {status} lists every holder"
    )


def _whole_owner_to_check(owner: str) -> ValueError:
    """Why check refuses an owner without its run id: the parts it leaves out are one
    run's."""
    return ValueError(
        "check needs the whole owner with its run id (workflow:skill:run_id, as acquire"
        f" printed it), not {owner!r}: it leaves out that run's own parts; without an"
        " owner it names every run's"
    )


def _clear_all_advice(lock: str, holders: list[_Record], by_hand: str) -> str:
    """How to clear a lock held shared whose runs are all gone: a release of each
    holder (a few, then where the rest are listed), safe to follow literally."""
    names = [holder.owner for holder in holders]
    if not all(name is not None and _releasable(name) for name in names):
        return f"If none of these runs is active, {by_hand}"
    releases = [
        f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(name)}"
        for name in names[:3]
        if name is not None
    ]
    more = len(names) - len(releases)
    if more:
        status = f"{_this_command()} status --lock {_quoted(lock)}"
        releases.append(f"then the other {more} holders that {status} lists")
    return (
        f"It is free only once all {len(names)} are gone. If none of these runs is"
        f" active, clear each with: {'; '.join(releases)}. Never clear a run that is"
        " still active: it would go on as if it held the lock"
    )


def _holder_text(holder: str | None) -> str:
    return "a lock file that names no owner" if holder is None else holder


def _names_text(holders: list[_Record]) -> str:
    """``a:b:1, c:d:2 and 3 more``: a few holders by name, then a count."""
    names = [_holder_text(holder.owner) for holder in holders[:3]]
    more = len(holders) - len(names)
    if more:
        return f"{', '.join(names)} and {more} more"
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]


def _holds_text(record: _Record) -> str:
    """``; 2 of its 3 slots are held`` for a lock of several slots, ``; 2 runs hold it
    shared`` for one held shared, ``; 2 runs hold parts of it`` for one held in parts,
    else nothing."""
    held = len(_holders(record))
    if record.shared:
        return f"; {_runs_text(held)} {'holds' if held == 1 else 'hold'} it shared"
    if record.parted:
        return f"; {_runs_text(held)} {'holds' if held == 1 else 'hold'} parts of it"
    if record.slots == 1:
        return ""
    return f"; {held} of its {record.slots} slots {'is' if held == 1 else 'are'} held"


def _runs_text(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


def _acquired_result(hold: _Hold) -> AcquireResult:
    """The acquire output of ``hold``, carrying its fence beside the output's keys."""
    lock, owner, replaced, after = hold.lock, hold.owner, hold.replaced, hold.after
    kind = hold.kind
    what = {"shared": f"a shared hold on {lock}", "slots": f"a slot of {lock}"}.get(kind, lock)
    if hold.parts is not None:
        shared = "a shared hold on " if kind == "shared" else ""
        what = f"{shared}the parts {_parts_text(hold.parts)} of {lock}"
    done = f"renewed {what} for {owner}" if hold.renewed else f"acquired {what} for {owner}"
    if replaced is not None:
        holder = f"of {replaced.owner}" if replaced.owner else "file that named no owner"
        stale = {"shared": "stale shared hold", "slots": "stale slot"}.get(kind, "stale lock")
        done += f", {'dropping' if hold.renewed else 'replacing'} the {stale} {holder}"
    done += _holds_text(after)
    stale_at = _stale_at(hold.since, hold.holder_timeout)
    result: AcquireResult = {
        "acquired": True,
        "refreshed": hold.renewed,
        "lock": lock,
        "owner": owner,
        "run_id": hold.run_id,
        "held_by": owner,
        "held_since": _format_time(hold.since),
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(hold.holder_timeout),
        "stale_replaced": {"held_by": replaced.owner, "held_since": _format_time(replaced.since)}
        if replaced is not None
        else None,
        "message": f"{done}; it goes stale at {stale_at} unless renewed{_unfenced(hold.fence)}",
    }
    return _fenced(result, hold.fence)


def _acquire_output(taken: _Hold | AcquireResult) -> AcquireResult:
    """The acquire output of a take: its hold's, or the refusal's own."""
    return taken if isinstance(taken, dict) else _acquired_result(taken)


def _waited(result: AcquireResult, waited: float, wait: float) -> AcquireResult:
    """``result`` of a take that waited in line, its message saying how long it waited."""
    outcome = "after waiting" if result["acquired"] else "gave up after waiting"
    result["message"] = f"{outcome} {waited:.1f} s (of up to {wait:g} s): {result['message']}"
    return result


def _unfenced(fence: int | None) -> str:
    """What a take's message says of a hold it could give no fence."""
    if fence is not None:
        return ""
    return (
        "; it has no fence: the store's clock could not be read (a Redis user without"
        " TIME), or the lock shows the largest fence there is"
    )


def _refusal(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """What ``take``, which refused ``request`` at ``now``, tells: the acquire output
    (held, or its turn is another's: _refused_result); else its error, raised: LockLost
    for a renewal that found the hold lost, ValueError for another program's file, or a
    count or a kind that clash with the ones in force."""
    record = take.record
    if take.outcome == "lost":
        raise _lost(lock, take)
    if take.outcome == "theirs":
        raise ValueError(_another_programs_refusal(lock, take.look, take.theirs))
    if take.outcome in ("count", "kind"):
        assert record is not None
        if take.outcome == "kind":
            raise ValueError(_kind_refusal(lock, request.owner, take.shared))
        raise ValueError(_count_refusal(lock, take, request.slots))
    if take.outcome == "parts":
        raise ValueError(_parts_kept_refusal(lock, request, take))
    if take.outcome in ("grow", "full") or take.clash not in (None, (None, None)):
        return _parts_refused_result(lock, request, take, by_hand=by_hand, now=now)
    return _refused_result(lock, request, take, by_hand=by_hand, now=now)


def _part_text(part: str | None, whose: str) -> str:
    """A part as a refusal names it: ``whose`` part ("your", "its"), or the lock whole."""
    if part is not None:
        return f"{whose} part {_quoted(part)}"
    return "the whole lock you asked for" if whose == "your" else "the whole lock"


def _parts_text(parts: tuple[str, ...] | None) -> str:
    return "the whole lock" if parts is None else ", ".join(_quoted(p) for p in parts)


def _parts_refused_result(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """The acquire output when ``take`` refuses ``request`` by its parts: a live hold
    of another or a waiter ahead has a part that conflicts with one it asks ("held",
    "line"); a part its owner adds to its hold conflicts with another's ("grow",
    refused at once); or the record would grow too large ("full"). It names who is in
    the way and both parts."""
    owner, record = request.owner, take.record
    holder = take.blocker
    if holder is None and take.live:  # too many parts: the first live hold to go stale
        holder = take.live[0]
    ours, theirs = take.clash or (None, None)
    asked = _part_text(ours, "your")
    their = _part_text(theirs, "its")
    # Too many parts on a free lock names no holder: nothing was written.
    by = None if holder is None else _holder_text(holder.owner)
    held_since = None if holder is None else _format_time(holder.since)
    stale_at = None if holder is None else _stale_at(holder.since, take.holder_timeout)
    if take.outcome == "full":
        message = (
            f"lock {lock} holds too many parts: its record would pass"
            f" {_RECORD_MAX_BYTES // 1024} KiB, the most a lock's record may hold; nothing"
            " changed. Name fewer or wider parts (a folder for the files in it), or keep"
            " another part of the tree under another lock"
        )
    elif take.outcome == "grow":
        waiting = take.waiter is not None and take.blocker is None
        where = "waits in line for" if waiting else "holds"
        if waiting and take.waiter is not None:
            by, held_since = take.waiter.owner, _format_time(take.waiter.since)
            stale_at = _lapses_at(take.waiter, now)
        held = "the whole lock" if record is None else _parts_text(_held_parts(record, owner))
        message = (
            f"{owner} holds {held} of {lock} and asked for {_parts_text(request.parts)}: "
            f"{asked} conflicts with {their}, which {by} {where}; nothing changed. A hold"
            " takes more parts only while no other hold or waiter is in their way, and"
            " never waits for them (two that waited to grow would wait on each other):"
            f" ask again once {by} has let go (status --lock shows who holds what), or"
            " release your hold and wait in line for every part you need"
        )
    elif take.outcome == "held":
        assert holder is not None
        age = now - holder.since
        age_text = f"{_duration_text(age)} ago" if age >= 0 else "dated in the future by this clock"
        clear = _clear_advice(lock, holder.owner, by_hand, holder.empty)
        clear = _maybe_the_callers_own(owner, holder.owner) + clear
        message = (
            f"lock {lock} is held in a part that conflicts with yours: {by} holds {their}"
            f" (since {held_since}, {age_text}), and some path lies in it and in {asked};"
            f" it goes stale at {stale_at}{_in_line_text(take.others)}. {clear}"
        )
    else:
        waiter = take.waiter
        assert waiter is not None
        by, held_since = waiter.owner, _format_time(waiter.since)
        stale_at = _lapses_at(waiter, now)
        message = (
            f"lock {lock} has no live hold in your way, but {by} waits in line ahead for"
            f" {their}, which conflicts with {asked} (waiting since {held_since})"
            f"{_in_line_text(take.others)}. Wait in line for your turn (acquire --wait); a"
            " place in line lapses within seconds of its waiter's end"
        )
    return {
        "acquired": False,
        "refreshed": False,
        "lock": lock,
        "owner": owner,
        "run_id": request.run_id,
        "held_by": by,
        "held_since": held_since,
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(take.holder_timeout),
        "stale_replaced": None,
        "message": message,
    }


def _held_parts(record: _Record, owner: str) -> tuple[str, ...] | None:
    """The parts ``owner`` holds of ``record`` (None: the lock whole)."""
    return next((h.parts for h in _holders(record) if h.owner == owner), None)


def _parts_kept_refusal(lock: str, request: _Request, take: _Take) -> str:
    """Why run, held() or a session, which keep the hold their owner has as it is, may
    not name a part it does not hold."""
    record = take.record
    held = None if record is None else _held_parts(record, request.owner)
    part, _ = take.clash or (None, None)
    return (
        f"{request.owner} holds {_parts_text(held)} of {lock}, and the part {_quoted(part or '')}"
        " is not among them: run, held() and a session keep the hold an owner has as it"
        " is, and never change its parts; name parts it holds, or none, or change its"
        " parts first with acquire --part"
    )


def _refused_result(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """The acquire output when ``take`` refuses ``request`` (held, or its turn is
    another's): of several slots or shared holds, the holder whose hold goes stale
    first is named; a shared call waits behind the first exclusive waiter, any other
    behind the first waiter."""
    owner, run_id, record, shared = request.owner, request.run_id, take.record, take.shared
    held = take.outcome == "held"
    several = record is not None and record.holders is not None
    live, waiter, holder, line = take.live, take.waiter, take.blocker, take.others
    assert holder is not None
    holder_timeout = take.holder_timeout
    held_since = _format_time(holder.since)
    stale_at = _stale_at(holder.since, holder_timeout)
    if waiter is not None and not held:
        stale_at = _lapses_at(waiter, now)
    if held:
        age = now - holder.since
        age_text = f"{_duration_text(age)} ago" if age >= 0 else "dated in the future by this clock"
        clear = _clear_advice(lock, holder.owner, by_hand, holder.empty)
        clear = _maybe_the_callers_own(owner, holder.owner) + clear
        if several:
            assert record is not None
            if record.shared:  # a slot frees with one release; a shared lock with all
                clear = _clear_all_advice(lock, live, by_hand)
            how = (
                f"held shared by {_runs_text(len(live))},"
                if record.shared
                else f"held in all {record.slots} of its slots, by"
            )
            message = (
                f"lock {lock} is {how} {_names_text(live)}; the first to go stale is"
                f" {_holder_text(holder.owner)}'s (since {held_since}, {age_text}), at"
                f" {stale_at}{_in_line_text(line)}. {clear}"
            )
        else:
            how = "held exclusively by" if shared else "held by"
            message = (
                f"lock {lock} is {how} {_holder_text(holder.owner)} since {held_since}"
                f" ({age_text}); it goes stale at {stale_at}{_in_line_text(line)}. {clear}"
            )
    elif shared:
        state = f"held shared by {_runs_text(len(live))}" if live else "free"
        message = (
            f"lock {lock} is {state}, but {holder.owner} waits in line ahead for an"
            f" exclusive hold (waiting since {held_since}), and shared holds come after"
            f" it{_in_line_text(line)}. Wait in line for your turn (acquire --shared"
            " --wait); a place in line lapses within seconds of its waiter's end"
        )
    else:
        state = "free" if record is None else "stale"
        if several:
            state = "free or stale"
            what = f"lock {lock} has a slot that is {state}"
        else:
            what = f"lock {lock} is {state}"
        message = (
            f"{what}, but it goes to the"
            f" first run waiting in line{_in_line_text(line)} (waiting since {held_since})."
            " Wait in line for your turn (acquire --wait); a place in line lapses within"
            " seconds of its waiter's end"
        )
    return {
        "acquired": False,
        "refreshed": False,
        "lock": lock,
        "owner": owner,
        "run_id": run_id,
        "held_by": holder.owner,
        "held_since": held_since,
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(holder_timeout),
        "stale_replaced": None,
        "message": message,
    }


def _lost(lock: str, take: _Take) -> LockLost:
    """Why a renewal finds its hold lost, as ``take`` found it."""
    record = take.record
    held_by = held_since = None
    if record is not None and record.holders is not None:
        # Of several slots or shared holds: this owner's is gone (cleared, or stale).
        hold = "shared hold" if record.shared else "slot"
        why = f"its {hold} was released or replaced, or went stale"
        if record.parted:
            why = "its parts were released or changed by another call of its owner, or went stale"
    elif record is None:
        why = "it was cleared, and no run holds it now"
    else:
        held_by, named = record.owner, _holder_text(record.owner)
        held_since = _format_time(record.since)
        why = f"{named} holds it since {held_since}"
        if take.stale:
            stale_at = _stale_at(record.since, take.holder_timeout)
            why = f"it went stale at {stale_at} before it was renewed"
    return LockLost(lock, held_by, held_since, why)


def _release_result(
    lock: str, owner: str, record: _Record | None, *, freed: bool = False, left: str = ""
) -> ReleaseResult:
    """``record``: the lock's (``freed``: the slot the release freed); ``left``: what is
    left of a lock of several slots."""
    other: _Record | None = None
    if record is None:
        reason: Literal["absent", "not-owner"] | None = "absent"
        message = f"no lock at {lock}; nothing to release"
    elif freed or (record.owner == owner and record.holders is None):
        reason = None
        message = f"released {lock} held by {owner}{left}"
    else:
        reason = "not-owner"
        holders = _holders(record)
        other = _first_to_go(holders, 0.0) if holders else record
        message = f"left {lock} in place: it is held by {_holder_text(other.owner)}, not {owner}"
        if record.holders is not None:
            holds = "shared holds" if record.shared else f"{record.slots} slots"
            message = f"left {lock} in place: {owner} holds none of its {holds}"
            if holders:
                message += f" (held by {_names_text(sorted(holders, key=lambda h: h.since))})"
    return {
        "released": reason is None,
        "reason": reason,
        "lock": lock,
        "owner": owner,
        "held_by": None if other is None else other.owner,
        "held_since": None if other is None else _format_time(other.since),
        "message": message,
    }


# --- Errors


def _describe_os_error(exc: OSError) -> str:
    """An OS error in words, with the file it names."""
    text = exc.strerror or str(exc)
    if exc.filename:
        text += f": {exc.filename}"
    return text


def _fail(message: str) -> None:
    """Write the one JSON error line on stderr."""
    line = json.dumps({"status": "error", "message": " ".join(message.split())})
    sys.stderr.write(line + "\n")


# --- status's report, which a listing gives for each lock too


def _status_result(lock: str, standing: _Standing, line: list[_Place], now: float) -> StatusResult:
    """status's report of ``standing``, the lock's at ``now``, with its live ``line``."""
    slots, live, shown = standing.slots, standing.live, standing.shown
    holder_timeout = standing.holder_timeout
    case = standing.case
    message = f"no lock at {lock}; it is free"
    if case == "all held":
        assert shown is not None
        how = (
            f"held shared by {_runs_text(len(live))},"
            if standing.mode == "shared"
            else f"held in all {slots} of its slots, by"
        )
        if standing.parted:
            how = f"held in parts by {_runs_text(len(live))},"
        message = (
            f"{lock} is {how} {_names_text(live)}; the first"
            f" to go stale is {_holder_text(shown.owner)}'s, at"
            f" {_stale_at(shown.since, holder_timeout)}"
        )
    elif case == "all shared stale":
        assert shown is not None
        message = (
            f"{lock} was held {'in parts' if standing.parted else 'shared'}, but every"
            " hold went stale, the last"
            f" {_holder_text(shown.owner)}'s at {_stale_at(shown.since, holder_timeout)}, so the"
            " next acquire takes it"
        )
    elif case == "one":
        assert shown is not None
        stale_at = _stale_at(shown.since, holder_timeout)
        then = (
            f"went stale at {stale_at}, so the next acquire takes it"
            if standing.state == "stale"
            else f"goes stale at {stale_at}"
        )
        since = _format_time(shown.since)
        message = f"{lock} is held by {_holder_text(shown.owner)} since {since}; it {then}"
    elif case == "slot stale":
        gone = standing.gone
        assert gone is not None
        message = (
            f"{lock} has no free slot of its {slots}, but {_holder_text(gone.owner)}'s went"
            f" stale at {_stale_at(gone.since, standing.timeout_of(gone))},"
            " so the next acquire takes it"
        )
    elif case == "some held":
        message = (
            f"{lock} has {slots - len(live)} of its {slots} slots free; held by {_names_text(live)}"
        )
    elif case == "no slot held":
        message = f"no slot of {lock} is held; it is free (slots: {slots})"
    return {
        "state": standing.state,
        "lock": lock,
        "held_by": None if shown is None else shown.owner,
        "held_since": None if shown is None else _format_time(shown.since),
        "stale_at": None if shown is None else _stale_at(shown.since, holder_timeout),
        "age_seconds": None if shown is None else int((now - shown.since) // 1),
        "stale_after_minutes": _minutes_for_output(holder_timeout),
        "waiting": [{"owner": p.owner, "since": _format_time(p.since)} for p in line],
        "slots": slots,
        "holders": [
            {
                "owner": holder.owner,
                "since": _format_time(holder.since),
                "stale_at": _stale_at(holder.since, standing.timeout_of(holder)),
                "fence": holder.fence,
                "parts": None if holder.parts is None else list(holder.parts),
            }
            for holder in standing.holders
        ],
        "mode": standing.mode,
        "fence": standing.fence,
        "message": message + _in_line_text(line),
    }


def _check_result(
    lock: str,
    reserved: list[tuple[str, _Record, str | None]],
    paths: tuple[str, ...],
    owner: str | None,
    stale_after: float,
) -> CheckResult:
    """check's answer: which of ``paths`` lie in a part of ``lock`` held by another
    than ``owner`` (None: by anyone), as ``reserved`` gives them (path, holder, part;
    ``stale_after`` judges a holder without a timeout of its own), the first few named
    in its message."""
    whom = "any run" if owner is None else f"a run other than {owner}"
    entries: list[Reservation] = [
        {
            "path": path,
            "held_by": holder.owner,
            "part": part,
            "kind": "shared" if holder.shared else "exclusive",
            "stale_at": _stale_at(holder.since, _deciding_timeout(holder, stale_after)),
        }
        for path, holder, part in reserved
    ]
    if not paths:
        message = f"no path was given, so none lies in a part of {lock} held by {whom}"
    elif not entries and len(paths) == 1:
        message = f"the path {_quoted(paths[0])} lies in no part of {lock} held by {whom}"
    elif not entries:
        message = f"none of the {len(paths)} paths lies in a part of {lock} held by {whom}"
    else:
        count = len(dict.fromkeys(entry["path"] for entry in entries))
        named = [_reservation_text(entry) for entry in entries[:3]]
        if len(entries) > 3:
            named.append(f"and {len(entries) - 3} more, which reserved lists")
        status = f"{_this_command()} status --lock {_quoted(lock)}"
        message = (
            f"{count} of the {len(paths)} paths {'lies' if count == 1 else 'lie'} in parts of"
            f" {lock} held by {whom}: {'; '.join(named)}. Leave them unwritten until those"
            f" holds end (released, or stale at their stale_at); {status} shows who holds"
            " what"
        )
    return {"free": not entries, "reserved": entries, "message": message}


def _reservation_text(entry: Reservation) -> str:
    """``'src/a.py' in wf:a:1's part 'src/**'``: a path, and the hold it lies in."""
    by, part, path = _holder_text(entry["held_by"]), entry["part"], _quoted(entry["path"])
    shared = ", shared" if entry["kind"] == "shared" else ""
    if part is None:
        return f"{path} in the whole lock, held by {by}{shared}"
    return f"{path} in {by}'s part {_quoted(part)}{shared}"


def _count_refusal(lock: str, take: _Take, slots: int) -> str:
    """Why a call naming ``slots`` (or a shared hold: ``take.shared``) is refused while
    the count of slots of the lock ``take`` found, or its shared holds, are in force."""
    record, shared = take.record, take.shared
    assert record is not None
    names = _names_text(take.live)
    if record.shared:
        return (
            f"lock {lock} is held shared (by {names}), and shared holds have no slots: ask"
            " for a shared hold with --shared (shared=True), or for the lock alone with no"
            " --slots; slots can be asked for once no shared hold is live"
        )
    in_force = record.slots
    if shared:
        return (
            f"lock {lock} has {in_force} slots while any is held (by {names}), and a slot"
            f" is never shared: ask for one with --slots {in_force} (slots={in_force});"
            " shared holds can be asked for once no slot is held"
        )
    ask = "no --slots (or --slots 1; slots=1)" if in_force == 1 else f"--slots {in_force}"
    if in_force > 1:
        ask += f" (slots={in_force})"
    return (
        f"lock {lock} has {in_force} slot{'s' if in_force > 1 else ''} while any is held"
        f" (by {names}), not {slots}: ask for it with {ask}; the count changes only once no"
        " slot is held"
    )


def _another_programs_text(look: _Look, why: str) -> str:
    """What the lock path is, another program's file by ``why`` (as the decision gave
    it), in words: by its name (there or not), or by its size and form."""
    if why == _BY_ITS_NAME:
        return f"names another program's file ({look.file_name}: a package manager's lockfile)"
    size = 0 if look.record is None else look.record.size
    form = ", a JSON or TOML document" if why == _FORM_DOCUMENT else ""
    return f"is a file of another program's ({size} bytes{form}, no lock record)"


def _another_programs_refusal(lock: str, look: _Look, why: str) -> str:
    """Why a file of another program's is no lock (acquire and status say it alike)."""
    return (
        f"the lock path {lock} {_another_programs_text(look, why)}: a lock needs a file"
        " of its own; give --lock a path no other program uses"
    )


def _another_programs_left(lock: str, owner: str, look: _Look, why: str) -> ReleaseResult:
    """A release's output for a file of another program's, which it leaves as it is."""
    return {
        "released": False,
        "reason": "not-owner",
        "lock": lock,
        "owner": owner,
        "held_by": None,
        "held_since": None,
        "message": f"left {lock} in place: the path {_another_programs_text(look, why)};"
        " a release never deletes another program's file",
    }


def _kind_refusal(lock: str, owner: str, shared: bool) -> str:
    """Why ``owner``, which holds the lock one way, may not hold it the other way:
    a hold never changes kind (two shared holders that both waited to turn exclusive
    would wait for each other forever)."""
    has = "the lock" if shared else "a shared hold on"
    asks = "a shared hold" if shared else "the lock exclusively"
    release = f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(owner)}"
    keep = ""
    if not shared:
        # run and held() never renew a shared hold as exclusive: their step would run
        # beside readers.
        keep = "; to keep it shared, add --shared (held(): shared=True)"
    return (
        f"{owner} holds {has} {lock} and asked for {asks}: a hold never changes kind{keep};"
        f" to change it, release it first ({release}), then ask again"
    )


# --------------------------------------------------------------------------------------
# src/skf_run_lock/store_protocol.py
# The store protocol: what the lock calls ask of a store. A store reads, applies a
# change atomically against what it read, keeps the line of waiters, and waits; it decides
# nothing (the decisions are functions of what it read). Every store class is checked
# against this Protocol by mypy: each store module's opener returns a ``_Store``, and
# its surveyor (the locks under a place, for a listing) a ``_Survey``.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from typing import Protocol


    # What a store's survey of a place gives a listing: the place as shown, each lock
    # found there (its name as a lock's address, and a look at it, as ``look`` would
    # give), and a note on the place for the listing's message ("": none; a folder that
    # does not exist says so). A survey only reads: no guard, no change, no waiting.
    _Survey = tuple[str, list[tuple[str, _Look]], str]

    class _Store(Protocol):
        """One lock in one store, for one call."""

        lock: str
        # Set by a call that waits in line: a server that refuses connections is tried
        # again until the step's deadline, not given up after a moment.
        patient: bool
        # Set by a call that must be done by a moment (``_SEAMS.clock``), a renewal whose
        # holder must stop then: no request of the call waits on the network past it,
        # however long a step may take (inf: each step's own deadline alone).
        call_deadline: float
        # True where a hold ends by its record's time, written in whole seconds (a
        # file): others may judge it stale up to a second before the take began.
        dated_in_seconds: bool

        def look(self, upto: str | None = None) -> _Look:
            """The lock as it is now, with its line, outside any change. ``upto``, a
            waiter's ticket: the line may end at that waiter's place, leaving out the
            places behind it, which its waiting never needs (a store may give them)."""

        def change(self, create: bool) -> _Store:
            """The store, to be entered for one change (a file: under its guard;
            ``create``: the lock's folder may be made)."""

        def __enter__(self) -> _Store: ...

        def __exit__(self, *exc_info: object) -> None: ...

        def read(self, line: bool = True) -> _Look:
            """Within a change: what the change must find unchanged to apply (``line``
            False: the change needs no line, a release, and a store may leave it out).
            A store may give, once a call, what its own last change left (``remembered``:
            its apply compares all of it); a call whose decision on it would change
            nothing reads again, since only a change proves it."""

        def apply(
            self,
            look: _Look,
            record: _Record | None,
            owner: str,
            place: _Place | None = None,
        ) -> bool:
            """Write ``record`` (None: delete it), ``place`` leaving the line in the same
            change, if the lock is still as ``look`` found it: False if not. A server
            marks each new holder of a lock of several slots (``mark``) so that its slot
            ends on the server's clock, and keeps the record while any slot may live."""

        def join(self, look: _Look, place: _Place, now: float) -> None:
            """Put ``place`` at the end of the line unless it is in it."""

        def prune(self, look: _Look, now: float) -> None:
            """Drop the places of ``look``'s line whose waiters are gone."""

        def beat(self, place: _Place) -> bool:
            """Show ``place``'s waiter alive: False if its place had lapsed."""

        def leave(self, place: _Place) -> None:
            """Take ``place`` out of the line."""

        def wait(
            self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int
        ) -> bool:
            """Up to ``left`` s until what ``place``'s waiter waits on changes (True): a
            place ``ahead`` of it ends (those it waits to leave, the last just ahead of
            it), or (``away`` 0: it takes the next slot that frees) a slot frees or its
            server ends it. ``away``: how many places must leave the line before it is
            among the first N (N slots), which take the slots that free, or, shared, before
            no exclusive waiter is ahead of it."""

        def vouches(self, look: _Look) -> bool:
            """Whether a wait that just ended unwoken saw every change since ``look`` to
            what it waits on (a watch that streams all of them): then the waiter needs
            no new look to go on waiting. False where a wait can miss one (a place
            ahead that lapsed, shown only by a look)."""

        def identity(self) -> tuple[object, ...]:
            """What names this lock however its name is spelled: two spellings of one
            lock give the same (a session matches its holds by it). Asked of no call."""

        def by_hand(self) -> str:
            """How a person clears the lock by hand, as a command to follow literally."""

        def close(self) -> None:
            """Let go of whatever the store holds (connections, a guard)."""


# --------------------------------------------------------------------------------------
# src/skf_run_lock/guard.py
# The guard: a file beside a lock on which each call takes an exclusive, non-blocking
# OS lock while it reads and changes the lock. How it locks, and what differs between
# POSIX and Windows, are the platform's (platforms.py): POSIX removes the guard while
# still holding it; Windows cannot, and retries what a file that another process has open
# refuses for a moment.
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# src/skf_run_lock/file_store.py
# The file store: a lock kept in a file, changed only under its guard; a record is
# written to a temp file, flushed, and renamed over the lock, so no reader ever sees half
# of one. The line of waiters is a file beside the lock, and a waiter polls.
# --------------------------------------------------------------------------------------

_LINE_SUFFIX = ".skf-line"  # a file lock's line of waiters
# The line file is read whole, up to this: about 600 waiters that each name 100 parts
# of 255 characters. A place that would pass it never joins (a reader would not see it).
_LINE_MAX_BYTES = 16 * 1024 * 1024
_TEMP_NAME = re.compile(r"(?:\.skf-line)?\.skf-[0-9a-f]{8}-tmp")
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _COMMON_FLAGS
# A line file opened to append a place to: a FIFO put in its stead fails at once
# (nobody reads it) instead of blocking the open.
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0) | _COMMON_FLAGS
# Temp names tried before giving up. The first name is taken only by a file a dead call
# left (made under the guard), so a few random names always do; tempfile, which shares
# its folder with strangers, tries TMP_MAX (238,328) names.
_TEMP_TRIES = 100
# How often a waiter looks at the lock file, by how many places must leave the line
# before its turn: a waiter whose turn it is (it takes the next slot that frees) most
# often, one place away next, and so on (a lock of N slots serves the first N at once).
_FILE_POLL_SEC = (0.002, 0.005, 0.025, 0.1)
# access() asks as the process's effective user, as open() does, where the system can:
# asked as the real user, a process whose real user may not search the lock's folder
# (setuid, a changed user) saw no line, and rewrote it with its own place alone.
_ACCESS_AS_OPEN = os.access in os.supports_effective_ids
# A waiter this far from its turn polls the slowest: each look it makes reads the whole
# line, and with many waiters most of a line's looks were these (one per change each).
_FAR_BACK = 8


def _lock_path(lock: str | os.PathLike[str]) -> str:
    """The absolute path of a lock; ValueError for one that cannot be a lock file."""

    path = os.fspath(lock)
    if not isinstance(path, str):
        raise ValueError(f"the lock path must be text, not {path!r}")
    if not path:
        raise ValueError("the lock path is empty; give the path of a file")
    if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)):
        raise ValueError(f"the lock path {path} ends with a separator; give the path of a file")
    name = os.path.basename(path)
    if name.endswith((_GUARD_SUFFIX, _LINE_SUFFIX)) or _TEMP_NAME.fullmatch(name[-17:]):
        raise ValueError(
            f"the lock name {name} is reserved for a lock's own guard, line or temp files;"
            " choose another name"
        )
    if path.startswith("~"):
        path = os.path.expanduser(path)
    # Before abspath, which turns CON into \\.\CON and drops a dot that ends a name.
    _SEAMS.platform.refuse_reserved_names(path)
    return os.path.abspath(path)


# The longest name a lock's own files add to its name (a temp file of its line), and
# the longest name a filesystem keeps (255 on ext4, APFS and NTFS alike).
_LONGEST_SUFFIX = len(_LINE_SUFFIX + ".skf-00000000-tmp")
_NAME_MAX = 255


def _refuse_names_too_long(lock: str) -> None:
    """OSError for a lock whose own files' names would be longer than a filesystem
    keeps: it would fail later with a cause (Windows: "no such file") that misleads."""
    name = os.path.basename(lock)
    if len(name) + _LONGEST_SUFFIX > _NAME_MAX:
        raise OSError(
            errno.ENAMETOOLONG,
            f"the lock name is too long: {len(name)} characters, to which the files a lock"
            f" keeps beside it add {_LONGEST_SUFFIX}, over the {_NAME_MAX} a filesystem"
            f" allows in a name; give a name of at most {_NAME_MAX - _LONGEST_SUFFIX}",
        )


# The paths of locks checked, each with its file's name and its line's path, by the
# path given and the platform's rules that checked it: a process names the same locks
# call after call. Absolute paths alone: a relative one moves with the working folder.
_NAMES_CHECKED: dict[tuple[str, object], tuple[str, str, str]] = {}


def _names_of(lock: str | os.PathLike[str]) -> tuple[str, str, str]:
    """A lock's absolute path, its file's name and its line's path; ValueError or
    OSError, as _lock_path and _refuse_names_too_long raise, for one that cannot be."""
    given = os.fspath(lock)
    key = (given, _SEAMS.platform)
    if isinstance(given, str) and key in _NAMES_CHECKED:
        return _NAMES_CHECKED[key]
    path = _lock_path(given)
    _refuse_names_too_long(path)
    names = (path, os.path.basename(path), path + _LINE_SUFFIX)
    if os.path.isabs(given):
        if len(_NAMES_CHECKED) >= _REMEMBERED_MAX:
            _NAMES_CHECKED.clear()  # a long-lived process keeps it small
        _NAMES_CHECKED[key] = names
    return names


def _remove_orphan_temps(lock: str) -> None:
    """Delete the lock's temp files (made under the guard: a dead call's)."""
    folder, base = os.path.split(lock)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(base) and _TEMP_NAME.fullmatch(name, len(base)):
            _remove_quietly(os.path.join(folder, name))


_FILE_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


def _folder_error(lock: str) -> ValueError:
    return ValueError(f"the lock path {lock} is a folder; give the path of a file")


def _refuse_unless_regular(lock: str, mode: int) -> None:
    """ValueError for a folder's ``mode``, OSError for any other not a regular file's."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise _folder_error(lock)
    kind = _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
    raise OSError(errno.EINVAL, f"the lock path {lock} is {kind}; a lock must be a regular file")


def _read_record(lock: str) -> _Record | None:
    """What the lock file says (None: no file). A link, never followed, names no owner.
    On Windows a file being replaced or deleted refuses to open for a moment."""
    try:
        fd = _despite_sharing(lambda: os.open(lock, _READ_FLAGS), lock)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return _record_of_unopened(lock, exc)
    try:
        info = os.fstat(fd)
        _refuse_unless_regular(lock, info.st_mode)
        # One read: a regular file gives all it has at once.
        data = os.read(fd, _RECORD_MAX_BYTES + 1)
    finally:
        os.close(fd)
    record = _parse_record(data, int(info.st_mtime // 1))
    record.size = info.st_size  # its whole size, which a read of 64 KiB does not tell
    return record


def _record_of_unopened(lock: str, exc: OSError) -> _Record:
    try:
        info = os.lstat(lock)
    except OSError:
        raise exc from None
    if stat.S_ISLNK(info.st_mode):
        return _Record(None, int(info.st_mtime // 1))
    _refuse_unless_regular(lock, info.st_mode)
    raise exc


def _random_temp(lock: str) -> str:
    """A temp name beside ``lock`` that no other call is likely to pick."""
    return f"{lock}.skf-{os.urandom(4).hex()}-tmp"


def _create_temp(lock: str) -> tuple[int, str]:
    """Create the temp file exclusively (one there was left by a dead call)."""
    path = f"{lock}.skf-00000000-tmp"
    for _ in range(_TEMP_TRIES):
        try:
            return os.open(path, _TEMP_FLAGS, 0o666), path
        except FileExistsError:
            try:
                os.unlink(path)
            except OSError:
                path = _random_temp(lock)
        except PermissionError as exc:
            if not _SEAMS.platform.refused_by_sharing(exc) or not _still_listed(path):
                raise _not_writable_error(os.path.dirname(lock), exc) from None
            # Windows: a temp file another program still has open is being deleted,
            # and its name refuses to be made again until that program closes it.
            path = _random_temp(lock)
        except BaseException as exc:
            # An interrupt after the file was made: ours, under the guard.
            _remove_quietly(path)
            if isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE:
                raise _not_writable_error(os.path.dirname(lock), exc) from None
            raise
    raise FileExistsError(errno.EEXIST, f"no free temp file name beside {lock}")


def _still_listed(path: str) -> bool:
    """Whether ``path``'s folder lists it (Windows lists a file being deleted, which
    refuses every open, lstat included, until the last program that has it open closes it)."""
    folder, name = os.path.split(path)
    try:
        return name in os.listdir(folder)
    except OSError:
        return False


def _write_record(lock: str, data: bytes, durable: bool = True) -> None:
    """Replace the lock file with ``data`` atomically: temp file, fsync, rename."""
    fd, temp = _create_temp(lock)
    try:
        try:
            written = os.write(fd, data)  # all of it, but for a full disk or a signal
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        _despite_sharing(lambda: os.replace(temp, lock), lock)
    except BaseException:
        _remove_quietly(temp)
        raise


def _unlink_freeing_the_name(path: str, lock: str) -> None:
    """Delete ``path`` (the lock file or its line) so that its name is free at once:
    where a deleted file's name stays while another program has it open (Windows), by
    renaming it away first."""
    if not _SEAMS.platform.delete_keeps_the_name:  # POSIX frees the name at unlink
        os.unlink(path)
        return
    away = _random_temp(lock)
    os.replace(path, away)
    # Deleted once the program that has it open closes it. If it cannot be deleted at
    # all, it stays under a temp file's name, which no lock, listing or line reads.
    _remove_quietly(away)


def _delete_record(lock: str) -> None:
    try:
        _despite_sharing(lambda: _unlink_freeing_the_name(lock, lock), lock)
    except _SharingRefused:
        raise
    except OSError as exc:
        if exc.errno in _NOT_WRITABLE:
            raise _not_writable_error(os.path.dirname(lock), exc) from None
        raise


# A place's fields as a line file keeps them: ticket, owner, since, timeout, its last
# beat, whether it waits for a shared hold, and for which parts (None: the lock whole).
_PlaceFields = tuple[str, str, int, float, float, bool, tuple[str, ...] | None]

# What each text line of a line file gave (its place's fields, or None: not a place),
# and the text that keeps each place's fields: a waiter reads the line (up to its own
# place) at every look and writes it at every change, and a place read is written back
# as the text it was read from.
_PARSED: dict[bytes, _PlaceFields | None] = {}
_WRITTEN: dict[_PlaceFields, bytes] = {}


# How long a take that gave its floor as a fence sleeps between looks at the clock.
_CLOCK_TICK_POLL_SEC = 0.0005


def _clock_past(floor_us: int | None) -> None:
    """Wait, still under the guard, until this machine's clock in microseconds passes
    ``floor_us``, which a take just gave as its fence: the next take reads the clock
    after this one, so its floor is larger however coarsely the clock ticks (Windows'
    time.time_ns before Python 3.13 moves every 15.6 ms; elsewhere it has moved by now)."""
    while floor_us is not None and time.time_ns() // 1000 <= floor_us:
        time.sleep(_CLOCK_TICK_POLL_SEC)


def _parse_line(data: bytes, upto: str | None = None) -> list[_Place]:
    """The valid places of a line file (a JSON object a line), up to the place whose
    ticket is ``upto`` if it is there. Never raises."""
    places = []
    for text in data.split(b"\n"):
        # Most places are as the last look saw them: one lookup, no calls (at 64
        # waiters, parsing the line was a quarter of all their CPU).
        if text in _PARSED:
            fields = _PARSED[text]
        else:
            fields = _remembered(_PARSED, text, _place_fields)
            if fields is not None:
                _remember(_WRITTEN, fields, text + b"\n")
        if fields is not None:
            ticket, owner, since, stale_after, beat, shared, parts = fields
            places.append(
                _Place(ticket, owner, since, stale_after, beat, shared=shared, parts=parts)
            )
            if fields[0] == upto:
                break  # the places behind a waiter: most of the new ones in a busy line
    return places


def _place_fields(text: bytes) -> _PlaceFields | None:
    """The fields of the place one text line of a line file gives; None if not one."""
    try:
        entry = json.loads(text)
        ticket, owner, since = entry["ticket"], entry["owner"], _time_of(entry["since"])
        timeout, beat = _holder_timeout(entry["stale_after_seconds"]), entry["beat"]
        shared = entry.get("shared") is True
        parts = _parts_read(entry.get("parts"))
    except (ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None
    if (
        isinstance(ticket, str)
        and isinstance(owner, str)
        and owner
        and since is not None
        and timeout is not None
        and isinstance(beat, int | float)
        and abs(beat) < 1e12
    ):
        return ticket, owner, since, timeout, float(beat), shared, parts
    return None


def _line_bytes(places: list[_Place]) -> bytes:
    texts = []
    for p in places:
        beat = round(p.beat or 0.0, 3)
        fields = (p.ticket, p.owner, p.since, p.stale_after, beat, p.shared, p.parts)
        texts.append(_remembered(_WRITTEN, fields, _place_text))
    return b"".join(texts)


def _place_text(fields: _PlaceFields) -> bytes:
    """One place as a text line of a line file (a shared waiter's, or one for parts,
    says so)."""
    ticket, owner, since, stale_after, beat, shared, parts = fields
    entry: dict[str, object] = {
        "ticket": ticket,
        "owner": owner,
        "since": _format_time(since),
        "stale_after_seconds": stale_after,
        "beat": beat,
    }
    if shared:
        entry["shared"] = True
    if parts is not None:
        entry["parts"] = list(parts)
    return (json.dumps(entry) + "\n").encode("ascii")


def _read_line(path: str, upto: str | None = None) -> list[_Place] | None:
    """The places in the line file, up to ``upto``'s (None: no file; unreadable: none)."""
    if not os.access(path, os.F_OK, effective_ids=_ACCESS_AS_OPEN):
        # Most locks have no line: asked so, the system answers without the error an
        # open raises, which cost a pair of calls 3 us.
        return None
    try:
        fd = _despite_sharing(lambda: os.open(path, _READ_FLAGS), path)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        # Places may carry parts, so a line can outgrow a record: read it whole.
        want = min(max(info.st_size, _RECORD_MAX_BYTES), _LINE_MAX_BYTES)
        chunks: list[bytes] = []
        while want > 0 and (chunk := os.read(fd, want)):
            chunks.append(chunk)
            want -= len(chunk)
        data = b"".join(chunks)
    except OSError:
        return []
    finally:
        os.close(fd)
    return _parse_line(data, upto)


def _appended(path: str, text: bytes, size: int) -> bool:
    """Whether ``text`` (whole places) was appended to the line file at ``path``. Only
    to a file of ``size`` bytes, the places the change read in it: a file that
    holds anything else (the torn text of an append a crash cut short, text that is
    no place) is written anew by the caller, which drops it. A write cut short here
    is written over the same way. Under the guard no other change writes the line,
    and a reader without it that reads a place half appended passes over it, as over
    any text that is not a place."""
    try:
        fd = os.open(path, _APPEND_FLAGS)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return False
        return os.write(fd, text) == len(text)
    except OSError:
        return False
    finally:
        os.close(fd)


def _signature(path: str) -> tuple[int, int, int] | None:
    """What changes whenever the file at ``path`` changes: its inode, time and size
    (None: no such file)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


class _FileSeen:
    """What a look at a file lock saw: the lock file's signature and the line file's."""

    __slots__ = ("line", "lock")

    def __init__(self, lock: str, line: str) -> None:
        self.lock = _signature(lock)
        self.line = _signature(line)


def _file_seen(look: _Look) -> _FileSeen:
    """What ``look``, a file store's, saw."""
    assert isinstance(look.seen, _FileSeen), "a look of another store"
    return look.seen


class _FileStore:
    """A lock kept in a file, changed under its guard; its line of waiters beside it."""

    patient = False  # a file has no server to refuse a call: waiting or not, the same
    call_deadline = float("inf")  # no network: the guard's wait ends no later
    dated_in_seconds = True  # a hold ends by its record's time, in whole seconds

    def __init__(self, lock: str | os.PathLike[str]) -> None:
        self.lock, self.file_name, self.line = _names_of(lock)
        self.guard: _Guard | None = None  # the change's
        self.held = False
        self.line_file = False  # the change found a line file

    def close(self) -> None:
        """Drop the guard if still held (an interrupt can cut a ``with`` short)."""
        if self.guard is not None:
            self.guard.drop()

    def look(self, upto: str | None = None) -> _Look:
        seen = _FileSeen(self.lock, self.line)
        record = _read_record(self.lock)  # then the line, as ever
        line = _read_line(self.line, upto)
        return _Look(record, line=line, seen=seen, file_name=self.file_name)

    def _read_in_change(self) -> _Look:
        line = _read_line(self.line)
        self.line_file = line is not None
        look = _Look(_read_record(self.lock), line=line, file_name=self.file_name)
        # A take's fence is at least this machine's clock in microseconds: larger than
        # that of a take whose record a release deleted, unless the clock steps back.
        look.fence_floor = time.time_ns() // 1000
        return look

    def change(self, create: bool) -> _FileStore:
        # No folder is made for a package manager's lockfile's name: with none, there is
        # no record there, and so no lock, only another program's file to refuse.
        create = create and not _named_as_a_package_lockfile(self.file_name)
        self.guard = _Guard(self.lock, make_parents=create, deadline=self.call_deadline)
        return self

    def __enter__(self) -> _FileStore:
        assert self.guard is not None, "enter store.change(create), not the store"
        try:
            self.guard.__enter__()
        except _NoFolder:
            return self  # no folder, so no lock
        self.held = True
        if not self.guard.created:
            _remove_orphan_temps(self.lock)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self.guard is not None
        try:
            if self.held:
                self.held = False
                self.guard.__exit__(*exc_info)
        finally:
            self.guard.drop()  # if an interrupt cut the exit short

    def read(self, line: bool = True) -> _Look:
        """Always with the line: a release drops the places of waiters that died."""
        return self._read_in_change() if self.held else _Look(None, file_name=self.file_name)

    def apply(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None = None,
    ) -> bool:
        """Always True: under the guard the lock cannot have changed since ``look``."""
        if record is None:
            _delete_record(self.lock)
        else:
            _write_record(self.lock, _bytes_of(record))
            if any(holder.fence == look.fence_floor for holder in _holders(record)):
                _clock_past(look.fence_floor)
        _Interrupts.disarm()
        leaving = None if place is None else place.ticket
        if place is not None:
            place.joined = False
        if look.line or self.line_file:  # else no line, and none to remove
            line = [p for p in _live(look.line, time.time()) if p.ticket != leaving]
            self._keep_line(look, line)
        return True

    def _keep_line(self, look: _Look, places: list[_Place], force: bool = False) -> None:
        """Write the line ``places`` if it differs (or ``force``); remove it once empty."""
        if not places:
            if self.line_file:
                try:
                    _unlink_freeing_the_name(self.line, self.lock)
                except OSError:
                    pass  # whoever comes next finds it empty and removes it
        elif force or list(map(id, places)) != list(map(id, look.line)):
            _write_record(self.line, _line_bytes(places), durable=False)

    def join(self, look: _Look, place: _Place, now: float) -> None:
        """Add ``place`` at the end of the line: appended to the line file when no
        place in it lapsed (each join used to write the whole line to a temp file
        and rename it, and on ext4 that held the guard 2-3 times as long), else by
        writing the line anew."""
        line = _live(look.line, now)
        if _ahead_of(line, place.ticket) is None:
            place.since, place.beat = int(now // 1), now
            size, more = len(_line_bytes(line)), _line_bytes([place])
            if size + len(more) > _LINE_MAX_BYTES:
                raise OSError(
                    errno.EFBIG,
                    f"the line of waiters beside {self.lock} would pass"
                    f" {_LINE_MAX_BYTES // (1024 * 1024)} MiB: no place was taken",
                )
            place.joined = True
            # Nothing lapsed: the file should hold exactly the text of ``line``.
            unchanged = self.line_file and len(line) == len(look.line)
            if unchanged and _appended(self.line, more, size):
                return
            line.append(place)
        self._keep_line(look, line)

    def prune(self, look: _Look, now: float) -> None:
        self._keep_line(look, _live(look.line, now))

    def beat(self, place: _Place) -> bool:
        with self.change(create=False) as change:
            look = change.read()
            now = time.time()
            line = _live(look.line, now)
            for mine in line:
                if mine.ticket == place.ticket:
                    mine.beat = now
                    self._keep_line(look, line, force=True)
                    return True
            self._keep_line(look, line)
            return False

    def leave(self, place: _Place) -> None:
        with self.change(create=False) as change:
            look = change.read()
            place.joined = False
            line = [p for p in _live(look.line, time.time()) if p.ticket != place.ticket]
            self._keep_line(look, line)

    def wait(self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int) -> bool:
        """Until the lock file changes: polled the more often the nearer its turn."""
        every = _FILE_POLL_SEC[min(away, 2) + (away >= _FAR_BACK)]
        seen = _file_seen(look)
        # A take and a release can leave no lock file again: the line shows it.
        line = self.line if ahead and seen.lock is None else None
        until = _SEAMS.clock() + left
        while (pause := min(every, until - _SEAMS.clock())) > 0:
            time.sleep(pause)
            if _signature(self.lock) != seen.lock or (line and _signature(line) != seen.line):
                return True
        return False

    def vouches(self, look: _Look) -> bool:
        """Never: a place ahead that lapsed changes no file a wait polls."""
        return False

    def identity(self) -> tuple[object, ...]:
        """Its folder (device and inode: a symlink, ``..`` or another spelling of it
        is the same) and its name, in one case where names fold it; by its absolute
        path while the folder cannot be read."""
        folder, name = os.path.split(self.lock)
        if _SEAMS.platform.names_fold_case:
            name = name.casefold()
        try:
            found = os.stat(folder)
        except OSError:
            return ("path", os.path.normpath(self.lock))
        return ("file", found.st_dev, found.st_ino, name)

    def by_hand(self) -> str:
        return f"delete the file {_quoted(self.lock)}"


def _open_file(lock: str | os.PathLike[str]) -> _Store:
    """The registry's opener: a file lock (mypy checks the class against _Store here)."""
    return _FileStore(lock)


# --------------------------------------------------------------------------------------
# src/skf_run_lock/registry.py
# The registry of stores: which store keeps a lock, by the form of its name. A file
# path is the file store; an address names a server store by its scheme. A server store's
# module is loaded only by a call that names such a lock, so that a file-lock call never
# pays for it. A new store is its modules, two functions that import them, and one entry
# in ``_SERVER_STORES``: the address check, ``--help``, the README's list of forms and the
# tests all read it.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Callable


# Each server store's module is imported by the function that needs it, so that a call
# that names no such lock never loads it (the file users copy carries it as text).


def _open_etcd_lock(address: str) -> _Store:
    _compile_carried('etcd_store')

    return _open_etcd(address)


def _survey_etcd_prefix(address: str) -> _Survey:
    _compile_carried('etcd_listing')

    return _survey_etcd(address)


def _open_redis_lock(address: str) -> _Store:
    _compile_carried('redis_store')

    return _open_redis(address)


def _survey_redis_prefix(address: str) -> _Survey:
    _compile_carried('redis_listing')

    return _survey_redis(address)


class _ServerKind:
    """One server store: its schemes, the address form it takes, the function that
    opens a lock (``address -> _Store``), and the one that surveys the locks under a
    prefix (``address -> _Survey``)."""

    __slots__ = ("form", "name", "opener", "schemes", "surveyor")

    def __init__(
        self,
        name: str,
        schemes: tuple[str, ...],
        form: str,
        *,
        opener: Callable[[str], _Store],
        surveyor: Callable[[str], _Survey],
    ) -> None:
        self.name = name
        self.schemes = schemes
        self.form = form
        self.opener = opener
        self.surveyor = surveyor


_SERVER_STORES = (
    _ServerKind(
        "etcd",
        ("etcd", "etcd+https"),
        "etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY",
        opener=_open_etcd_lock,
        surveyor=_survey_etcd_prefix,
    ),
    _ServerKind(
        "redis",
        ("redis", "rediss"),
        "redis[s]://[USER@]HOST[:PORT]/KEY",
        opener=_open_redis_lock,
        surveyor=_survey_redis_prefix,
    ),
)

# An address, never a file (one letter is a drive: C://x).
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
_ADDRESS_FORMS = ", ".join(kind.form for kind in _SERVER_STORES[:-1])
_ADDRESS_FORMS += f" or {_SERVER_STORES[-1].form}"


def _refuse_scheme_typos(lock: str) -> None:
    """ValueError for a lock path that starts as an address does (a server's scheme,
    any case, and a colon) without its ``//``: a typo (redis:/host/key), never meant
    as a folder named "redis:"; likewise one whose first part is a scheme followed by
    an empty part, its colon dropped (redis//host/key), never meant as a folder "redis"."""
    first, slash, after = lock.partition("/")
    dropped = _kind_of_scheme(first) if slash and after.startswith("/") else None
    if dropped is not None:
        raise ValueError(
            f"the path {_without_credentials(lock, first + '//')} starts with {first}// but"
            f" not {first}://: an address of {dropped.name} is {dropped.form}"
        )
    scheme, colon, rest = lock.partition(":")
    if not colon or rest.startswith("//"):
        return
    kind = _kind_of_scheme(scheme)
    if kind is None:
        return
    shown = _without_credentials(lock, f"{scheme}:")
    # Windows names no file with a colon: there the address is the only way.
    as_a_file = (
        f"; a file whose path starts so is given as ./{scheme}:..."
        if _SEAMS.platform.colon_in_a_file_name
        else ""
    )
    raise ValueError(
        f"the path {shown} starts with {scheme}: but not {scheme}://: an address of"
        f" {kind.name} is {kind.form}{as_a_file}"
    )


def _kind_of_scheme(scheme: str) -> _ServerKind | None:
    """The server store whose scheme ``scheme`` is, in any case; None: no store's."""
    return next((k for k in _SERVER_STORES if scheme.lower() in k.schemes), None)


def _without_credentials(lock: str, start: str) -> str:
    """``lock`` as a message shows it: what stands before an @ may be a password, what
    follows it names the server."""
    at, tail = lock.rpartition("@")[1:]
    return f"{start}<credentials left out>@{tail}" if at else lock


def _server_kind(address: str) -> _ServerKind:
    """The server store of ``address``; ValueError for a scheme no store has."""
    scheme = address.partition("://")[0]
    for kind in _SERVER_STORES:
        if scheme in kind.schemes:
            return kind
    raise ValueError(
        f"the lock address {_shown_address(address)} has a scheme this version does not know"
        f" ({scheme}); give a file path, or {_ADDRESS_FORMS}"
    )


def _store_for(lock: str | os.PathLike[str]) -> _Store:
    """The store of a lock, as the seam gives it (``_SEAMS.opened``: as it is, unless a
    test wraps it); ValueError for an unknown scheme (never a folder)."""
    if isinstance(lock, str) and _ADDRESS.match(lock):
        return _SEAMS.opened(_server_kind(lock).opener(lock))
    _refuse_scheme_typos(os.fspath(lock))
    return _SEAMS.opened(_open_file(lock))


def _lock_identity(lock: str | os.PathLike[str]) -> tuple[object, ...]:
    """What names ``lock`` however it is spelled (its store says: a file by its folder
    and name, a server's lock by its scheme, endpoints and key); ValueError as
    _store_for. Opens nothing on the network, and no call of the CLI asks it."""
    store = _store_for(lock)
    try:
        return store.identity()
    finally:
        store.close()


def _survey_for(under: str | os.PathLike[str]) -> _Survey:
    """The locks under a place: a folder, or a server's address whose KEY is a prefix;
    ValueError for an unknown scheme or a place that is a file."""
    if isinstance(under, str) and _ADDRESS.match(under):
        return _server_kind(under).surveyor(under)
    _refuse_scheme_typos(os.fspath(under))
    _compile_carried('file_listing')

    return _survey_folder(under)


# --------------------------------------------------------------------------------------
# src/skf_run_lock/lock_calls.py
# The lock calls: acquire, release and status, one algorithm over any store, and waiting
# in line. Each call reads the lock, decides by the pure functions of the decisions, and
# applies its change atomically against what it read, trying again when another writer
# came first. A waiter joins the line, keeps its place alive, waits for what may make it
# its turn, tries again, and leaves the line however the wait ends.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime


# Changes lost to other writers, in a row, before a call gives up ("kept changing").
# A lost change is tried again at once, and a busy lock of several slots has many
# writers: eight processes taking and releasing slots of one lock as fast as they
# could made a call lose twenty in a row about every two seconds, and a release that
# gives up keeps its slot held until its timeout; at a hundred, none did
# (bench/churn.py).
_CHANGE_TRIES = 100


def _kept_changing(lock: str) -> OSError:
    return OSError(errno.EAGAIN, f"the lock {lock} kept changing; try again")


def acquire(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    now: datetime | None = None,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
    shared: bool = False,
    parts: list[str] | None = None,
) -> AcquireResult:
    """Take the lock (a file path or a server address) for ``owner``
    (``workflow:skill[:run_id]``) if it is free or stale, or renew it if it is
    ``owner``'s; else change nothing. ``stale_after`` is in **seconds**. With
    ``slots`` N, up to N owners hold it at once, each its own slot. With ``shared``,
    a shared hold: any number of owners hold it shared at once, while nobody holds it
    exclusively. With ``parts`` (path patterns, git's glob pathspecs), only those parts
    of it: two holds conflict when some path lies in a part of each (a hold without
    parts holds the lock whole), unless both are shared; an owner naming other parts
    than it holds changes its hold to them, if what it adds is free.

    :returns: the acquire output, carrying the hold's fence beside its keys (read it
        with :func:`fence_of`); a pickle of it is a plain dict, without the fence.
    :raises ValueError: a bad owner, timeout, count or lock; a count of slots other
        than the one in force while a slot is held; the other kind of hold than the
        one ``owner`` holds; or bad parts.
    :raises OSError: the lock could not be read or written.
    """
    fixed_now = None if now is None else _seconds_of(now)
    request = _Request(
        lock,
        owner,
        "",
        stale_after,
        fixed_now=fixed_now,
        empty_is_stale=empty_is_stale,
        slots=slots,
        shared=shared,
        parts=parts,  # type: ignore[arg-type]  # a list given, a set kept: checked
    )
    return _acquire_output(_take(_checked(request)))


def _take(request: _Request) -> _Hold | AcquireResult:
    """acquire, checked: the hold, or the refusal's output (``request.renew_only``:
    LockLost unless still the owner's live hold; ``request.keep_longer``: a renewal
    never shortens the hold; no request waits on the network past
    ``request.deadline``). A take that waits in line does so (_wait_for)."""
    try:
        return _wait_for(request, refused=None)
    except LockBusy as busy:
        return busy.result


def _take_in(
    store: _Store, request: _Request, place: _Place | None = None
) -> _Hold | AcquireResult:
    """One try of acquire: the hold, or the refusal's output; a waiter's ``place`` joins
    the line, or leaves it taking."""
    # Before anything is sent: a hold this try takes (a lease granted, a record written,
    # a change that lost its race and took a lease for the next) starts no sooner.
    request.try_began = _SEAMS.clock()
    ticket = None if place is None else place.ticket
    for _ in range(_CHANGE_TRIES):
        with store.change(create=not request.renew_only) as change:
            look = change.read()
            clock = time.time()  # once a try: a place's beat is always the clock's
            now = clock if request.fixed_now is None else request.fixed_now
            read_at = _SEAMS.clock()
            if read_at >= request.deadline:
                # A renewal read past its holder's stop point (its store was slow to
                # answer) writes nothing: the work was told the hold was lost.
                took = read_at - request.try_began
                why = f"reading the lock took {took:.1f} s, past the time to stop: nothing written"
                raise TimeoutError(errno.ETIMEDOUT, why)
            take = _decide_take(request, look, ticket, now)
            if look.remembered and take.outcome != "take":
                continue  # only a change proves a remembered look: read the lock itself
            if place is not None and not take.in_line:
                place.joined = False  # a new place if refused
            if take.outcome != "take":
                by_hand = ""
                if take.outcome in ("held", "line"):
                    if place is None:
                        change.prune(look, now)
                    else:
                        change.join(look, place, clock)
                    by_hand = store.by_hand()
                # The refusal's output, or its error raised (the hold lost, another
                # program's file, a count or a kind that clash).
                refused = _refusal(store.lock, request, take, by_hand=by_hand, now=now)
                if take.outcome in ("grow", "full"):
                    raise LockBusy(refused)  # refused at once: never waited out
                return refused
            new = take.new
            assert new is not None and take.after is not None
            leaving = place if place is not None and place.joined else None
            if change.apply(look, take.after, request.owner, leaving):
                if store.dated_in_seconds:
                    # Others judge this hold from its record's time, a whole second:
                    # up to a second before this try began, by the renewer's count.
                    request.try_began = min(request.try_began, read_at - (now - new.since))
                return _Hold(
                    store.lock,
                    request.owner,
                    request.run_id,
                    since=new.since,
                    holder_timeout=take.holder_timeout,
                    renewed=take.renewed is not None,
                    replaced=take.replaced,
                    after=take.after,
                    fence=new.fence,
                    session=new.session,
                    shared=new.shared,
                    parts=new.parts,
                )
    raise _kept_changing(store.lock)


def _take_waiting(
    request: _Request,
    refused: Callable[[AcquireResult, float, int], None] | None,
    place: _Place | None = None,
    *,
    keep_place: bool = False,
) -> tuple[_Hold | None, AcquireResult]:
    """A take that waits in line when the request may (the CLI's acquire and run, the
    session's acquire tool): the hold (None: refused) and its output, whose message says
    how long it waited; ``refused(result, seconds left, place)``, ``place`` and
    ``keep_place`` as _wait_for takes them."""
    started = _SEAMS.clock()
    hold: _Hold | None = None
    try:
        hold = _wait_for(request, refused=refused, place=place, keep_place=keep_place)
        result = _acquired_result(hold)
    except LockBusy as busy:
        result = busy.result
    if not request.wait:
        return hold, result
    return hold, _waited(result, _SEAMS.clock() - started, request.wait)


def acquire_within(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    wait: float,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
    shared: bool = False,
    parts: list[str] | None = None,
) -> AcquireResult:
    """As :func:`acquire`, waiting up to ``wait`` seconds in line, first come, first
    served (the first k in line take the k slots that free; the shared waiters at its
    head go in together; a waiter waits only behind those its parts conflict with);
    :class:`LockBusy` if the wait runs out."""
    request = _Request(
        lock,
        owner,
        "",
        stale_after,
        wait=wait,
        empty_is_stale=empty_is_stale,
        slots=slots,
        shared=shared,
        parts=parts,  # type: ignore[arg-type]  # a list given, a set kept: checked
    )
    return _acquired_result(_wait_for(_checked(request), refused=None))


def release(lock: str | os.PathLike[str], owner: str) -> ReleaseResult:
    """Delete the lock if its record names ``owner`` (with its run id), or, of a lock of
    several slots, free ``owner``'s slot; else ``reason`` says "absent" or "not-owner".
    ValueError, OSError as :func:`acquire`."""
    return _release_of(_Release(lock, owner))


def _release_of(request: _Release) -> ReleaseResult:
    """release, as asked: the lock checked by its store, then the owner (whole, with
    its run id); what the store read decided (``_released``), applied against it, and
    the output; no wait past ``request.deadline``."""
    store = _store_for(request.lock)
    store.call_deadline = request.deadline
    owner = request.owner
    if not _has_run_id(owner):
        raise _whole_owner_needed(store.lock, owner)
    try:
        for _ in range(_CHANGE_TRIES):
            with store.change(create=False) as change:
                look = change.read(line=False)
                record = look.record
                # Another program's file is left as it is (none there: "absent").
                theirs = _another_programs_file(look) if record is not None else ""
                if theirs:
                    return _another_programs_left(store.lock, owner, look, theirs)
                now = time.time()
                after, freed = (None, None) if record is None else _released(record, owner, now)
                if freed is None:
                    if look.remembered:
                        continue  # only a change proves a remembered look: read it anew
                    change.prune(look, now)
                    return _release_result(store.lock, owner, record)
                if change.apply(look, after, owner):
                    left = "" if after is None else _holds_text(after)
                    return _release_result(store.lock, owner, freed, freed=True, left=left)
        raise _kept_changing(store.lock)
    finally:
        store.close()


def status(
    lock: str | os.PathLike[str],
    stale_after: float,
    now: datetime | None = None,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
) -> StatusResult:
    """Say who holds the lock ("free", "held" or "stale"), changing nothing;
    ``stale_after`` (seconds) judges a record without a timeout of its own; ``slots``
    is the count shown while no slot is held (else the count in force is). Its
    ``fence`` is the largest of the live holders' (the newest take's), None while
    nobody holds the lock."""
    fixed_now = None if now is None else _seconds_of(now)
    query = _Query(
        lock,
        _checked_stale_after(stale_after),
        fixed_now=fixed_now,
        empty_is_stale=empty_is_stale,
        slots=_checked_slots(slots),
    )
    return _status_of(query)


def _status_of(query: _Query) -> StatusResult:
    """status, checked: the lock judged at ``query.fixed_now`` (None: the clock), its
    line by the clock, read once."""
    store = _store_for(query.lock)
    try:
        look = store.look()
    finally:
        store.close()
    clock = time.time()
    record = look.record or look.last
    theirs = _another_programs_file(look)
    if theirs:
        raise ValueError(_another_programs_refusal(store.lock, look, theirs))
    seconds = clock if query.fixed_now is None else query.fixed_now
    standing = _standing(record, query, seconds)
    return _status_result(store.lock, standing, _live(look.line, clock), seconds)


def check(
    lock: str | os.PathLike[str],
    paths: list[str] | tuple[str, ...],
    owner: str | None = None,
) -> CheckResult:
    """Say which of ``paths`` lie in a part of the lock held by another run than
    ``owner`` (None: by any run), changing nothing. A path is relative to the top of
    the tree, as git prints it (``src/api/routes.py``), and literal; it lies in every
    live hold of the whole lock, and in each part of a live hold that covers it, shared
    or not (a commit is a write). A record without a timeout of its own is judged by
    the default 60 minutes.

    :param owner: the whole owner, with its run id: its own parts are left out.
    :returns: the check output: ``free`` (no path lies in such a part), ``reserved``
        (an entry for each path, holder and part, in the order of ``paths``, each path
        once), ``message``.
    :raises ValueError: a bad lock, owner (or one without its run id) or path; a lock
        path that is another program's file.
    :raises OSError: the lock could not be read.
    """
    return _check_of(_Query(lock, DEFAULT_STALE_AFTER_MIN * 60.0), paths, owner)


def _check_of(query: _Query, paths: object, owner: str | None) -> CheckResult:
    """check, as asked: the lock checked by its store, then the owner, then the paths;
    the lock read once, judged by the clock (``query.stale_after`` for a record
    without a timeout of its own)."""
    store = _store_for(query.lock)
    try:
        if owner is not None and not _has_run_id(owner):
            raise _whole_owner_to_check(owner)
        _compile_carried('parts')

        checked = _checked_paths(paths, _SEAMS.platform.colon_in_a_file_name)
        look = store.look()
    finally:
        store.close()
    theirs = _another_programs_file(look)
    if theirs:
        raise ValueError(_another_programs_refusal(store.lock, look, theirs))
    now = time.time()
    reserved = _reserved(look.record or look.last, checked, owner, query, now)
    return _check_result(store.lock, reserved, checked, owner, query.stale_after)


# At most this many waits in a row go on from one look, each ended by a beat (a
# look at least every _VOUCHED_WAITS + 1 beats).
_VOUCHED_WAITS = 4


# --- Waiting in line: first come, first served


def _new_place(request: _Request) -> _Place:
    """A place in line for ``request``'s waiter, not yet in it."""
    ticket = os.urandom(4).hex()
    return _Place(
        ticket,
        request.owner,
        0,
        request.stale_after,
        None,
        shared=request.shared,
        parts=request.parts,
    )


def _wait_for(
    request: _Request,
    *,
    refused: Callable[[AcquireResult, float, int], None] | None,
    place: _Place | None = None,
    keep_place: bool = False,
) -> _Hold:
    """A take's hold (LockBusy, with the last refusal, if the wait runs out, or at once
    if it may not wait), calling ``refused(result, seconds left, place)`` as it waits up
    to ``request.wait`` in line. ``place``: the waiter's own (a session's, kept from
    its last call, waits on from where it stands; one that lapsed joins at the end);
    ``keep_place``: a wait that runs out leaves it in line, for the caller to keep."""
    deadline = _SEAMS.clock() + request.wait
    store = _store_for(request.lock)
    store.call_deadline = request.deadline
    store.patient = bool(request.wait)
    if place is None and request.wait:
        place = _new_place(request)
    ran_out = False
    try:
        while True:
            result = _take_in(store, request, place)
            if isinstance(result, _Hold):
                return result
            if place is None or _SEAMS.clock() >= deadline:
                ran_out = True
                raise LockBusy(result)
            _wait_turn(store, place, deadline, request, result=result, shown=refused)
    finally:
        if place is not None and place.joined and not (keep_place and ran_out):
            _leave_line(store, place)
        store.close()


def _wait_turn(
    store: _Store,
    place: _Place,
    deadline: float,
    request: _Request,
    *,
    result: AcquireResult,
    shown: Callable[[AcquireResult, float, int], None] | None,
) -> None:
    """Wait, keeping ``place`` alive, until its turn may have come (or its place lapsed);
    ``shown(result, seconds left, place)`` is told each new place in line. A waiter
    among the first N in line (N slots) watches the slots: one that frees may be its."""
    beat_at = _SEAMS.clock() + _SEAMS.beat_sec
    last_shown = 0
    found = None  # what the last look found, while the wait goes on from it
    vouched = 0  # waits in a row that went on from one look
    while (left := deadline - _SEAMS.clock()) > 0:
        if found is None:
            found = _found_in_line(store, place, request)
            if found is None:
                return
        look, turn, stale_at = found
        ahead = turn.ahead
        if _SEAMS.clock() >= beat_at:
            # A beat changes nothing a look sees: the wait goes on from this look.
            if not store.beat(place):
                return
            beat_at = _SEAMS.clock() + _SEAMS.beat_sec
            last_shown = 0  # shown again after a beat
        if shown is not None and last_shown != len(ahead) + 1:
            last_shown = len(ahead) + 1
            shown(result, left, last_shown)
        pause = min(left, beat_at - _SEAMS.clock(), stale_at - _SEAMS.clock())
        woken = store.wait(pause, look, turn.waits_on, place, turn.away)
        if woken and not ahead:
            return  # a slot that frees is the first's: the try reads the lock anyway
        # A wait that ended unwoken, for its beat, goes on from the same look where the
        # store vouches that nothing it waits on changed since. A look every few beats
        # all the same catches a watch whose connection died unseen.
        trusted = not woken and vouched < _VOUCHED_WAITS and _SEAMS.clock() < stale_at
        if trusted and store.vouches(look):
            vouched += 1
        else:
            found = None
            vouched = 0


def _found_in_line(
    store: _Store, place: _Place, request: _Request
) -> tuple[_Look, _Turn, float] | None:
    """A look for a waiter: the look, what it waits for, and when (on ``_SEAMS.clock``)
    to wake for a slot going stale by its time (inf: never). None: its turn may have
    come, or its place lapsed, and it tries again."""
    look = store.look(upto=place.ticket)  # only the places ahead of it matter
    turn = _decide_turn(request, look, place, time.time())
    if turn is None:
        return None
    return look, turn, _SEAMS.clock() + turn.stale_in


def _leave_line(store: _Store, place: _Place) -> None:
    """Leave the line on the way out, before an interrupt; a place left behind lapses."""
    armed = _Interrupts.armed
    _Interrupts.armed = False
    try:
        store.leave(place)
    except (OSError, ValueError):
        pass
    finally:
        _Interrupts.armed = armed


# --------------------------------------------------------------------------------------
# src/skf_run_lock/listing.py
# The listing: every lock under a place at once (a folder, an etcd prefix, a Redis
# keyspace or a whole Redis Cluster), as its store's survey found them, each judged as
# ``status`` judges it, and the list output with its table. A survey only reads; which of
# what it found are locks is a decision (``_listed``).
# --------------------------------------------------------------------------------------

def list_locks(
    under: str | os.PathLike[str], stale_after: float = DEFAULT_STALE_AFTER_MIN * 60
) -> ListResult:
    """List every lock under ``under``: a folder (searched recursively, links not
    followed), or an ``etcd://``/``redis://`` address whose KEY is a prefix (a Redis
    Cluster: every primary). Read only, like :func:`status`.

    :param under: the folder or the address of the locks to list.
    :param stale_after: seconds; judges a record without a timeout of its own.
    :returns: the list output, its locks sorted by name.
    :raises ValueError: a place that is a file, or an unknown scheme.
    :raises OSError: the place could not be read.
    """
    return _list_locks(under, stale_after)


def _list_locks(under: str | os.PathLike[str], stale_after: float) -> ListResult:
    """list_locks's work: survey ``under``, keep the locks, judge each."""
    query = _Query(under, _checked_stale_after(stale_after))  # what it asks of each lock
    shown, found, note = _survey_for(under)
    now = time.time()
    statuses: list[StatusResult] = []
    others = 0  # files named as locks are but plainly another program's
    for lock, look in found:
        record = look.record or look.last
        line = _live(look.line, now)
        if _listed(lock, look, line):
            statuses.append(_status_result(lock, _standing(record, query, now), line, now))
        elif _left_out(lock, look):
            others += 1
    result = _list_result(shown, statuses, note, now)
    if others:
        files = "file" if others == 1 else "files"
        result["message"] += f"; left out {others} {files} of other programs named *.lock"
    return result


def _listed_lock(status: StatusResult) -> ListedLock:
    """A lock as a listing shows it: its status output's keys but ``message``."""
    return {
        "state": status["state"],
        "lock": status["lock"],
        "held_by": status["held_by"],
        "held_since": status["held_since"],
        "stale_at": status["stale_at"],
        "age_seconds": status["age_seconds"],
        "stale_after_minutes": status["stale_after_minutes"],
        "waiting": status["waiting"],
        "slots": status["slots"],
        "holders": status["holders"],
        "mode": status["mode"],
        "fence": status["fence"],
    }


def _list_result(
    under: str, statuses: list[StatusResult], note: str = "", now: float = 0.0
) -> ListResult:
    """The listing of ``under``: its locks sorted by name, and a count of each state,
    a lock with slots both held and free counted as partly held (``note``: the
    survey's word on the place)."""
    locks = sorted(map(_listed_lock, statuses), key=lambda entry: entry["lock"])
    states = [_shown_state(entry, now) for entry in locks]
    kinds = ("held", "partly held", "stale", "free")
    counts = [f"{states.count(s)} {s}" for s in kinds if s in states]
    waiting = sum(len(entry["waiting"]) for entry in locks)
    if not locks:
        message = f"no locks under {under}" + (f": {note}" if note else "")
    else:
        noun = "lock" if len(locks) == 1 else "locks"
        message = f"{len(locks)} {noun} under {under}: {', '.join(counts)}"
        if waiting:
            message += f"; {waiting} {'run waits' if waiting == 1 else 'runs wait'} in line"
    return {"under": under, "locks": locks, "message": message}


def _live_holders_at(entry: ListedLock, now: float) -> list[Holder]:
    """The holders of a listed lock whose slots are live at ``now``."""
    return [h for h in entry["holders"] if (_parse_time(h["stale_at"]) or 0) > now]


def _shown_state(entry: ListedLock, now: float) -> str:
    """A lock's state as a listing counts it: a status's, but a lock of several slots
    that some hold while others are free is "partly held" (a status calls it free)."""
    if entry["state"] == "free" and entry["slots"] > 1 and _live_holders_at(entry, now):
        return "partly held"
    return entry["state"]


def _shown_name(text: str) -> str:
    """``text`` for a table: as it is if printable (any script: a person reads it),
    else quoted with escapes (a name may hold a newline, or a terminal's control
    characters), as is one that stdout cannot encode."""
    plain = text.isprintable() and text.strip() == text
    if plain and not text.isascii():
        try:
            text.encode(sys.stdout.encoding or "utf-8")
        except (UnicodeEncodeError, LookupError):
            plain = False
    return text if plain else json.dumps(text)


# --- The table for a person


def _list_table(result: ListResult, now: float) -> str:
    """The listing as an aligned table for a person: one row a lock, then its message."""
    rows = [["LOCK", "STATE", "MODE", "HOLDER", "AGE", "STALE IN", "WAITING"]]
    rows += [_table_row(entry, now) for entry in result["locks"]]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join([*lines, result["message"]]) + "\n"


def _table_row(entry: ListedLock, now: float) -> list[str]:
    """One lock's row, with its mode (shared or exclusive) while anyone holds it. A lock
    of several slots that anyone holds shows how many of its slots are held, and one
    held shared or in parts how many hold it, and by whom: the longest holder (its age,
    when it goes stale, its parts) and a count of the rest; a status of a lock of slots
    may say "free" while a slot is."""
    state: str = entry["state"]
    holder = "-" if entry["held_since"] is None else _shown_name(_holder_text(entry["held_by"]))
    age = entry["age_seconds"]
    stale_at = entry["stale_at"] if state == "held" else None
    live = _live_holders_at(entry, now)
    parted = any(h["parts"] is not None for h in live)
    if (entry["slots"] > 1 or entry["mode"] == "shared" or parted) and live:
        longest = live[0]  # holders come longest held first
        if entry["slots"] > 1:
            state = f"{len(live)}/{entry['slots']} held"
        holder = _shown_name(_holder_text(longest["owner"])) + _parts_cell(longest["parts"])
        if len(live) > 1:
            holder += f" and {len(live) - 1} more"
        since = _parse_time(longest["since"])
        age = None if since is None else max(0, int(now - since))
        stale_at = longest["stale_at"]
    stale_in = "-"
    if stale_at is not None:
        left = _parse_time(stale_at)
        stale_in = "-" if left is None else _duration_text(max(0, left - now))
    return [
        _shown_name(entry["lock"]),
        state,
        entry["mode"] or "-",
        holder,
        "-" if age is None else _duration_text(age),
        stale_in,
        str(len(entry["waiting"])),
    ]


# The most characters of parts a holder's cell shows: more are shown as a count.
_PARTS_SHOWN_MAX = 32


def _parts_cell(parts: list[str] | None) -> str:
    """What a holder's cell says of its parts: `` (src/**, docs)`` while they are
    short, else `` (3 parts)``; nothing for a hold of the whole lock."""
    if parts is None:
        return ""
    shown = ", ".join(parts)
    if len(shown) <= _PARTS_SHOWN_MAX and _shown_name(shown) == shown:
        return f" ({shown})"
    return f" ({len(parts)} part{'s' if len(parts) != 1 else ''})"


# --------------------------------------------------------------------------------------
# src/skf_run_lock/renewer.py
# The renewer: it keeps a hold taken for work that runs (``held()``'s block, ``run``'s
# command, a session's holds) by renewing it every third of its timeout (sooner on
# failure), and finds it lost once too little is left of it to stop the work before it
# can end on the store's side.
# --------------------------------------------------------------------------------------

_MIN_RENEWABLE_SEC = 3.0  # renewed every third of it: a second between


def _checked_renewable(stale_after: float, name: str, unit: str, shown: str) -> float:
    """``stale_after`` if a holder can renew so short a hold in time; ValueError in
    ``unit``, quoting what the caller gave as ``shown``."""
    if stale_after < _MIN_RENEWABLE_SEC:
        least = _MIN_RENEWABLE_SEC / _UNIT_SECONDS[unit]
        raise ValueError(
            f"{name} of {shown} is too short to renew the lock safely while work runs;"
            f" give at least {least:g} {unit}"
        )
    return stale_after


_RUN_GRACE_SEC = 5.0  # between SIGTERM and SIGKILL, for a lock found lost
# How long the release of a hold that a renewal wrote too late may wait on its store.
_LATE_RELEASE_SEC = 5.0

# A hold that cannot be renewed must end on this side before it can on the server's.
# The renewer counts it from the moment the try that took or last renewed it began (a
# lease, a record's expiry start later), and the work is stopped when what is left falls
# to a grace (run's SIGTERM to SIGKILL: 5 s, a sixth of a shorter hold) plus a margin:
# half a second for the killed command to be gone, and 1% of the hold for a server
# clock that runs faster than ours.
_GRACE_SHARE = 1 / 6
_MARGIN_SEC = 0.5
_CLOCK_RATE_MARGIN = 0.01


class _Renewer:
    """Renews the hold for held() and run every third of its timeout (sooner on failure),
    and finds it lost once too little is left of the hold to stop the work before it
    ends: each renewal waits on the network no longer than that. ``hold`` is the hold
    as last taken or renewed (a renewal beside a newer holder may get a new fence)."""

    def __init__(self, request: _Request, hold: _Hold) -> None:
        self.hold = hold
        self.lock = hold.lock
        self.renewal = request.renewal(hold)
        # As long as the request asked, which a hold kept longer outlasts; a session's
        # hold, which keeps its lease whoever renews it, may be shorter.
        self.lasts = min(request.stale_after, hold.holder_timeout)
        self.every = self.lasts / 3
        self.margin = _MARGIN_SEC + self.lasts * _CLOCK_RATE_MARGIN
        self.grace = min(_RUN_GRACE_SEC, self.lasts * _GRACE_SHARE)
        self.renewed = request.try_began  # the hold began no sooner
        self.next = self.renewed + self.every
        self.failure: Exception | None = None  # the last renewal's, since one succeeded
        self.ran_out = False  # lost by the clock, not found lost
        self.lost: LockLost | None = None
        # The owner held the lock before this work took it: never released here.
        self.kept = hold.renewed

    def stop_at(self) -> float:
        """When the work must stop (``_SEAMS.clock``): the grace and the margin before
        the soonest the hold may end."""
        return self.renewed + self.lasts - self.grace - self.margin

    def due_in(self) -> float:
        return max(0.0, min(self.next, self.stop_at()) - _SEAMS.clock())

    def next_look(self) -> float:
        """How long the work's thread may wait before it looks again (renew_if_due): at
        most a second on the system's clock, which may stop while the machine sleeps."""
        return _blind_wait(self.due_in())

    def renew_if_due(self) -> LockLost | None:
        """Renew the lock once due, else find it lost by the clock: None while held."""
        if self.due_in() > 0:
            return self.lost_by_now()
        return self.renew()

    def stop_in(self) -> float:
        """Seconds until the work must stop (0 once it must)."""
        return max(0.0, self.stop_at() - _SEAMS.clock())

    def renew(self) -> LockLost | None:
        """Renew the lock now: None while held, its LockLost once not."""
        if self.lost is not None:
            return self.lost
        started = _SEAMS.clock()
        if started < self.stop_at():
            self.renewal.deadline = self.stop_at()
            try:
                renewed = _take(self.renewal)
            except LockLost as lost:
                self.lost = lost
                return lost
            except (OSError, ValueError) as exc:
                self.failure = exc
                self.next = started + min(1.0, self.every / 3)
            else:
                if self.lost is not None:
                    # Told lost by the clock while this renewal was under way (held()'s
                    # check, a session's holds): the work stopped, and what the renewal
                    # wrote late is let go, not left held for a whole timeout.
                    self.let_go(renewed)
                    return self.lost
                if not isinstance(renewed, _Hold):
                    # Refused (the record would pass its limit): nothing was written,
                    # so it counts as a renewal that failed, and the hold runs down.
                    self.failure = ValueError(str(renewed.get("message")))
                    self.next = started + min(1.0, self.every / 3)
                    return self.lost_if_no_try_left()
                self.hold = renewed
                self.renewed = self.renewal.try_began
                self.next = self.renewed + self.every
                self.failure = None
                return None
        return self.lost_if_no_try_left()

    def lost_if_no_try_left(self) -> LockLost | None:
        """Its LockLost once no try of a renewal is left in time, else None."""
        if max(self.next, _SEAMS.clock()) >= self.stop_at():
            self.ran_out_now()
        return self.lost

    def lost_by_now(self) -> LockLost | None:
        """Its LockLost once lost, or once the work must stop by the clock, even while
        a renewal is still under way (held()'s check)."""
        if self.lost is None and _SEAMS.clock() >= self.stop_at():
            self.ran_out_now()
        return self.lost

    def let_go(self, renewed: _Hold | object) -> None:
        """Release a hold a renewal wrote once the work had been told it was lost, unless
        the owner held it before the work (then it is left as it is, to its own time)."""
        if self.kept or not isinstance(renewed, _Hold):
            return
        late = _Release(renewed.lock, renewed.owner)
        late.deadline = _SEAMS.clock() + _LATE_RELEASE_SEC
        try:
            _release_of(late)
        except (OSError, ValueError):
            pass  # it lapses at its own time

    def ran_out_now(self) -> None:
        failing = _duration_text(_SEAMS.clock() - self.renewed)
        kept = f"{self.grace + self.margin:.1f}"
        why = f"renewals failed for {failing}, until the hold would go stale within the {kept} s"
        why += " kept to stop the work"
        if self.failure is not None:
            why += f" ({self.failure})"
        else:
            # No renewal failed: none ran in time (a renewal under way, or the process
            # paused, or the machine asleep, past the moment to stop).
            why += " (none was answered in time)"
        self.ran_out = True
        self.lost = LockLost(self.lock, None, None, why)

    def grace_left(self) -> float:
        """run's time between SIGTERM and SIGKILL: what is left of the hold less the
        margin (at most 5 s) when it ran out; 5 s for a lock found lost, no longer its."""
        if not self.ran_out:
            return _RUN_GRACE_SEC
        left = self.renewed + self.lasts - self.margin - _SEAMS.clock()
        return max(0.0, min(_RUN_GRACE_SEC, left))


# --------------------------------------------------------------------------------------
# src/skf_run_lock/held_and_run.py
# Work done while a lock is held: ``held()`` for a ``with`` block and ``run``'s
# command. Both take the lock as acquire does, keep it with the renewer, and release it
# however the work ends, unless their owner held it before they started: that hold is
# theirs to renew, never to end, and is left no shorter than it was. A lock lost meanwhile
# is reported.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    import subprocess
    import threading


def held(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float = 3600.0,
    wait: float = 0.0,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
    shared: bool = False,
    parts: list[str] | None = None,
) -> _Lease:
    """Hold the lock for a ``with`` block::

        with skf.held(path, "forge-tier-rw:write", 60.0, wait=30.0) as lease:
            ...  # lease.check() raises LockLost if the lock was lost


    Taken as by :func:`acquire_within` (``slots``: one of that many; ``shared``: a
    shared hold; ``parts``: those parts of it; an owner's hold it had is kept as it is,
    and the parts named must be among its own), renewed from a thread every third of
    ``stale_after`` (seconds, at least 3), released however the block ends;
    :class:`LockLost` at the end of a block that ended normally without it.
    """
    request = _Request(
        lock,
        owner,
        "",
        stale_after,
        wait=wait,
        empty_is_stale=empty_is_stale,
        slots=slots,
        shared=shared,
        parts=parts,  # type: ignore[arg-type]  # a list given, a set kept: checked
        keep_longer=True,
    )
    # Each part checked once, the owner and the timeout first (held()'s order).
    _check_owner_and_timeout(request)
    _checked_renewable(request.stale_after, "stale_after", "seconds", repr(stale_after))
    _check_wait(request)
    _check_how(request)
    return _Lease(request)


class _Lease:
    """A lock held by :func:`held`: ``owner``, ``result``, ``fence``, ``lost``,
    ``check()``."""

    def __init__(self, request: _Request) -> None:
        self.request = request
        self.lock = request.lock
        self.owner = request.owner
        self.result: AcquireResult | None = None
        self.kept = False  # the owner held the lock before the block: left held after
        self.renewer: _Renewer | None = None
        self.stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    @property
    def fence(self) -> int | None:
        """The hold's fence as last taken or renewed, for each write the block makes
        (None before it is entered)."""
        return None if self.renewer is None else self.renewer.hold.fence

    @property
    def lost(self) -> bool:
        """True once the lock was found lost, or could not be renewed in time."""
        return self.renewer is not None and self.renewer.lost_by_now() is not None

    def check(self) -> None:
        """Raise :class:`LockLost` if the lock was lost."""
        if self.renewer is not None and (lost := self.renewer.lost_by_now()) is not None:
            raise lost

    def __enter__(self) -> _Lease:
        import threading

        hold = _wait_for(self.request, refused=None)
        self.result = _acquired_result(hold)
        self.owner = hold.owner
        self.kept = hold.renewed
        self.renewer = _Renewer(self.request, hold)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._keep, name="skf-run-lock renewal", daemon=True)
        try:
            self.thread.start()
        except BaseException:
            if not self.kept:
                release(self.lock, self.owner)
            raise
        return self

    def _keep(self) -> None:
        assert self.renewer is not None and self.stop is not None
        while not self.stop.wait(self.renewer.next_look()):
            if self.renewer.renew_if_due() is not None:
                return

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        assert self.stop is not None and self.thread is not None and self.renewer is not None
        renewer = self.renewer
        # Nothing here waits past the hold's stop point: not the renewal under way (it
        # ends by then, unless its store hangs), nor the release.
        try:
            self.stop.set()
            self.thread.join(renewer.stop_in())
        finally:
            try:
                # A hold the owner had before is left as it is; a lost one too (its
                # record is another's, or ends on the server within the grace).
                if not self.kept and renewer.lost_by_now() is None:
                    _release_of(_Release(self.lock, self.owner, renewer.stop_at()))
            except (OSError, ValueError) as failure:
                # A lost lock is what the block is told (its server out of reach, most
                # likely, as the renewals found): the failed release is a note on it.
                told = exc if exc is not None else renewer.lost_by_now()
                if told is None:
                    raise
                told.add_note(f"and the lock could not be released: {failure}")
        if (lost := renewer.lost_by_now()) is not None and exc_type is None:
            raise lost


def _signal_child(child: subprocess.Popen[bytes], signum: int) -> None:
    try:
        child.send_signal(signum)
    except (OSError, ValueError):
        pass  # it has ended (or Windows)


def _stop_command(child: subprocess.Popen[bytes], waiter: threading.Thread, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    import signal

    _signal_child(child, signal.SIGTERM)
    waiter.join(grace)
    if waiter.is_alive():
        child.kill()
        waiter.join()


def _run_holding(request: _Request, hold: _Hold, command: list[str]) -> int:
    """Run ``command`` holding ``hold``, which ``request`` took: its exit code, 3 if
    lost, 126/127 if not run."""
    import subprocess
    import threading

    # The lock as its store names it (a file's absolute path): the command, and git's
    # hooks, which run at the top of the tree, may read SKF_RUN_LOCK from elsewhere.
    lock = hold.lock
    owner = hold.owner
    # A hold the owner had before run started (a workflow's lock, a run step inside it)
    # is left held when run ends, however it ends.
    kept = hold.renewed

    if _Interrupts.pending is not None:  # came while the lock was taken
        _release_for_run(lock, owner, kept)
        _fail(f"interrupted by {_signal_name(_Interrupts.pending)} before the command started")
        return 128 + _Interrupts.pending
    env = {**os.environ, "SKF_RUN_LOCK": lock, "SKF_RUN_LOCK_OWNER": owner}
    fence = hold.fence
    if fence is not None:  # the number its writes carry, for a resource that checks them
        env["SKF_RUN_LOCK_FENCE"] = str(fence)
    try:
        # The request runs between fork and exec, where a lock another thread held at
        # the fork would never be let go: it calls one C function and takes no lock.
        dies_with_run = _SEAMS.platform.dies_with_run()  # Linux: SIGTERM when run dies
        child = subprocess.Popen(command, env=env, preexec_fn=dies_with_run)  # noqa: PLW1509
    except OSError as exc:
        _release_for_run(lock, owner, kept)
        _fail(f"could not start {command[0]!r}: {_describe_os_error(exc)}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    _Interrupts.handle(lambda signum, _: _signal_child(child, signum))
    if _Interrupts.pending is not None:  # came while the command started
        _signal_child(child, _Interrupts.pending)
    waiter = threading.Thread(target=child.wait, daemon=True)
    waiter.start()
    renewer = _Renewer(request, hold)
    lost = None
    while True:
        waiter.join(renewer.next_look())
        if not waiter.is_alive():
            break
        lost = renewer.renew_if_due()
        if lost is not None:
            _stop_command(child, waiter, renewer.grace_left())
            break
    # A hold found lost is no longer the work's (another's, cleared, or changed by a call
    # of its owner): nothing of its own to release. One that ran out may still be.
    _release_for_run(lock, owner, kept or (lost is not None and not renewer.ran_out))
    if lost is not None:
        _fail(f"{lost}; the command {command[0]!r} was stopped")
        return _EXIT_HELD
    code = child.returncode
    return 128 - code if code < 0 else code


def _release_for_run(lock: str, owner: str, kept: bool) -> None:
    """Release after run, unless the hold is ``kept`` (its owner's from before run); a
    failure is reported, and changes no exit code."""
    if kept:
        return
    try:
        release(lock, owner)
    except OSError as exc:
        _fail(f"the lock could not be released: {_describe_os_error(exc)}")
    except ValueError as exc:
        _fail(f"the lock could not be released: {exc}")


# --------------------------------------------------------------------------------------
# src/skf_run_lock/cli.py
# The command line: each command parsed by hand (argparse would print plain-text usage
# and exit 2, where the contract wants one JSON line and exit 1), run, and answered with
# one JSON line on stdout, or one JSON error line on stderr, and the contract's exit code.
# --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    from collections.abc import Callable


# Each command's options: True a required value, False an optional one, None a flag.
_OPTIONS: dict[str, dict[str, bool | None]] = {
    "acquire": {
        "--lock": True,
        "--owner": True,
        "--stale-after": False,
        "--wait": False,
        "--slots": False,
        "--shared": None,
        "--part": False,
        "--empty-is-stale": None,
        "--get": False,
    },
    "release": {"--lock": True, "--owner": True, "--get": False},
    "status": {
        "--lock": True,
        "--stale-after": False,
        "--slots": False,
        "--empty-is-stale": None,
        "--get": False,
    },
    "check": {"--lock": True, "--owner": False, "--null": None, "--get": False},
    "list": {"--under": True, "--stale-after": False, "--table": None, "--get": False},
    "serve": {"--lease": False},
    "run-id": {"--get": False},
}
# run takes acquire's options but --get: it prints nothing of its own on stdout.
_OPTIONS["run"] = {name: kind for name, kind in _OPTIONS["acquire"].items() if name != "--get"}
_COMMAND_NAMES = "acquire, release, status, check, run, list, serve or run-id"
# check takes paths as arguments (after a bare --, whatever they are), or "-" for
# stdin, which its options keep under this name.
_STDIN = "-"
_HELP_HINT = "--help shows how to use each"


# The words that ask about the tool rather than a lock, as people type them.
_ABOUT_THE_TOOL = ("-h", "--help", "help", "--version", "-V", "version")


def _about_the_tool(
    command: str, rest: list[str]
) -> tuple[str, dict[str, str], list[str], list[str]]:
    """The help (``help COMMAND``: that command's) or the version."""
    if command not in ("--version", "-V", "version"):
        if command != "help" or not rest:
            return "help", {}, [], []
        if len(rest) > 1 or rest[0] not in _OPTIONS:
            raise _UsageError(f"help takes one command of {_COMMAND_NAMES}, not {' '.join(rest)!r}")
        return "help", {"command": rest[0]}, [], []
    if rest:
        raise _UsageError(f"{command} takes nothing more, not {rest[0]!r}")
    return "version", {}, [], []


def _parse_args(argv: list[str]) -> tuple[str, dict[str, str], list[str], list[str]]:
    """The command, its ``{option: value}``, run's COMMAND and the keys of its --get
    options, in the order given."""
    if not argv:
        raise _UsageError(f"a command is required: {_COMMAND_NAMES}; {_HELP_HINT}")
    command, *rest = argv
    if command in _ABOUT_THE_TOOL:
        return _about_the_tool(command, rest)
    # run's own options stand before --; what follows is COMMAND's, --help included;
    # after check's, paths.
    own = rest[: rest.index("--")] if command in ("run", "check") and "--" in rest else rest
    if command in _OPTIONS and ("-h" in own or "--help" in own):
        return "help", {"command": command}, [], []
    tail: list[str] = []
    if command == "run":
        if "--" not in rest:
            raise _UsageError("run needs -- and the command to run after its options")
        rest, tail = own, rest[len(own) + 1 :]
    allowed = _OPTIONS.get(command)
    if allowed is None:
        raise _UsageError(_not_a_command(command))
    paths: list[str] | None = None
    if command == "check":
        paths, rest, tail = [], own, rest[len(own) + 1 :]
    options, got = _parse_options(command, allowed, rest, paths)
    if paths is not None:
        tail = _check_paths_given(options, paths, tail)
    missing = [name for name, required in allowed.items() if required and name not in options]
    if missing:
        raise _UsageError(f"{command} needs {' and '.join(missing)}")
    if command == "run" and not tail:
        raise _UsageError("run needs a command after --")
    if got:
        _check_get(command, options, got)
    return command, options, tail, got


def _check_get(command: str, options: dict[str, str], got: list[str]) -> None:
    """Each ``--get KEY``: a key the command prints, checked before it runs."""
    keys = _OUTPUT_KEYS[command]
    beside = _BESIDE_KEYS.get(command, ())
    if "--table" in options:
        raise _UsageError("--get prints keys of the JSON, which --table does not print")
    for key in got:
        if key not in keys + beside:
            also = f"; and, not in its JSON, {', '.join(beside)}" if beside else ""
            raise _UsageError(
                f"{command} prints no key {key!r}; its keys are {', '.join(keys)}" + also
            )


def _got_lines(result: Output, got: list[str]) -> str:
    """What ``--get`` prints: each key's value on a line of its own, in the order given
    (a key of the JSON, else what the output carries beside its keys: None where it
    carries nothing, a refusal's fence). With more than one key, a string that holds a
    line break (a path may) is written as JSON, so that each value stays on its own line
    for ``read``."""
    lines = []
    for key in got:
        keys = dict(result)
        value = keys[key] if key in keys else getattr(result, key, None)
        text = _value_text(value)
        if len(got) > 1 and ("\n" in text or "\r" in text):
            text = json.dumps(value)
        lines.append(text + "\n")
    return "".join(lines)


def _value_text(value: object) -> str:
    """One value of an output as --get prints it: a string as it is, null as nothing
    (so that ``[ -n "$value" ]`` tests it), anything else as JSON writes it (as ``jq
    -r`` does). A string stdout cannot encode (a console of a narrower code page) is
    written as JSON too, escaped, never a traceback."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value.encode(sys.stdout.encoding or "utf-8")
        except (UnicodeEncodeError, LookupError):
            return json.dumps(value)
        return value
    return json.dumps(value)


# Options that may be given more than once, each value kept: their values stand in
# the options joined by a NUL, which no argument can hold.
_REPEATED = ("--part",)
_JOINED = "\0"


def _repeated(options: dict[str, str], name: str) -> list[str] | None:
    """The values of an option given once or more (None: not given)."""
    return options[name].split(_JOINED) if name in options else None


def _parse_options(
    command: str, allowed: dict[str, bool | None], rest: list[str], paths: list[str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Each option given once, with its value (but those that repeat, _REPEATED); and
    --get's keys, which it may repeat. ``paths``: a command that takes arguments
    (check) gets each one that is no option (and "-") added to it."""
    options: dict[str, str] = {}
    got: list[str] = []
    args = iter(rest)
    for arg in args:
        if paths is not None and (arg == _STDIN or not arg.startswith("-")):
            paths.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        if name not in allowed:
            raise _UsageError(_not_taken(command, allowed, arg))
        if name in options and name not in _REPEATED:
            raise _UsageError(f"{name} is given more than once")
        if allowed[name] is None:
            if has_value:
                raise _UsageError(f"{name} takes no value")
            options[name] = ""
            continue
        if not has_value:
            value = next(args, "")
        if not value or value.startswith("--"):
            raise _UsageError(f"{name} needs a value")
        if name == "--get":
            got.append(value)
        elif name in options:  # one that repeats
            options[name] += _JOINED + value
        else:
            options[name] = value
    return options, got


def _check_paths_given(options: dict[str, str], paths: list[str], after: list[str]) -> list[str]:
    """check's paths: those given before a bare -- (where "-" says to read them from
    stdin, kept in ``options``), then all ``after`` it, as given; refused when "-" comes
    with others, twice, or --null comes without it."""
    if _STDIN in paths:
        if paths.count(_STDIN) > 1 or len(paths) > 1 or after:
            raise _UsageError(
                "check reads its paths from stdin (-) or takes them as arguments, not both:"
                " give - alone, or the paths (a path named - after --)"
            )
        options[_STDIN] = ""
        return []
    if "--null" in options:
        raise _UsageError("--null says how stdin separates paths: give - to read them from stdin")
    return [*paths, *after]


def _not_a_command(word: str) -> str:
    """Why ``word`` is no command: an option put first, or the closest command to it."""
    if word.startswith("-"):
        if any(word.partition("=")[0] in options for options in _OPTIONS.values()):
            return f"put the command first ({_COMMAND_NAMES}), then {word}"
        guess = _did_you_mean(word, ["--help", "--version"])
        return f"unknown option {word!r}{guess}; {_HELP_HINT}"
    guess = _did_you_mean(word, list(_OPTIONS))
    return f"unknown command {word!r}{guess}; use {_COMMAND_NAMES}; {_HELP_HINT}"


def _not_taken(command: str, allowed: dict[str, bool | None], arg: str) -> str:
    """Why ``command`` refuses ``arg``, and what it may have meant: the closest option,
    or, for a bare value, the option that takes it."""
    see = f"{command} --help shows its options"
    if arg.startswith("-"):
        guess = _did_you_mean(arg.partition("=")[0], list(allowed))
        return f"{command} does not take {arg!r}{guess}; {see}"
    place = next((name for name in ("--lock", "--under") if name in allowed), None)
    if place is None:
        return f"{command} takes no value such as {arg!r}; {see}"
    return (
        f"{command} does not take {arg!r} on its own: options come as --name value;"
        f" give it as {place} {_quoted(arg)}; {see}"
    )


def _did_you_mean(word: str, names: list[str]) -> str:
    """``; did you mean --owner?`` for the name closest to ``word`` (the one it begins,
    as ``-v`` begins --version, else the nearest spelling); empty if none is close."""
    stem = word.lstrip("-")
    starting = [name for name in names if stem and name.lstrip("-").startswith(stem)]
    if len(starting) == 1:
        return f" (did you mean {starting[0]}?)"
    from difflib import get_close_matches

    close = get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _stale_after_given(options: dict[str, str]) -> tuple[float, str, str]:
    """--stale-after: a duration (a bare number is minutes), checked; and the unit and
    text it was given in, for a later check's message."""
    text = options.get("--stale-after", str(DEFAULT_STALE_AFTER_MIN))
    seconds, unit = _duration_seconds(text, "--stale-after", "minutes")
    return _stale_after_within(seconds, "--stale-after", unit, repr(text)), unit, repr(text)


def _stale_after_seconds(options: dict[str, str]) -> float:
    return _stale_after_given(options)[0]


def _wait_seconds(options: dict[str, str]) -> float:
    """--wait: a duration (a bare number is seconds), checked."""
    text = options.get("--wait", "0")
    seconds, unit = _duration_seconds(text, "--wait", "seconds")
    return _wait_within(seconds, "--wait", _MAX_WAIT_SEC, unit, repr(text))


def _slots(options: dict[str, str]) -> int:
    """--slots N: digits only (no sign, point or exponent), from 1 to MAX_SLOTS."""
    text = options.get("--slots", "1")
    if not (text.isascii() and text.isdigit()):
        raise _UsageError(
            f"--slots must be a whole number of slots from 1 to {MAX_SLOTS}, not {text!r}"
        )
    # Digits past five make a count out of range whatever they say (and int() refuses
    # thousands of them); the message quotes the text as given, never a stand-in.
    count = int(text) if len(text) <= 5 else 0
    return _checked_slots(count, "--slots", given=text)


def _shared(options: dict[str, str]) -> bool:
    """--shared: a shared hold, which has no count of slots to give."""
    if "--shared" in options and "--slots" in options:
        raise _UsageError(
            "--shared and --slots cannot be given together: a shared hold is one of any"
            " number, never a slot; give one or the other"
        )
    return "--shared" in options


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _cli_request(
    options: dict[str, str], stale_after: float, *, keep_longer: bool = False
) -> _Request:
    """What acquire or run asks (``keep_longer``: run, which never shortens a hold its
    owner already has), from its options, each checked once, here (``stale_after``:
    checked already), the owner last (a run id added if it has none)."""
    wait = _wait_seconds(options)
    slots = _slots(options)
    shared = _shared(options)
    parts = _checked_parts_of(_repeated(options, "--part"), slots)
    owner, run_id = _owner_with_run_id(options["--owner"])
    return _Request(
        options["--lock"],
        owner,
        run_id,
        stale_after,
        wait=wait,
        empty_is_stale="--empty-is-stale" in options,
        slots=slots,
        shared=shared,
        parts=parts,
        keep_longer=keep_longer,
    )


def _cli_take(request: _Request) -> tuple[_Hold | None, AcquireResult]:
    """acquire's take, waiting in line if the request may, a line on the terminal saying
    its place: the hold (None: refused) and its output."""
    line = None
    if request.wait and _is_terminal(sys.stderr):  # a person sees it on a terminal only
        _compile_carried('usage')

        line = _WaitLine()
    try:
        return _take_waiting(request, line)
    finally:
        if line is not None:
            line.clear()


def _cli_acquire(options: dict[str, str], tail: list[str]) -> tuple[AcquireResult, int]:
    stale_after = _stale_after_seconds(options)
    hold, result = _cli_take(_cli_request(options, stale_after))
    code = _EXIT_HELD if hold is None else _EXIT_OK
    text = options.get("--stale-after", "")
    bare = text.replace(".", "", 1).isdigit()
    if code == _EXIT_OK and bare and stale_after > _BARE_MINUTES_NOTED_SEC:
        result["message"] += _minutes_meant(text, stale_after)
    return result, code


# A bare --stale-after above a day may be seconds meant as minutes (3600 holds for two
# and a half days): a take says in its message how long it took it to be.
_BARE_MINUTES_NOTED_SEC = 1440 * 60


def _minutes_meant(text: str, seconds: float) -> str:
    """What a take's message says of a bare ``--stale-after`` ``text`` above a day."""
    minutes = int(seconds // 60)
    hours, _ = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} day{'s' * (days != 1)}"]
    if hours:
        parts.append(f"{hours} hour{'s' * (hours != 1)}")
    return f"; --stale-after {text} is {text} minutes: {' '.join(parts)} (seconds: {text}s)"


def _cli_run(options: dict[str, str], tail: list[str]) -> tuple[None, int]:
    stale_after, unit, shown = _stale_after_given(options)
    _checked_renewable(stale_after, "--stale-after", unit, shown)
    request = _cli_request(options, stale_after, keep_longer=True)
    hold, result = _cli_take(request)
    if hold is None:
        sys.stderr.write(json.dumps(result) + "\n")  # stdout is COMMAND's
        return None, _EXIT_HELD
    return None, _run_holding(request, hold, tail)


def _cli_release(options: dict[str, str], tail: list[str]) -> tuple[ReleaseResult, int]:
    return release(options["--lock"], options["--owner"]), _EXIT_OK


def _cli_status(options: dict[str, str], tail: list[str]) -> tuple[StatusResult, int]:
    empty_is_stale = "--empty-is-stale" in options
    result = status(
        options["--lock"],
        _stale_after_seconds(options),
        empty_is_stale=empty_is_stale,
        slots=_slots(options),
    )
    return result, _EXIT_HELD if result["state"] == "held" else _EXIT_OK


def _cli_check(options: dict[str, str], tail: list[str]) -> tuple[CheckResult, int]:
    """check: the paths given (``tail``), or read from stdin ("-"), each checked."""
    paths = _paths_on_stdin("--null" in options) if _STDIN in options else tail
    result = check(options["--lock"], paths, options.get("--owner"))
    return result, _EXIT_OK if result["free"] else _EXIT_HELD


def _paths_on_stdin(null: bool) -> list[str]:
    """The paths on stdin, one a line (a line may end in CRLF), or each ended by a NUL
    (``null``: as ``git diff -z`` gives them, taken as they are); UTF-8. An empty one
    names no path: a script's printf of no paths writes an empty line."""
    try:
        data = b"" if sys.stdin is None else sys.stdin.buffer.read()
    except (OSError, ValueError) as exc:
        raise ValueError(f"check could not read the paths on stdin: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"the paths on stdin are not UTF-8 (byte {exc.start} is not): give each path"
            " as git prints it"
        ) from None
    if null:
        return [path for path in text.split("\0") if path]
    return [line.removesuffix("\r") for line in text.split("\n") if line.removesuffix("\r")]


def _cli_list(options: dict[str, str], tail: list[str]) -> tuple[ListResult | str, int]:
    result = list_locks(options["--under"], _stale_after_seconds(options))
    if "--table" in options:
        return _list_table(result, time.time()), _EXIT_OK
    return result, _EXIT_OK


# A session hold's timeout: renewed every third of it, so a killed server's holds lapse
# within it; at least run's shortest.
_DEFAULT_LEASE = "30s"


def _cli_serve(options: dict[str, str], tail: list[str]) -> tuple[None, int]:
    """serve: an MCP server over stdio; it exits 0 when the session ends."""
    text = options.get("--lease", _DEFAULT_LEASE)
    seconds, unit = _duration_seconds(text, "--lease", "seconds")
    lease = _stale_after_within(seconds, "--lease", unit, repr(text))
    _checked_renewable(lease, "--lease", unit, repr(text))
    _compile_carried('serve')

    return None, _serve(lease)


def _cli_help(options: dict[str, str], tail: list[str]) -> tuple[str, int]:
    """--help: the whole tool's, or (``COMMAND --help``) that command's."""
    command = options.get("command")
    _compile_carried('usage')

    if command is None:
        return _help(), _EXIT_OK
    return _command_help(command, _OPTIONS[command]), _EXIT_OK


def _cli_run_id(options: dict[str, str], tail: list[str]) -> tuple[dict[str, str], int]:
    return {"run_id": new_run_id()}, _EXIT_OK


def _cli_version(options: dict[str, str], tail: list[str]) -> tuple[dict[str, str], int]:
    return {"version": __version__}, _EXIT_OK


_COMMANDS: dict[str, Callable[[dict[str, str], list[str]], tuple[Output | str | None, int]]] = {
    "help": _cli_help,
    "acquire": _cli_acquire,
    "run": _cli_run,
    "release": _cli_release,
    "status": _cli_status,
    "check": _cli_check,
    "list": _cli_list,
    "serve": _cli_serve,
    "run-id": _cli_run_id,
    "version": _cli_version,
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``): print one JSON line and
    return the exit code (never SystemExit).

    :param argv: the arguments after the program's name.
    :returns: the exit code of the contract.
    """
    try:
        try:
            command, options, tail, got = _parse_args(sys.argv[1:] if argv is None else list(argv))
            result, code = _COMMANDS[command](options, tail)
        finally:
            _Interrupts.disarm()  # the call answers, whatever arrives
    except _Interrupted as stop:
        code = 128 + stop.signum
        error = _interrupted(stop.signum)
    except _UsageError as exc:
        code = _EXIT_BAD_ARGS
        error = f"usage error: {exc}"
    except ValueError as exc:
        code = _EXIT_BAD_ARGS
        error = str(exc)
    except OSError as exc:
        code = _EXIT_OS_ERROR
        error = f"the lock could not be read or written: {_describe_os_error(exc)}"
    else:
        if isinstance(result, dict) and got:
            sys.stdout.write(_got_lines(result, got))
            if command == "acquire" and code == _EXIT_HELD:
                # Why it was refused, and what to do, as run shows it: stdout is the value.
                sys.stderr.write(json.dumps(result) + "\n")
        elif result is not None:  # run leaves stdout to its command
            sys.stdout.write(result if isinstance(result, str) else json.dumps(result) + "\n")
        return code
    _fail(error)
    return code


def _entry() -> None:
    """The program: the copied file run as a script, or the installed command. Signals
    end it cleanly; it exits with main()'s code once its output is out."""
    _SEAMS.platform.end_lines_in_lf()  # Windows: as everywhere else
    try:
        try:
            _Interrupts.install()
            exit_code = main()
        finally:
            _Interrupts.disarm()
    except _Interrupted as stop:  # it came as main() began, before its own try
        exit_code = 128 + stop.signum
        _fail(_interrupted(stop.signum))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: teardown must not try again
        exit_code = exit_code or _EXIT_OS_ERROR
        sys.stdout = sys.stderr = None
    _Interrupts.ignore()
    sys.exit(exit_code)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/usage.py, carried as text: compiled only for a lock of its store
# What the command line shows a person, carried as text (a lock call never compiles
# it): the text of ``--help``, the whole tool's and each command's, and the line a waiting
# call keeps rewriting on a terminal. Kept apart from cli.py for that: compiling it would
# cost every lock call 0.8 ms (``compile()`` of this module, best of 50, CPython 3.11 on
# 2 cores; a call takes about 60 ms).
# --------------------------------------------------------------------------------------

_CARRIED['usage'] = (6461, (), r'''
import os
import sys
import textwrap


# Each command: what it does, in a line, and an example that runs as shown.
_COMMAND_HELP = {
    "acquire": (
        "take the lock, or renew this owner's hold; a missing run id is added",
        "{name} acquire --lock ~/.locks/demo.lock --owner demo:build --stale-after 30m",
    ),
    "release": (
        "end this owner's hold; a lock it does not hold is left alone",
        "owner=$({name} acquire --lock ~/.locks/demo.lock --owner demo:build --get owner)\n"
        '  {name} release --lock ~/.locks/demo.lock --owner "$owner"',
    ),
    "status": (
        "say who holds the lock, changing nothing",
        "{name} status --lock ~/.locks/demo.lock --get state",
    ),
    "check": (
        "say which of these paths lie in a part another run holds, changing nothing",
        "git diff --name-only -z HEAD | {name} check --lock ~/.locks/demo.lock --null -",
    ),
    "run": (
        "hold the lock while COMMAND runs, renewing it; exit with its code",
        "{name} run --lock ~/.locks/demo.lock --owner demo:test --wait 5m -- make test",
    ),
    "list": (
        "every lock under PLACE, as status sees each one",
        "{name} list --under ~/.locks --table",
    ),
    "serve": (
        "an MCP server over stdio for an agent session, whose holds end with it",
        "uv run --with 'mcp>=2.3,<3' {name} serve --lease 30s",
    ),
    "run-id": (
        "print a new run id",
        'owner="demo:build:$({name} run-id --get run_id)"',
    ),
}

# What each command's exit codes mean.
_EXITS = {
    "acquire": "0 taken or renewed, 1 bad arguments, 2 the lock could not be read or"
    " written, 3 held by another run (the JSON names it)",
    "release": "0 answered (released, or reason says absent or not-owner), 1 bad arguments,"
    " 2 the lock could not be read or written",
    "status": "0 free or stale, 3 held, 1 bad arguments, 2 the lock could not be read",
    "check": "0 no path lies in a part another run holds (or no path given), 3 some do"
    " (reserved names each path, holder and part), 1 bad arguments or paths, 2 the lock"
    " could not be read",
    "run": "COMMAND's own; before it starts 1, 2 or 3 as acquire (JSON on stderr), 126 or"
    " 127 if it cannot start; 3 if the lock is lost while it runs (COMMAND is stopped)",
    "list": "0 listed, 1 bad arguments, 2 the place could not be read",
    "serve": "0 when the session ends (stdin closed, SIGTERM, SIGINT, SIGHUP, the parent"
    " gone), its holds released; 1 bad arguments, or the MCP SDK missing (the message says"
    " how to bring it)",
    "run-id": "0",
}


def _option_lines(command: str) -> dict[str, tuple[str, str]]:
    """Each option a command may take: its form, and what it means (wrapped where it is
    shown; a line of its own after a newline)."""
    forms = "".join(f"\n{kind.form}" for kind in _SERVER_STORES)
    keys = ", ".join(_OUTPUT_KEYS.get(command, ()))
    owner = (
        "workflow:skill:run_id, as acquire printed it"
        if command == "release"
        else "workflow:skill[:run_id]; a missing run id is added. The run id names one run"
        " and must be unique to it: two runs given deploy:site:main both hold the lock as"
        " one (let acquire add it)"
    )
    if command == "check":
        owner = (
            "workflow:skill:run_id, as acquire printed it: leave out this run's own parts"
            " (default: every run's parts count)"
        )
    return {
        "--lock": (
            "--lock LOCK",
            f"a file of its own (~ expanded, made absolute), or an address:{forms}",
        ),
        "--owner": ("--owner OWNER", owner),
        "--under": ("--under PLACE", "a folder, or a server's address whose KEY is a prefix"),
        "--stale-after": (
            "--stale-after DURATION",
            "the holder's timeout: a hold not renewed for this long is abandoned,"
            " and the next acquire takes it; 90s, 10m, 2h, 1.5h, 1d or 1h30m (a bare number is"
            f" minutes; default {DEFAULT_STALE_AFTER_MIN}m, at most {MAX_STALE_AFTER_MIN}m)."
            " A hold is judged by its holder's own timeout; this one judges only"
            " records that carry none"
            + ("; run needs at least 3s, renewing every third of it" if command == "run" else ""),
        ),
        "--wait": (
            "--wait DURATION",
            "wait in line this long for the lock, first come, first served;"
            " 30s, 5m, 1h or 2m30s (a bare number is seconds; default 0, at most 24h)",
        ),
        "--slots": (
            "--slots N",
            f"the count of slots a lock no slot holds has (default 1, at most {_MAX_SLOTS});"
            " while any is held, status shows the count in force",
        )
        if command == "status"
        else (
            "--slots N",
            f"up to N runs hold the lock at once, one slot each (default 1, at most"
            f" {_MAX_SLOTS}); while any slot is held, every call names the same N",
        ),
        "--shared": (
            "--shared",
            "a shared hold: any number of runs hold it shared at once (readers), while"
            " nobody holds it without --shared (a writer, alone); not with --slots",
        ),
        "--part": (
            "--part PATTERN",
            "hold only this part of the lock (repeat for more; a path or a glob such as"
            " src/api or docs/**/*.md, as git reads it): holds conflict only where some"
            " path lies in a part of each; an owner naming other parts changes its hold to"
            " them, when what it adds is free; not with --slots",
        ),
        "--empty-is-stale": (
            "--empty-is-stale",
            "an empty lock file (flock(1) leaves one) is stale at once",
        ),
        "--table": ("--table", "a table for a person instead of JSON"),
        "--null": (
            "--null",
            "with -, the paths on stdin each end with a NUL (git diff -z, find -print0),"
            " not a line break",
        ),
        "--lease": (
            "--lease DURATION",
            "the timeout of the session's holds, renewed every third of it while the"
            " server lives: a killed server's holds lapse within it; 30s, 2m (a bare number"
            " is seconds; default 30s, at least 3s)",
        ),
        "--get": (
            "--get KEY",
            "print only KEY's value, alone on one line (null: an empty line); given more"
            " than once, each KEY's value on a line of its own, in the order given; KEY is"
            f" one of {keys}"
            + (
                ", or fence (its hold's, not in the JSON); a refusal (exit 3) also writes"
                " its JSON on stderr"
                if command == "acquire"
                else ""
            ),
        ),
    }


def _command_help(command: str, options: dict[str, bool | None]) -> str:
    """The text of ``COMMAND --help``: its usage, its own options, an example and what
    its exit codes mean."""
    name = _program_name()
    summary, example = _COMMAND_HELP[command]
    described = _option_lines(command)
    shown = [
        f"{described[option][0]}" if required else f"[{described[option][0]}]"
        for option, required in options.items()
    ]
    if "--get" in options:  # it may be given more than once
        shown[list(options).index("--get")] += "..."
    if command == "run":
        shown.append("-- COMMAND [ARG...]")
    if command == "check":
        shown.append("[PATH... | -]")
    usage = _wrapped(f"usage: {name} {command}", shown)
    lines = [usage, "", f"{summary[0].upper()}{summary[1:]}.", "", "options:"]
    for option in options:
        form, meaning = described[option]
        text, *own_lines = meaning.split("\n")
        first, *rest = [*textwrap.wrap(text, 88 - 24), *own_lines]
        lines.append(f"  {form:<22}{first}" if len(form) < 22 else f"  {form}\n{'':24}{first}")
        lines.extend(f"{'':24}{more}" for more in rest)
    if command == "check":
        lines.append(
            f"  {'PATH':<22}a path as git prints it, from the top of the tree (src/api/x.py);"
            f"\n{'':24}after a bare --, every argument is a path"
        )
        lines.append(f"  {'-':<22}read the paths from stdin, one a line (--null: NUL-ended)")
    lines.append(f"  {'-h, --help':<22}show this help")
    lines += ["", "example:", "  " + example.format(name=name), ""]
    lines.append(
        textwrap.fill(_EXITS[command], 88, initial_indent="exit: ", subsequent_indent="      ")
    )
    if command == "serve":
        lines.append("Speaks MCP on stdin and stdout; an error is one JSON line on stderr.")
    elif command != "run":
        lines.append("Prints one line of JSON on stdout; an error is one JSON line on stderr.")
    return "\n".join(lines) + "\n"


def _wrapped(head: str, parts: list[str]) -> str:
    """``head`` and ``parts`` in lines of at most 88 columns, a part never split, the
    later lines indented under the first part."""
    pad = " " * (len(head) + 1)
    lines = [head]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) > 88 and lines[-1] != head:
            lines.append(pad + part)
        else:
            lines[-1] += " " + part
    return "\n".join(lines)


def _program_name() -> str:
    return "skf-run-lock" if __name__ == "skf_run_lock.usage" else "skf-run-lock.py"


def _help() -> str:
    """The text of ``--help``: every command in a line; each has a help of its own."""
    name = _program_name()
    commands = "".join(
        f"  {command:<10}{summary}\n" for command, (summary, _) in _COMMAND_HELP.items()
    )
    return f"""\
usage: {name} COMMAND [OPTIONS]   ({name} COMMAND --help: its options)
       {name} --version

A run lock kept in a file, etcd or Redis, for workflows made of many separate
processes: one run holds it at a time (or N, with --slots; or any number at once,
with --shared, while nobody holds it alone), a crashed run's hold expires after its
timeout, and waiters are served first come, first served.

commands:
{commands}
Prints one line of JSON (run: nothing on stdout but COMMAND's; --get KEY: that value
alone, a line for each --get). Exit 0 done, 1 bad arguments, 2 the lock could not be
read or written, 3 held by another run, 128+n interrupted by signal n.
"""


class _WaitLine:
    """While --wait waits on a terminal: a line on stderr, rewritten in place."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, result: AcquireResult, left: float, place: int) -> None:
        try:
            width = os.get_terminal_size(sys.stderr.fileno()).columns
        except (OSError, ValueError):
            width = 0
        line = (
            f"waiting, {_ordinal(place)} in line: held by {_holder_text(result['held_by'])}"
            f" since {result['held_since']}, giving up in {_duration_text(-(-left // 1))}"
            f" ({result['lock']})"
        )
        # A wrapped line could not be taken back by \r.
        sys.stderr.write(f"\r{line[: width - 1] if width else line}\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/parts.py, carried as text: compiled only for a lock of its store
# Parts of a tree: the path patterns a hold may name, checked, and the questions asked
# of them: does a part cover a path (and which of many parts does each of many paths lie
# in: indexed), and do two parts share one. Pure: no store, no clock. Compiled only for a
# call that names parts or paths.
#
# A part is read as git reads a ``:(glob)`` pathspec: segments between ``/``; ``*`` is
# any characters within a segment, ``?`` one character (a code point), a segment of
# stars alone (``**``) any number of whole segments, none included; elsewhere a run of
# stars is ``*``. A part covers every path it matches and everything under such a path.
# A path is literal (its ``*`` and ``?`` are characters). Both are compared with ASCII
# case folded, everywhere: on macOS and Windows ``Src/A.py`` is ``src/a.py``, and a
# false conflict on Linux is the safe side.
#
# A part is kept as written after normalisation (``./`` at the start and every ``/`` at
# the end dropped, its case kept), which is what messages show; it is compared by its
# key (``_part_key``: ASCII folded, runs of stars collapsed), so a list of parts is a
# set of keys, each shown by the least of the spellings given for it.
# --------------------------------------------------------------------------------------

_CARRIED['parts'] = (6747, (), r'''
if TYPE_CHECKING:
    _Pattern = tuple[str, ...]  # a part's segments, each "**" or a glob (folded)

_PART_MAX_LEN = 255
_PARTS_MAX = 100
_GLOBSTAR = "**"
# Each part's pattern and literal leading segments, made once for its text: a take is
# decided against every part of every holder, and a waiter reads the same parts at
# each look. A memo starts afresh once full: no content makes one hold more than a few
# megabytes.
_SHAPES: dict[str, tuple[_Pattern, _Pattern]] = {}
_SHAPES_MAX = 2048
_SHAPES_LONGEST = 128  # characters: a longer part is made anew each time
# A hold's parts made ready to be met by others' (_Leads), by the hold's parts: a take
# meets every holder's parts with its own, a waiter's turn every place's with its own.
_LEADS: dict[tuple[str, ...], _Leads] = {}
_LEADS_MAX = 2  # the decisions meet one hold's parts with many in turn


def _checked_part(part: object) -> str:
    """``part`` as a hold keeps it: normalised, its case kept; or ValueError, one line
    naming the part and what is wrong with it."""
    if not isinstance(part, str):
        raise ValueError(f"a part must be a string, not {type(part).__name__}")
    if not part:
        raise ValueError("a part must not be empty: name a path or a pattern")
    if len(part) > _PART_MAX_LEN:
        raise ValueError(
            f"part {_shown(part)} is {len(part)} characters long; at most {_PART_MAX_LEN} allowed"
        )
    # Every record read checks each of its holders' parts: ASCII text is asked at once.
    controls = not part.isprintable() if part.isascii() else any(map(_is_control, part))
    if controls:
        raise ValueError(
            f"part {_shown(part)} holds a control character: name paths by printable ones"
        )
    for c in "[]{}":
        if c in part:
            raise ValueError(
                f"part {_shown(part)} holds {c!r}: only '*', '?' and '**' are patterns in a part"
            )
    return _normalised(part, "part")


def _is_control(c: str) -> bool:
    """Whether the character ``c`` is a control character (C0, DEL or C1)."""
    return c < " " or "\x7f" <= c <= "\x9f"


def _checked_parts(parts: object) -> tuple[str, ...] | None:
    """The parts a caller gave, checked, as a set: one per key, in the order of the keys;
    None (no parts: the whole lock) stays None. ValueError, one line, for anything else
    than a list (or tuple, or set) of 1 to 100 parts."""
    if parts is None:
        return None
    if isinstance(parts, str):
        raise ValueError("parts must be a list of strings, not a string: put one part in a list")
    if not isinstance(parts, list | tuple | set | frozenset):
        raise ValueError(f"parts must be a list of strings, not {type(parts).__name__}")
    if not parts:
        raise ValueError("parts is empty: leave parts out to hold the lock whole")
    if len(parts) > _PARTS_MAX:
        raise ValueError(f"{len(parts)} parts given; at most {_PARTS_MAX} allowed")
    spellings: dict[str, str] = {}
    for part in parts:
        text = _checked_part(part)
        key = _part_key(text)
        # The least spelling, so that the same set given in any order is kept alike.
        spellings[key] = min(spellings.get(key, text), text)
    return tuple(spellings[key] for key in sorted(spellings))


def _checked_path(path: object, posix_names: bool = False) -> str:
    """``path`` (one a commit touches, as git prints it) normalised as a part is, its
    case kept; or ValueError, one line, naming it. Its ``*``, ``?`` and brackets are
    characters. A ``.`` segment is refused as ``..`` is (git never prints one). Where a
    file's name may hold a backslash or a colon (``posix_names``), they are characters
    of it (git names such a file so); elsewhere (Windows) a backslash is a separator a
    person typed, and a drive an absolute path: refused, as in a part."""
    if not isinstance(path, str):
        raise ValueError(f"a path must be a string, not {type(path).__name__}")
    if not path:
        raise ValueError("a path must not be empty")
    return _normalised(path, "path", posix_names)


def _checked_paths(paths: object, posix_names: bool = False) -> tuple[str, ...]:
    """The paths a caller asks about, each checked (_checked_path), in the order given,
    each once (the first time it came); ValueError, one line, for the first that is
    wrong, or for anything else than a list (or tuple) of strings."""
    if isinstance(paths, str):
        raise ValueError("paths must be a list of strings, not a string: put one path in a list")
    if not isinstance(paths, list | tuple):
        raise ValueError(f"paths must be a list of strings, not {type(paths).__name__}")
    return tuple(dict.fromkeys(_checked_path(path, posix_names) for path in paths))


def _normalised(text: str, what: str, posix_names: bool = False) -> str:
    """``text`` without ``./`` at its start nor ``/`` at its end, or ValueError naming
    it (``what``: part or path) for what neither may hold (``posix_names``: a path whose
    names may hold a backslash or a colon)."""
    given = text  # as messages show it
    if "\\" in text and not posix_names:
        raise ValueError(f"{what} {_shown(given)} holds a backslash: separate segments with '/'")
    drive = text[1:2] == ":" and text[0].isascii() and text[0].isalpha() and not posix_names
    if text.startswith("/") or drive:
        raise ValueError(
            f"{what} {_shown(given)} is an absolute path: name it from the top of the tree,"
            " with '/' between segments"
        )
    if text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if text in ("", "."):
        if what == "part":
            raise ValueError(
                f"part {_shown(given)} names the whole tree: leave parts out to hold the lock whole"
            )
        raise ValueError(
            f"path {_shown(given)} names the top of the tree: name a file or folder in it"
        )
    segments = text.split("/")
    if "" in segments:
        raise ValueError(
            f"{what} {_shown(given)} holds an empty segment (two '/' in a row): write one '/'"
        )
    if "." in segments:
        raise ValueError(f"{what} {_shown(given)} holds a '.' segment: leave it out")
    if ".." in segments:
        raise ValueError(
            f"{what} {_shown(given)} holds a '..' segment: name the path from the top of the tree"
            " without one"
        )
    return text


def _shown(text: str) -> str:
    """``text`` as a message shows it: quoted on one line, a long one cut."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}..."


def _folded(text: str) -> str:
    """``text`` with ASCII letters lowercased, and no other character changed."""
    if text.isascii():
        return text.lower()
    return "".join(c.lower() if c.isascii() else c for c in text)


def _pattern(part: str) -> _Pattern:
    """A checked part's segments, folded: ``**`` for a segment of two stars or more, a
    glob with each run of stars made one otherwise."""
    return _shape(part)[0]


def _shape(part: str) -> tuple[_Pattern, _Pattern]:
    """A checked part's pattern, and its literal leading segments (those before the
    first that holds a star or "?"), made once for each text (_SHAPES)."""
    shape = _SHAPES.get(part)
    if shape is None:
        pattern = _made_pattern(part)
        lead = next((at for at, s in enumerate(pattern) if "*" in s or "?" in s), len(pattern))
        shape = (pattern, pattern[:lead])
        if len(part) <= _SHAPES_LONGEST:
            if len(_SHAPES) >= _SHAPES_MAX:
                _SHAPES.clear()
            _SHAPES[part] = shape
    return shape


def _made_pattern(part: str) -> _Pattern:
    """A part's pattern (see _pattern), made."""
    segments = []
    for written in _folded(part).split("/"):
        if len(written) > 1 and written.strip("*") == "":
            segments.append(_GLOBSTAR)
            continue
        glob = written
        while "**" in glob:
            glob = glob.replace("**", "*")
        segments.append(glob)
    return tuple(segments)


def _part_key(part: str) -> str:
    """What a checked part is compared by: two parts with one key are one part."""
    return "/".join(_pattern(part))


def _covers(part: str, path: str) -> bool:
    """Whether ``path`` lies in ``part`` (both checked): its first segments, some or
    all, match the pattern."""
    return _ready_covers(_Ready(part), _folded(path))


class _Ready:
    """A checked part made ready to be matched against many paths: ``folded``, and
    unless it is literal (``pattern`` None) its pattern and where its first star or
    "?" stands (``first``): what stands before it is literal (a "**" there may take no
    segment: "src/**" covers "src")."""

    __slots__ = ("first", "folded", "pattern")

    def __init__(self, part: str) -> None:
        self.folded = _folded(part)
        star, mark = self.folded.find("*"), self.folded.find("?")
        self.first = star if mark < 0 or 0 <= star < mark else mark
        self.pattern = None if self.first < 0 else _pattern(part)


def _ready_covers(ready: _Ready, path: str) -> bool:
    """Whether the checked, folded ``path`` lies in the part ``ready`` is."""
    part = ready.folded
    if ready.pattern is None:  # the part's own path, or one under it
        return path.startswith(part) and path[len(part) : len(part) + 1] in ("", "/")
    if not (path + "/").startswith(part[: ready.first]):
        return False
    return _prefix_matches(ready.pattern, path.split("/"))


class _PartIndex:
    """Parts (checked) indexed to find, for each of many paths, those it lies in. Each
    part is asked once however many hold it (readers share the same parts). Every
    literal segment of a part (no star, no "?") must be some segment of a path it
    covers, folded: a part is filed in a tree of folders by its literal leading
    segments (``src/api`` for ``src/api/*.py``), and there by its last literal segment
    after them (looked for among a path's segments), else (no literal segment after
    them: ``**/*.md``, ``src/*``) tried on every path that reaches its folder, and only
    if the path holds each run of characters its globs must match (``.md``). A path
    walks down its own first segments: ten thousand paths against a thousand parts,
    all under one folder, ask each path about the few parts that name its folders."""

    __slots__ = ("at", "pieces", "ready", "top")

    def __init__(self, parts: list[str]) -> None:
        places: dict[str, list[int]] = {}  # each part's key, and where it stands
        for at, part in enumerate(parts):
            places.setdefault(_part_key(part), []).append(at)
        self.at = list(places.values())
        self.ready = [_Ready(parts[same[0]]) for same in self.at]
        self.pieces = [_pieces(ready.folded) for ready in self.ready]
        self.top = _IndexFolder()
        for one, ready in enumerate(self.ready):
            segments = ready.folded.split("/")
            folder, depth = self.top, 0
            for segment in segments:
                if "*" in segment or "?" in segment:
                    break
                folder = folder.under.setdefault(segment, _IndexFolder())
                depth += 1
            literal = [s for s in segments[depth:] if "*" not in s and "?" not in s]
            if literal:
                folder.by_any.setdefault(literal[-1], []).append(one)
            else:
                folder.everywhere.append(one)

    def covering(self, path: str) -> list[int]:
        """The places in ``parts``, in order, of those that ``path`` (checked) lies in."""
        folded = _folded(path)
        segments = folded.split("/")
        tried: list[int] = []
        folder = self.top
        named: set[str] | None = None  # the path's segments, once a folder asks
        for segment in [*segments, ""]:  # "" names no folder: the path's own is the last
            tried += folder.everywhere
            if folder.by_any:
                named = set(segments) if named is None else named
                for one in named:
                    tried += folder.by_any.get(one, ())
            below = folder.under.get(segment)
            if below is None:
                break
            folder = below
        found = [
            self.at[one]
            for one in tried
            if all(piece in folded for piece in self.pieces[one])
            and _ready_covers(self.ready[one], folded)
        ]
        if len(found) == 1:
            return list(found[0])
        return sorted(at for same in found for at in same)  # in the parts' order


class _IndexFolder:
    """A folder of a _PartIndex: the parts whose literal leading segments lead to it,
    by their last literal segment after those (``by_any``) or tried on every path
    (``everywhere``), and the folders ``under`` it, by their folded names."""

    __slots__ = ("by_any", "everywhere", "under")

    def __init__(self) -> None:
        self.by_any: dict[str, list[int]] = {}
        self.everywhere: list[int] = []
        self.under: dict[str, _IndexFolder] = {}


def _pieces(part: str) -> list[str]:
    """The runs of characters (no star, no "?") of a folded part: a path it covers
    holds each of them, as its segments match the part's."""
    return [piece for piece in part.replace("?", "*").replace("/", "*").split("*") if piece]


def _prefix_matches(pattern: _Pattern, segments: list[str]) -> bool:
    """Whether some of the first ``segments`` (none to all) match ``pattern``: the
    positions in the pattern reached after each segment, a ``**`` passed over freely."""
    end = len(pattern)
    reached = _past_globstars(pattern, {0})
    for segment in segments:
        if end in reached:
            return True
        after = set()
        for at in reached:
            glob = pattern[at]
            if glob == _GLOBSTAR:
                after.add(at)
            elif _glob_matches(glob, segment):
                after.add(at + 1)
        if not after:
            return False
        reached = _past_globstars(pattern, after)
    return end in reached


def _past_globstars(pattern: _Pattern, reached: set[int]) -> set[int]:
    """``reached`` with every position a ``**`` matching no segment leads to."""
    more = set(reached)
    for start in reached:
        at = start
        while at < len(pattern) and pattern[at] == _GLOBSTAR:
            at += 1
            more.add(at)
    return more


def _glob_matches(glob: str, text: str) -> bool:
    """Whether the segment ``text`` matches ``glob`` (both folded). A star first takes
    nothing; on a mismatch the last star takes one character more (the other stars'
    choices need no revisiting), so this is at worst the product of the lengths."""
    if "*" not in glob and "?" not in glob:
        return glob == text
    at = read = 0
    star = -1  # the last star passed, and where the text stood after what it took
    resume = 0
    while read < len(text):
        token = glob[at] if at < len(glob) else ""
        if token == "*":
            star, resume = at, read
            at += 1
        elif token and (token == "?" or token == text[read]):
            at += 1
            read += 1
        elif star >= 0:
            resume += 1
            at, read = star + 1, resume
        else:
            return False
    return glob[at:].strip("*") == ""


def _overlap(a: str, b: str) -> bool:
    """Whether some path lies in both parts (checked): decided exactly, in time
    proportional to the product of their lengths."""
    return _patterns_overlap(_pattern(a), _pattern(b))


def _first_overlap(
    ours: tuple[str, ...] | None, theirs: tuple[str, ...] | None
) -> tuple[str | None, str | None] | None:
    """The first pair (our part, their part), in the parts' order, that shares a path,
    or None if no pair does. None for a set is a whole hold: it conflicts with every
    part, and stands as None in the pair. Only pairs whose literal leading segments
    agree are tried (_Leads)."""
    if ours is None or theirs is None:
        return (ours[0] if ours else None, theirs[0] if theirs else None)
    leads = _LEADS.get(ours)
    if leads is None:
        leads = _Leads(ours)
        if len(_LEADS) >= _LEADS_MAX:
            _LEADS.clear()
        _LEADS[ours] = leads
    shapes = [_shape(part) for part in theirs]
    tried = sorted((mine, at) for at, shape in enumerate(shapes) for mine in leads.meeting(shape))
    for mine, at in tried:
        if _patterns_overlap(leads.patterns[mine], shapes[at][0]):
            return (ours[mine], theirs[at])
    return None


class _Leads:
    """A hold's parts made ready to be met by other parts: each one's pattern, and
    their places filed in a tree of folders by their literal leading segments. A
    path's first segments are those of both parts it lies in, so two parts share one
    only if their literal leading segments agree as far as both have them
    (``src/api/**`` and ``src/cli/*.py`` never do): ours end on the way down to where
    theirs end, or under it."""

    __slots__ = ("patterns", "top")

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.patterns: list[_Pattern] = []
        self.top = _LeadFolder()
        for at, part in enumerate(parts):
            pattern, lead = _shape(part)
            self.patterns.append(pattern)
            folder = self.top
            for segment in lead:
                folder.under_or_here.append(at)
                folder = folder.under.setdefault(segment, _LeadFolder())
            folder.under_or_here.append(at)
            folder.here.append(at)

    def meeting(self, shape: tuple[_Pattern, _Pattern]) -> list[int]:
        """Our places whose literal leading segments agree with those of ``shape``."""
        found: list[int] = []
        folder = self.top
        for segment in shape[1]:
            found += folder.here
            below = folder.under.get(segment)
            if below is None:
                return found
            folder = below
        return found + folder.under_or_here


class _LeadFolder:
    """A folder of _Leads: the places of the parts whose literal leading segments end
    ``here``, of those that end here or under it, and the folders ``under`` it."""

    __slots__ = ("here", "under", "under_or_here")

    def __init__(self) -> None:
        self.here: list[int] = []
        self.under_or_here: list[int] = []
        self.under: dict[str, _LeadFolder] = {}


def _patterns_overlap(a: _Pattern, b: _Pattern) -> bool:
    """Whether some path lies in both. Walk the two patterns' segments side by side
    (the product of their segment automata, whose only moves are these): two globs
    take one segment together, so some segment must match both. A ``**`` reached on
    either side decides: it takes, one at a time, the segments the rest of the other
    part needs (some segment matches every glob of a checked part) until that part is
    used up. A part used up holds all under what it matched, so the other part is
    finished under it."""
    for x, y in zip(a, b, strict=False):
        if _GLOBSTAR in (x, y):
            return True
        if not _globs_meet(x, y):
            return False
    return True  # one part is used up


def _globs_meet(g: str, h: str) -> bool:
    """Whether some segment (never empty, ``.`` or ``..``) matches both globs (folded,
    runs of stars made one). A literal one is that segment; a glob meets itself (its
    stars and "?" taking letters); two others are met by _globs_share."""
    if g == h or ("*" not in g and "?" not in g):
        return g not in ("", ".", "..") and _glob_matches(h, g)
    if "*" not in h and "?" not in h:
        return h not in ("", ".", "..") and _glob_matches(g, h)
    return _globs_share(g, h)


def _globs_share(g: str, h: str) -> bool:
    """Whether some segment matches both globs: the product of the two, walked a row
    (a position in ``g``) at a time, each row one set of positions in ``h`` (bit j:
    position j) for each of what the characters read so far may be: nothing (``e``),
    ``.`` (``d1``), ``..`` (``d2``), or anything else (``s``, a segment: a path never
    holds an empty, ``.`` or ``..`` segment, so two globs that share only those share
    no path). Where either side takes any character, one that is not a dot is best (a
    segment stays one whatever follows). Moves go to the next row, or along the row to
    a later position (over a star of ``h`` that takes nothing, or a character that a
    star of ``g`` takes), never back: so each row is finished before the next, and a
    whole row moves at once, its sets shifted and masked: exact, and as fast as a few
    operations on integers a row."""
    while "**" in g or "**" in h:  # one star of a run is enough, and moves once
        g, h = g.replace("**", "*"), h.replace("**", "*")
    end = len(h)
    full = (1 << (end + 1)) - 1
    stars = characters = 0  # the positions in h of its stars, and of the rest
    equal: dict[str, int] = {}  # of each character (and of "?")
    for j, y in enumerate(h):
        if y == "*":
            stars |= 1 << j
        else:
            characters |= 1 << j
            equal[y] = equal.get(y, 0) | 1 << j
    dots = equal.get(".", 0)
    anything = equal.get("?", 0)
    e, d1, d2, s = 1, 0, 0, 0
    for x in g + "/":  # "/", in no glob: the row past g's end
        reached = e | d1 | d2 | s
        if not reached:
            return False
        if x == "*":
            # Along the row: a star of h takes nothing, and g's star takes each
            # character of h, a dot moving e, d1 and d2 on and any other making a
            # segment; two stars together read any character, a segment. So every
            # position right of the first reached is reached, and right of the first
            # segment all are one.
            e |= (e & stars) << 1
            d1 |= (e & dots) << 1
            d1 |= (d1 & stars) << 1
            d2 |= (d1 & dots) << 1
            d2 |= (d2 & stars) << 1
            after = full & -(reached & -reached)
            s |= after & stars | (after & characters & ~dots) << 1 | (d2 & dots) << 1
            s = full & -(s & -s)
            continue  # down: the star takes no more
        e |= (e & stars) << 1
        d1 |= (d1 & stars) << 1
        d2 |= (d2 & stars) << 1
        s |= (s & stars) << 1
        if x == "/":
            break
        # Down: x read beside a star of h (which takes it), or beside a token of h
        # that it matches (diagonally): a dot moves e, d1 and d2 on, any other
        # character makes a segment.
        matched = characters if x == "?" else equal.get(x, 0) | anything
        dotted = matched if x == "." else dots if x == "?" else 0  # read as a dot
        starred = stars if x == "." else 0  # beside which a dot is read
        beside = e | d1 | d2 | s
        e, d1, d2, s = (
            0,
            e & starred | (e & dotted) << 1,
            d1 & starred | (d1 & dotted) << 1,
            (d2 | s) & starred
            | ((d2 | s) & dotted) << 1
            | beside & stars & ~starred
            | (beside & matched & ~dotted) << 1,
        )
    return bool(s >> end & 1)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/kept_connections.py, carried as text: compiled only for a lock of its store
# Connections kept from one call to the next in a process: one idle list per server
# endpoint, user, credentials and TLS files, each connection lent to one call at a time
# (a Redis WATCH lives on its connection), sound when lent, never used by a forked child,
# closed at exit. Compiled only for a server's lock.
# --------------------------------------------------------------------------------------

_CARRIED['kept_connections'] = (7291, (), r'''
import atexit
import os
import threading


if TYPE_CHECKING:
    from typing import TypeVar


    _C = TypeVar("_C", bound=_Connection)

    # What a kept connection was made for: its scheme, its endpoint, the user, the
    # number of its secret (never the secret itself) and its TLS files as they stood.
    _KeptKey = tuple[object, ...]

# The idle connections kept per key: as many as a process's threads used at once, up to
# this (serve's tool calls and renewals each lend one while they run).
_IDLE_MAX = 4
# How long a request that changes nothing waits for the first answer on a kept
# connection before it is sent again on a new one: a NAT or a firewall that dropped the
# connection while it was idle swallows what comes on it without a word.
_UNPROVEN_ANSWER_SEC = 1.0


class _KeptConnections:
    """The process's kept connections: ``idle``, per key, each idle connection with
    when it was kept, the newest last; ``secrets``, the number of each secret a key was
    made with."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.idle: dict[_KeptKey, list[tuple[float, _Connection]]] = {}
        self.secrets: dict[str, int] = {}

    def secret_number(self, secret: str | None) -> int:
        """The number that stands for ``secret`` in a key (0: none), so that no key, and
        nothing that shows one, holds a password. A hash would cost a call hashlib's
        import, 2 ms."""
        if not secret:
            return 0
        with self.guard:
            return self.secrets.setdefault(secret, len(self.secrets) + 1)

    def lend(self, key: _KeptKey, kind: type[_C]) -> _C | None:
        """An idle connection kept for ``key``, sound (nothing came on it while it was
        idle), lent to the caller alone until it keeps it again; None if none is.
        It is ``unproven`` until its first answer."""
        now = _SEAMS.clock()
        while True:
            with self.guard:
                idle = self.idle.get(key)
                if not idle:
                    return None
                since, connection = idle.pop()
            # Idle too long, a NAT or a proxy may have dropped it without a word: a
            # request sent into that silence would wait out its deadline.
            fresh = now - since < _SEAMS.kept_idle_sec
            if isinstance(connection, kind) and fresh and connection.sound():
                connection.unproven = True
                return connection
            connection.close()

    def keep(self, connection: _Connection) -> None:
        """Keep ``connection``, clean (every answer read), for the next call made with
        its key; closed instead once enough are kept, or if another process made it."""
        if connection.pid != os.getpid() or connection.received:
            connection.close()
            return
        with self.guard:
            idle = self.idle.setdefault(connection.kept_as, [])
            if len(idle) < _IDLE_MAX:
                idle.append((_SEAMS.clock(), connection))
                return
        connection.close()

    def discard(self, key: _KeptKey) -> None:
        """Close the idle connections of ``key``: one of them was found broken (the
        server restarted, a proxy reset them), so the others likely are too."""
        with self.guard:
            idle = self.idle.pop(key, [])
        for _, connection in idle:
            connection.close()

    def close_all(self) -> None:
        """At exit."""
        with self.guard:
            idle, self.idle = self.idle, {}
        for connections in idle.values():
            for _, connection in connections:
                connection.close()

    def forget(self) -> None:
        """In a forked child: the parent's connections are the parent's. The child lets
        go of its copies (its descriptors closed, nothing sent: the parent's connection
        goes on) and makes its own. A new guard: a thread of the parent may have held
        this one when the process forked."""
        self.guard = threading.Lock()
        idle, self.idle = self.idle, {}
        for connections in idle.values():
            for _, connection in connections:
                connection.let_go()


_KEPT = _KeptConnections()
atexit.register(_KEPT.close_all)
if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_KEPT.forget)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/server_gateway.py, carried as text: compiled only for a lock of its store
# What the server stores share: a gateway's lock address parsed, a deadline for each
# step, TLS, patience and when to give up, a connection that never waits past its deadline
# (its host's name lookup included), kept between calls, the wording of failures, a store
# that has its gateway, and a waiter's place kept as a value on the server. Compiled only
# for a server's lock.
# --------------------------------------------------------------------------------------

_CARRIED['server_gateway'] = (7411, ('kept_connections',), r'''
import errno
import json
import os
import re
import sys
import threading
import time


if TYPE_CHECKING:
    import select
    import socket
    import ssl
    from collections.abc import Callable
    from typing import Self, TypeVar

    _T = TypeVar("_T")
    _C = TypeVar("_C", bound="_Connection")

    # An address as the system gives it: its family, and (host, port[, flow, scope]).
    _Address = tuple[int, tuple[object, ...]]

_ANSWER_MAX_BYTES = 8 * 1024 * 1024
_TLS_FAILURE = "TLS failure"
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?"


def _seconds_left(deadline: float) -> float:
    left = deadline - _SEAMS.clock()
    if left <= 0:
        raise TimeoutError(errno.ETIMEDOUT, "timed out")
    return left


def _unknown_outcome(owner: str, taking: bool) -> str:
    if taking:
        return f"the lock may have been taken by {owner}: acquire again to renew it"
    return f"the lock of {owner} may have been released: release again to be sure"


def _place_value(place: _Place) -> bytes:
    """A waiter's place as the value a server keeps (a shared waiter's says so)."""
    entry: dict[str, object] = {
        "owner": place.owner,
        "since": _format_time(place.since),
        "stale_after_seconds": place.stale_after,
    }
    if place.shared:
        entry["shared"] = True
    if place.parts is not None:
        entry["parts"] = list(place.parts)
    return json.dumps(entry).encode()


# A place's fields as a server's value keeps them: owner, since, timeout, whether it
# waits for a shared hold, and for which parts (None: the lock whole).
_ValueFields = tuple[str, int, float, bool, tuple[str, ...] | None]
# What each place's value gave (None: not a place).
_PLACES_READ: dict[bytes, _ValueFields | None] = {}


def _place_of(ticket: str, value: bytes) -> _Place | None:
    """The place a server's value gives; None if it is not one."""
    fields = _remembered(_PLACES_READ, value, _value_fields)
    if fields is None:
        return None
    owner, since, timeout, shared, parts = fields
    return _Place(ticket, owner, since, timeout, None, shared=shared, parts=parts)


def _value_fields(value: bytes) -> _ValueFields | None:
    try:
        entry = json.loads(value)
        owner = entry["owner"]
        since = _time_of(entry["since"])
        timeout = _holder_timeout(entry["stale_after_seconds"])
        shared = entry.get("shared") is True
        parts = _parts_read(entry.get("parts"))
    except (ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None
    if not (isinstance(owner, str) and owner) or since is None or timeout is None:
        return None
    return owner, since, timeout, shared, parts


# Each lock address parsed, by gateway and prefix: a process's calls name a few locks.
_ADDRESSES_PARSED: dict[tuple[type, str, bool], tuple[tuple[str, ...], str, str]] = {}
_ADDRESSES_PARSED_MAX = 256


# A call that does not wait gives up on a server that refuses every connection after
# this long: nothing listens there, and the step's whole deadline (5 s by default)
# would only put off saying so. A server restarting in place is back well within it.
_REFUSED_GRACE_SEC = 1.5


class _ServerGateway:
    """What each server store's gateway shares: the address, a deadline per step, TLS,
    the call's patience and the rules for giving up, and the wording of failures."""

    patient = False  # a call that waits in line: a refusing server is tried until the deadline
    # The call's own deadline (a renewal's: when its holder must stop), which cuts every
    # step's; see ``deadline``.
    call_deadline = float("inf")

    # Each server store says, for its messages: the server's name, its variables'
    # prefix, what its port is called and the variable that sets the deadline.
    name = ""
    env = ""
    port = ""
    timeout_var = ""
    # The address's form ({0}: the scheme), why credentials in it are refused, and the
    # scheme that means TLS.
    form = ""
    credentials = ""
    secure = ""
    default_port = 0  # 0: each HOST names its PORT
    many = False  # several HOST:PORT may be given
    users = False  # a USER@ may be given
    password: str | None = None  # the user's secret, if any (its store's variable)

    def __init__(self, address: str, timeout: float, prefix: bool = False) -> None:
        """Parse ``address`` (ValueError unless it is of ``form``); ``prefix``: its KEY
        is where the locks to list start, and may be empty."""
        known = _ADDRESSES_PARSED.get((type(self), address, prefix))
        parsed = known or self._parsed(address, prefix)
        self.endpoints = list(parsed[0])
        self.lock = address
        self.user = parsed[1]
        self.key_text = parsed[2]
        self.timeout = timeout
        self.tls = address.startswith(self.secure + "://")
        self.context: ssl.SSLContext | None = None
        self.next_step()

    def _parsed(self, address: str, prefix: bool) -> tuple[tuple[str, ...], str, str]:
        """``address``'s endpoints, user and key, kept for the next call on it."""
        shown = _shown_address(address)
        scheme, _, rest = address.partition("://")
        where, slash, key = rest.partition("/")
        user, at, hosts = where.rpartition("@")
        if ":" in user or (at and not self.users):
            raise ValueError(f"the lock address {shown} {self.credentials}")
        found = [re.fullmatch(_HOST, host) for host in hosts.split(",")]
        ports_known = all(host and (host[2] or self.default_port) for host in found)
        too_many = len(found) > 1 and not self.many
        if prefix and not slash:
            # A listing prints each lock as this place and its key: without the slash
            # it would print addresses that name no lock.
            form = self.form.format(scheme).replace("/KEY", "/PREFIX")
            raise ValueError(
                f"the place {shown} must be {form}, as a lock's address is;"
                f" give {shown}/ for every lock there"
            )
        if (not key and not prefix) or (at and not user) or too_many or not ports_known:
            raise ValueError(f"the lock address {shown} must be {self.form.format(scheme)}")
        endpoints = []
        for host in filter(None, found):
            port = int(host[2] or self.default_port)
            if not 0 < port < 65536:
                raise ValueError(f"the port of {host[0]} in {address} is not from 1 to 65535")
            endpoints.append(f"{host[1]}:{port}")
        if "\0" in key:
            raise ValueError(f"the lock key in {address} must not contain a NUL character")
        if "?" in key or "#" in key:
            # The path is the key as it stands: no query, no fragment, no database.
            raise ValueError(
                f"the lock key in {shown} must not contain ? or #: all that follows the"
                " first / after the host is the key itself, taken as it stands (no"
                " options, no database number); give a key without them"
            )
        parsed = (tuple(endpoints), user, key)
        if len(_ADDRESSES_PARSED) >= _ADDRESSES_PARSED_MAX:
            _ADDRESSES_PARSED.clear()  # a long-lived process keeps it small
        _ADDRESSES_PARSED[type(self), address, prefix] = parsed
        return parsed

    def address_of(self, key: bytes, errors: str = "surrogateescape") -> str:
        """The address of the lock at ``key`` on the same servers (a listing's names;
        ``errors``: how bytes that are not UTF-8 are shown)."""
        where = self.lock[: len(self.lock) - len(self.key_text)]
        return where + key.decode("utf-8", errors)

    @property
    def deadline(self) -> float:
        """The moment (``_SEAMS.clock``) no request waits past: the step's, cut to the
        call's. Every connect, send and receive gets what is left of it as its
        timeout, so a server that swallows every byte holds a renewal no longer than
        its holder may wait."""
        return min(self.step_deadline, self.call_deadline)

    @deadline.setter
    def deadline(self, moment: float) -> None:
        self.step_deadline = moment

    def next_step(self) -> None:
        self.step_began = _SEAMS.clock()
        self.deadline = self.step_began + self.timeout

    def tls_context(self) -> ssl.SSLContext | None:
        if self.tls and self.context is None:
            import ssl

            env = os.environ
            cert = env.get(self.env + "CERT")
            self.context = ssl.create_default_context(cafile=env.get(self.env + "CACERT") or None)
            if cert:
                self.context.load_cert_chain(cert, env.get(self.env + "KEY") or None)
        return self.context

    def connection_to(self, endpoint: str, kind: type[_C], opened: Callable[[], _C]) -> _C:
        """A connection to ``endpoint``: one kept from an earlier call made with the same
        user, secret and TLS files if one is sound, else a new one (``opened()``)."""
        key = self.kept_key(endpoint)
        connection = _KEPT.lend(key, kind) or opened()
        connection.kept_as = key
        return connection

    def kept_key(self, endpoint: str) -> tuple[object, ...]:
        """What a connection to ``endpoint`` is kept for: the scheme, the endpoint, the
        user, the secret's number and, with TLS, its files as they stand (one replaced
        is a new key)."""
        files: list[object] = []
        if self.tls:
            for name in ("CACERT", "CERT", "KEY"):
                path = os.environ.get(self.env + name) or ""
                try:
                    found = os.stat(path) if path else None
                except OSError:
                    found = None
                shown = found and (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
                files.append((path, shown))
        scheme = self.lock.partition("://")[0]
        return (scheme, endpoint, self.user, _KEPT.secret_number(self.password), *files)

    def unreachable(self, where: str, why: str | None) -> OSError:
        within = f"within {self.timeout:g} s ({self.timeout_var})"
        if self.call_deadline < self.step_deadline:  # a renewal's, cut to its hold
            waited = _SEAMS.clock() - self.step_began
            within = f"within {waited:.1f} s, all the time the call had left,"
        return OSError(
            errno.EHOSTUNREACH,
            f"{self.name} could not be reached {within} at {where}: {why or 'no time left'}",
        )

    def refused_for_good(self, since: float) -> bool:
        """True once a call that does not wait has seen its server refuse connections
        since ``since`` for the grace period."""
        return not self.patient and _SEAMS.clock() - since >= _REFUSED_GRACE_SEC

    def give_up_if_refused(self, exc: Exception, since: float, where: str, why: str) -> None:
        """Raise the refusal once ``exc`` is a refused connection and a call that does
        not wait has seen them since ``since`` for the grace period."""
        if isinstance(exc, ConnectionRefusedError) and self.refused_for_good(since):
            raise self.refused(where, why) from None

    def refused(self, where: str, why: str) -> OSError:
        return OSError(
            errno.ECONNREFUSED,
            f"{self.name} at {where} refused the connection for {_REFUSED_GRACE_SEC:g} s"
            f" ({why}): is {self.name} running there, listening on that port?",
        )

    def lost_answer(self, where: str, exc: Exception, outcome: str) -> _OutcomeUnknown:
        return _OutcomeUnknown(
            errno.ETIMEDOUT,
            f"{self.name} at {where} failed after the change was sent ({self.describe(exc)}),"
            f" so {outcome}",
        )

    def describe(self, exc: Exception) -> str:
        """Why a request failed, and what to check."""
        # Without ssl imported no error is a TLS one.
        ssl = sys.modules.get("ssl")
        if ssl is not None and isinstance(exc, ssl.SSLError | ssl.CertificateError):
            e = self.env
            return f"{_TLS_FAILURE} ({exc}); check {e}CACERT, {e}CERT and {e}KEY"
        if isinstance(exc, ValueError):
            return f"{exc}: is this {self.port} port?"
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


class _ServerStore:
    """A lock on a server, as a store: it has its ``gateway`` (which keeps the call's
    patience and deadline, set on the store by the lock calls) and no guard to enter."""

    gateway: _ServerGateway
    lock: str
    dated_in_seconds = False  # a hold ends on the server's clock (a lease, an expiry)

    @property
    def patient(self) -> bool:
        return self.gateway.patient

    @patient.setter
    def patient(self, patient: bool) -> None:
        self.gateway.patient = patient

    @property
    def call_deadline(self) -> float:
        return self.gateway.call_deadline

    @call_deadline.setter
    def call_deadline(self, moment: float) -> None:
        self.gateway.call_deadline = moment

    def identity(self) -> tuple[object, ...]:
        """Its scheme, its set of endpoints (a name in one case, the default port
        filled in) and its key: the user and the order of the endpoints aside."""
        gateway = self.gateway
        scheme = gateway.lock.partition("://")[0]
        endpoints = frozenset(endpoint.lower() for endpoint in gateway.endpoints)
        return ("server", scheme, endpoints, gateway.key_text)

    def change(self, create: bool) -> Self:
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


# --- A connection, its host's name looked up within its deadline


class _Lookup:
    """One lookup of a host name's addresses, in a thread of its own so that a call can
    stop waiting for it at its deadline: ``done`` once it found ``addresses`` or failed
    (``failure``). The system's resolver cannot be stopped: a lookup a call gave up on
    goes on, and its answer serves the next call."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.done = threading.Event()
        self.addresses: list[_Address] = []
        self.failure: OSError | None = None

    def run(self) -> None:
        import socket

        try:
            found = socket.getaddrinfo(self.host, None, type=socket.SOCK_STREAM)
            self.addresses = [(family, address) for family, _, _, _, address in found]
        except (OSError, UnicodeError) as exc:  # gaierror; a name IDNA cannot encode
            why = getattr(exc, "strerror", None) or str(exc)
            self.failure = OSError(errno.EHOSTUNREACH, f"the name {self.host} was not found: {why}")
        finally:
            _NAMES.answered(self)
            self.done.set()


class _Names:
    """The host names looked up: each one's last answer (``known``: when it came, and
    the addresses), used again for ``_SEAMS.name_kept_sec`` (the standard library tells
    no lifetime), and the lookups under way (``running``), one per name at most: every
    call that needs a name meanwhile waits for that one, and a resolver that hangs holds
    one thread, not one per try."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.known: dict[str, tuple[float, list[_Address]]] = {}
        self.running: dict[str, _Lookup] = {}

    def addresses(self, host: str, deadline: float) -> list[_Address]:
        """``host``'s addresses (an IP address's: itself), waiting for a lookup no later
        than ``deadline``: TimeoutError, saying how long it waited, if none came."""
        import socket

        for family, form in ((socket.AF_INET, (host, 0)), (socket.AF_INET6, (host, 0, 0, 0))):
            try:
                socket.inet_pton(family, host)
            except OSError:
                continue
            return [(family, form)]  # an IP address: nothing to look up
        lookup = self._lookup(host)
        if isinstance(lookup, list):
            return lookup
        asked = _SEAMS.clock()
        # A second at most on the system's clock, then the deadline is read again.
        while not lookup.done.wait(_blind_wait(deadline - _SEAMS.clock())):
            if _SEAMS.clock() >= deadline:
                waited = _SEAMS.clock() - asked
                why = f"no answer to the name lookup of {host} in {waited:.1f} s"
                raise TimeoutError(errno.ETIMEDOUT, why)
        if lookup.failure is not None:
            raise OSError(*lookup.failure.args)  # each call its own, raised in its thread
        return lookup.addresses

    def _lookup(self, host: str) -> list[_Address] | _Lookup:
        """``host``'s last answer while it is used again, else its lookup under way (one
        started now if none is)."""
        with self.guard:
            known = self.known.get(host)
            if known is not None and _SEAMS.clock() - known[0] < _SEAMS.name_kept_sec:
                return known[1]
            lookup = self.running.get(host)
            if lookup is None:
                lookup = self.running[host] = _Lookup(host)
                thread = threading.Thread(target=lookup.run, name="skf-run-lock lookup")
                thread.daemon = True  # a resolver that hangs keeps no process alive
                try:
                    thread.start()
                except RuntimeError as exc:  # no thread to be had
                    del self.running[host]
                    raise OSError(errno.EAGAIN, f"{host} could not be looked up: {exc}") from None
            return lookup

    def answered(self, lookup: _Lookup) -> None:
        with self.guard:
            if self.running.get(lookup.host) is lookup:
                del self.running[lookup.host]
            if lookup.failure is None:
                self.known[lookup.host] = (_SEAMS.clock(), lookup.addresses)

    def forget(self, host: str) -> None:
        """Look ``host`` up anew next time: none of its addresses could be reached (it may
        have moved)."""
        with self.guard:
            self.known.pop(host, None)

    def forget_lookups(self) -> None:
        """In a forked child: the lookups under way run in the parent's threads, which
        the child has not, so none would ever answer it; it looks its names up itself.
        A new guard: a thread of the parent may have held this one when it forked."""
        self.guard = threading.Lock()
        self.running = {}


_NAMES = _Names()
if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_NAMES.forget_lookups)


def _connected(host: str, port: int, deadline: float) -> socket.socket:
    """A TCP connection to ``host`` (a name or an IP address) at ``port``, made by
    ``deadline``: the name's lookup and each of its addresses in turn share that one
    deadline, each address an equal part of what is left (socket.create_connection looks
    a name up with no deadline at all, and gives each address the whole timeout)."""
    import socket

    addresses = _NAMES.addresses(host, deadline)
    failure: OSError | None = None
    for tried, (family, address) in enumerate(addresses):
        until = _SEAMS.clock() + _seconds_left(deadline) / (len(addresses) - tried)
        while True:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                # A second at most on the system's clock, then the deadline is read
                # again (a connection whose every SYN is lost is tried anew meanwhile).
                sock.settimeout(_blind_wait(max(0.001, until - _SEAMS.clock())))
                sock.connect((address[0], port, *address[2:]))
            except TimeoutError as exc:
                sock.close()
                failure = exc
                if _SEAMS.clock() < min(until, deadline):
                    continue
            except OSError as exc:
                sock.close()
                failure = exc
            else:
                return sock
            break
    _NAMES.forget(host)
    raise failure or OSError(errno.EHOSTUNREACH, f"the name {host} has no address")


class _Connection:
    """A TCP connection (TLS with a ``context``); nothing waits past its ``deadline``,
    the name lookup included."""

    protocol = "a protocol"  # for messages

    def __init__(self, endpoint: str, context: ssl.SSLContext | None, deadline: float) -> None:
        import socket

        host, _, port = endpoint.rpartition(":")
        host = host.strip("[]")
        self.endpoint = endpoint
        self.sock: socket.socket = _connected(host, int(port), deadline)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                self.sock = context.wrap_socket(
                    self.sock, server_hostname=host, do_handshake_on_connect=False
                )
                self._wait_for(self.sock.do_handshake, deadline)
        except BaseException:
            self.sock.close()
            raise
        self.received = bytearray()  # not yet taken apart
        self.pid = os.getpid()  # a forked child never uses its parent's (kept_connections)
        self.kept_as: tuple[object, ...] = ()  # the key it is kept under, between calls
        # Lent again from the kept ones, and no answer since: a failure before its first
        # answer may be its age (closed or reset while it was idle), not the server's.
        self.unproven = False
        self.idle: select.poll | None = None  # what sound() asks if anything came

    def close(self) -> None:
        self.sock.close()

    def sound(self) -> bool:
        """Whether this idle connection may carry a request: nothing came on it while it
        was idle (no end, no reset, nothing unasked), seen without waiting."""
        import select

        pending = getattr(self.sock, "pending", None)  # TLS: bytes it decrypted, unread
        if self.received or (pending is not None and pending()):
            return False
        if not hasattr(select, "poll"):  # Windows
            return not select.select([self.sock], [], [], 0)[0]
        if self.idle is None:  # poll, not select: select takes no descriptor past 1023
            self.idle = select.poll()
            self.idle.register(self.sock, select.POLLIN)
        return not self.idle.poll(0)

    def let_go(self) -> None:
        """Close this process's copy of the socket, sending nothing: a forked child's
        copy of its parent's connection, which the parent goes on using."""
        descriptor = self.sock.detach()
        if descriptor >= 0:
            os.close(descriptor)

    def _find(self, marker: bytes, deadline: float, limit: int, start: int = 0) -> int:
        while (found := self.received.find(marker, start)) < 0:
            if len(self.received) > limit:
                raise ValueError(f"the answer was not {self.protocol} (a line too long)")
            self._receive(deadline)
        return found

    def _wait_for(self, step: Callable[..., _T], deadline: float, *args: object) -> _T:
        """``step(*args)`` on the socket, tried again after each second it waits on the
        system's clock (which may stop while the machine sleeps) until ``deadline``."""
        while True:
            self._limit(deadline)
            try:
                return step(*args)
            except TimeoutError:
                continue  # read the deadline again

    def _limit(self, deadline: float) -> None:
        """Let the socket wait no longer than what is left of ``deadline``, and a second
        at most. Each setting is a system call: one is kept while it is no longer than
        that and at most a millisecond shorter (a wait that ends early only reads the
        deadline again), and each is set a thousandth short, so that a deadline a
        moment nearer, as a kept connection's first answer has, keeps it too."""
        wait = _blind_wait(_seconds_left(deadline))
        kept = self.sock.gettimeout()
        if kept is None or kept > wait or kept < wait - 0.001:
            self.sock.settimeout(wait * 0.999)

    def _send(self, data: bytes, deadline: float) -> None:
        """Send all of ``data`` by ``deadline``, and within a second: a request goes
        into the socket's buffer at once unless the server has stopped reading, and
        one cut short cannot be sent again on this connection (TimeoutError)."""
        self._limit(deadline)
        self.sock.sendall(data)

    def _receive(self, deadline: float, end_ok: bool = False) -> bool:
        """Receive more; False if the server closed the connection and ``end_ok``."""
        data = self._wait_for(self.sock.recv, deadline, 65536)
        if not data:
            if not end_ok:
                raise ConnectionResetError(errno.ECONNRESET, "the connection closed mid-answer")
            return False
        self.unproven = False
        self.received += data
        return True


class _Pause:
    """A waiter's pause: 5 ms growing to 100 ms, jittered against lockstep."""

    def __init__(self) -> None:
        self.next = 0.005

    def sleep(self, left: float) -> None:
        import random  # only a waiter needs it

        time.sleep(min(left, self.next * random.uniform(0.5, 1.0)))
        self.next = min(self.next * 1.5, 0.1)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/http1.py, carried as text: compiled only for a lock of its store
# HTTP/1.1, as etcd's JSON gateway speaks it: one request at a time on a connection
# kept open, a body read by its length, in chunks (a watch's stream), or to the close,
# every size bounded. Compiled only for an etcd lock.
# --------------------------------------------------------------------------------------

_CARRIED['http1'] = (8004, ('server_gateway',), r'''
if TYPE_CHECKING:
    import ssl
    from typing import Literal

_HEAD_MAX_BYTES = 64 * 1024


class _HttpConnection(_Connection):
    """HTTP/1.1 to etcd. Not http.client: ~18 ms to import, 2-4x the CPU (bench 6d)."""

    protocol = "HTTP"

    def __init__(self, endpoint: str, context: ssl.SSLContext | None, deadline: float) -> None:
        super().__init__(endpoint, context, deadline)
        self.body = bytearray()  # not yet read

        self.framing: Literal["length", "chunked", "close"] = "length"
        self.left = 0  # bytes of the body still to come, when its length is known
        self.reusable = True

    def send(self, path: str, payload: bytes, headers: dict[str, str], deadline: float) -> None:
        if any("\r" in value or "\n" in value for value in headers.values()):
            raise ValueError("a header held a line break")
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        head = f"POST {path} HTTP/1.1\r\nHost: {self.endpoint}\r\n{fields}"
        self._send(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload, deadline)

    def start_answer(self, deadline: float) -> int:
        """Read the answer's status line and headers: its status code."""
        end = self._find(b"\r\n\r\n", deadline, _HEAD_MAX_BYTES)
        lines = self.received[:end].decode("latin-1").split("\r\n")
        del self.received[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not (code.isdigit() and rest[3:4] in ("", " ")):
            raise ValueError("the answer was not HTTP")
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValueError("the answer was not HTTP")
            headers[name.strip().lower()] = value.strip().lower()
        length = headers.get("content-length")
        self.reusable = headers.get("connection") != "close" and version == "HTTP/1.1"
        self.left = 0
        if "chunked" in headers.get("transfer-encoding", ""):
            self.framing = "chunked"
        elif length is None:
            self.framing = "close"
            self.reusable = False
        elif length.isdigit() and int(length) <= _ANSWER_MAX_BYTES:
            self.framing = "length"
            self.left = int(length)
        else:
            raise ValueError(f"the answer's length was {length!r}")
        self.body.clear()
        return int(code)

    def rest(self, deadline: float) -> bytes:
        while self._more_body(deadline):
            pass
        return bytes(self.body)

    def readline(self, deadline: float) -> bytes:
        """The body's next line (a watch's next message); b"" once the body ended."""
        while (end := self.body.find(b"\n")) < 0:
            if not self._more_body(deadline):
                end = len(self.body) - 1
                break
        line = bytes(self.body[: end + 1])
        del self.body[: end + 1]
        return line

    def _more_body(self, deadline: float) -> bool:
        piece = self._piece(deadline)
        if piece is None:
            return False
        self.body += piece
        if len(self.body) > _ANSWER_MAX_BYTES:
            raise ValueError("the answer was too large")
        return True

    def _piece(self, deadline: float) -> bytes | None:
        if self.framing == "chunked":
            return self._chunk(deadline)
        closes = self.framing == "close"
        if (not closes and self.left == 0) or (
            not self.received and not self._receive(deadline, end_ok=closes)
        ):
            return None
        size = len(self.received) if closes else min(self.left, len(self.received))
        piece = bytes(self.received[:size])
        del self.received[:size]
        self.left -= 0 if closes else size
        return piece

    def _chunk(self, deadline: float) -> bytes | None:
        end = self._find(b"\r\n", deadline, 1024)
        size_text = self.received[:end].split(b";")[0].strip()
        if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
            raise ValueError("the answer was not HTTP (a bad chunk)")
        size = int(size_text, 16)
        if size > _ANSWER_MAX_BYTES:
            raise ValueError("the answer was too large")
        if size == 0:
            trailer = self._find(b"\r\n\r\n", deadline, _HEAD_MAX_BYTES, end)
            del self.received[: trailer + 4]
            return None
        while len(self.received) < end + 2 + size + 2:
            self._receive(deadline)
        if self.received[end + 2 + size : end + 4 + size] != b"\r\n":
            raise ValueError("the answer was not HTTP (a bad chunk)")
        chunk = bytes(self.received[end + 2 : end + 2 + size])
        del self.received[: end + 4 + size]
        return chunk
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/resp.py, carried as text: compiled only for a lock of its store
# RESP2, the protocol of Redis and Valkey: commands pipelined on one connection, and
# answers read whole, every size bounded, an error answer kept as an answer. Compiled only
# for a Redis lock.
# --------------------------------------------------------------------------------------

_CARRIED['resp'] = (8130, ('server_gateway',), r'''
if TYPE_CHECKING:
    from typing import Any

    _Command = tuple[bytes | str | int, ...]

_RESP_MAX_ITEMS = 1_000_000  # a waiter is one item
_RESP_MAX_DEPTH = 3  # EXEC's answer holds LRANGE's
# Each kind of answer's first byte, as indexing bytes gives it.
_SIMPLE = ord("+")
_ERROR = ord("-")
_INTEGER = ord(":")
_BULK = ord("$")
_ARRAY = ord("*")


# The commands sent so far whose encoding is short (a lock's reads, MULTI, EXEC...; not
# a SET of a record): most of each call's, sent again by the next call on that lock.
_ENCODED: dict[_Command, bytes] = {}
_ENCODED_MAX = 1024
_ENCODED_LONGEST = 128


def _encoded(command: _Command) -> bytes:
    """``command`` as RESP sends it: an array of bulk strings."""
    out = [b"*%d\r\n" % len(command)]
    for arg in command:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    encoded = b"".join(out)
    if len(encoded) <= _ENCODED_LONGEST:
        if len(_ENCODED) >= _ENCODED_MAX:
            _ENCODED.clear()  # a long-lived process keeps it small
        _ENCODED[command] = encoded
    return encoded


class _RedisError:
    """An error answer (``-WRONGTYPE ...``), kept as an answer: later ones must be read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def code(self) -> str:
        return self.text.partition(" ")[0]


def _errors_in(answers: list[Any]) -> list[_RedisError]:
    """The error answers among ``answers``, alone or inside EXEC's answer."""
    errors = [answer for answer in answers if isinstance(answer, _RedisError)]
    for answer in answers:
        if isinstance(answer, list):
            errors += [item for item in answer if isinstance(item, _RedisError)]
    return errors


class _Incomplete(Exception):
    """More bytes must come before the answer can be read."""


class _RespConnection(_Connection):
    """RESP2: commands pipelined, answers read whole, every size bounded."""

    protocol = "RESP (Redis)"
    watching = False  # a WATCH an earlier call left on it, kept (redis_gateway)

    def send(self, commands: list[_Command], deadline: float) -> None:
        sent = [_ENCODED.get(command) or _encoded(command) for command in commands]
        self._send(b"".join(sent), deadline)

    def answer(self, deadline: float) -> Any:
        return self.answers(1, deadline)[0]

    def answers(self, count: int, deadline: float) -> list[Any]:
        """The next ``count`` answers, each read whole; the bytes they took are let go
        once, after the last."""
        found: list[Any] = []
        received = self.received
        at = 0
        while len(found) < count:
            end = received.find(b"\r\n", at)
            if end > at and received[at] == _SIMPLE:  # +OK, +QUEUED: most answers
                found.append(bytes(received[at + 1 : end]))
                at = end + 2
                continue
            try:
                value, at = self._parse(at, 0)
            except _Incomplete:
                if len(received) - at > _ANSWER_MAX_BYTES + 1024:
                    raise ValueError("the answer was too large") from None
                self._receive(deadline)
                continue
            found.append(value)
        del received[:at]
        return found

    def _parse(self, at: int, depth: int) -> tuple[Any, int]:
        """The answer that starts at ``at`` in what was received, and where it ends."""
        received = self.received
        end = received.find(b"\r\n", at)
        if end < 0:
            if len(received) - at > 1024:
                raise ValueError(f"the answer was not {self.protocol} (a line too long)")
            raise _Incomplete
        kind = received[at]
        line = received[at + 1 : end]
        if kind == _SIMPLE:
            return bytes(line), end + 2
        if kind == _ERROR:
            return _RedisError(line.decode("utf-8", "replace")), end + 2
        # A number: plain digits (bytearray.isdigit() is true of ASCII digits alone),
        # after a minus sign or not, 18 at most.
        digits = line[1:] if line[:1] == b"-" else line
        if kind in (_INTEGER, _BULK, _ARRAY) and digits.isdigit() and len(digits) <= 18:
            size = int(line)
            if kind == _INTEGER:
                return size, end + 2
            if size == -1:
                return None, end + 2
            if kind == _BULK and 0 <= size <= _ANSWER_MAX_BYTES:
                if len(received) < end + 2 + size + 2:
                    raise _Incomplete
                if received[end + 2 + size : end + 4 + size] != b"\r\n":
                    raise ValueError(f"the answer was not {self.protocol} (a bad length)")
                return bytes(received[end + 2 : end + 2 + size]), end + 4 + size
            if kind == _ARRAY and 0 <= size <= _RESP_MAX_ITEMS and depth < _RESP_MAX_DEPTH:
                return self._items(end + 2, size, depth + 1)
        raise ValueError(f"the answer was not {self.protocol}")

    def _items(self, at: int, count: int, depth: int) -> tuple[list[Any], int]:
        """The ``count`` items of an array that start at ``at``, and where they end. A
        whole bulk string is read here, in the loop: a line of 64 waiters is an answer
        of 64 of them, and parsing each by a call of its own was a fifth of a Redis
        waiter's CPU. Anything else (another kind, a nil, a string not all received, a
        length that is not plain digits) is _parse's, which reads it or says why not."""
        received = self.received
        items: list[Any] = []
        for _ in range(count):
            end = received.find(b"\r\n", at) if at < len(received) else -1
            # bytearray.isdigit() is true only of ASCII digits: no sign, space or "_".
            header = received[at + 1 : end] if end > at and received[at] == _BULK else b""
            if header.isdigit() and len(header) <= 18:
                size = int(header)
                start = end + 2
                stop = start + size
                if size <= _ANSWER_MAX_BYTES and received[stop : stop + 2] == b"\r\n":
                    items.append(bytes(received[start:stop]))
                    at = stop + 2
                    continue
            item, at = self._parse(at, depth)
            items.append(item)
        return items, at
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/etcd_gateway.py, carried as text: compiled only for a lock of its store
# etcd's HTTP/JSON gateway, as every etcd lock speaks to it: the endpoints tried in
# turn within the call's deadline, the user's token, a connection kept from call to call, and
# etcd's refusals as errors that say what to do. Compiled only for an etcd lock.
# --------------------------------------------------------------------------------------

_CARRIED['etcd_gateway'] = (8295, ('http1', 'kept_connections', 'server_gateway'), r'''
import binascii
import errno
import json
import os
import re
import time


if TYPE_CHECKING:
    from typing import Any

_DURATION = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)"
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# gRPC's status codes, as etcd's gateway answers them.
_GRPC_UNAVAILABLE = 14
_GRPC_PERMISSION_DENIED = 7
_GRPC_UNAUTHENTICATED = 16
# How long a write that may be sent again waits for its answer before it is (to the
# next member): a member whose leader died unseen forwards it into the void, and it
# would wait out the call; sent again, it lands once a leader serves, or its compare
# finds the first sending landed.
_RESEND_AFTER_SEC = 1.0


def _etcd_duration(text: str) -> float:
    """Seconds of an etcdctl duration (Go's format: ``5s``, ``500ms``, ``1m30s``)."""
    parts = re.findall(_DURATION, text)
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    if "".join(number + unit for number, unit in parts) != text or not seconds > 0:
        raise ValueError(
            f"ETCDCTL_COMMAND_TIMEOUT must be a duration like 5s or 500ms, not {text!r}"
        )
    return seconds


def _answer_field(answer: dict[str, Any], name: str, request: str, digits: bool = False) -> str:
    """The text field ``name`` of etcd's answer; OSError if it has none."""
    value = answer.get(name)
    if isinstance(value, str) and value and (value.isdigit() or not digits):
        return value
    raise _not_etcd(request, name)


def _not_etcd(request: str, name: str) -> OSError:
    return OSError(
        errno.EPROTO,
        f"the answer to {request} had no valid {name!r}: is this etcd's client port?",
    )


def _b64(data: bytes) -> str:
    """``data`` as etcd's JSON carries bytes: base64, as text."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes etcd's JSON carries as base64 ``text``: as base64.b64decode reads it
    (ValueError if it is not base64 text, TypeError if not text), in one C call: a
    look at a line of 64 decodes some 140 keys and values."""
    return binascii.a2b_base64(text)


class _EtcdGateway(_ServerGateway):
    """What an etcd lock asks of the gateway, for an address
    ``etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY``: ``post`` a request and read its
    answer. Its settings are etcdctl's: ``ETCDCTL_COMMAND_TIMEOUT``, ``ETCDCTL_USER``
    and ``ETCDCTL_PASSWORD`` (TLS: the server gateway's)."""

    name = "etcd"
    env = "ETCDCTL_"
    port = "etcd's client"
    timeout_var = "ETCDCTL_COMMAND_TIMEOUT"
    form = "{0}://HOST:PORT[,HOST:PORT...]/KEY"
    many = True
    secure = "etcd+https"
    credentials = (
        "names a user: credentials never go in the address; set ETCDCTL_USER (and"
        " ETCDCTL_PASSWORD) instead"
    )

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        env = os.environ
        timeout = _etcd_duration(env.get("ETCDCTL_COMMAND_TIMEOUT") or "5s")
        super().__init__(address, timeout, prefix)
        user, _, password = (env.get("ETCDCTL_USER") or "").partition(":")
        self.user = user
        self.password = password or env.get("ETCDCTL_PASSWORD", "")
        self.headers = {"Content-Type": "application/json"}
        self.connection: _HttpConnection | None = None
        # The last post's change was sent again, on a new connection: the kept one it
        # went on first failed before its first answer (see ``post``'s ``resendable``).
        self.resent = False

    def _connect(self, endpoint: str) -> _HttpConnection:
        """A connection to ``endpoint``: one kept from an earlier call if one is sound."""
        self._give_back()
        self.connection = self.connection_to(
            endpoint, _HttpConnection, lambda: self._open(endpoint)
        )
        return self.connection

    def _open(self, endpoint: str) -> _HttpConnection:
        return _HttpConnection(endpoint, self.tls_context(), self.deadline)

    def post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        outcome: str | None = None,
        resendable: bool = False,
    ) -> Any:
        """POST ``body`` to the first endpoint that answers. ``outcome``: a write's.
        ``resendable``: a write whose caller can tell from the answer to the same write
        sent again whether the first landed (a transaction that compares): one whose
        answer is lost (a kept connection that failed before its first answer, or none
        within _RESEND_AFTER_SEC) is sent again (``resent``) until the deadline, rather
        than left unknown at once."""
        self.resent = False
        if path != "/v3/auth/authenticate":
            self._authorize()
        payload = json.dumps(body).encode()
        # Each endpoint's first reason (later ones are often the deadline).
        failures: dict[str, str] = {}
        broken: set[str] = set()  # TLS failed: trying again cannot help
        refusing: dict[str, bool] = {}  # nothing listened there, as last tried
        started = _SEAMS.clock()
        lost: Exception | None = None  # why the answer to a write sent was lost
        while True:
            for endpoint in self.endpoints:
                left = self.deadline - _SEAMS.clock()
                if left <= 0:
                    break
                if endpoint in broken:
                    continue
                try:
                    status, answer = self._exchange(endpoint, path, payload, outcome, resendable)
                except _OutcomeUnknown:
                    raise
                except (OSError, ValueError) as exc:
                    lost = exc if self.resent else lost
                    reason = failures.setdefault(endpoint, self.describe(exc))
                    if reason.startswith(_TLS_FAILURE):
                        broken.add(endpoint)
                    refusing[endpoint] = isinstance(exc, ConnectionRefusedError)
                    continue
                refusing[endpoint] = False
                if status == 200:
                    return answer
                code = answer.get("code")
                message = answer.get("message") or answer.get("error")
                if code == _GRPC_UNAVAILABLE or status in (502, 503, 504):
                    failures.setdefault(endpoint, message or f"HTTP status {status}")
                    continue
                raise self._refusal(code, message or f"HTTP status {status}")
            # No member answered (down, electing): nothing applied, unless a write lost.
            if lost is None:
                self._give_up_if_all_refuse(refusing, started, failures)
            left = self.deadline - _SEAMS.clock()
            if left <= 0 or broken.issuperset(self.endpoints):
                break
            time.sleep(min(0.05, left))
        raise self._unanswered(failures, lost, outcome)

    def _unanswered(
        self, failures: dict[str, str], lost: Exception | None, outcome: str | None
    ) -> OSError:
        """What a post that got no answer in time raises: a write sent whose answer was
        lost (``lost``) may have been applied; else nothing was."""
        if lost is not None and outcome is not None:
            return self.lost_answer(", ".join(self.endpoints), lost, outcome)
        reasons = "; ".join(f"{endpoint}: {why}" for endpoint, why in failures.items())
        return self.unreachable(", ".join(self.endpoints), reasons)

    def _give_up_if_all_refuse(
        self, refusing: dict[str, bool], started: float, failures: dict[str, str]
    ) -> None:
        """Raise the refusal once every endpoint refused connections for the grace."""
        every_one_refused = all(refusing.get(each) for each in self.endpoints)
        if every_one_refused and self.refused_for_good(started):
            raise self.refused(", ".join(self.endpoints), failures[self.endpoints[0]])

    def _authorize(self) -> None:
        if self.user and "Authorization" not in self.headers:
            credentials = {"name": self.user, "password": self.password}
            answer = self.post("/v3/auth/authenticate", credentials)
            self.headers["Authorization"] = _answer_field(answer, "token", "authenticate")

    def _exchange(
        self, endpoint: str, path: str, payload: bytes, outcome: str | None, resendable: bool
    ) -> tuple[int, dict[str, Any]]:
        """One request to ``endpoint``: (status, answer). A kept connection that fails
        before its first answer (closed or reset while it was idle) is replaced at once
        where that is safe: a request not sent, one that changes nothing, or one whose
        caller tells from its resending whether it landed."""
        while True:
            sent = False
            connection = self.connection
            try:
                if connection is None or connection.endpoint != endpoint or not connection.reusable:
                    connection = self._connect(endpoint)
                connection.send(path, payload, self.headers, self.deadline)
                sent = True
                until = self.deadline
                if resendable:
                    until = min(until, _SEAMS.clock() + _RESEND_AFTER_SEC)
                elif connection.unproven and outcome is None:
                    # Sent again on a new one if no answer comes (see _UNPROVEN_ANSWER_SEC).
                    until = min(until, _SEAMS.clock() + _UNPROVEN_ANSWER_SEC)
                status = connection.start_answer(until)
                body = connection.rest(until)
                try:
                    answer = json.loads(body.decode("utf-8") or "{}")
                except ValueError:
                    raise ValueError("the answer was not JSON") from None
            except (OSError, ValueError) as exc:
                self._hang_up()  # cut short: never read it out of step
                if connection is not None and connection.unproven:
                    _KEPT.discard(connection.kept_as)  # its siblings likely went too
                    if not sent or outcome is None:
                        continue  # a new connection (never unproven: once a request)
                    if resendable:
                        self.resent = True
                        continue
                if sent and outcome is not None:
                    if not resendable:
                        raise self.lost_answer(endpoint, exc, outcome) from None
                    self.resent = True
                    raise  # sent again until the deadline: the next member, each in turn
                raise
            except BaseException:
                self._hang_up()  # an interrupt: never read its answer out of step
                raise
            return status, answer if isinstance(answer, dict) else {}

    def _give_back(self) -> None:
        """Keep the connection, its answer read whole, for the next call."""
        connection = self.connection
        self.connection = None
        if connection is not None and connection.reusable:
            _KEPT.keep(connection)
        elif connection is not None:
            connection.close()

    def _hang_up(self) -> None:
        """Close the connection: one cut short could be read out of step."""
        if self.connection is not None:
            self.connection.close()
        self.connection = None

    def _refusal(self, code: object, message: str) -> OSError:
        if code == _GRPC_PERMISSION_DENIED:
            who = f"user {self.user!r}" if self.user else "an anonymous user"
            return PermissionError(
                errno.EACCES, f"etcd denied {who} access to the key {self.key_text}: {message}"
            )
        if "user name is empty" in message:
            return PermissionError(
                errno.EACCES, "etcd wants a user name: set ETCDCTL_USER (and ETCDCTL_PASSWORD)"
            )
        if code == _GRPC_UNAUTHENTICATED or "authentication failed" in message:
            return PermissionError(
                errno.EACCES,
                f"etcd refused authentication ({message}); check ETCDCTL_USER and ETCDCTL_PASSWORD",
            )
        return OSError(errno.EIO, f"etcd refused the request: {message} (code {code})")
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/etcd_watch.py, carried as text: compiled only for a lock of its store
# etcd's watch, as a waiter on an etcd lock keeps one: a stream of the changes to a key
# or a range of keys, made from now on its own connection through the gateway, read a
# message at a time until a deadline. Compiled only for an etcd lock.
# --------------------------------------------------------------------------------------

_CARRIED['etcd_watch'] = (8573, ('etcd_gateway',), r'''
import errno
import json


if TYPE_CHECKING:
    from typing import Any


class _EtcdWatch:
    """One watch of a waiter's, on the ``gateway``'s endpoints and credentials: open
    while ``connection`` is, streaming the changes to ``watching`` after revision
    ``watched``; ``streamed``: the revision of the latest change it streamed."""

    def __init__(self, gateway: _EtcdGateway) -> None:
        self.gateway = gateway
        self.connection: _HttpConnection | None = None
        # The keys it watches: from a key to a range's end (None: that key alone).
        self.watching: tuple[bytes, bytes | None] | None = None
        self.watched = 0  # the revision after which the open watch streams changes
        self.streamed = 0  # the revision of the latest change a watch streamed

    def vouches(self, seen: int) -> bool:
        """Whether it is open, streams every change after revision ``seen`` and has
        streamed none of them yet."""
        return self.connection is not None and 0 < self.watched <= seen and self.streamed <= seen

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def start(self, until: float, keys: tuple[bytes, bytes | None]) -> bool:
        """Watch ``keys`` (a key and a range's end, or None: that key alone) from now:
        True once it streams, ``watched`` the revision it streams the changes after."""
        gateway = self.gateway
        gateway.deadline = min(until, _SEAMS.clock() + gateway.timeout)
        key, end = keys
        watch = {"key": _b64(key)}
        if end is not None:
            watch["range_end"] = _b64(end)
        self.watching = keys
        payload = json.dumps({"create_request": watch}).encode()
        try:
            gateway._authorize()
        except (OSError, ValueError):
            return False  # the next step says why
        for endpoint in gateway.endpoints:
            try:
                self.connection = gateway._open(endpoint)
                self.connection.send("/v3/watch", payload, gateway.headers, gateway.deadline)
                if self.connection.start_answer(gateway.deadline) == 200 and self._created(until):
                    return True
            except (OSError, ValueError):
                pass
            self.stop()
        return False

    def _created(self, until: float) -> bool:
        """Whether the watch's first message says it was made; ``watched``: its revision."""
        try:
            result = self._message(until)
            revision = result["header"]["revision"]
        except (AttributeError, KeyError, TypeError, ValueError):
            return False
        if not (result.get("created") and isinstance(revision, str) and revision.isdigit()):
            return False
        self.watched = int(revision)
        return True

    def deleted(self, until: float, kept: dict[bytes, Any] | None, seen: int) -> set[bytes]:
        """The keys deleted after revision ``seen`` in the watch's next message; each
        change after ``seen`` is applied to ``kept``. A watch kept from an earlier wait
        may still bring changes the look at ``seen`` already saw: they are passed over.
        ConnectionResetError if the stream ended."""
        try:
            result = self._message(until)
            if result.get("canceled"):
                raise ValueError("canceled")
            deleted = set()
            # A PUT, the default, has no type in etcd's JSON.
            for event in result.get("events") or []:
                kv = event["kv"]
                revision = int(kv["mod_revision"])
                if revision <= seen:
                    continue
                self.streamed = max(self.streamed, revision)
                key = _unb64(kv["key"])
                if event.get("type") == "DELETE":
                    deleted.add(key)
                    if kept is not None:
                        kept.pop(key, None)
                elif kept is not None:
                    kept[key] = kv
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ConnectionResetError(errno.ECONNRESET, "the watch ended") from None
        return deleted

    def _message(self, until: float) -> Any:
        """The result of the watch's next message (TimeoutError if none came by then)."""
        assert self.connection is not None
        return json.loads(self.connection.readline(until).decode("utf-8"))["result"]
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/etcd_store.py, carried as text: compiled only for a lock of its store
# The etcd store, which has etcd's HTTP/JSON gateway (etcd_gateway.py): the record at
# KEY on a lease (the holder's timeout, on the server's clock), every change one transaction
# compared against the revision it read, and waiters in line as keys on leases of their
# own that they keep alive, each watching the key ahead of it (etcd_watch.py). Compiled
# only for an etcd lock.
# --------------------------------------------------------------------------------------

_CARRIED['etcd_store'] = (8687, ('etcd_gateway', 'etcd_watch', 'server_gateway'), r'''
import atexit
import os
import time


if TYPE_CHECKING:
    from typing import Any


# A lease granted and not used yet: its TTL, its ID, when it was granted or last kept
# alive (on ``_SEAMS.clock``), and whether it was granted ahead of a take.
_Spare = tuple[int, str, float, bool]


# What this process's last change of each lock (by its endpoints and key) left there,
# as committed: the revision and the keys it left (the record's and the last holder's
# copy, or none). The process's next change of that lock decides on it rather than
# reading first; its transaction compares that those keys and an empty line stand as
# they were left, and the lock calls read anew when it would change nothing.
_LEFT: dict[tuple[object, ...], tuple[int, list[dict[str, str]]]] = {}
_LEFT_MAX = 256
# The lease a release by this process left with nothing on it, by lock (as _LEFT), with
# the lock's address: the process's next take of the lock keeps it alive and puts its
# record on it, rather than granting one (a write through the cluster's log; a keep-
# alive is the leader's alone) and revoking the old. Those left are revoked at exit
# (a CLI's release so costs what it did), else they run out by themselves. Each serves
# only the owner whose record it carried: a process that remembers that record on it
# may keep it alive before its transaction is refused, which must never renew another
# owner's hold.
_FREE_LEASES: dict[tuple[object, ...], tuple[str, str, str]] = {}


# How long a process's exit may wait on revoking the leases left free, all together:
# a server gone by then must not hold the exit up (the leases run out by themselves).
_EXIT_REVOKES_SEC = 1.0


def _revoke_free_leases() -> None:
    """At exit: revoke each lease a release left free, for nothing will use it."""
    stop = _SEAMS.clock() + _EXIT_REVOKES_SEC
    while _FREE_LEASES and _SEAMS.clock() < stop:
        _, (lease, address, _) = _FREE_LEASES.popitem()
        try:
            gateway = _EtcdGateway(address)
            gateway.call_deadline = stop
            gateway.post("/v3/lease/revoke", {"ID": lease})
        except (OSError, ValueError):
            pass  # it runs out by itself


def _whole_seconds(seconds: float) -> int:
    """A lease's TTL for a timeout of ``seconds``: whole seconds, rounded up."""
    return int(max(1, -(-seconds // 1)))


class _EtcdSeen:
    """What a look at an etcd lock saw: the revision at which it was read (0: none)."""

    __slots__ = ("revision",)

    def __init__(self, revision: int) -> None:
        self.revision = revision


def _revision_seen(look: _Look) -> int:
    """The revision at which ``look``, an etcd store's, was read (0 if it gives none)."""
    assert isinstance(look.seen, _EtcdSeen), "a look of another store"
    return look.seen.revision


def _wait_place(value: bytes, lease: object) -> _Place | None:
    """The place a line key gives; None if not one (or leaseless: it could never end)."""
    if not (isinstance(lease, str) and lease.isdigit()):
        return None
    return _place_of(lease, value)


class _EtcdStore(_ServerStore):
    """One lock on etcd (``etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY``), as the
    lock calls ask of a store, spoken to through its ``gateway``. The record is at KEY on
    a lease; beside it, after a NUL, the last holder's (``last``), each waiter's place
    (``wait``, a NUL, its lease) and, of several slots, each holder's key on its lease
    (``slot``, a NUL, the lease). Each change is one transaction that compares what the
    call read; the line is kept by places on leases the waiters keep alive, and a waiter
    waits on its ``watch``."""

    gateway: _EtcdGateway

    def __init__(self, address: str) -> None:
        self.gateway = _EtcdGateway(address)
        self.lock = self.gateway.lock
        key = self.gateway.key_text
        self.key = key.encode()
        self.last_key = (key + "\0last").encode()
        self.wait_prefix = (key + "\0wait\0").encode()
        self.slot_prefix = (key + "\0slot\0").encode()
        self.watch = _EtcdWatch(self.gateway)  # a waiter's, open while it waits
        self.pause = _Pause()
        # Leases granted and not yet used: of tries that lost their race, and the one
        # granted ahead for a take to come (see _grant_ahead).
        self.spares: list[_Spare] = []
        self.ranged: tuple[int, list[Any]] = (-1, [])  # the last range: its revision, keys
        self.told: _Look | None = None  # what the first in line's watch told, for its read
        # The lock as the last join or lost change found it, for the next read or look
        # (with the line or not), and whether the last read asked for the line.
        self.fresh: tuple[_Look, bool] | None = None
        self.line_read = True
        self.record_on: str | None = None  # the lease the last change put the record on
        self.left_as = (tuple(self.gateway.endpoints), key)  # its entry in _LEFT
        self.remembering = True  # the first read of a call may be what _LEFT holds
        self.freed: tuple[str, str, str] | None = None  # a free lease the change uses

    def look(self, upto: str | None = None) -> _Look:
        """The lock with its whole line: read again, unless the last change gave it (a
        join, or a change that lost its race after a read of the line)."""
        self.told = None
        fresh = self._fresh(line=True)
        return self._range(line=True) if fresh is None else fresh

    def read(self, line: bool = True) -> _Look:
        """As look (the transaction compares later); without the ``line``, only the
        record's, the last holder's and the slots' keys are read. The first read after
        the first in line's watch woke it is what the watch told: the record's keys as
        they stand after the change that woke it, the line as its look found it (a
        place ahead that left since only makes it wait once more). The read after a
        change that lost its race is what that change's transaction found."""
        self.line_read = line
        told, self.told = self.told, None
        found = self._fresh(line) if told is None else told
        if found is None and self.remembering:
            found = self._remembered()
        self.remembering = False
        look = self._range(line) if found is None else found
        # A take's fence is one more than the revision the look was read at: no more
        # than the revision its transaction commits at, larger than every earlier
        # take's, which committed at or before it.
        look.fence_floor = _revision_seen(look) + 1
        return look

    def _fresh(self, line: bool) -> _Look | None:
        """What the last change found, once (None: nothing, or not the line asked for)."""
        fresh, self.fresh = self.fresh, None
        if fresh is None or (line and not fresh[1]):
            return None
        return fresh[0]

    def _remembered(self) -> _Look | None:
        """What this process's last change of the lock left, as a look (None: none)."""
        left = _LEFT.get(self.left_as)
        if left is None:
            return None
        revision, kvs = left
        look = _looked(self.key, kvs, revision)
        look.remembered = True
        self.ranged = (revision, kvs)
        return look

    def _leave_known(
        self, record: _Record | None, revision: int, value: bytes, created: int
    ) -> None:
        """Remember what a change committed at ``revision`` left: ``record`` (``value``,
        on ``self.record_on``; its key ``created`` at that revision, or 0: before), or
        nothing, as a range would give it. A lock of several slots is not remembered:
        its holders' leases end without a change to compare."""
        if record is not None and record.holders is not None:
            _LEFT.pop(self.left_as, None)
            return
        kvs = []
        if record is not None:
            at = str(revision)
            kvs = [
                {"key": _b64(self.key), "value": _b64(value), "mod_revision": at},
                {"key": _b64(self.last_key), "value": _b64(value), "mod_revision": at},
            ]
            if self.record_on:
                kvs[0]["lease"] = self.record_on
            if created:
                kvs[0]["create_revision"] = str(created)
        if len(_LEFT) >= _LEFT_MAX:
            _LEFT.clear()  # a long-lived process keeps it small
        _LEFT[self.left_as] = (revision, kvs)

    def _span(self, line: bool) -> dict[str, str]:
        """The keys a read asks for: the record's and the slots', and the line's."""
        end = self.key + b"\1" if line else self.slot_prefix[:-1] + b"\1"
        return {"key": _b64(self.key), "range_end": _b64(end)}

    def _range(self, line: bool) -> _Look:
        answer = self.gateway.post("/v3/kv/range", self._span(line))
        return self._look_of(answer, "range")

    def _look_of(self, answer: Any, what: str, ranged: Any = None) -> _Look:
        """The look a range gives (``answer``, or ``ranged``: a range in the answer of a
        transaction), at the revision of ``answer``; kept as this store's last range."""
        if ranged is None:
            ranged = answer
        try:
            header = str(answer.get("header", {}).get("revision", "0"))
            seen = int(header) if header.isdigit() else 0
            kvs = ranged.get("kvs", [])
            look = _looked(self.key, kvs, seen)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise _not_etcd(what, "kvs") from None
        self.ranged = (seen, kvs)
        return look

    def _found(self, answer: Any, index: int, line: bool) -> None:
        """Keep as ``fresh`` the range a transaction's ``index``th operation gave."""
        try:
            ranged = answer["responses"][index]["response_range"]
        except (KeyError, IndexError, TypeError):
            raise _not_etcd("txn", "responses") from None
        if not isinstance(ranged, dict):
            raise _not_etcd("txn", "responses")
        self.fresh = (self._look_of(answer, "txn", ranged), line)

    def _place_key(self, place: _Place) -> bytes:
        return self.wait_prefix + place.ticket.encode()

    def _grant_ahead(self, stale_after: float) -> None:
        """A lease for the take to come, unless one is spare. It has a second more
        than the timeout, kept alive by the waiter's beats, and a take uses it only
        while a whole timeout is left of it: a slot never ends before its timeout,
        and may end a second after it."""
        ttl = _whole_seconds(stale_after) + 1
        if not any(ahead for _, _, _, ahead in self.spares):
            sent = _SEAMS.clock()
            answer = self.gateway.post("/v3/lease/grant", {"TTL": str(ttl)})
            lease = _answer_field(answer, "ID", "lease/grant", digits=True)
            self.spares.append((ttl, lease, sent, True))

    def revoke(self, lease: str | None) -> None:
        if lease:
            try:
                self.gateway.post("/v3/lease/revoke", {"ID": lease})
            except OSError:
                pass  # it runs out by itself

    def _grant(
        self,
        seconds: float,
        granted: list[_Spare],
        owner: str | None = None,
        mine: str | None = None,
    ) -> str:
        """A lease of ``seconds`` (rounded up), added to ``granted`` if granted in this
        try: a spare one if one serves, else a new one. Only one granted ahead serves, a
        second longer, while that TTL is left of it: a slot on it ends no sooner than on
        a lease granted now (the renewer counts a hold from its try's start), and at
        most a second later. A lost try's lease, granted before, would end sooner:
        revoked. So does one kept alive now with that TTL or a second more: ``mine``,
        the lease of the hold it renews, or one a release of the lock in this process
        left free, if it carried ``owner``'s record."""
        ttl = _whole_seconds(seconds)
        now = _SEAMS.clock()
        for spare in self.spares:
            spare_ttl, lease, sent, ahead = spare
            if ahead and spare_ttl == ttl + 1 and spare_ttl - (now - sent) >= ttl:
                self.spares.remove(spare)
                granted.append(spare)
                return lease
        if mine and ttl <= self._ttl_kept(mine) <= ttl + 1:
            return mine
        free = _FREE_LEASES.pop(self.left_as, None)
        if free is not None and free[2] != owner:
            _FREE_LEASES[self.left_as] = free  # its owner's next take's
        elif free is not None:
            if ttl <= (left := self._ttl_kept(free[0])) <= ttl + 1:
                self.freed = free  # free again if this try's change loses
                return free[0]
            if left:
                self.revoke(free[0])  # of another timeout: of no use
        sent = _SEAMS.clock()
        answer = self.gateway.post("/v3/lease/grant", {"TTL": str(ttl)})
        lease = _answer_field(answer, "ID", "lease/grant", digits=True)
        granted.append((ttl, lease, sent, False))
        return lease

    def _slot_key(self, lease: str) -> bytes:
        return self.slot_prefix + lease.encode()

    # -- Waiting: a waiter watches only what it waits on (the place just ahead of it, or
    # at its turn the record and the slots' keys), never polls, and at its turn keeps
    # what its watch streams, so that its take needs neither a grant nor a read.

    def wait(self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int) -> bool:
        """Until the place just ahead is deleted, or (its turn) the record or a slot's
        key. Each watches only what it waits on: the place just ahead, alone, or (its
        turn) the record and the slots' keys, never the line. A take or a leave then
        wakes one waiter, and etcd streams each change to those it concerns.

        A watch starts from the moment it is made, never from a past revision: etcd
        holds back the news of a watch that starts in the past until its next sweep, up
        to 100 ms later. A watch made after something changed since ``look`` wakes the
        waiter at once to look again; the watch goes on, and streams every later change.

        At its turn a waiter has the lease it will take on granted ahead, and keeps the
        record's keys up to date from what its watch streams, so that its take needs
        neither a grant nor a read."""
        turn = away == 0
        self.told = None
        watching = self._target(ahead, away)
        seen = _revision_seen(look)
        watch = self.watch
        if watch.connection is not None and (watch.watching != watching or watch.watched > seen):
            watch.stop()  # another key, or it cannot vouch for what came after look
        until = _SEAMS.clock() + left
        try:
            if turn:
                self._grant_ahead(place.stale_after)
            kept = self._kept(look) if turn else None
            if watch.connection is None:
                if not watch.start(until, watching):
                    self.pause.sleep(left)
                    return False
                if watch.watched > seen:
                    return True  # changed since the look: what it waits on may have
            while True:
                deleted = watch.deleted(until, kept, seen)
                if turn and (self.key in deleted or self._slot_in(deleted)):
                    if kept is not None:
                        self.told = self._told(kept)
                    return True
                if not turn and watching[0] in deleted:
                    return True
        except TimeoutError:
            return False  # the stream goes on
        except (OSError, ValueError):
            watch.stop()
            self.pause.sleep(max(0.0, until - _SEAMS.clock()))
            return False
        finally:
            self.gateway.next_step()

    def vouches(self, look: _Look) -> bool:
        """While the watch is open, streams every change after ``look`` and has
        streamed none yet: a place ahead that ends, by its leaving or its lease, and
        (its turn) a slot that frees each delete a key it watches, and so wake the
        wait. (A change it streamed that woke nothing, such as a renewal at its turn,
        is in no look yet, so the next wait needs a new one.)"""
        return self.watch.vouches(_revision_seen(look))

    def _target(self, ahead: list[_Place], away: int) -> tuple[bytes, bytes | None]:
        """What a waiter ``away`` from its turn watches: at its turn, the record and
        the slots' keys; else the place just ahead of it."""
        if away == 0:
            return (self.key, self.slot_prefix[:-1] + b"\1")
        return (self._place_key(ahead[-1]), None)

    def _slot_in(self, keys: set[bytes]) -> bool:
        return any(key.startswith(self.slot_prefix) for key in keys)

    def _kept(self, look: _Look) -> dict[bytes, Any] | None:
        """The record's keys of ``look``, by key (None: ``look`` was not this store's
        last range), to keep up to date as the watch streams their changes."""
        seen, kvs = self.ranged
        if seen != _revision_seen(look):
            return None
        return {
            key: kv for kv in kvs if not (key := _unb64(kv["key"])).startswith(self.wait_prefix)
        }

    def _told(self, kept: dict[bytes, Any]) -> _Look:
        """The look the ``kept`` keys give, with the line of this store's last range."""
        seen, kvs = self.ranged
        line = [kv for kv in kvs if _unb64(kv["key"]).startswith(self.wait_prefix)]
        revisions = [int(kv.get("mod_revision", 0)) for kv in kept.values()]
        return _looked(self.key, [*kept.values(), *line], max([seen, *revisions]))

    # -- Changes, the line, and letting go

    def close(self) -> None:
        while self.spares:
            self.revoke(self.spares.pop()[1])
        self.told = self.fresh = None
        self.gateway._give_back()
        self.watch.stop()

    def by_hand(self) -> str:
        return f"delete its key (etcdctl del {_quoted(self.key.decode())})"

    def join(self, look: _Look, place: _Place, now: float) -> None:
        """A key on a lease of its own, kept alive by the waiter; the transaction that
        puts it reads the lock as it then stands, for the waiter's first look."""
        if _ahead_of(_live(look.line, now), place.ticket) is not None:
            return
        answer = self.gateway.post("/v3/lease/grant", {"TTL": str(int(_SEAMS.place_ttl_sec))})
        place.ticket = _answer_field(answer, "ID", "lease/grant", digits=True)
        place.since = int(now // 1)
        place.joined = True
        value = _place_value(place)
        put = {"key": _b64(self._place_key(place)), "value": _b64(value), "lease": place.ticket}
        ops = [{"request_put": put}, {"request_range": self._span(line=True)}]
        self._found(self.gateway.post("/v3/kv/txn", {"success": ops}), 1, line=True)

    def prune(self, look: _Look, now: float) -> None:
        """Nothing to do: etcd ends the place of a waiter that stopped."""

    def beat(self, place: _Place) -> bool:
        """Keep the place's lease alive, and any lease granted ahead with it."""
        self.gateway.next_step()  # each beat a step of its own, with its own deadline
        for spare in list(self.spares):
            ttl, lease, _, ahead = spare
            if ahead:
                self.spares.remove(spare)
                sent = _SEAMS.clock()
                if self._kept_alive(lease):  # else it ended: nothing to revoke
                    self.spares.append((ttl, lease, sent, ahead))
        return self._kept_alive(place.ticket)

    def _kept_alive(self, lease: str) -> bool:
        return self._ttl_kept(lease) > 0

    def _ttl_kept(self, lease: str) -> int:
        """Keep ``lease`` alive: its TTL, to which it was renewed (0: it had ended)."""
        answer = self.gateway.post("/v3/lease/keepalive", {"ID": lease})
        result = answer.get("result")
        ttl = result.get("TTL") if isinstance(result, dict) else None
        return int(ttl) if isinstance(ttl, str) and ttl.isdigit() else 0

    def leave(self, place: _Place) -> None:
        self.gateway.next_step()
        place.joined = False
        self.revoke(place.ticket)

    def apply(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None = None,
    ) -> bool:
        """By a transaction; signals wait while it is sent."""
        # The leases of slots this change renews or releases.
        kept = {holder.mark for holder in _holders(record)}
        gone = [h.mark for h in _holders(look.record) if h.mark not in kept]
        with _SIGNALS_HELD:
            applied = self._swap(look, record, owner, place, gone=gone)
            if applied:
                _Interrupts.disarm()
        if applied:
            # The leases nothing stands on now (else they would only run out): the
            # record's last one, and those of slots renewed or released.
            kept = {holder.mark for holder in _holders(record)} | {self.record_on}
            # A release's record lease is the process's next take's (_grant).
            whole = look.record is not None and look.record.holders is None
            free = look.lease if record is None and whole else None
            for lease in {look.lease, *gone} - kept:
                if lease is not None and lease == free:
                    if len(_FREE_LEASES) >= _LEFT_MAX:
                        _FREE_LEASES.clear()  # a long-lived process keeps it small
                    assert look.record is not None
                    _FREE_LEASES[self.left_as] = (lease, self.lock, look.record.owner or "")
                else:
                    self.revoke(lease)
        if applied and place is not None:
            place.joined = False  # its lease runs out by itself
        return applied

    def _swap(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None,
        *,
        gone: list[str | None],
    ) -> bool:
        """If the record's revision is still ``look``'s: put ``record`` (None: delete
        it). Each new holder of several slots gets a lease of its own and a key on it
        (``slot``, a NUL, the lease), that ends its slot; the record's lease outlives
        them all, so an older version sees the lock held while any slot is live."""
        granted: list[_Spare] = []
        ops: list[dict[str, Any]] = []
        self.record_on = None
        self.freed = None
        puts = b""
        if record is not None:
            lease = self._record_lease(record, look, granted, ops)
            self.record_on = lease
            puts = _bytes_of(record)
            ops += [
                {
                    "request_put": {
                        "key": _b64(self.key),
                        "value": _b64(puts),
                        "lease": lease or "0",
                    }
                },
                {"request_put": {"key": _b64(self.last_key), "value": _b64(puts)}},
            ]
        else:
            ops = [{"request_delete_range": {"key": _b64(k)}} for k in (self.key, self.last_key)]
        for mark in gone:
            if mark is not None:
                ops.append({"request_delete_range": {"key": _b64(self._slot_key(mark))}})
        outcome = _unknown_outcome(owner, taking=owner in [h.owner for h in _holders(record)])
        compare = [
            {
                "key": _b64(self.key),
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": look.revision,
            }
        ]
        if look.remembered:
            # Not read: the last holder's copy and the line must stand as remembered
            # too (an empty line: no place's key created at all).
            compare.append({**compare[0], "key": _b64(self.last_key)})
            if self.line_read:
                compare.append(
                    {
                        "key": _b64(self.wait_prefix),
                        "range_end": _b64(self.wait_prefix[:-1] + b"\1"),
                        "target": "CREATE",
                        "result": "EQUAL",
                        "create_revision": "0",
                    }
                )
        if place is not None:
            key = _b64(self._place_key(place))
            compare.append(
                {"key": key, "target": "CREATE", "result": "GREATER", "create_revision": "0"}
            )
            ops.append({"request_delete_range": {"key": key}})
        # Lost, the transaction reads the lock instead, for the next try's read.
        failure = [{"request_range": self._span(self.line_read)}]
        txn = {"compare": compare, "success": ops, "failure": failure}
        _LEFT.pop(self.left_as, None)  # known again only once this change is
        answer = self.gateway.post("/v3/kv/txn", txn, outcome=outcome, resendable=True)
        landed = self.gateway.resent and self._landed(answer, record, puts)
        if answer.get("succeeded") or landed:
            committed = landed or _answer_revision(answer)
            created = 0
            if record is not None and look.revision == "0":
                _raise_fences(record, committed)
                created = committed
            self._leave_known(record, committed, puts, created)
            return True
        self.spares += granted  # those granted ahead serve the next try; all revoked at close
        if self.freed is not None:
            _FREE_LEASES[self.left_as] = self.freed  # nothing was put on it
        self._found(answer, 0, self.line_read)
        return False

    def _landed(self, answer: Any, record: _Record | None, value: bytes) -> int:
        """The revision the change (``record``, None: a delete) committed at when its
        first sending, whose answer was lost, landed: seen in what the second, which
        then found the lock changed, read instead (0: it did not). A put is known by its
        ``value`` on its lease (the record's times, to the second, and its fence); a
        delete by both keys gone (an expiry leaves the last holder's)."""
        if answer.get("succeeded"):
            return 0
        try:
            kvs = answer["responses"][0]["response_range"].get("kvs", [])
            keys = {_unb64(kv["key"]): kv for kv in kvs}
            header = int(answer["header"]["revision"])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            return 0
        if record is None:
            return header if self.key not in keys and self.last_key not in keys else 0
        kv = keys.get(self.key)
        if record.holders is not None or kv is None or kv.get("lease") != self.record_on:
            return 0
        return int(kv.get("mod_revision", 0)) if _unb64(kv.get("value", "")) == value else 0

    def _record_lease(
        self,
        record: _Record,
        look: _Look,
        granted: list[_Spare],
        ops: list[dict[str, Any]],
    ) -> str | None:
        """The lease ``record`` goes on: one slot's, its holder's timeout. Of several,
        each new holder gets a lease of its timeout and a key on it; the record stays
        on a lease that outlives every slot: a release leaves it on its own; a take
        puts it on the new holder's when no other holder has a longer timeout (every
        other slot's lease was granted earlier), else on a lease of the longest. A
        renewal of one slot keeps its lease (``look``'s), kept alive, if it serves."""
        current = look.lease
        if record.holders is None:
            assert record.stale_after is not None
            was = look.record
            mine = was is not None and was.holders is None and was.owner == record.owner
            return self._grant(record.stale_after, granted, record.owner, current if mine else None)
        lease = None
        newest = 0.0
        for holder in record.holders:
            if holder.mark is None:
                assert holder.stale_after is not None
                holder.mark = self._grant(holder.stale_after, granted, holder.owner)
                marker = {"key": _b64(self._slot_key(holder.mark)), "lease": holder.mark}
                marker["value"] = _b64((holder.owner or "").encode())
                ops.append({"request_put": marker})
                lease, newest = holder.mark, holder.stale_after
        if lease is None:
            return current  # a release: the lease it is on outlives the rest
        longest = max(h.stale_after or 0.0 for h in record.holders)
        return lease if newest >= longest else self._grant(longest, granted)


def _raise_fences(record: _Record, created: int) -> None:
    """Raise each fence of ``record``, whose key was created at revision ``created``, to
    at least that revision. A take that finds the key absent cannot tell from what it
    read whether another run took and released the lock before its transaction commits
    (a revision of 0 compares equal either way), so its fence is the revision that
    creates the key: larger than that of every take committed before it."""
    for holder in _holders(record):
        if holder.fence is not None and holder.fence < created:
            holder.fence = min(created, _MAX_FENCE)


def _answer_revision(answer: Any) -> int:
    """The revision a transaction's ``answer`` committed at (its header's)."""
    header = answer.get("header")
    revision = header.get("revision") if isinstance(header, dict) else None
    if not (isinstance(revision, str) and revision.isdigit()):
        raise _not_etcd("txn", "header")
    return int(revision)


def _looked(key: bytes, kvs: list[Any], seen: int) -> _Look:
    """The look at the lock ``key`` that its keys ``kvs`` (of one range) give: its
    record (on a lease: live), the last holder's, and the line in the order joined. Of
    several slots, a holder's is live while the key on its lease is."""
    record = last = None
    revision = "0"
    lease = None
    line: list[tuple[int, _Place]] = []
    now = int(time.time())
    last_key = key + b"\0last"
    wait_prefix = key + b"\0wait\0"
    slot_prefix = key + b"\0slot\0"
    live_slots = set()
    for kv in kvs:
        name = _unb64(kv["key"])
        if name.startswith(slot_prefix):
            if kv.get("lease") == name[len(slot_prefix) :].decode("ascii", "replace"):
                live_slots.add(kv["lease"])
            continue
        value = _unb64(kv.get("value", ""))
        if name.startswith(wait_prefix):
            place = _wait_place(value, kv.get("lease"))
            if place is not None:
                line.append((int(kv["create_revision"]), place))
            continue
        parsed = _parse_record(value, now)  # a foreign value is dated now
        if name == key:
            revision = _answer_field(kv, "mod_revision", "range", digits=True)
            created = kv.get("create_revision", "0")  # etcd leaves out a 0
            _raise_fences(parsed, int(created) if str(created).isdigit() else 0)
            record = parsed
            lease = kv.get("lease")
            if lease:
                record.lease = "live"
        elif name == last_key:
            last = parsed
            last.lease = "expired"
    for holder in record.holders or [] if record is not None else []:
        holder.lease = "live" if holder.mark in live_slots else "expired"
    for holder in last.holders or [] if last is not None else []:
        holder.lease = "expired"
    line.sort(key=lambda entry: entry[0])
    return _Look(record, last, revision, lease, line=[p for _, p in line], seen=_EtcdSeen(seen))


atexit.register(_revoke_free_leases)
if hasattr(os, "register_at_fork"):  # a forked child's are its parent's
    os.register_at_fork(after_in_child=_FREE_LEASES.clear)


def _open_etcd(address: str) -> _Store:
    """The registry's opener: an etcd lock (mypy checks the class against _Store here)."""
    return _EtcdStore(address)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/etcd_listing.py, carried as text: compiled only for a lock of its store
# The etcd store's listing: every lock under a prefix, read in ranges of one revision
# (one consistent view, a page at a time). Compiled only for a listing of etcd.
# --------------------------------------------------------------------------------------

_CARRIED['etcd_listing'] = (9371, ('etcd_gateway', 'etcd_store'), r'''
if TYPE_CHECKING:
    from typing import Any


def _survey_etcd(address: str) -> _Survey:
    """Every lock whose key starts with the address's KEY, from ranges of one revision
    (one consistent view, a page at a time); read only."""
    gateway = _EtcdGateway(address, prefix=True)
    prefix = gateway.key_text.encode()
    try:
        # etcd takes no empty key: the whole keyspace starts at NUL.
        start = prefix or b"\0"
        end = _prefix_end(prefix)
        revision = 0
        groups: dict[bytes, list[Any]] = {}
        while True:
            body: dict[str, Any] = {
                "key": _b64(start),
                "range_end": _b64(end),
                "limit": _SEAMS.survey_page,
                "revision": revision,
            }
            answer = gateway.post("/v3/kv/range", body)
            try:
                revision = revision or int(answer["header"]["revision"])
                kvs = answer.get("kvs", [])
                for kv in kvs:
                    name = _unb64(kv["key"])
                    groups.setdefault(name.partition(b"\0")[0], []).append(kv)
            except (AttributeError, KeyError, TypeError, ValueError):
                raise _not_etcd("range", "kvs") from None
            if not (answer.get("more") and kvs):
                break
            start = name + b"\0"
    finally:
        gateway._give_back()
    try:
        looks = {key: _looked(key, found, revision) for key, found in groups.items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise _not_etcd("range", "kvs") from None
    found = [(gateway.address_of(key, "replace"), look) for key, look in looks.items()]
    return address, found, ""


def _prefix_end(prefix: bytes) -> bytes:
    """The end of etcd's range of keys that start with ``prefix`` (all keys: NUL)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/redis_gateway.py, carried as text: compiled only for a lock of its store
# Redis's gateway, as every Redis (or Valkey) lock speaks to it: one connection to a
# node (authenticated, TLS with ``rediss``), commands pipelined on it within the step's
# deadline, a Redis Cluster's redirects followed to the node that serves the lock's keys,
# and Redis's refusals as errors a person can act on. Compiled only for a Redis lock.
# --------------------------------------------------------------------------------------

_CARRIED['redis_gateway'] = (9433, ('kept_connections', 'resp', 'server_gateway'), r'''
import errno
import os
import re
import time


if TYPE_CHECKING:
    from typing import Any


# A Redis Cluster's answers that send a call to another node, followed this often at
# most per call (a slot moves once; more means the cluster is being reconfigured).
_REDIRECTS_MAX = 5
_REDIRECT_PAUSE_SEC = 0.05
# Errors after which nothing ran and the server serves soon (loading, promoting, busy,
# or a Cluster slot in mid-migration: TRYAGAIN).
_REDIS_BUSY = ("LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")


def _redis_timeout(text: str) -> float:
    """Seconds of SKF_REDIS_TIMEOUT, a plain number (at most a day)."""
    if not _PLAIN_DECIMAL.fullmatch(text) or not 0 < float(text) <= _MAX_WAIT_SEC:
        raise ValueError(
            f"SKF_REDIS_TIMEOUT must be a number of seconds from 0 to 86400, like 5 or 0.5,"
            f" not {text!r}"
        )
    return float(text)


def _with_asking(commands: tuple[_Command, ...]) -> list[_Command]:
    """``commands`` for a node an ASK sent them to: ASKING before each one outside a
    transaction, and before its MULTI (inside one, the node keeps it until EXEC)."""
    sending: list[_Command] = []
    inside = False
    for command in commands:
        if not inside:
            sending.append(("ASKING",))
        sending.append(command)
        if command[0] == "MULTI":
            inside = True
        elif command[0] in ("EXEC", "DISCARD"):
            inside = False
    return sending


class _CommandDenied(PermissionError):
    """Redis refused the user a ``command`` (NOPERM), not a key."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(errno.EACCES, message)
        self.command = command


def _denied_command(text: str) -> str | None:
    """The command a NOPERM refusal names (Redis and Valkey: "... no permissions to run
    the 'time' command"), lowercase; None where it names a key or a channel."""
    _, quote, rest = text.partition(" the '")
    name, closing, after = rest.partition("'")
    if quote and closing and after.startswith(" command"):
        return name.lower()
    return None


class _NotApplied(Exception):
    """A transaction under WATCH did not run (redirected, or the node was busy)."""


class _RedisGateway(_ServerGateway):
    """The conversation with Redis or Valkey for one lock's address
    (``redis[s]://[USER@]HOST[:PORT]/KEY``): a connection (authenticated, TLS with
    ``rediss``), commands pipelined on it within the step's deadline, a Redis Cluster's
    redirects followed to the node that serves the lock's keys, and Redis's refusals as
    errors a person can act on. A waiter's ``bell`` is its connection too: a redirect
    ends it."""

    name = "Redis"
    env = "SKF_REDIS_"
    port = "Redis's"
    timeout_var = "SKF_REDIS_TIMEOUT"
    form = "{0}://HOST[:PORT]/KEY or {0}://USER@HOST[:PORT]/KEY"
    default_port = 6379
    users = True
    secure = "rediss"
    credentials = "holds a password: a password never goes in the address; set REDISCLI_AUTH"

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        env = os.environ
        super().__init__(address, _redis_timeout(env.get("SKF_REDIS_TIMEOUT") or "5"), prefix)
        (self.endpoint,) = self.endpoints
        # Bytes as given: an argument may hold any (surrogate-escaped).
        self.key = self.key_text.encode("utf-8", "surrogateescape")
        self.password = env.get("REDISCLI_AUTH")
        self.connection: _RespConnection | None = None
        self.watched: _RespConnection | None = None  # the one whose WATCH is on KEY
        self.bell: _RespConnection | None = None  # a waiter's, blocked on its bell
        # True once a Cluster's ASK sent the lock's keys to the node importing their
        # slot: each command there goes after an ASKING (harmless once it owns it).
        self.asking = False

    def _open(self) -> _RespConnection:
        connection = _RespConnection(self.endpoint, self.tls_context(), self.deadline)
        if self.password is not None or self.user:
            who = (self.user,) if self.user else ()
            try:
                connection.send([("AUTH", *who, self.password or "")], self.deadline)
                answer = connection.answer(self.deadline)
            except BaseException:
                connection.close()
                raise
            if isinstance(answer, _RedisError):
                connection.close()
                raise self._refusal(answer)
        return connection

    def call(
        self,
        *commands: _Command,
        outcome: str | None = None,
        write: bool = False,
        watched: bool = False,
        raw: bool = False,
    ) -> list[Any]:
        """The answers to ``commands``, followed to the node a Redis Cluster redirects
        them to; a ``write`` that was sent is not tried again. ``watched``: a
        transaction under an earlier call's WATCH, which a redirect or a busy node ends
        in _NotApplied: sent again it would run without its WATCH. ``raw``: the answers
        as they came, error answers among them (nothing redirected)."""
        failure = None
        redirects = 0
        started = _SEAMS.clock()
        while True:
            connection = self.connection
            sent = False
            try:
                if connection is None:
                    connection = self.connection_to(self.endpoint, _RespConnection, self._open)
                    self.connection = connection
                sending = self._sending(connection, commands)
                deadline = self.deadline
                if connection.unproven and not (write or watched or outcome is not None):
                    # Sent again on a new one if no answer comes (see _UNPROVEN_ANSWER_SEC).
                    deadline = min(deadline, _SEAMS.clock() + _UNPROVEN_ANSWER_SEC)
                connection.send(sending, deadline)
                sent = True
                answers = self._answers(connection, sending, deadline)
            except (OSError, ValueError) as exc:
                self._drop()
                if watched and not sent:
                    # EXEC, the transaction's last bytes, never left: it did not run. Sent
                    # on a new connection it would run without its WATCH: read again.
                    raise _NotApplied from None
                if sent and (outcome is not None or write):
                    raise self._lost(exc, outcome) from None
                if connection is not None and connection.unproven:
                    # A kept connection closed or reset while it was idle (a restart, a
                    # proxy) before it said a word: the others kept with it likely were
                    # too. A new one at once (never unproven: this happens once a call).
                    _KEPT.discard(connection.kept_as)
                    continue
                reason = self._passing(exc, started)
                failure = failure or reason
            except BaseException:
                self._drop()  # an interrupt: never read its answers out of step
                raise
            else:
                errors = _errors_in(answers)
                if raw or not errors:
                    return answers
                if self._redirected(errors[0], redirects, watched):
                    redirects += 1
                    continue
                failure = errors[0].text
            left = self.deadline - _SEAMS.clock()
            if left <= 0:
                raise self.unreachable(self.endpoint, failure)
            time.sleep(min(0.05, left))

    def _sending(
        self, connection: _RespConnection, commands: tuple[_Command, ...]
    ) -> list[_Command]:
        """``commands`` as sent on ``connection``: after an UNWATCH where an earlier call
        left a WATCH on it, with ASKING where an ASK sent them."""
        asked = (("UNWATCH",), *commands) if connection.watching else commands
        return _with_asking(asked) if self.asking else list(asked)

    def _answers(
        self, connection: _RespConnection, sending: list[_Command], deadline: float
    ) -> list[Any]:
        """The answers to what _sending sent, without ASKING's and UNWATCH's."""
        answers = connection.answers(len(sending), deadline)
        if self.asking:
            answers = [a for c, a in zip(sending, answers, strict=True) if c[0] != "ASKING"]
        if connection.watching:
            connection.watching = False
            del answers[0]  # UNWATCH's
        return answers

    def _lost(self, exc: Exception, outcome: str | None) -> OSError:
        """The failure of a change that was sent (``outcome``: what it may have done)."""
        if outcome is not None:
            return self.lost_answer(self.endpoint, exc, outcome)
        return OSError(errno.EIO, f"Redis at {self.endpoint}: {self.describe(exc)}")

    def _passing(self, exc: Exception, since: float) -> str:
        """Why a request that changed nothing failed, if trying again may help (else the
        error it means is raised): a refusal, after ``since``, is given up on in time."""
        reason = self.describe(exc)
        if isinstance(exc, PermissionError):
            raise exc  # trying again cannot help
        if reason.startswith(_TLS_FAILURE):
            raise OSError(errno.EPROTO, f"Redis at {self.endpoint}: {reason}") from None
        self.give_up_if_refused(exc, since, self.endpoint, reason)
        return reason

    def _redirected(self, error: _RedisError, redirects: int, watched: bool) -> bool:
        """True if ``error`` sent the call to another node; False if the node is busy
        (try again soon); else the refusal ``error`` means."""
        if error.code in ("MOVED", "ASK") and redirects < _REDIRECTS_MAX:
            # Nothing of a redirected command ran; the node it names serves it. Sent on
            # again, the nodes are still telling each other of a slot's move (slow on a
            # busy machine): each further redirect waits a little longer (0.75 s in all).
            if redirects:
                pause = _REDIRECT_PAUSE_SEC * 2 ** (redirects - 1)
                time.sleep(min(pause, max(0.0, self.deadline - _SEAMS.clock())))
            self._redirect(error)
            if watched:
                raise _NotApplied
            return True
        if error.code not in _REDIS_BUSY:
            raise self._refusal(error)
        if watched:
            # The lock call reads again and retries; a slot's keys finish moving within
            # moments, so its tries (20 of them) span about 2 s.
            time.sleep(min(0.1, max(0.0, self.deadline - _SEAMS.clock())))
            raise _NotApplied
        return False

    def _redirect(self, error: _RedisError) -> None:
        """Go to the node a MOVED or ASK answer names (ASK: with ASKING, for now)."""
        found = re.fullmatch(r"(MOVED|ASK) [0-9]+ (.*:[0-9]{1,5})", error.text)
        if found is None:
            raise self._refusal(error)
        self._stop_listening()
        self._go(self._node_address(found[2]), asking=found[1] == "ASK")

    def _node_address(self, where: str) -> str:
        """The endpoint of a node a Cluster names as ``HOST:PORT``."""
        host, _, port = where.rpartition(":")
        if not host or host == "?":  # the node does not know its name: the same host
            host = self.endpoint.rpartition(":")[0]
        elif ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address
        return f"{host}:{port}"

    def _go(self, endpoint: str, asking: bool = False) -> None:
        """Send what follows to the node at ``endpoint`` (``asking``: after ASKING)."""
        if endpoint != self.endpoint:
            self._give_back()
            self.endpoint = endpoint
        self.asking = asking

    def _stop_listening(self) -> None:
        if self.bell is not None:
            self.bell.close()
            self.bell = None

    def _drop(self) -> None:
        """Close the connection: one cut short could be read out of step."""
        if self.connection is not None:
            self.connection.close()
        self.connection = None
        self.watched = None

    def _give_back(self) -> None:
        """Keep the connection, every answer read, for the next call (which first undoes
        a WATCH this one left on it)."""
        connection = self.connection
        if connection is not None:
            connection.watching = self.watched is connection
            _KEPT.keep(connection)
        self.connection = None
        self.watched = None

    def _refusal(self, error: _RedisError) -> OSError:
        code = error.code
        text = error.text
        who = f"user {self.user!r}" if self.user else "the default user"
        if code == "ERR" and "AUTH" in text.upper():
            code = "WRONGPASS"  # before ACLs, or no password set
        key = self.key.decode("utf-8", "replace")
        denied = {
            "NOAUTH": f"Redis wants a password ({text}): set REDISCLI_AUTH",
            "WRONGPASS": f"Redis refused {who} ({text}); check the user in the address"
            " and REDISCLI_AUTH",
            "NOPERM": f"Redis denied {who} access to the lock's keys ({key}): {text}",
        }
        command = _denied_command(text) if code == "NOPERM" else None
        if command is not None:
            return _CommandDenied(
                command,
                f"Redis denied {who} the command {command.upper()} ({text}): give the user"
                f" +{command} (the commands a user needs: docs/redis.md, Permissions)",
            )
        if code in denied:
            return PermissionError(errno.EACCES, denied[code])
        advice = {
            "WRONGTYPE": f"a key of the lock {self.lock} holds another type of value, not"
            f" this tool's ({text}); {self.by_hand()} if it is no longer needed",
            "MOVED": f"a Redis Cluster sent the lock's keys from node to node more than"
            f" {_REDIRECTS_MAX} times ({text}): its slots are being moved; try again once"
            " the cluster is stable",
            "READONLY": f"{self.endpoint} is a replica ({text}): give the primary's address",
        }
        advice["ASK"] = advice["MOVED"]
        return OSError(errno.EIO, advice.get(code, f"Redis refused the request: {text}"))

    def by_hand(self) -> str:
        # The address's own node; -c follows a Cluster's redirect, as this store does.
        host, _, port = self.endpoints[0].rpartition(":")
        key = self.key.decode("utf-8", "surrogateescape")
        return f"delete its key (redis-cli -c -h {host.strip('[]')} -p {port} DEL {_quoted(key)})"
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/redis_store.py, carried as text: compiled only for a lock of its store
# The Redis (or Valkey) store, which has Redis's gateway (redis_gateway.py, RESP2 over a
# socket): the record at KEY, expiring on the server's clock; every change one MULTI/EXEC
# under a WATCH of KEY; every other key of the lock in KEY's hash slot; waiters in line
# block on a bell of their own (BLPOP), rung by the release in its transaction. Compiled
# only for a Redis lock.
# --------------------------------------------------------------------------------------

_CARRIED['redis_store'] = (9768, ('redis_gateway', 'resp', 'server_gateway'), r'''
import errno
import os
import time


if TYPE_CHECKING:
    from typing import Any


def _slot_base(key: str) -> str | None:
    """KEY if it has a hash tag, else ``{KEY}``; None for a ``}`` but no tag."""
    start = key.find("{")
    if start >= 0 and key.find("}", start + 1) > start + 1:
        return key
    return None if "}" in key else "{" + key + "}"


def _server_us(clock: object) -> int:
    """The server's time in microseconds from TIME's answer (seconds and microseconds)."""
    if (
        isinstance(clock, list)
        and len(clock) == 2
        and all(isinstance(part, bytes) and part.isdigit() for part in clock)
    ):
        return int(clock[0]) * 1_000_000 + int(clock[1])
    raise OSError(errno.EPROTO, "Redis answered TIME in a shape it never has")


def _left_ms(holder: _Record, server_ms: int) -> int:
    """The ms until ``holder``'s slot ends by the server's clock (its mark: the ms it ends
    at); 0 or less once ended, or if no server time ends it (no slot, then)."""
    mark = holder.mark
    return int(mark) - server_ms if mark is not None and mark.isdigit() else 0


def _slots_ended(record: _Record, server_ms: int, ttl: int) -> int:
    """Judge each slot of ``record`` by the server's clock; the ms until the next live
    one ends (else ``ttl``, the record's own)."""
    ends = []
    for holder in record.holders or []:
        left = _left_ms(holder, server_ms)
        live = left > 0
        holder.lease = "live" if live else "expired"
        if live:
            ends.append(left)
    return min(ends) if ends else ttl


class _RedisSeen:
    """What a look at a Redis lock saw: the milliseconds until its next slot ends by the
    server's clock (-1: none ends by time)."""

    __slots__ = ("ttl_ms",)

    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms


class _RedisStore(_ServerStore):
    """One lock on Redis or Valkey: ``redis[s]://[USER@]HOST[:PORT]/KEY``, spoken to
    through its ``gateway``. The record is at KEY, expiring; the other keys share its
    Cluster slot: ``{KEY}``, a NUL, then ``last``, ``line`` (tickets in order), and per
    waiter ``wait`` and ``wake`` with its ticket: its place, and a list it blocks on
    until a release or a leaver pushes."""

    gateway: _RedisGateway

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        self.gateway = _RedisGateway(address, prefix)
        self.lock = self.gateway.lock
        self.key = self.gateway.key
        key = self.gateway.key_text
        base = _slot_base(key)
        if base is None and not prefix:
            raise ValueError(
                f"the lock key in {address} holds a '}}' but no hash tag, so its line cannot"
                " share its hash slot; give a key without '}', or with a tag like {name}"
            )
        base_bytes = (base or key).encode("utf-8", "surrogateescape")
        self.last_key = base_bytes + b"\0last"
        self.line_key = base_bytes + b"\0line"
        self.wait_prefix = base_bytes + b"\0wait\0"
        self.bell_prefix = base_bytes + b"\0wake\0"
        # True once a look found a lock of several slots: each later look asks the
        # server's TIME with its reads, not after them (a lock of one slot never does).
        self.clocked = False
        # True once Redis refused this user TIME: reads no longer ask it.
        self.timeless = False

    def close(self) -> None:
        self.gateway._give_back()
        self.gateway._stop_listening()

    def by_hand(self) -> str:
        return self.gateway.by_hand()

    # -- What the lock calls ask of a store

    def look(self, upto: str | None = None) -> _Look:
        """The record (its expiry live, or none), the last holder's, and the line (up to
        ``upto``'s place, if it is in line: the places behind it are not read)."""
        return self._looked(self.gateway.call(*self._reads(), *self._clock()), upto=upto)

    def read(self, line: bool = True) -> _Look:
        """As look, with KEY watched on this connection until the change applies; always
        with the line (a release rings the waiters it leaves a slot for). Without the
        ``line`` (a release's), nor the record's expiry nor the last holder's: only a
        take judges staleness or names a holder whose record expired."""
        reads = self._reads() if line else [("GET", self.key), ("LRANGE", self.line_key, 0, -1)]
        clock: list[_Command] = [] if self.timeless else [("TIME",)]
        try:
            answers = self.gateway.call(("WATCH", self.key), *reads, *clock)[1:]
        except _CommandDenied as denied:
            if not clock or denied.command != "time":
                raise
            # A user without TIME takes, renews and releases a lock of one slot, as
            # before fences: its takes get no fence rather than a weaker one.
            self.timeless = True
            answers = self.gateway.call(("WATCH", self.key), *reads)[1:]
        if not line:
            answers[1:1] = [-1, None]  # no expiry read, no last holder's
        look = self._looked(answers)
        if not self.timeless:
            # A take's fence is at least the server's clock in microseconds, read with
            # the lock in the same round trip: larger than that of a take whose keys a
            # release deleted, unless that clock steps back.
            look.fence_floor = _server_us(answers[-1])
            if look.clock is None:  # the first slot's mark, should the change take one
                look.clock = look.fence_floor // 1000
        self.gateway.watched = self.gateway.connection
        return look

    def _clock(self) -> list[_Command]:
        return [("TIME",)] if self.clocked else []

    def _reads(self, keys: tuple[bytes, bytes, bytes, bytes] | None = None) -> list[_Command]:
        """The reads of a look at this lock, or at the lock of ``keys`` (_lock_keys)."""
        key, last, line, _ = keys or (self.key, self.last_key, self.line_key, b"")
        return [("GET", key), ("PTTL", key), ("GET", last), ("LRANGE", line, 0, -1)]

    def _looked(
        self, answers: list[Any], wait_prefix: bytes | None = None, upto: str | None = None
    ) -> _Look:
        """The look _reads' answers give, then TIME's if asked (the places read at
        ``wait_prefix``, or this lock's, up to ``upto``'s); ``seen``: the ms until the
        next slot ends."""
        value, ttl, last_value, tickets, *clock = answers
        if not (isinstance(ttl, int) and isinstance(tickets, list)):
            raise OSError(errno.EPROTO, "Redis answered a read in a shape it never has")
        now = int(time.time())
        server_ms = None
        record = last = None
        if isinstance(value, bytes):
            record = _parse_record(value, now)  # a foreign value is dated now
            if ttl >= 0:
                record.lease = "live"
            if record.holders is not None:
                # Of several slots: the server's clock ends each (a lock of one slot, its
                # record's expiry, and a call on one never needs TIME).
                server_ms = (
                    _server_us(clock[0] if clock else self.gateway.call(("TIME",))[0]) // 1000
                )
                self.clocked = True
                ttl = _slots_ended(record, server_ms, ttl)
        if isinstance(last_value, bytes) and record is None:
            last = _parse_record(last_value, now)
            last.lease = "expired"
            for holder in last.holders or []:
                holder.lease = "expired"
        line = []
        if tickets:
            tickets = [t.decode("ascii", "replace") for t in tickets if isinstance(t, bytes)]
            if upto in tickets:
                # The values of the places behind a waiter: most of a busy line's newcomers.
                tickets = tickets[: tickets.index(upto) + 1]
            prefix = self.wait_prefix if wait_prefix is None else wait_prefix
            place_keys = [prefix + ticket.encode("ascii", "replace") for ticket in tickets]
            (places,) = self.gateway.call(("MGET", *place_keys))
            for ticket, entry in zip(tickets, places, strict=False):
                place = _place_of(ticket, entry) if isinstance(entry, bytes) else None
                # A place whose key is gone: _live drops it.
                line.append(place or _Place(ticket, "", 0, 0.0, 0.0))
        look = _Look(record, last, line=line, seen=_RedisSeen(ttl))
        look.clock = server_ms
        return look

    def _place_key(self, ticket: str) -> bytes:
        return self.wait_prefix + ticket.encode("ascii", "replace")

    def _bell_key(self, ticket: str) -> bytes:
        return self.bell_prefix + ticket.encode("ascii", "replace")

    def _ring(self, ticket: str) -> list[_Command]:
        bell = self._bell_key(ticket)
        return [("RPUSH", bell, 1), ("PEXPIRE", bell, self._place_ms())]

    def _place_ms(self) -> int:
        return max(1, int(_SEAMS.place_ttl_sec * 1000))

    def join(self, look: _Look, place: _Place, now: float) -> None:
        """A new ticket (a lapsed one must never come back) and its place, expiring."""
        if _ahead_of(_live(look.line, now), place.ticket) is not None:
            return
        place.ticket = os.urandom(8).hex()
        place.since = int(now // 1)
        # Joined before it is sent: a signal that lands once the server has put the
        # place in line, before its answer is read, must still take it out on the way.
        place.joined = True
        ms = self._place_ms()
        self.gateway.call(
            ("UNWATCH",),
            ("MULTI",),
            ("SET", self._place_key(place.ticket), _place_value(place), "PX", ms),
            ("RPUSH", self.line_key, place.ticket),
            ("PEXPIRE", self.line_key, ms),
            ("EXEC",),
            write=True,
        )

    def prune(self, look: _Look, now: float) -> None:
        live = _live(look.line, now)
        dead = [("LREM", self.line_key, 0, p.ticket) for p in look.line if p not in live]
        if dead:
            self.gateway.call(*dead, write=True)

    def beat(self, place: _Place) -> bool:
        self.gateway.next_step()  # each beat a step of its own, with its own deadline
        ms = self._place_ms()
        kept, _, _ = self.gateway.call(
            ("PEXPIRE", self._place_key(place.ticket), ms),
            ("PEXPIRE", self.line_key, ms),
            ("PEXPIRE", self._bell_key(place.ticket), ms),
            write=True,
        )
        return bool(kept == 1)

    def _leaving(self, ticket: str) -> list[_Command]:
        return [
            ("DEL", self._place_key(ticket), self._bell_key(ticket)),
            ("LREM", self.line_key, 0, ticket),
        ]

    def leave(self, place: _Place) -> None:
        """Leave the line, waking the waiter behind (it may now be first)."""
        self.gateway.next_step()
        place.joined = False

        (tickets,) = self.gateway.call(("UNWATCH",), ("LRANGE", self.line_key, 0, -1))[1:]
        line = [t.decode("ascii", "replace") for t in tickets if isinstance(t, bytes)]
        behind = line[line.index(place.ticket) + 1 :] if place.ticket in line else []
        ring = self._ring(behind[0]) if behind else []
        self.gateway.call(("MULTI",), *self._leaving(place.ticket), *ring, ("EXEC",), write=True)

    def apply(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None = None,
    ) -> bool:
        """In MULTI/EXEC under read()'s WATCH; signals wait while it is sent. A new holder
        of several slots is marked with the server time its slot ends at; the record
        lives until the last of them."""
        clock = look.clock  # read() read the server's TIME with the lock
        if clock is None and record is not None and record.holders is not None:
            # Slots end on the server's clock: a user without TIME is refused here.
            clock = _server_us(self.gateway.call(("TIME",))[0]) // 1000
        gateway = self.gateway
        if gateway.connection is None or gateway.connection is not gateway.watched:
            return False  # its watch's connection was lost: read again
        ops: list[_Command] = []
        ms = 0 if record is None else _lifetime_ms(record, clock or 0)
        if ms > 0 and record is not None:
            data = _bytes_of(record)
            ops += [("SET", self.key, data, "PX", ms), ("SET", self.last_key, data)]
        else:
            record = None  # a release, or no slot left that the server would keep
            ops += [("DEL", self.key, self.last_key)]
        # Each waiter whose turn the change may give is rung (the first in line, for one
        # slot; the shared waiters at its head; each that conflicts with no live hold
        # nor waiter ahead, of a lock held in parts): two releases in a row must wake
        # two, not the same one twice.
        leaving = None if place is None else place.ticket
        live = _live(look.line, time.time())
        line = [p for p in live if p.ticket != leaving]
        in_force = record or look.record
        slots = 1 if in_force is None else in_force.slots
        for waiter in _turns(line, slots, _live_after(record, clock or 0)):
            ops += self._ring(waiter.ticket)
        # The places of waiters that died go with the change, as a file's do: their
        # keys would only expire, a few seconds later.
        for dead in look.line:
            if dead not in live and dead.ticket != leaving:
                ops += self._leaving(dead.ticket)
        if place is not None:
            ops += self._leaving(place.ticket)
        taking = any(holder.owner == owner for holder in _holders(record))
        outcome = _unknown_outcome(owner, taking=taking)
        with _SIGNALS_HELD:
            try:
                answers = gateway.call(("MULTI",), *ops, ("EXEC",), outcome=outcome, watched=True)
            except _NotApplied:
                answers = [None]  # read again, on the node that serves the keys now
            gateway.watched = None  # EXEC ends the watch
            applied = answers[-1] is not None
            if applied:
                _Interrupts.disarm()
        if applied and place is not None:
            place.joined = False
        return applied

    def wait(self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int) -> bool:
        """Until ``place``'s bell rings (an expiry rings none: the next waits its TTL)."""
        assert isinstance(look.seen, _RedisSeen), "a look of another store"
        ttl = look.seen.ttl_ms
        if away == 0 and ttl >= 0:
            left = min(left, ttl / 1000 + 0.001)
        until = _SEAMS.clock() + left
        try:
            gateway = self.gateway
            if gateway.bell is None:
                gateway.deadline = min(until, _SEAMS.clock() + gateway.timeout)
                gateway.bell = gateway._open()
            return self._rung(gateway.bell, place.ticket, until)
        except (OSError, ValueError):
            # A new connection next time.
            self.gateway._stop_listening()
            return False
        finally:
            self.gateway.next_step()

    def vouches(self, look: _Look) -> bool:
        """Never: a place ahead that expired rings no bell."""
        return False

    def _rung(self, bell: _RespConnection, ticket: str, until: float) -> bool:
        left = max(0.001, until - _SEAMS.clock())
        asking: list[_Command] = [("ASKING",)] if self.gateway.asking else []
        bell.send(
            [*asking, ("BLPOP", self._bell_key(ticket), f"{left:.3f}")],
            until + self.gateway.timeout,
        )
        if asking:
            bell.answer(until + self.gateway.timeout)
        answer = bell.answer(until + self.gateway.timeout)
        if isinstance(answer, _RedisError) and answer.code in ("MOVED", "ASK"):
            # Its slot moved (a blocked BLPOP is told so too): look again there.
            self.gateway._redirect(answer)
            return False
        if isinstance(answer, _RedisError):
            raise self.gateway._refusal(answer)
        return answer is not None


def _ms_of(stale_after: float) -> int:
    """A timeout in whole ms, rounded up (at least 1)."""
    return max(1, -(-int(stale_after * 1000 * 1000) // 1000))


def _lifetime_ms(record: _Record, clock: int) -> int:
    """How long the server keeps ``record``: its holder's timeout; of several slots,
    until the last one ends, each new holder first marked with the server time (ms,
    from ``clock``) its slot ends at."""
    if record.holders is None:
        assert record.stale_after is not None
        return _ms_of(record.stale_after)
    for holder in record.holders:
        if holder.mark is None:
            assert holder.stale_after is not None
            holder.mark = str(clock + _ms_of(holder.stale_after))
    return max((_left_ms(holder, clock) for holder in record.holders), default=0)


def _live_after(after: _Record | None, clock: int) -> list[_Record]:
    """The holds a change that leaves ``after`` leaves live: its one holder's, or of
    several those the server's time (``clock``) has not ended."""
    if after is None:
        return []
    if after.holders is None:
        return [after]
    return [h for h in after.holders if _left_ms(h, clock) > 0]


def _open_redis(address: str) -> _Store:
    """The registry's opener: a Redis lock (mypy checks the class against _Store here)."""
    return _RedisStore(address)
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/redis_listing.py, carried as text: compiled only for a lock of its store
# The Redis store's listing: every lock under a prefix on one node, or on every
# primary of a Redis Cluster, found with SCAN (never KEYS, the prefix matched
# literally) and read a batch of locks to a round trip. Compiled only for a listing of
# Redis.
# --------------------------------------------------------------------------------------

_CARRIED['redis_listing'] = (10167, ('redis_gateway', 'redis_store', 'resp'), r'''
import errno
import re


def _lock_keys(key: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """The keys of the lock at ``key``: its record, last holder, line and places'
    prefix (as _RedisStore keeps them)."""
    base = (_slot_base(key.decode("utf-8", "surrogateescape")) or "").encode(
        "utf-8", "surrogateescape"
    )
    return key, base + b"\0last", base + b"\0line", base + b"\0wait\0"


def _lock_key_of(name: bytes) -> bytes | None:
    """The lock a key found by a scan may belong to: a record's key is its own; a last
    holder's or a line's gives its lock's; None for the other keys."""
    if b"\0" not in name:
        return name
    base, _, rest = name.partition(b"\0")
    if rest not in (b"last", b"line"):
        return None  # a waiter's place or bell: its line shows the lock
    text = base.decode("utf-8", "surrogateescape")
    if text.startswith("{") and text.endswith("}") and _slot_base(text[1:-1]) == text:
        return base[1:-1]
    return base if _slot_base(text) == text else None


def _glob_escaped(data: bytes) -> bytes:
    """``data`` as a SCAN pattern matches it literally."""
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", data)


class _RedisSurvey:
    """What reads many locks at once, for a listing, through a Redis ``store`` of the
    prefix (its reads) and that store's ``gateway``: the nodes to scan, the locks' keys
    under the prefix on one, a look at a batch of them."""

    def __init__(self, address: str) -> None:
        self.store = _RedisStore(address, prefix=True)
        self.gateway = self.store.gateway

    def primaries(self) -> list[str]:
        """The address's node, or every primary of the Redis Cluster it is a node of."""
        gateway = self.gateway
        (nodes,) = gateway.call(("CLUSTER", "NODES"), raw=True)
        if isinstance(nodes, _RedisError):
            if "cluster support disabled" in nodes.text:
                return [gateway.endpoint]
            raise gateway._refusal(nodes)
        if not isinstance(nodes, bytes):
            raise OSError(errno.EPROTO, "Redis answered CLUSTER NODES in a shape it never has")
        found = []
        for line in nodes.decode("utf-8", "replace").splitlines():
            fields = line.split()
            flags = fields[2].split(",") if len(fields) > 2 else []
            if "master" in flags and "fail" not in flags and "noaddr" not in flags:
                found.append(gateway._node_address(fields[1].partition("@")[0]))
        return found or [gateway.endpoint]

    def scan(self) -> set[bytes]:
        """The keys of the locks on this node that start with the prefix: the records'
        keys, and the locks of last holders and lines (``{KEY}`` starts them)."""
        keys = set()
        prefix = self.store.key
        escaped = _glob_escaped(prefix)
        for pattern in (escaped + b"*", b"\\{" + escaped + b"*"):
            cursor: bytes | None = b"0"
            while cursor is not None:
                (answer,) = self.gateway.call(
                    ("SCAN", cursor, "MATCH", pattern, "COUNT", _SEAMS.scan_count)
                )
                if not (isinstance(answer, list) and len(answer) == 2):
                    raise OSError(errno.EPROTO, "Redis answered SCAN in a shape it never has")
                following, names = answer
                for name in names if isinstance(names, list) else []:
                    key = _lock_key_of(name) if isinstance(name, bytes) else None
                    if key is not None and key.startswith(prefix):
                        keys.add(key)
                cursor = following if isinstance(following, bytes) and following != b"0" else None
        return keys

    def looks(self, keys: list[bytes]) -> list[tuple[bytes, _Look]]:
        """A look at each lock of ``keys``, all read in one round trip; a lock whose
        slot moved meanwhile is looked at alone (following it), and a key that holds
        another type of value is no lock."""
        store = self.store
        commands = [command for key in keys for command in store._reads(_lock_keys(key))]
        answers = self.gateway.call(*commands, raw=True)
        per = len(store._reads())  # each lock's reads, answered in order
        looks = []
        for at, key in enumerate(keys):
            mine = answers[per * at : per * at + per]
            errors = _errors_in(mine)
            if not errors:
                looks.append((key, store._looked(mine, _lock_keys(key)[3])))
            elif errors[0].code in (*_REDIS_BUSY, "MOVED", "ASK"):
                lone = _RedisStore(self.gateway.address_of(key))
                try:
                    looks.append((key, lone.look()))
                finally:
                    lone.close()
        return looks


def _survey_redis(address: str) -> _Survey:
    """Every lock whose key starts with the address's KEY, on the node it names or on
    every primary of its Cluster: found with SCAN (never KEYS), then read a batch at
    a time; read only."""
    survey = _RedisSurvey(address)
    gateway = survey.gateway
    try:
        found: dict[bytes, str] = {}  # each lock's key, and the node that holds it
        for node in survey.primaries():
            gateway._go(node)
            for key in survey.scan():
                found.setdefault(key, node)
        by_node: dict[str, list[bytes]] = {}
        for key, node in found.items():
            by_node.setdefault(node, []).append(key)
        looks: list[tuple[bytes, _Look]] = []
        for node, keys in by_node.items():
            for at in range(0, len(keys), _SEAMS.survey_batch):
                gateway._go(node)
                looks += survey.looks(keys[at : at + _SEAMS.survey_batch])
    finally:
        survey.store.close()
    return address, [(gateway.address_of(key), look) for key, look in looks], ""
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/file_listing.py, carried as text: compiled only for a lock of its store
# The file store's survey for ``list``: every lock under a folder, each looked at as
# ``status`` looks, reading only. Carried as text in the built file: compiled only by a
# listing of a folder.
# --------------------------------------------------------------------------------------

_CARRIED['file_listing'] = (10305, (), r'''
import os
import stat


def _survey_folder(under: str | os.PathLike[str]) -> _Survey:
    """Every lock file under the folder ``under`` (searched recursively, no link
    followed), and every line whose lock file is missing, each looked at as ``status``
    looks: bounded, non-blocking reads, no guard, nothing created. A subfolder or a
    file this user cannot read is passed over: it shows no lock to them."""
    folder = os.fspath(under)
    if not isinstance(folder, str) or not folder:
        raise ValueError(f"the place to list must be a folder's path, not {folder!r}")
    folder = os.path.abspath(os.path.expanduser(folder))
    try:
        mode = os.stat(folder).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return folder, [], "there is no such folder"  # so no lock, as status finds none
    if not stat.S_ISDIR(mode):
        raise ValueError(f"the place {folder} is not a folder; give a folder to list")
    found: list[tuple[str, _Look]] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError:
            if current == folder:
                raise
            continue
        names = {entry.name for entry in entries}
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):  # no link, FIFO or device
                    found += _looks_of_file(entry, names)
            except (OSError, ValueError):
                continue  # gone, or turned into something else, since it was listed
    return folder, found, ""


def _looks_of_file(entry: os.DirEntry[str], names: set[str]) -> list[tuple[str, _Look]]:
    """The lock a regular file of a folder may be, its line read with it (a line
    without its lock file: a free lock with waiters)."""
    name = entry.name
    if name.endswith(_LINE_SUFFIX):
        if name[: -len(_LINE_SUFFIX)] in names:
            return []  # looked at with its lock file
        lock = entry.path[: -len(_LINE_SUFFIX)]
        look = _Look(None, line=_read_line(entry.path) or [], file_name=os.path.basename(lock))
        return [(lock, look)]
    if name.endswith(_GUARD_SUFFIX) or _TEMP_NAME.fullmatch(name[-17:]):
        return []
    record = _read_record(entry.path)
    line = _read_line(entry.path + _LINE_SUFFIX) if name + _LINE_SUFFIX in names else None
    return [(entry.path, _Look(record, line=line, file_name=name))]
''')


# --------------------------------------------------------------------------------------
# src/skf_run_lock/serve.py, carried as text: compiled only for a lock of its store
# The agent session's server (``serve``): an MCP server over stdio whose tools take,
# renew and release locks as the CLI does, and whose holds end with the session. A lock
# taken through it is a session hold: its timeout is the server's lease, it is renewed
# by the renewer run uses while the server lives (each hold apart), and released when
# the session ends (stdin or stdout closed, SIGTERM, SIGINT, SIGHUP, its parent gone);
# killed outright, its holds lapse within the lease. A cancelled acquire keeps nothing,
# and a wait cut at the call limit keeps its place for the next call. The MCP Python
# SDK is imported here alone, when serve starts; compiled only for serve.
# --------------------------------------------------------------------------------------

_CARRIED['serve'] = (10378, (), r'''
import json
import os
import sys
import threading
import time
from collections import deque


if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


_SDK = "mcp>=2.3,<3"

# At the session's end its holds are released at once, each on its own thread, and the
# server exits after this at most, released or not: a hold not released lapses.
_RELEASES_WITHIN_SEC = 1.5
# How often the server looks whether its parent is gone (a client that killed uv alone).
_PARENT_LOOK_SEC = 0.2


def _sdk_missing() -> str:
    """What serve says without the MCP SDK: the commands that bring it, to run as shown."""
    script = sys.argv[0] if sys.argv else "skf-run-lock.py"
    if not script.endswith(".py"):  # the installed command
        return (
            f"serve needs the MCP Python SDK ({_SDK}), which this Python lacks: install"
            " the command with it, uv tool install 'skf-run-lock[mcp]' (or pip install"
            " 'skf-run-lock[mcp]')"
        )
    return (
        f"serve needs the MCP Python SDK ({_SDK}), which this Python lacks: run it as"
        f" uv run --with '{_SDK}' {_quoted(script)} serve"
    )


class _Cancelled(BaseException):
    """The client cancelled a waiting acquire: it leaves the line (no except stops it)."""


# A waiting acquire cut at the call limit keeps its place in line this long for the
# agent's next call; a cancel of an acquire answered this recently still undoes it (a
# client ignores the answer to a request it cancelled: the MCP specification).
_KEPT_SEC = 10.0


class _Call:
    """One tool call, under way or answered within _KEPT_SEC: how it tells its client as
    it waits, whether it still stands (not once the client cancels it, or the session
    ends), and what an acquire took that a cancel undoes: a hold the session did not
    have before (``took``; released if its owner had none), a place kept in line
    (``kept``)."""

    def __init__(self, session: _Session, report: Callable[[float, float, str], None]) -> None:
        self.session = session
        self.report = report
        self.cancelled = threading.Event()  # set under the session's guard
        self.took: _SessionHold | None = None  # a hold the session had not, now its
        self.took_new = False  # ``took`` was its owner's by no earlier take: released
        self.kept: _KeptPlace | None = None

    def stands(self) -> bool:
        return not self.cancelled.is_set() and not self.session.ending.is_set()

    def __call__(self, done: float, total: float, message: str) -> None:
        """Tell the client; _Cancelled once the call no longer stands."""
        if not self.stands():
            raise _Cancelled
        self.report(done, total, message)


# --- What a session holds


# What the holds tool says of a hold still held: one the session took, or one it kept.
_HELD_WORDS = {
    False: "held by this session: renewed while it lives, released when it ends",
    True: "held by its owner before this session took it: renewed while the session lives,"
    " left held when it ends",
}


class _SessionHold:
    """A hold this session took, or kept (its owner's before the session took it: renewed,
    never released by the session), its renewer, and what became of it: ``state`` is
    "held", then "released" or "lost", ``why`` says how. ``key``: its lock (however
    spelled) and owner."""

    def __init__(self, request: _Request, hold: _Hold, identity: tuple[object, ...]) -> None:
        self.key = (identity, hold.owner)
        self.renewer = _Renewer(request, hold)
        self.kept = hold.renewed and not hold.session
        self.state = "held"
        self.why = ""
        self.renewed_at = time.time()

    def view(self) -> dict[str, object]:
        """The hold as the holds tool shows it."""
        hold = self.renewer.hold
        return {
            "lock": hold.lock,
            "owner": hold.owner,
            "fence": hold.fence,
            "kind": hold.kind,
            "parts": None if hold.parts is None else list(hold.parts),
            "state": self.state,
            "kept": self.kept,
            "last_renewal": _format_time(self.renewed_at),
            "message": self.why or _HELD_WORDS[self.kept],
        }


class _KeptPlace:
    """The place in line of a waiting acquire cut at the call limit, kept for the agent's
    next call: beaten by the server (which takes nothing meanwhile) until a call resumes
    it, or it is dropped (``dropped``: by a release, a cancel or the session's end; the
    beating thread then leaves the line), or _KEPT_SEC pass."""

    def __init__(
        self, identity: tuple[object, ...], given: str, request: _Request, place: _Place
    ) -> None:
        self.key = (identity, request.owner)
        self.given = given  # the owner as the agent gave it, with or without a run id
        self.request = request
        self.place = place
        self.until = _SEAMS.clock() + _KEPT_SEC
        self.over = threading.Event()  # resumed or dropped: its beats stop
        self.dropped = False

    def resumed_by(self, given: str, request: _Request) -> bool:
        """Whether an acquire of its lock under ``given`` asks what it waited for: the
        same kind, count and parts (as a set, each part by its key)."""
        ours = given in (self.given, self.request.owner)
        asked = self.request
        same = (request.shared, request.slots) == (asked.shared, asked.slots)
        return ours and same and _part_keys(request.parts) == _part_keys(asked.parts)


def _part_keys(parts: tuple[str, ...] | None) -> frozenset[str] | None:
    """What a set of parts is compared by (None: the lock whole)."""
    if parts is None:
        return None
    _compile_carried('parts')

    return frozenset(_part_key(part) for part in parts)


class _Session:
    """The holds of one agent session, each renewed on a thread of its own (a store out of
    reach holds up no other's) and released when the session ends; the places in line it
    keeps between calls, and its calls. ``ending`` is set once it ends, however it ends."""

    def __init__(self, lease: float, parent: int) -> None:
        self.lease = lease
        self.parent = parent  # the process that started the server, as it started
        self.guard = threading.Lock()  # all that follows, and each hold's state
        self.holds: dict[tuple[object, str], _SessionHold] = {}
        self.places: dict[tuple[object, str], _KeptPlace] = {}
        self.calls: dict[object, _Call] = {}  # by request id
        # The answered ones, oldest first, each with when (_SEAMS.clock): let go from the
        # front in time that does not grow with how many a busy client made lately.
        self.answered_calls: deque[tuple[float, object, _Call]] = deque()
        self.taking: dict[str, set[_Call]] = {}  # takes under way, by whole owner
        self.takes: dict[str, int] = {}  # takes begun so far, by whole owner
        self.owners: dict[str, threading.Lock] = {}  # held by each owner's take
        self.threads: set[threading.Thread] = set()  # what the end waits for
        self.ending = threading.Event()
        self.untold: list[_SessionHold] = []  # ended, by no call of this session's

    def aside(self, work: Callable[..., None], *args: object) -> threading.Thread:
        """``work(*args)`` on a thread of its own, which the session's end waits for."""

        def run() -> None:
            try:
                work(*args)
            finally:
                with self.guard:
                    self.threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, daemon=True)
        with self.guard:
            self.threads.add(thread)
        thread.start()
        return thread

    def start(self, key: object, report: Callable[[float, float, str], None]) -> _Call:
        """A new call, request id ``key``; calls answered over _KEPT_SEC ago are let go."""
        call = _Call(self, report)
        gone = _SEAMS.clock() - _KEPT_SEC
        with self.guard:
            answered = self.answered_calls
            while answered and answered[0][0] < gone:
                _, old, was = answered.popleft()
                if self.calls.get(old) is was:  # not an id the client has used again
                    del self.calls[old]
            self.calls[key] = call
        return call

    def answered(self, call: _Call, key: object) -> None:
        with self.guard:
            self.answered_calls.append((_SEAMS.clock(), key, call))

    def cancel(self, key: object) -> None:
        """The client cancelled call ``key`` (under way, or answered within _KEPT_SEC):
        it no longer stands, and what it took is let go at once, a hold its owner did
        not have before released, a place kept left; but not while another take of the
        same owner is under way, which renews that hold for a call the client awaits.
        Decided under the guard, as keeping is: a call is kept or cancelled, never both."""
        with self.guard:
            call = self.calls.get(key)
            if call is None:
                return
            call.cancelled.set()
            took, call.took = call.took, None
            kept, call.kept = call.kept, None
            if kept is not None:
                self.drop_place(kept)
            free = took is not None and self.holds.get(took.key) is took
            if took is None or not free or took.state != "held":
                return
            if self.taking.get(took.renewer.hold.owner, set()) - {call}:
                return  # that take keeps it: not this one's to free
            del self.holds[took.key]  # not the session's: nobody knows of it
            took.state = "released"
            begun = self.takes.get(took.renewer.hold.owner, 0)
        if call.took_new:
            self.aside(self.release_cancelled, took.renewer.hold, begun)

    def release_cancelled(self, hold: _Hold, begun: int) -> None:
        """Release ``hold``, which a cancelled call took, unless its owner's take that
        began since has it now (the owner's takes and this release go one at a time)."""
        with self.owner_lock(hold.owner):
            with self.guard:
                if self.takes.get(hold.owner, 0) != begun:
                    return  # taken again since: that take's, which its client awaits
            _release_quietly(hold)

    def owner_lock(self, owner: str) -> threading.Lock:
        """What ``owner``'s takes and the releases of its cancelled ones hold."""
        with self.guard:
            return self.owners.setdefault(owner, threading.Lock())

    def taking_as(self, owner: str, call: _Call, under_way: bool) -> None:
        """``call``'s take for ``owner`` is under way, or (``under_way`` False) done."""
        with self.guard:
            calls = self.taking.setdefault(owner, set())
            if under_way:
                calls.add(call)
                self.takes[owner] = self.takes.get(owner, 0) + 1
            else:
                calls.discard(call)
                if not calls:
                    del self.taking[owner]

    def keep(
        self, call: _Call, request: _Request, hold: _Hold, identity: tuple[object, ...]
    ) -> bool:
        """Keep ``hold``, which ``call``'s ``request`` took, renewing it from now on;
        False, keeping nothing, once the call no longer stands (the caller releases a
        hold its owner did not have before)."""
        one = _SessionHold(request, hold, identity)
        with self.guard:
            if call.cancelled.is_set() or self.ending.is_set():
                return False
            before = self.holds.get(one.key)
            self.holds[one.key] = one
            if not hold.renewed or before is None or before.state != "held":
                call.took, call.took_new = one, not hold.renewed
        threading.Thread(target=_renew_apart, args=(self, one), daemon=True).start()
        return True

    def holding(self, one: _SessionHold) -> bool:
        with self.guard:
            return self.holds.get(one.key) is one and one.state == "held"

    def judge(self) -> None:
        """Each hold by the renewer's clock (under the guard), as held() judges its own:
        one past the moment its work had to stop is lost, whatever its renewal is doing."""
        for one in self.holds.values():
            if one.state == "held" and (lost := one.renewer.lost_by_now()) is not None:
                self.ended(one, lost)

    def ended(self, one: _SessionHold, lost: LockLost) -> None:
        """``one`` ended by no call of this session's (under the guard): told at the next
        call, and never taken again by the session on its own."""
        free = lost.held_by is None and not one.renewer.ran_out
        one.state = "released" if free else "lost"
        one.why = str(lost)
        self.untold.append(one)

    def views(self) -> list[dict[str, object]]:
        """The holds as the holds tool shows them, each judged by the clock."""
        with self.guard:
            self.judge()
            return [one.view() for one in self.holds.values()]

    def told(self) -> list[dict[str, object]]:
        """The holds that ended since the last call, by no call of this session's."""
        with self.guard:
            self.judge()
            ended, self.untold = self.untold, []
        return [held.view() for held in ended]

    def released(self, identity: tuple[object, ...], owner: str, freed: bool) -> None:
        """This session's release call for ``owner`` on the lock ``identity`` names: its
        place kept in line is dropped, and its hold, if ``freed``, is released."""
        with self.guard:
            kept = self.places.get((identity, owner))
            if kept is not None:
                self.drop_place(kept)
            held = self.holds.get((identity, owner))
            if freed and held is not None and held.state == "held":
                held.state = "released"
                held.why = "released by this session's release call"

    def renewed(self, one: _SessionHold, lost: LockLost | None) -> None:
        """What a renewal of ``one`` found: held still, or released or lost."""
        with self.guard:
            if self.holds.get(one.key) is not one or one.state != "held":
                return  # released by a call, taken anew, or lost by the clock meanwhile
            if lost is not None:
                self.ended(one, lost)
            elif one.renewer.failure is None:  # renewed, not tried again soon
                one.renewed_at = time.time()

    def resume(self, identity: tuple[object, ...], given: str, request: _Request) -> _Place | None:
        """The place kept for an acquire of the lock ``identity`` names under ``given``,
        as ``request`` asks it (its owner and run id then the place's); None: none, or
        one of another kind or count, dropped (the acquire joins at the end)."""
        with self.guard:
            for kept in self.places.values():
                if kept.key[0] == identity and given in (kept.given, kept.request.owner):
                    break
            else:
                return None
            del self.places[kept.key]
            kept.over.set()
            if not kept.resumed_by(given, request):
                kept.dropped = True
                return None
        request.owner, request.run_id = kept.request.owner, kept.request.run_id
        return kept.place

    def keep_place(self, call: _Call, kept: _KeptPlace) -> bool:
        """Keep ``kept`` in line, beating it, for the agent's next call; False once the
        call no longer stands (the caller leaves the line)."""
        with self.guard:
            if call.cancelled.is_set() or self.ending.is_set():
                return False
            old = self.places.pop(kept.key, None)
            if old is not None:
                self.drop_place(old)
            self.places[kept.key] = kept
            call.kept = kept
        self.aside(_beat_kept, self, kept)
        return True

    def drop_place(self, kept: _KeptPlace) -> None:
        """(Under the guard.) ``kept`` leaves the line: its beating thread takes it out."""
        if self.places.get(kept.key) is kept:
            del self.places[kept.key]
        kept.dropped = True
        kept.over.set()

    def lapsed(self, kept: _KeptPlace) -> bool:
        """Whether ``kept``'s beating thread, done, takes it out of the line: dropped, or
        no call resumed it in time (then no call can now)."""
        with self.guard:
            if self.places.get(kept.key) is kept:
                del self.places[kept.key]
                return True
            return kept.dropped

    def release_all(self, until: float) -> None:
        """Release every hold the session took (not those it kept), each at once on a
        thread of its own, and leave its places in line, waiting for all of it until
        ``until`` (on ``_SEAMS.clock``) at the latest."""
        with self.guard:
            mine = [h for h in self.holds.values() if h.state == "held" and not h.kept]
            for one in mine:
                one.state = "released"
            for kept in list(self.places.values()):
                self.drop_place(kept)
        for one in mine:
            self.aside(_release_quietly, one.renewer.hold)
        with self.guard:
            threads = list(self.threads)
        for thread in threads:
            thread.join(max(0.0, until - _SEAMS.clock()))


def _renew_apart(session: _Session, one: _SessionHold) -> None:
    """``one``'s renewals, each when due, on a thread of its own: a renewal stuck on a
    store out of reach holds up no other hold's (one thread for all let a healthy file
    hold go stale behind a frozen Redis)."""
    while not session.ending.wait(one.renewer.next_look()):
        if not session.holding(one):
            return
        if one.renewer.due_in() <= 0:  # else a second passed on the system's clock
            session.renewed(one, one.renewer.renew())


def _beat_kept(session: _Session, kept: _KeptPlace) -> None:
    """Keep ``kept``'s place alive in line until a call resumes it; take it out once it
    is dropped or its time is up."""
    store = _store_for(kept.request.lock)
    try:
        while not kept.over.wait(max(0.0, min(_SEAMS.beat_sec, kept.until - _SEAMS.clock()))):
            if _SEAMS.clock() >= kept.until:
                break
            try:
                if not store.beat(kept.place):
                    break  # lapsed: out of the line already
            except (OSError, ValueError):
                pass  # beaten again at the next beat, or lapsed
        if session.lapsed(kept):
            _leave_line(store, kept.place)
    finally:
        store.close()


def _release_quietly(hold: _Hold) -> None:
    """Release ``hold`` as the session ends: a failure leaves it to lapse."""
    try:
        release(hold.lock, hold.owner)
    except (OSError, ValueError):
        pass


# --- The tools: what each takes, checked as the CLI checks it, and what it answers


def _text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value:
        raise _UsageError(f"{name} is required: a string")
    return value


def _place(arguments: dict[str, Any], name: str) -> str:
    """A lock or a place to list: a server's address, or an absolute path (``~`` is the
    server's user's home). The server's working folder is not the agent shell's."""
    text = _text(arguments, name)
    if _ADDRESS.match(text) or os.path.isabs(os.path.expanduser(text)):
        return text
    raise _UsageError(
        f"{name} {_quoted(text)} is a relative path, which the server would resolve in its"
        f" own working folder, not your shell's: give it as an absolute path"
    )


def _wait(arguments: dict[str, Any]) -> float:
    """A wait as the CLI takes it (``60s``, ``2m``) or seconds as a number."""
    value = arguments.get("wait", 0)
    if isinstance(value, str):
        seconds, unit = _duration_seconds(value, "wait", "seconds")
        return _wait_within(seconds, "wait", _MAX_WAIT_SEC, unit, repr(value))
    return _checked_wait(value, "wait", _MAX_WAIT_SEC)


def _session_request(arguments: dict[str, Any], lease: float) -> tuple[_Request, bool]:
    """What the acquire tool asks, each part checked once, in the CLI's order, its wait
    cut to the call limit; and whether it was cut."""
    lock = _place(arguments, "lock")
    owner_text = _text(arguments, "owner")
    wait = _wait(arguments)
    shared = arguments.get("shared", False)
    if not isinstance(shared, bool):
        raise _UsageError(f"shared must be true or false, not {shared!r}")
    if shared and "slots" in arguments:
        raise _UsageError(
            "shared and slots cannot be given together: a shared hold is one of any"
            " number, never a slot; give one or the other"
        )
    slots = _checked_slots(arguments.get("slots", 1), "slots")
    parts = _checked_parts_of(arguments.get("parts"), 1)
    if parts is not None and slots != 1:
        raise _UsageError(f"parts have no count of slots: give parts or slots {slots}, not both")
    owner, run_id = _owner_with_run_id(owner_text)
    longest = _SEAMS.longest_call_wait_sec
    request = _Request(
        lock,
        owner,
        run_id,
        lease,
        wait=min(wait, longest),
        slots=slots,
        shared=shared,
        parts=parts,
        keep_longer=True,
        session=True,
    )
    return request, wait > longest


def _acquire(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    """The acquire tool: the CLI's acquire output and the hold's fence. A wait cut at the
    call limit keeps its place in line for the next call, which resumes it."""
    request, cut = _session_request(arguments, session.lease)
    given = arguments["owner"]
    place = session.resume(_lock_identity(request.lock), given, request)
    if place is None and request.wait:
        place = _new_place(request)
    started = _SEAMS.clock()

    def refused(result: Any, left: float, place: int) -> None:
        waited = _SEAMS.clock() - started
        call(waited, request.wait, f"{_ordinal(place)} in line: {result['message']}")

    with session.owner_lock(request.owner):
        session.taking_as(request.owner, call, True)
        try:
            hold, result = _take_waiting(request, refused, place, keep_place=cut)
            identity = _lock_identity(request.lock)  # again: the take may have made its folder
            kept = hold is not None and session.keep(call, request, hold, identity)
        finally:
            session.taking_as(request.owner, call, False)
    if hold is not None and not kept:
        if not hold.renewed:  # nobody would know of it
            _release_quietly(hold)
        raise _Cancelled
    if hold is None and cut and place is not None and place.joined:
        if not session.keep_place(call, _KeptPlace(identity, given, request, place)):
            _leave_quietly(request.lock, place)
            raise _Cancelled
        result["message"] += (
            f"; your place in line is kept {_KEPT_SEC:g} s: call acquire again within them,"
            " with this lock and owner and the same slots, shared and parts, to wait on from it"
        )
    return {**result, "fence": None if hold is None else hold.fence}


def _leave_quietly(lock: str | os.PathLike[str], place: _Place) -> None:
    """Take ``place`` out of the line of ``lock``: a failure leaves it to lapse."""
    try:
        store = _store_for(lock)
    except (OSError, ValueError):
        return
    try:
        _leave_line(store, place)
    finally:
        store.close()


def _release(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    lock = _place(arguments, "lock")
    owner = _text(arguments, "owner")
    result = release(lock, owner)
    session.released(_lock_identity(lock), owner, result["released"])
    return dict(result)


def _status(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return dict(status(_place(arguments, "lock"), DEFAULT_STALE_AFTER_MIN * 60))


# The most paths one check call takes (the CLI takes any number).
_CHECK_PATHS_MAX = 10_000


def _check(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    """The check tool: the CLI's check output for ``paths``, at most _CHECK_PATHS_MAX."""
    lock = _place(arguments, "lock")
    if "paths" not in arguments:
        raise _UsageError("paths is required: a list of paths, as git prints them")
    paths = arguments["paths"]
    if isinstance(paths, list) and len(paths) > _CHECK_PATHS_MAX:
        raise _UsageError(
            f"paths holds {len(paths)} paths; a call takes at most {_CHECK_PATHS_MAX}:"
            " check the rest in another call"
        )
    return dict(check(lock, paths, arguments.get("owner")))


def _list(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return dict(list_locks(_place(arguments, "under")))


def _holds(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return {"holds": session.views()}


_LOCK = {
    "type": "string",
    "description": "the lock: an absolute file path, or an etcd:// or redis:// address",
}
_OWNER = {
    "type": "string",
    "description": "workflow:skill or workflow:skill:run_id (acquire adds a run id if it"
    " has none; release needs the whole owner acquire answered)",
}

# Each tool: what it does, in words an agent can act on, its input schema, and its call.
_TOOLS: dict[str, tuple[str, dict[str, Any], Callable[..., dict[str, Any]]]] = {
    "acquire": (
        "Take a run lock for this session (or renew it: call again with the same owner)."
        " The hold lasts as long as this session: it is renewed while the server runs and"
        " released when the session ends; call release on every halt path all the same."
        " Answers the CLI's acquire JSON and the hold's fence; acquired false with a"
        " message saying who holds it and what to do when it is held. wait (e.g. '60s',"
        " '2m', or seconds) stands in line first come first served, at most 50 s a call;"
        " a longer wait cut there keeps its place 10 s: call again within them to wait on.",
        {
            "type": "object",
            "properties": {
                "lock": _LOCK,
                "owner": _OWNER,
                "wait": {
                    "type": ["string", "number"],
                    "description": "how long to wait in line: '60s', '2m', or seconds"
                    " (at most 50 s a call); 0 (default) answers at once",
                },
                "slots": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "take one of this many slots (default 1)",
                },
                "shared": {
                    "type": "boolean",
                    "description": "a shared hold (readers: any number at once)",
                },
                "parts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "hold only these parts of the lock (1 to 100 paths or"
                    " globs from the top of the tree, as git reads them: 'src/api',"
                    " 'docs/**/*.md'); holds conflict only where some path lies in a part"
                    " of each. Default: the whole lock. A call again keeps the hold as"
                    " it is: the parts it names must be among those held (to change them,"
                    " release, then acquire the new set)",
                },
            },
            "required": ["lock", "owner"],
            "additionalProperties": False,
        },
        _acquire,
    ),
    "release": (
        "Release a run lock: the CLI's release JSON (released false with a reason when"
        " it is not the owner's). Give the whole owner that acquire answered.",
        {
            "type": "object",
            "properties": {"lock": _LOCK, "owner": _OWNER},
            "required": ["lock", "owner"],
            "additionalProperties": False,
        },
        _release,
    ),
    "status": (
        "Who holds a lock, changing nothing: the CLI's status JSON (state free, held or"
        " stale, the holders, the line of waiters, the fence).",
        {
            "type": "object",
            "properties": {"lock": _LOCK},
            "required": ["lock"],
            "additionalProperties": False,
        },
        _status,
    ),
    "check": (
        "Which of these paths lie in a part of a lock that another run holds (any run,"
        " without owner), changing nothing: the CLI's check JSON. free is true when none"
        " does; else reserved names each path with the holder, its part (null: it holds"
        " the whole lock), kind and stale_at. Check the paths a commit writes before"
        " making it; a shared part reserves them too.",
        {
            "type": "object",
            "properties": {
                "lock": _LOCK,
                "paths": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": _CHECK_PATHS_MAX,
                    "description": "paths from the top of the tree, as git prints them"
                    " ('src/api/routes.py'), at most 10000",
                },
                "owner": {
                    "type": "string",
                    "description": "the whole owner (workflow:skill:run_id) whose own parts"
                    " are left out; default: every run's parts count",
                },
            },
            "required": ["lock", "paths"],
            "additionalProperties": False,
        },
        _check,
    ),
    "list": (
        "Every lock under a folder (absolute path) or an etcd:// or redis:// key prefix,"
        " changing nothing: the CLI's list JSON.",
        {
            "type": "object",
            "properties": {
                "under": {
                    "type": "string",
                    "description": "an absolute folder, or an etcd:// or redis:// address"
                    " whose key is a prefix",
                }
            },
            "required": ["under"],
            "additionalProperties": False,
        },
        _list,
    ),
    "holds": (
        "This session's holds: each with its lock, owner, fence, kind, parts (null: the"
        " whole lock), state (held, released or lost) and last renewal.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        _holds,
    ),
}


def _call(
    session: _Session, name: str, arguments: dict[str, Any], call: _Call
) -> tuple[dict[str, Any] | None, str]:
    """A tool's answer (None and the message for bad input or a failure, as the CLI says
    it), with the holds this session lost since its last call after its own keys."""
    tool = _TOOLS.get(name)
    if tool is None:
        return None, f"unknown tool {name!r}; the tools are {', '.join(_TOOLS)}"
    properties = tool[1]["properties"]
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        takes = ", ".join(properties) or "nothing"
        return None, f"usage error: {name} takes {takes}, not {unknown[0]!r}"
    try:
        answer = tool[2](session, arguments, call)
    except _UsageError as exc:
        return None, f"usage error: {exc}"
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"the lock could not be read or written: {_describe_os_error(exc)}"
    answer["lost_holds"] = session.told()
    return answer, ""


# --- The session's end, however it comes


def _call_key(request_id: object) -> object:
    """A request's id as a cancel names it: 7 and "7" are one id, as the SDK holds."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id


async def _answered(
    session: _Session, ctx: Any, name: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The answer of a tool call (as _call gives it), worked out on a thread of its own
    while the SDK's asyncio loop serves other calls, however many acquires wait in line:
    a pool's N threads (asyncio.to_thread's) left every other call unanswered while N
    waited, 6 on 2 cores. A cancelled call stops waiting for its thread, which leaves
    the line at its next beat, as it does once the session ends, and keeps nothing."""
    import asyncio

    loop = asyncio.get_running_loop()
    answered: asyncio.Future[tuple[dict[str, Any] | None, str]] = loop.create_future()

    def report(done: float, total: float, message: str) -> None:
        sent = asyncio.run_coroutine_threadsafe(
            ctx.session.report_progress(done, total, message), loop
        )
        try:
            sent.result()
        except Exception:  # the call ended meanwhile (cancelled, or the session)
            raise _Cancelled from None

    key = _call_key(ctx.request_id)
    call = session.start(key, report)

    def work() -> None:
        outcome: tuple[dict[str, Any] | None, str] | None = None
        failure: BaseException | None = None
        try:
            outcome = _call(session, name, arguments, call)
        except _Cancelled:
            outcome = None, "the call was cancelled, or the session ended, as it waited"
        except BaseException as exc:  # the SDK tells the client of an internal error
            failure = exc
        session.answered(call, key)
        try:
            loop.call_soon_threadsafe(_settle, answered, outcome, failure)
        except RuntimeError:  # the loop is closed: the session has ended
            pass

    session.aside(work)
    try:
        return await answered
    except asyncio.CancelledError:
        session.cancel(key)  # the waiting thread leaves the line at its next beat
        raise


def _settle(future: Any, outcome: Any, failure: BaseException | None) -> None:
    """Give the call awaiting ``future`` its thread's outcome, unless it stopped waiting."""
    if future.done():
        return
    if failure is not None:
        future.set_exception(failure)
    else:
        future.set_result(outcome)


def _end_when_told(session: _Session) -> None:
    """Once the session ends: release its holds, leave its places in line, and exit 0. A
    call still waiting in line leaves it at its next beat, given what is left of the
    releases' time (its place lapses if it cannot)."""
    session.ending.wait()
    session.release_all(_SEAMS.clock() + _RELEASES_WITHIN_SEC)
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(0)


def _watch_parent(session: _Session) -> None:
    """End the session once the process that started the server is gone (a client that
    killed ``uv run`` alone leaves the server to another parent)."""
    while os.getppid() == session.parent:
        if session.ending.wait(_PARENT_LOOK_SEC):
            return
    session.ending.set()


def _watch_output(session: _Session, output: int) -> None:
    """End the session once the client closed the server's stdout (``output``, a copy of
    it), idle or not: poll sees the pipe's reader gone (an error) or a hang-up, where a
    write would see it only at the next answer. Nobody can hear the server then."""
    import select

    poller = select.poll()
    poller.register(output, 0)  # errors and hang-ups alone
    while not session.ending.is_set():
        for _, event in poller.poll():
            if event & (select.POLLERR | select.POLLHUP):
                session.ending.set()
                return
            if event & select.POLLNVAL:
                return
        time.sleep(_PARENT_LOOK_SEC)


def _serve(lease: float) -> int:
    """Serve the tools over stdio until the session ends (this process then exits 0)."""
    parent = os.getppid()  # before the SDK loads, which takes seconds: a parent gone meanwhile
    try:
        from mcp import types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise ValueError(_sdk_missing()) from None
    import asyncio
    import select


    session = _Session(lease, parent)
    _Interrupts.disarm()
    _Interrupts.handle(lambda signum, frame: session.ending.set())
    for work in (_end_when_told, _watch_parent):
        threading.Thread(target=work, args=(session,), daemon=True).start()
    if hasattr(select, "poll"):  # POSIX; on Windows a closed stdout is seen at a write
        try:
            output = os.dup(1)  # before the SDK points stdout elsewhere
        except OSError:  # no stdout at all: the SDK's first write says so
            pass
        else:
            threading.Thread(target=_watch_output, args=(session, output), daemon=True).start()

    tools = [
        types.Tool(name=name, description=words, input_schema=schema)
        for name, (words, schema, _) in _TOOLS.items()
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        answer, error = await _answered(session, ctx, params.name, arguments)
        if answer is None:
            text = types.TextContent(type="text", text=error)
            return types.CallToolResult(content=[text], is_error=True)
        text = types.TextContent(type="text", text=json.dumps(answer))
        return types.CallToolResult(content=[text], structured_content=answer)

    async def cancelled(ctx: Any, params: types.CancelledNotificationParams) -> None:
        # Also for a call already answered: the client ignores that answer.
        session.cancel(_call_key(params.request_id))

    server: Any = Server(
        "skf-run-lock",
        version=__version__,
        instructions="Run locks whose holds end with this session: take a lock with the"
        " acquire tool at the start of a run and release it on every halt path.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.add_notification_handler(
        "notifications/cancelled", types.CancelledNotificationParams, cancelled
    )

    async def run() -> None:
        async with stdio_server() as (read, write):
            sys.stdout = sys.stderr  # nothing but the protocol on stdout
            await server.run(read, write, server.create_initialization_options())
            session.ending.set()  # stdin closed: released now, not after asyncio's teardown

    try:
        asyncio.run(run())  # once stdin closes, the session is ending
    except Exception as exc:  # the client's end of the pipes gone, most likely
        _fail(f"the session ended: {exc}")
    finally:
        session.ending.set()
    while True:  # the ending thread exits the process
        time.sleep(60)
''')

_BUILD = 'a02e5365c41e82b86703d375dd6230873aa9113af9b295f8a2643c713903d139'  # what a cache entry must name
_compile_carried('core')  # every call runs it
if __name__ == "__main__":
    _entry()
