"""Waiting in line: a waiter joins the line, keeps its place alive, waits for what may
make it its turn, tries again, and leaves the line however the wait ends. Carried as
text: compiled only for a call that waits (``acquire --wait``, ``acquire_within``,
``run --wait``, ``held(wait=...)``), so that a call that does not wait never pays for it.
Kept apart from the algorithm for that: compiling it would cost every file-lock call
0.6 ms (``compile()`` of this module, best of 50, CPython 3.11 on 2 cores; a call takes
about 60 ms). It imports the algorithm's one try of a take, and the algorithm imports
it only inside ``acquire_within``, as that runs."""

from __future__ import annotations

import os
import time

from .algorithm import _take_in
from .contract import LockBusy
from .decisions import _BEAT_SEC, _ahead_of, _free_slots, _live, _stale_in
from .inputs import _checked_slots, _checked_stale_after, _checked_wait, _owner_with_run_id
from .interrupts import _Interrupts
from .records import _Place
from .registry import _store_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .contract import AcquireResult
    from .interface import _Store
    from .records import _Look


# At most this many waits in a row go on from one look, each ended by a beat (a
# look at least every _VOUCHED_WAITS + 1 beats).
_VOUCHED_WAITS = 4


def _wait_for(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float,
    wait: float,
    *,
    empty_is_stale: bool,
    refused: Callable[[AcquireResult, float, int], None] | None,
    slots: int = 1,
    keep_longer: bool = False,
) -> AcquireResult:
    """acquire_within, calling ``refused(result, seconds left, place)`` as it waits;
    ``keep_longer``: a hold the owner has is never shortened (run, held())."""
    wait = _checked_wait(wait)
    owner, run_id = _owner_with_run_id(owner)
    stale_after = _checked_stale_after(stale_after)
    slots = _checked_slots(slots)
    deadline = time.monotonic() + wait
    store = _store_for(lock)
    store.patient = bool(wait)
    place = _Place(os.urandom(4).hex(), owner, 0, stale_after, None) if wait else None
    try:
        while True:
            result = _take_in(
                store,
                owner,
                run_id,
                stale_after,
                empty_is_stale=empty_is_stale,
                keep_longer=keep_longer,
                place=place,
                slots=slots,
            )
            if result["acquired"]:
                return result
            if place is None or time.monotonic() >= deadline:
                raise LockBusy(result)
            _wait_turn(
                store,
                place,
                deadline,
                stale_after,
                empty_is_stale,
                slots=slots,
                result=result,
                shown=refused,
            )
    finally:
        if place is not None and place.joined:
            _leave_line(store, place)
        store.close()


def _wait_turn(
    store: _Store,
    place: _Place,
    deadline: float,
    caller_timeout: float,
    empty_is_stale: bool,
    *,
    slots: int = 1,
    result: AcquireResult,
    shown: Callable[[AcquireResult, float, int], None] | None,
) -> None:
    """Wait, keeping ``place`` alive, until its turn may have come (or its place lapsed);
    ``shown(result, seconds left, place)`` is told each new place in line. A waiter
    among the first N in line (N slots) watches the slots: one that frees may be its."""
    beat_at = time.monotonic() + _BEAT_SEC
    last_shown = 0
    found = None  # what the last look found, while the wait goes on from it
    vouched = 0  # waits in a row that went on from one look
    while (left := deadline - time.monotonic()) > 0:
        if found is None:
            found = _found_in_line(
                store, place, caller_timeout, empty_is_stale, slots=slots, left=left
            )
            if found is None:
                return
        look, ahead, away, stale_at = found
        if time.monotonic() >= beat_at:
            # A beat changes nothing a look sees: the wait goes on from this look.
            if not store.beat(place):
                return
            beat_at = time.monotonic() + _BEAT_SEC
            last_shown = 0  # shown again after a beat
        if shown is not None and last_shown != len(ahead) + 1:
            last_shown = len(ahead) + 1
            shown(result, left, last_shown)
        pause = min(left, beat_at - time.monotonic(), stale_at - time.monotonic())
        woken = store.wait(pause, look, ahead, place, away)
        if woken and not ahead:
            return  # a slot that frees is the first's: the try reads the lock anyway
        # A wait that ended unwoken, for its beat, goes on from the same look where the
        # store vouches that nothing it waits on changed since. A look every few beats
        # all the same catches a watch whose connection died unseen.
        trusted = not woken and vouched < _VOUCHED_WAITS and time.monotonic() < stale_at
        if trusted and store.vouches(look):
            vouched += 1
        else:
            found = None
            vouched = 0


def _found_in_line(
    store: _Store,
    place: _Place,
    caller_timeout: float,
    empty_is_stale: bool,
    *,
    slots: int,
    left: float,
) -> tuple[_Look, list[_Place], int, float] | None:
    """A look for a waiter: the look, the places ahead of ``place``, how many must
    leave before it is among the first N (N ``slots``), and when (by the monotonic
    clock) to wake for a slot going stale by its time. None: its turn may have come,
    or its place lapsed, and it tries again."""
    look = store.look(upto=place.ticket)  # only the places ahead of it matter
    now = time.time()
    ahead = _ahead_of(_live(look.line, now), place.ticket)
    if ahead is None:
        return None
    if len(ahead) < _free_slots(look.record, slots, caller_timeout, now, empty_is_stale):
        return None
    # Among the first N in line, a slot that frees may be its own: it watches them.
    away = max(0, len(ahead) - slots + 1)
    # The next to take a slot also wakes when one goes stale.
    until_stale = _stale_in(look.record, caller_timeout, now) if away == 0 else left
    return look, ahead, away, time.monotonic() + until_stale


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
