"""The Redis (or Valkey) store, in RESP2 over a socket: the record at KEY, expiring on the
server's clock; every change one MULTI/EXEC under a WATCH of KEY; every other key of the
lock in KEY's hash slot; waiters in line block on a bell of their own (BLPOP), rung by
the release in its transaction. Compiled only for a Redis lock."""

from __future__ import annotations

import errno
import os
import re
import time

from .contract import _MAX_WAIT_SEC
from .decisions import _PLACE_TTL_SEC, _ahead_of, _holders, _live, _turns
from .inputs import _PLAIN_DECIMAL
from .interrupts import _SIGNALS_HELD, _Interrupts
from .quoting import _quoted
from .records import _bytes_of, _Look, _parse_record, _Place, _Record
from .resp import _errors_in, _RedisError, _RespConnection
from .server_store import (
    _TLS_FAILURE,
    _place_of,
    _place_value,
    _ServerStore,
    _unknown_outcome,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .interface import _Store
    from .resp import _Command

# A Redis Cluster's answers that send a call to another node, followed this often at
# most per call (a slot moves once; more means the cluster is being reconfigured).
_REDIRECTS_MAX = 5
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


def _slot_base(key: str) -> str | None:
    """KEY if it has a hash tag, else ``{KEY}``; None for a ``}`` but no tag."""
    start = key.find("{")
    if start >= 0 and key.find("}", start + 1) > start + 1:
        return key
    return None if "}" in key else "{" + key + "}"


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


class _RedisSeen:
    """What a look at a Redis lock saw: the milliseconds until its next slot ends by the
    server's clock (-1: none ends by time)."""

    __slots__ = ("ttl_ms",)

    def __init__(self, ttl_ms: int) -> None:
        self.ttl_ms = ttl_ms


class _RedisServer(_ServerStore):
    """The conversation with Redis or Valkey for one lock's address: a connection
    (authenticated, TLS with ``rediss``), commands pipelined on it within the step's
    deadline, a Redis Cluster's redirects followed to the node that serves the lock's
    keys, and Redis's refusals as errors a person can act on."""

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
        started = time.monotonic()
        while True:
            sending = _with_asking(commands) if self.asking else list(commands)
            sent = False
            try:
                if self.connection is None:
                    self.connection = self._open()
                self.connection.send(sending, self.deadline)
                sent = True
                answers = [self.connection.answer(self.deadline) for _ in sending]
            except (OSError, ValueError) as exc:
                self._drop()
                reason = self.describe(exc)
                if sent and outcome is not None:
                    raise self.lost_answer(self.endpoint, exc, outcome) from None
                if sent and write:
                    raise OSError(errno.EIO, f"Redis at {self.endpoint}: {reason}") from None
                if isinstance(exc, PermissionError):
                    raise  # trying again cannot help
                if reason.startswith(_TLS_FAILURE):
                    raise OSError(errno.EPROTO, f"Redis at {self.endpoint}: {reason}") from None
                self.give_up_if_refused(exc, started, self.endpoint, reason)
                failure = failure or reason
            except BaseException:
                self._drop()  # an interrupt: never read its answers out of step
                raise
            else:
                answers = [a for c, a in zip(sending, answers, strict=True) if c[0] != "ASKING"]
                errors = _errors_in(answers)
                if raw or not errors:
                    return answers
                if self._redirected(errors[0], redirects, watched):
                    redirects += 1
                    continue
                failure = errors[0].text
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise self.unreachable(self.endpoint, failure)
            time.sleep(min(0.05, left))

    def _redirected(self, error: _RedisError, redirects: int, watched: bool) -> bool:
        """True if ``error`` sent the call to another node; False if the node is busy
        (try again soon); else the refusal ``error`` means."""
        if error.code in ("MOVED", "ASK") and redirects < _REDIRECTS_MAX:
            # Nothing of a redirected command ran; the node it names serves it.
            self._redirect(error)
            if watched:
                raise _NotApplied
            return True
        if error.code not in _REDIS_BUSY:
            raise self._refusal(error)
        if watched:
            # The algorithm reads again and retries; a slot's keys finish moving within
            # moments, so its tries (20 of them) span about 2 s.
            time.sleep(min(0.1, max(0.0, self.deadline - time.monotonic())))
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
            self._drop()
            self.endpoint = endpoint
        self.asking = asking

    def _stop_listening(self) -> None:
        if self.bell is not None:
            self.bell.close()
            self.bell = None

    def _drop(self) -> None:
        if self.connection is not None:
            self.connection.close()
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


class _RedisStore(_RedisServer):
    """One lock on Redis or Valkey: ``redis[s]://[USER@]HOST[:PORT]/KEY``. The record is
    at KEY, expiring; the other keys share its Cluster slot: ``{KEY}``, a NUL, then
    ``last``, ``line`` (tickets in order), and per waiter ``wait`` and ``wake`` with its
    ticket: its place, and a list it blocks on until a release or a leaver pushes."""

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        super().__init__(address, prefix)
        key = self.key_text
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
        self._drop()
        self._stop_listening()

    # -- What the algorithm asks of a store

    def look(self, upto: str | None = None) -> _Look:
        """The record (its expiry live, or none), the last holder's, and the line (up to
        ``upto``'s place, if it is in line: the places behind it are not read)."""
        return self._looked(self.call(*self._reads(), *self._clock()), upto=upto)

    def read(self, line: bool = True) -> _Look:
        """As look, with KEY watched on this connection until the change applies; always
        with the line: a release rings the waiters it leaves a slot for."""
        clock: list[_Command] = [] if self.timeless else [("TIME",)]
        try:
            answers = self.call(("WATCH", self.key), *self._reads(), *clock)[1:]
        except _CommandDenied as denied:
            if not clock or denied.command != "time":
                raise
            # A user without TIME takes, renews and releases a lock of one slot, as
            # before fences: its takes get no fence rather than a weaker one.
            self.timeless = True
            answers = self.call(("WATCH", self.key), *self._reads())[1:]
        look = self._looked(answers)
        if not self.timeless:
            # A take's fence is at least the server's clock in microseconds, read with
            # the lock in the same round trip: larger than that of a take whose keys a
            # release deleted, unless that clock steps back.
            look.fence_floor = _server_us(answers[-1])
            if look.clock is None:  # the first slot's mark, should the change take one
                look.clock = look.fence_floor // 1000
        self.watched = self.connection
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
                server_ms = _server_us(clock[0] if clock else self.call(("TIME",))[0]) // 1000
                self.clocked = True
                ttl = _slots_ended(record, server_ms, ttl)
        if isinstance(last_value, bytes) and record is None:
            last = _parse_record(last_value, now)
            last.lease = "expired"
            for holder in last.holders or []:
                holder.lease = "expired"
        tickets = [t.decode("ascii", "replace") for t in tickets if isinstance(t, bytes)]
        if upto in tickets:
            # The values of the places behind a waiter: most of a busy line's newcomers.
            tickets = tickets[: tickets.index(upto) + 1]
        prefix = self.wait_prefix if wait_prefix is None else wait_prefix
        place_keys = [prefix + ticket.encode("ascii", "replace") for ticket in tickets]
        places = self.call(("MGET", *place_keys)) if tickets else [[]]
        line = []
        for ticket, entry in zip(tickets, places[0], strict=False):
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
        return max(1, int(_PLACE_TTL_SEC * 1000))

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
        self.call(
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
            self.call(*dead, write=True)

    def beat(self, place: _Place) -> bool:
        ms = self._place_ms()
        kept, _, _ = self.call(
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
        self.next_step()
        place.joined = False

        (tickets,) = self.call(("UNWATCH",), ("LRANGE", self.line_key, 0, -1))[1:]
        line = [t.decode("ascii", "replace") for t in tickets if isinstance(t, bytes)]
        behind = line[line.index(place.ticket) + 1 :] if place.ticket in line else []
        ring = self._ring(behind[0]) if behind else []
        self.call(("MULTI",), *self._leaving(place.ticket), *ring, ("EXEC",), write=True)

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
            clock = _server_us(self.call(("TIME",))[0]) // 1000
        if self.connection is None or self.connection is not self.watched:
            return False  # its watch's connection was lost: read again
        ops: list[_Command] = []
        ms = 0 if record is None else _lifetime_ms(record, clock or 0)
        if ms > 0 and record is not None:
            data = _bytes_of(record)
            ops += [("SET", self.key, data, "PX", ms), ("SET", self.last_key, data)]
        else:
            record = None  # a release, or no slot left that the server would keep
            ops += [("DEL", self.key, self.last_key)]
        # Each waiter who may take a slot (or a shared hold) after the change is rung (the
        # first in line, for one slot; the shared waiters at its head): two releases in
        # a row must wake two, not the same one twice.
        leaving = None if place is None else place.ticket
        live = _live(look.line, time.time())
        line = [p for p in live if p.ticket != leaving]
        free = _free_after(look.record, record, clock or 0)
        for waiter in _turns(line, record, free):
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
                answers = self.call(("MULTI",), *ops, ("EXEC",), outcome=outcome, watched=True)
            except _NotApplied:
                answers = [None]  # read again, on the node that serves the keys now
            self.watched = None  # EXEC ends the watch
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
        until = time.monotonic() + left
        try:
            if self.bell is None:
                self.deadline = min(until, time.monotonic() + self.timeout)
                self.bell = self._open()
            return self._rung(self.bell, place.ticket, until)
        except (OSError, ValueError):
            # A new connection next time.
            self._stop_listening()
            return False
        finally:
            self.next_step()

    def vouches(self, look: _Look) -> bool:
        """Never: a place ahead that expired rings no bell."""
        return False

    def _rung(self, bell: _RespConnection, ticket: str, until: float) -> bool:
        left = max(0.001, until - time.monotonic())
        asking: list[_Command] = [("ASKING",)] if self.asking else []
        bell.send([*asking, ("BLPOP", self._bell_key(ticket), f"{left:.3f}")], until + self.timeout)
        if asking:
            bell.answer(until + self.timeout)
        answer = bell.answer(until + self.timeout)
        if isinstance(answer, _RedisError) and answer.code in ("MOVED", "ASK"):
            # Its slot moved (a blocked BLPOP is told so too): look again there.
            self._redirect(answer)
            return False
        if isinstance(answer, _RedisError):
            raise self._refusal(answer)
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


def _free_after(before: _Record | None, after: _Record | None, clock: int) -> int:
    """How many slots a change that leaves ``after`` (of ``before``) leaves free: all
    of ``before``'s once it is deleted; else those with no live holder (by ``clock``,
    the server's time, for several)."""
    if after is None:
        return 1 if before is None else before.slots
    if after.holders is None:
        return 0
    return after.slots - len([h for h in after.holders if _left_ms(h, clock) > 0])


def _open_redis(address: str) -> _Store:
    """The registry's opener: a Redis lock (mypy checks the class against _Store here)."""
    return _RedisStore(address)
