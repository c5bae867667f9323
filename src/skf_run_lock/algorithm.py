"""The algorithm: acquire, release and status, one algorithm over any store. Each call
reads the lock, decides by the pure functions of the decisions, and applies its change
atomically against what it read, trying again when another writer came first. How a
waiter keeps its place in the line and waits for its turn is waiting.py's."""

from __future__ import annotations

import errno
import os
import time

from .decisions import (
    _ahead_of,
    _kept_timeout,
    _live,
    _released,
    _still_holds,
    _taken,
    _verdict,
)
from .inputs import (
    _checked_slots,
    _checked_stale_after,
    _owner_for_release,
    _owner_with_run_id,
    _seconds_of,
)
from .outputs import (
    _acquired_result,
    _lost,
    _refused_result,
    _release_result,
    _slots_text,
)
from .records import _Place, _Record
from .registry import _store_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime

    from .contract import AcquireResult, ReleaseResult, StatusResult
    from .interface import _Store

__all__ = ["acquire", "acquire_within", "release", "status"]

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
) -> AcquireResult:
    """Take the lock (a file path or a server address) for ``owner``
    (``workflow:skill[:run_id]``) if it is free or stale, or renew it if it is
    ``owner``'s; else change nothing. ``stale_after`` is in **seconds**. With
    ``slots`` N, up to N owners hold it at once, each its own slot.

    :returns: the acquire output.
    :raises ValueError: a bad owner, timeout, count or lock; or a count of slots
        other than the one in force while a slot is held.
    :raises OSError: the lock could not be read or written.
    """
    fixed_now = None if now is None else _seconds_of(now)
    owner, run_id = _owner_with_run_id(owner, fixed_now)
    stale_after = _checked_stale_after(stale_after)
    slots = _checked_slots(slots)
    return _take(
        lock,
        owner,
        run_id,
        stale_after,
        fixed_now=fixed_now,
        empty_is_stale=empty_is_stale,
        slots=slots,
    )


def _take(
    lock: str | os.PathLike[str],
    owner: str,
    run_id: str,
    stale_after: float,
    *,
    fixed_now: float | None = None,
    empty_is_stale: bool = False,
    renew_only: bool = False,
    keep_longer: bool = False,
    slots: int = 1,
) -> AcquireResult:
    """acquire, checked; ``renew_only``: LockLost unless still ``owner``'s live lock;
    ``keep_longer``: a renewal never shortens the hold (_kept_timeout)."""
    store = _store_for(lock)
    try:
        return _take_in(
            store,
            owner,
            run_id,
            stale_after,
            fixed_now=fixed_now,
            empty_is_stale=empty_is_stale,
            renew_only=renew_only,
            keep_longer=keep_longer,
            slots=slots,
        )
    finally:
        store.close()


def _take_in(
    store: _Store,
    owner: str,
    run_id: str,
    stale_after: float,
    *,
    fixed_now: float | None = None,
    empty_is_stale: bool = False,
    renew_only: bool = False,
    keep_longer: bool = False,
    place: _Place | None = None,
    slots: int = 1,
) -> AcquireResult:
    """One try of acquire; a waiter's ``place`` joins the line, or leaves it taking."""
    for _ in range(_CHANGE_TRIES):
        with store.change(create=not renew_only) as change:
            look = change.read()
            now = time.time() if fixed_now is None else fixed_now
            record = look.record
            if renew_only and not _still_holds(record, owner, stale_after, now, empty_is_stale):
                raise _lost(store.lock, record, stale_after, now, empty_is_stale)
            line = _live(look.line, now)
            ticket = None if place is None else place.ticket
            if place is not None and _ahead_of(line, place.ticket) is None:
                place.joined = False  # a new place if refused
            verdict = _verdict(
                record,
                line,
                owner,
                ticket,
                slots=slots,
                caller_timeout=stale_after,
                now=now,
                empty_is_stale=empty_is_stale,
            )
            if verdict == "count":
                assert record is not None
                from .reports import _count_refusal

                raise ValueError(_count_refusal(store.lock, record, slots, stale_after))
            if verdict != "take":
                if place is None:
                    change.prune(look, now)
                else:
                    change.join(look, place, time.time())
                return _refused_result(
                    store.lock,
                    owner,
                    run_id,
                    caller_timeout=stale_after,
                    record=record,
                    now=now,
                    by_hand=store.by_hand(),
                    held=verdict == "held",
                    line=[p for p in line if p.ticket != ticket],
                )
            since = int(now // 1)
            timeout = _kept_timeout(record, owner, stale_after) if keep_longer else stale_after
            new = _Record(owner, since, timeout)
            after, before = _taken(
                record, look.last, new, slots, caller_timeout=stale_after, now=now
            )
            leaving = place if place is not None and place.joined else None
            if change.apply(look, after, owner, leaving):
                return _acquired_result(
                    store.lock,
                    owner,
                    run_id,
                    stale_after=timeout,
                    since=since,
                    before=before,
                    after=after,
                )
    raise _kept_changing(store.lock)


def acquire_within(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    wait: float,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
) -> AcquireResult:
    """As :func:`acquire`, waiting up to ``wait`` seconds in line, first come, first
    served (the first k in line take the k slots that free); :class:`LockBusy` if the
    wait runs out."""
    from .waiting import _wait_for

    return _wait_for(
        lock, owner, stale_after, wait, empty_is_stale=empty_is_stale, refused=None, slots=slots
    )


def release(lock: str | os.PathLike[str], owner: str) -> ReleaseResult:
    """Delete the lock if its record names ``owner`` (with its run id), or, of a lock of
    several slots, free ``owner``'s slot; else ``reason`` says "absent" or "not-owner".
    ValueError, OSError as :func:`acquire`."""
    owner = _owner_for_release(owner)
    store = _store_for(lock)
    try:
        for _ in range(_CHANGE_TRIES):
            with store.change(create=False) as change:
                look = change.read(line=False)
                record = look.record
                now = time.time()
                after, freed = (None, None) if record is None else _released(record, owner, now)
                if freed is None:
                    change.prune(look, now)
                    return _release_result(store.lock, owner, record)
                if change.apply(look, after, owner):
                    left = "" if after is None else _slots_text(after)
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
    is the count shown while no slot is held (else the count in force is)."""
    seconds = _seconds_of(now)
    stale_after = _checked_stale_after(stale_after)
    slots = _checked_slots(slots)
    store = _store_for(lock)
    try:
        look = store.look()
    finally:
        store.close()
    record = look.record or look.last
    line = _live(look.line, time.time())
    from .reports import _status_result

    return _status_result(
        store.lock, record, stale_after, seconds, empty_is_stale, line=line, slots=slots
    )
