"""The decisions, as pure functions of what a store read and the time: is a record
stale, may an owner take the lock (or one of its slots), who in the line is alive, who
goes first, what a take or a release leaves. No store decides anything; each only
reads, applies a change atomically, and waits."""

from __future__ import annotations

from .records import _Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .records import _Place

# A place in line lapses _PLACE_TTL_SEC after its waiter's last beat; a waiter beats
# every _BEAT_SEC.
_PLACE_TTL_SEC = 3.0
_BEAT_SEC = 1.0


def _deciding_timeout(record: _Record, caller_timeout: float) -> float:
    """The timeout that decides ``record``'s staleness: its holder's, else the caller's."""
    return caller_timeout if record.stale_after is None else record.stale_after


def _is_stale(record: _Record, caller_timeout: float, now: float, empty_is_stale: bool) -> bool:
    """True if ``record``'s lock is abandoned at ``now`` (on a server, its clock decides)."""
    if record.lease is not None:
        return record.lease == "expired"
    if empty_is_stale and record.empty:
        return True
    return now - record.since >= _deciding_timeout(record, caller_timeout)


# --- Slots: a lock held by up to N runs at once, each under its own owner and timeout.
# A lock of one slot is its record's own holder; one of several lists its holders.


def _holders(record: _Record | None) -> list[_Record]:
    """Who holds ``record``'s slots, live or stale."""
    if record is None:
        return []
    return [record] if record.holders is None else record.holders


def _live_holders(
    record: _Record | None, caller_timeout: float, now: float, empty_is_stale: bool
) -> list[_Record]:
    """The holders of ``record`` whose slots are not stale at ``now``."""
    return [
        holder
        for holder in _holders(record)
        if not _is_stale(holder, caller_timeout, now, empty_is_stale)
    ]


def _in_force(
    record: _Record | None, caller_timeout: float, now: float, empty_is_stale: bool
) -> int | None:
    """The count of slots that stands while any slot is held; None once none is."""
    if record is None or not _live_holders(record, caller_timeout, now, empty_is_stale):
        return None
    return record.slots


def _first_to_go(holders: list[_Record], caller_timeout: float) -> _Record:
    """The holder of ``holders`` whose slot goes stale first by its time."""
    return min(holders, key=lambda h: h.since + _deciding_timeout(h, caller_timeout))


def _free_slots(
    record: _Record | None, slots: int, caller_timeout: float, now: float, empty_is_stale: bool
) -> int:
    """How many of ``slots`` a taker may have now: free, or held by a stale holder."""
    return slots - len(_live_holders(record, caller_timeout, now, empty_is_stale))


def _still_holds(
    record: _Record | None, owner: str, caller_timeout: float, now: float, empty_is_stale: bool
) -> bool:
    """True if ``owner`` holds a slot of ``record`` that is not stale."""
    live = _live_holders(record, caller_timeout, now, empty_is_stale)
    return any(holder.owner == owner for holder in live)


def _kept_timeout(record: _Record | None, owner: str, stale_after: float) -> float:
    """The timeout of a take that keeps ``owner``'s hold no shorter than it was (run and
    held() on a lock their owner held before they started): the longer of
    ``stale_after`` and the hold's own. A renewal starts its time now, so the lock goes
    stale no sooner than before; an owner that holds nothing takes ``stale_after``."""
    own = [_deciding_timeout(h, stale_after) for h in _holders(record) if h.owner == owner]
    return max([stale_after, *own])


def _taken(
    record: _Record | None,
    last: _Record | None,
    new: _Record,
    slots: int,
    *,
    caller_timeout: float,
    now: float,
) -> tuple[_Record, _Record | None]:
    """The record a take by ``new`` leaves, and the holder it renews or replaces (None:
    a free slot). Its own slot is renewed, else the first stale one replaced, else a free
    one taken; the other holders' slots are untouched. A count that changes (no slot
    held) starts a new record; ``last`` is a server's record that expired whole."""
    gone = _holders(record) or _holders(last)
    same_count = record is not None and record.slots == slots and slots > 1
    kept = _holders(record) if same_count else []
    at = next((i for i, h in enumerate(kept) if h.owner == new.owner), None)
    if at is None:
        stale = [h for h in kept if _is_stale(h, caller_timeout, now, False)]
        if stale:
            at = kept.index(_first_to_go(stale, caller_timeout))
    if kept and at is not None:
        before: _Record | None = kept[at]
        holders = [*kept[:at], new, *kept[at + 1 :]]
    elif kept:
        before = None
        holders = [*kept, new]
    else:
        # A new record: a stale holder (or a server's expired one) is what it replaces.
        before = _first_to_go(gone, caller_timeout) if gone else None
        holders = [new]
    if slots == 1:
        return new, before
    return _slots_record(slots, holders), before


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
    return _slots_record(record.slots, rest), mine


def _slots_record(slots: int, holders: list[_Record]) -> _Record:
    record = _Record(None, min(h.since for h in holders))
    record.slots = slots
    record.holders = holders
    return record


# --- The line of waiters: first come, first served


def _live(line: list[_Place], now: float) -> list[_Place]:
    """The places of ``line`` whose waiters are alive at ``now``, in order."""
    return [p for p in line if p.beat is None or abs(now - p.beat) < _PLACE_TTL_SEC]


def _ahead_of(line: list[_Place], ticket: str) -> list[_Place] | None:
    """The places before ``ticket``'s in the live ``line``; None if it has no place."""
    for at, place in enumerate(line):
        if place.ticket == ticket:
            return line[:at]
    return None


def _verdict(
    record: _Record | None,
    line: list[_Place],
    owner: str,
    ticket: str | None,
    *,
    slots: int = 1,
    caller_timeout: float,
    now: float,
    empty_is_stale: bool,
) -> Literal["take", "held", "line", "count"]:
    """May ``owner`` "take" a slot, are all "held", do the free ones go to those ahead in
    ``line`` ("line"), or does it ask for another "count" than the one in force? The
    first k in line take the k free slots; a call with no place comes after them all."""
    in_force = _in_force(record, caller_timeout, now, empty_is_stale)
    if in_force is not None and in_force != slots:
        return "count"
    if any(holder.owner == owner for holder in _holders(record)):
        return "take"
    free = _free_slots(record, slots, caller_timeout, now, empty_is_stale)
    if free <= 0:
        return "held"
    ahead = _ahead_of(line, ticket) if ticket is not None else None
    position = len(line) if ahead is None else len(ahead)
    return "take" if position < free else "line"


def _stale_in(record: _Record | None, caller_timeout: float, now: float) -> float:
    """Seconds until a live slot of ``record`` goes stale by its time alone (inf: never
    by time: none is live, or a server's clock ends them)."""
    ends = [
        holder.since + _deciding_timeout(holder, caller_timeout) - now
        for holder in _holders(record)
        if holder.lease is None
    ]
    return min((end for end in ends if end > 0), default=float("inf"))


# A name that says it is a lock: what stands there blocks acquire, whatever it holds.
_LOCK_NAME_SUFFIX = ".lock"


def _listed(lock: str, record: _Record | None, line: list[_Place]) -> bool:
    """True if a listing shows the lock ``lock`` whose record (or last holder's) is
    ``record`` and whose live line is ``line``: a record this tool wrote (a JSON object
    naming an owner); anything else at a name ending in ``.lock``, which acquire would
    refuse or replace (an empty file, foreign bytes, an older version's PID and time);
    or, with none, waiters in line. A store's other values are no locks."""
    if record is not None and (record.owner is not None or lock.endswith(_LOCK_NAME_SUFFIX)):
        return True
    return bool(line)
