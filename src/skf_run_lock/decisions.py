"""The decisions, as pure functions of what a store read and the time: is a record
stale, may an owner take the lock, who in the line is alive, who goes first. No store
decides anything; each only reads, applies a change atomically, and waits."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .records import _Place, _Record

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


def _takes(
    record: _Record | None, owner: str, caller_timeout: float, now: float, empty_is_stale: bool
) -> bool:
    """True if ``owner`` may take ``record``'s lock: free, its own, or stale."""
    return (
        record is None
        or record.owner == owner
        or _is_stale(record, caller_timeout, now, empty_is_stale)
    )


def _still_holds(
    record: _Record | None, owner: str, caller_timeout: float, now: float, empty_is_stale: bool
) -> bool:
    return (
        record is not None
        and record.owner == owner
        and not _is_stale(record, caller_timeout, now, empty_is_stale)
    )


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
    caller_timeout: float,
    now: float,
    empty_is_stale: bool,
) -> Literal["take", "held", "line"]:
    """May ``owner`` "take" the lock, is it "held", or is it the first in ``line``'s?"""
    if record is not None and not _takes(record, owner, caller_timeout, now, empty_is_stale):
        return "held"
    if record is not None and record.owner == owner:
        return "take"
    return "line" if line and line[0].ticket != ticket else "take"


def _stale_in(record: _Record | None, caller_timeout: float, now: float) -> float:
    """Seconds until ``record`` goes stale by its time alone (inf: never by time)."""
    if record is None or record.lease is not None:
        return float("inf")
    return record.since + _deciding_timeout(record, caller_timeout) - now


def _listed(record: _Record | None, line: list[_Place]) -> bool:
    """True if a listing shows a lock whose record (or last holder's) is ``record`` and
    whose live line is ``line``: a record this tool wrote (a JSON object naming an
    owner), or, with none, waiters in line. A store's other values are no locks."""
    return (record is not None and record.owner is not None) or bool(line)
