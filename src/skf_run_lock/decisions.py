"""The decisions, as pure functions of what a store read and the time: is a record
stale, may an owner take the lock (one of its slots, or a shared hold), who in the line
is alive, who goes first, what a take or a release leaves. No store decides anything;
each only reads, applies a change atomically, and waits."""

from __future__ import annotations

from .records import (
    _FORM_BYTES,
    _FORM_DOCUMENT,
    _FORM_RECORD,
    _MAX_FENCE,
    _RECORD_MAX_BYTES,
    _bytes_of,
    _kept_record,
    _Record,
    _taking_records,
)
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .inputs import _Query, _Request
    from .records import _Look, _Place

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
    if take.blocker is None and take.waiter is not None:
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
    from .parts import _first_overlap

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
    from .parts import _part_key

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
    from .parts import _PartIndex

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
