"""The file store: a lock kept in a file, changed only under its guard; a record is
written to a temp file, flushed, and renamed over the lock, so no reader ever sees half
of one. The line of waiters is a file beside the lock, and a waiter polls."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time

from .decisions import _ahead_of, _holders, _live, _named_as_a_package_lockfile
from .guard import (
    _COMMON_FLAGS,
    _GUARD_SUFFIX,
    _NOT_WRITABLE,
    _READ_FLAGS,
    _despite_sharing,
    _Guard,
    _not_writable_error,
    _remove_quietly,
    _SharingRefused,
)
from .interrupts import _Interrupts
from .public_surface import _NoFolder
from .quoting import _quoted
from .records import (
    _RECORD_MAX_BYTES,
    _REMEMBERED_MAX,
    _bytes_of,
    _holder_timeout,
    _Look,
    _parse_record,
    _parts_read,
    _Place,
    _Record,
    _remember,
    _remembered,
    _time_of,
)
from .seams import _SEAMS
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .store_protocol import _Store

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
