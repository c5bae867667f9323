"""The lock calls: acquire, release and status, one algorithm over any store, and waiting
in line. Each call reads the lock, decides by the pure functions of the decisions, and
applies its change atomically against what it read, trying again when another writer
came first. A waiter joins the line, keeps its place alive, waits for what may make it
its turn, tries again, and leaves the line however the wait ends."""

from __future__ import annotations

import errno
import os
import time

from .decisions import (
    _another_programs_file,
    _decide_take,
    _decide_turn,
    _live,
    _released,
    _reserved,
    _standing,
)
from .hold import _Hold
from .inputs import (
    _checked,
    _checked_slots,
    _checked_stale_after,
    _has_run_id,
    _Query,
    _Release,
    _Request,
    _seconds_of,
)
from .interrupts import _Interrupts
from .outputs import (
    _acquire_output,
    _acquired_result,
    _another_programs_left,
    _another_programs_refusal,
    _check_result,
    _holds_text,
    _refusal,
    _release_result,
    _status_result,
    _waited,
    _whole_owner_needed,
    _whole_owner_to_check,
)
from .public_surface import DEFAULT_STALE_AFTER_MIN, LockBusy
from .records import _Place
from .registry import _store_for
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from .decisions import _Turn
    from .public_surface import AcquireResult, CheckResult, ReleaseResult, StatusResult
    from .records import _Look
    from .store_protocol import _Store

__all__ = ["acquire", "acquire_within", "check", "release", "status"]


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
        from .parts import _checked_paths

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
