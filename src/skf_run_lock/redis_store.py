"""The Redis (or Valkey) store, which has Redis's gateway (redis_gateway.py, RESP2 over a
socket): the record at KEY, expiring on the server's clock; every change one MULTI/EXEC
under a WATCH of KEY; every other key of the lock in KEY's hash slot; waiters in line
block on a bell of their own (BLPOP), rung by the release in its transaction. Compiled
only for a Redis lock."""

from __future__ import annotations

import errno
import os
import time

from .decisions import _ahead_of, _holders, _live, _turns
from .interrupts import _SIGNALS_HELD, _Interrupts
from .records import _bytes_of, _Look, _parse_record, _Place, _Record
from .redis_gateway import _CommandDenied, _NotApplied, _RedisGateway
from .resp import _RedisError, _RespConnection
from .seams import _SEAMS
from .server_gateway import _place_of, _place_value, _ServerStore, _unknown_outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .resp import _Command
    from .store_protocol import _Store


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
