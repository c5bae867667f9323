"""The record: what a lock says, read from its bytes and written as bytes; a waiter's
place in the line; and one look at a lock, as a store read it."""

from __future__ import annotations

import json

from .public_surface import _MAX_SLOTS, _MAX_STALE_AFTER_SEC, _TOOL
from .times import _format_time, _parse_time

TYPE_CHECKING = False
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
    from .parts import _checked_parts

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
