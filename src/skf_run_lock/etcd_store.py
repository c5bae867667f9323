"""The etcd store, which has etcd's HTTP/JSON gateway (etcd_gateway.py): the record at
KEY on a lease (the holder's timeout, on the server's clock), every change one transaction
compared against the revision it read, and waiters in line as keys on leases of their
own that they keep alive, each watching the key ahead of it (etcd_watch.py). Compiled
only for an etcd lock."""

from __future__ import annotations

import atexit
import os
import time

from .decisions import _ahead_of, _holders, _live
from .etcd_gateway import _answer_field, _b64, _EtcdGateway, _not_etcd, _unb64
from .etcd_watch import _EtcdWatch
from .interrupts import _SIGNALS_HELD, _Interrupts
from .quoting import _quoted
from .records import _MAX_FENCE, _bytes_of, _Look, _parse_record, _Place, _Record
from .seams import _SEAMS
from .server_gateway import _Pause, _place_of, _place_value, _ServerStore, _unknown_outcome

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .store_protocol import _Store

# A lease granted and not used yet: its TTL, its ID, when it was granted or last kept
# alive (on ``_SEAMS.clock``), and whether it was granted ahead of a take.
_Spare = tuple[int, str, float, bool]


# What this process's last change of each lock (by its endpoints and key) left there,
# as committed: the revision and the keys it left (the record's and the last holder's
# copy, or none). The process's next change of that lock decides on it rather than
# reading first; its transaction compares that those keys and an empty line stand as
# they were left, and the lock calls read anew when it would change nothing.
_LEFT: dict[tuple[object, ...], tuple[int, list[dict[str, str]]]] = {}
_LEFT_MAX = 256
# The lease a release by this process left with nothing on it, by lock (as _LEFT), with
# the lock's address: the process's next take of the lock keeps it alive and puts its
# record on it, rather than granting one (a write through the cluster's log; a keep-
# alive is the leader's alone) and revoking the old. Those left are revoked at exit
# (a CLI's release so costs what it did), else they run out by themselves. Each serves
# only the owner whose record it carried: a process that remembers that record on it
# may keep it alive before its transaction is refused, which must never renew another
# owner's hold.
_FREE_LEASES: dict[tuple[object, ...], tuple[str, str, str]] = {}


# How long a process's exit may wait on revoking the leases left free, all together:
# a server gone by then must not hold the exit up (the leases run out by themselves).
_EXIT_REVOKES_SEC = 1.0


def _revoke_free_leases() -> None:
    """At exit: revoke each lease a release left free, for nothing will use it."""
    stop = _SEAMS.clock() + _EXIT_REVOKES_SEC
    while _FREE_LEASES and _SEAMS.clock() < stop:
        _, (lease, address, _) = _FREE_LEASES.popitem()
        try:
            gateway = _EtcdGateway(address)
            gateway.call_deadline = stop
            gateway.post("/v3/lease/revoke", {"ID": lease})
        except (OSError, ValueError):
            pass  # it runs out by itself


def _whole_seconds(seconds: float) -> int:
    """A lease's TTL for a timeout of ``seconds``: whole seconds, rounded up."""
    return int(max(1, -(-seconds // 1)))


class _EtcdSeen:
    """What a look at an etcd lock saw: the revision at which it was read (0: none)."""

    __slots__ = ("revision",)

    def __init__(self, revision: int) -> None:
        self.revision = revision


def _revision_seen(look: _Look) -> int:
    """The revision at which ``look``, an etcd store's, was read (0 if it gives none)."""
    assert isinstance(look.seen, _EtcdSeen), "a look of another store"
    return look.seen.revision


def _wait_place(value: bytes, lease: object) -> _Place | None:
    """The place a line key gives; None if not one (or leaseless: it could never end)."""
    if not (isinstance(lease, str) and lease.isdigit()):
        return None
    return _place_of(lease, value)


class _EtcdStore(_ServerStore):
    """One lock on etcd (``etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY``), as the
    lock calls ask of a store, spoken to through its ``gateway``. The record is at KEY on
    a lease; beside it, after a NUL, the last holder's (``last``), each waiter's place
    (``wait``, a NUL, its lease) and, of several slots, each holder's key on its lease
    (``slot``, a NUL, the lease). Each change is one transaction that compares what the
    call read; the line is kept by places on leases the waiters keep alive, and a waiter
    waits on its ``watch``."""

    gateway: _EtcdGateway

    def __init__(self, address: str) -> None:
        self.gateway = _EtcdGateway(address)
        self.lock = self.gateway.lock
        key = self.gateway.key_text
        self.key = key.encode()
        self.last_key = (key + "\0last").encode()
        self.wait_prefix = (key + "\0wait\0").encode()
        self.slot_prefix = (key + "\0slot\0").encode()
        self.watch = _EtcdWatch(self.gateway)  # a waiter's, open while it waits
        self.pause = _Pause()
        # Leases granted and not yet used: of tries that lost their race, and the one
        # granted ahead for a take to come (see _grant_ahead).
        self.spares: list[_Spare] = []
        self.ranged: tuple[int, list[Any]] = (-1, [])  # the last range: its revision, keys
        self.told: _Look | None = None  # what the first in line's watch told, for its read
        # The lock as the last join or lost change found it, for the next read or look
        # (with the line or not), and whether the last read asked for the line.
        self.fresh: tuple[_Look, bool] | None = None
        self.line_read = True
        self.record_on: str | None = None  # the lease the last change put the record on
        self.left_as = (tuple(self.gateway.endpoints), key)  # its entry in _LEFT
        self.remembering = True  # the first read of a call may be what _LEFT holds
        self.freed: tuple[str, str, str] | None = None  # a free lease the change uses

    def look(self, upto: str | None = None) -> _Look:
        """The lock with its whole line: read again, unless the last change gave it (a
        join, or a change that lost its race after a read of the line)."""
        self.told = None
        fresh = self._fresh(line=True)
        return self._range(line=True) if fresh is None else fresh

    def read(self, line: bool = True) -> _Look:
        """As look (the transaction compares later); without the ``line``, only the
        record's, the last holder's and the slots' keys are read. The first read after
        the first in line's watch woke it is what the watch told: the record's keys as
        they stand after the change that woke it, the line as its look found it (a
        place ahead that left since only makes it wait once more). The read after a
        change that lost its race is what that change's transaction found."""
        self.line_read = line
        told, self.told = self.told, None
        found = self._fresh(line) if told is None else told
        if found is None and self.remembering:
            found = self._remembered()
        self.remembering = False
        look = self._range(line) if found is None else found
        # A take's fence is one more than the revision the look was read at: no more
        # than the revision its transaction commits at, larger than every earlier
        # take's, which committed at or before it.
        look.fence_floor = _revision_seen(look) + 1
        return look

    def _fresh(self, line: bool) -> _Look | None:
        """What the last change found, once (None: nothing, or not the line asked for)."""
        fresh, self.fresh = self.fresh, None
        if fresh is None or (line and not fresh[1]):
            return None
        return fresh[0]

    def _remembered(self) -> _Look | None:
        """What this process's last change of the lock left, as a look (None: none)."""
        left = _LEFT.get(self.left_as)
        if left is None:
            return None
        revision, kvs = left
        look = _looked(self.key, kvs, revision)
        look.remembered = True
        self.ranged = (revision, kvs)
        return look

    def _leave_known(
        self, record: _Record | None, revision: int, value: bytes, created: int
    ) -> None:
        """Remember what a change committed at ``revision`` left: ``record`` (``value``,
        on ``self.record_on``; its key ``created`` at that revision, or 0: before), or
        nothing, as a range would give it. A lock of several slots is not remembered:
        its holders' leases end without a change to compare."""
        if record is not None and record.holders is not None:
            _LEFT.pop(self.left_as, None)
            return
        kvs = []
        if record is not None:
            at = str(revision)
            kvs = [
                {"key": _b64(self.key), "value": _b64(value), "mod_revision": at},
                {"key": _b64(self.last_key), "value": _b64(value), "mod_revision": at},
            ]
            if self.record_on:
                kvs[0]["lease"] = self.record_on
            if created:
                kvs[0]["create_revision"] = str(created)
        if len(_LEFT) >= _LEFT_MAX:
            _LEFT.clear()  # a long-lived process keeps it small
        _LEFT[self.left_as] = (revision, kvs)

    def _span(self, line: bool) -> dict[str, str]:
        """The keys a read asks for: the record's and the slots', and the line's."""
        end = self.key + b"\1" if line else self.slot_prefix[:-1] + b"\1"
        return {"key": _b64(self.key), "range_end": _b64(end)}

    def _range(self, line: bool) -> _Look:
        answer = self.gateway.post("/v3/kv/range", self._span(line))
        return self._look_of(answer, "range")

    def _look_of(self, answer: Any, what: str, ranged: Any = None) -> _Look:
        """The look a range gives (``answer``, or ``ranged``: a range in the answer of a
        transaction), at the revision of ``answer``; kept as this store's last range."""
        if ranged is None:
            ranged = answer
        try:
            header = str(answer.get("header", {}).get("revision", "0"))
            seen = int(header) if header.isdigit() else 0
            kvs = ranged.get("kvs", [])
            look = _looked(self.key, kvs, seen)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise _not_etcd(what, "kvs") from None
        self.ranged = (seen, kvs)
        return look

    def _found(self, answer: Any, index: int, line: bool) -> None:
        """Keep as ``fresh`` the range a transaction's ``index``th operation gave."""
        try:
            ranged = answer["responses"][index]["response_range"]
        except (KeyError, IndexError, TypeError):
            raise _not_etcd("txn", "responses") from None
        if not isinstance(ranged, dict):
            raise _not_etcd("txn", "responses")
        self.fresh = (self._look_of(answer, "txn", ranged), line)

    def _place_key(self, place: _Place) -> bytes:
        return self.wait_prefix + place.ticket.encode()

    def _grant_ahead(self, stale_after: float) -> None:
        """A lease for the take to come, unless one is spare. It has a second more
        than the timeout, kept alive by the waiter's beats, and a take uses it only
        while a whole timeout is left of it: a slot never ends before its timeout,
        and may end a second after it."""
        ttl = _whole_seconds(stale_after) + 1
        if not any(ahead for _, _, _, ahead in self.spares):
            sent = _SEAMS.clock()
            answer = self.gateway.post("/v3/lease/grant", {"TTL": str(ttl)})
            lease = _answer_field(answer, "ID", "lease/grant", digits=True)
            self.spares.append((ttl, lease, sent, True))

    def revoke(self, lease: str | None) -> None:
        if lease:
            try:
                self.gateway.post("/v3/lease/revoke", {"ID": lease})
            except OSError:
                pass  # it runs out by itself

    def _grant(
        self,
        seconds: float,
        granted: list[_Spare],
        owner: str | None = None,
        mine: str | None = None,
    ) -> str:
        """A lease of ``seconds`` (rounded up), added to ``granted`` if granted in this
        try: a spare one if one serves, else a new one. Only one granted ahead serves, a
        second longer, while that TTL is left of it: a slot on it ends no sooner than on
        a lease granted now (the renewer counts a hold from its try's start), and at
        most a second later. A lost try's lease, granted before, would end sooner:
        revoked. So does one kept alive now with that TTL or a second more: ``mine``,
        the lease of the hold it renews, or one a release of the lock in this process
        left free, if it carried ``owner``'s record."""
        ttl = _whole_seconds(seconds)
        now = _SEAMS.clock()
        for spare in self.spares:
            spare_ttl, lease, sent, ahead = spare
            if ahead and spare_ttl == ttl + 1 and spare_ttl - (now - sent) >= ttl:
                self.spares.remove(spare)
                granted.append(spare)
                return lease
        if mine and ttl <= self._ttl_kept(mine) <= ttl + 1:
            return mine
        free = _FREE_LEASES.pop(self.left_as, None)
        if free is not None and free[2] != owner:
            _FREE_LEASES[self.left_as] = free  # its owner's next take's
        elif free is not None:
            if ttl <= (left := self._ttl_kept(free[0])) <= ttl + 1:
                self.freed = free  # free again if this try's change loses
                return free[0]
            if left:
                self.revoke(free[0])  # of another timeout: of no use
        sent = _SEAMS.clock()
        answer = self.gateway.post("/v3/lease/grant", {"TTL": str(ttl)})
        lease = _answer_field(answer, "ID", "lease/grant", digits=True)
        granted.append((ttl, lease, sent, False))
        return lease

    def _slot_key(self, lease: str) -> bytes:
        return self.slot_prefix + lease.encode()

    # -- Waiting: a waiter watches only what it waits on (the place just ahead of it, or
    # at its turn the record and the slots' keys), never polls, and at its turn keeps
    # what its watch streams, so that its take needs neither a grant nor a read.

    def wait(self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int) -> bool:
        """Until the place just ahead is deleted, or (its turn) the record or a slot's
        key. Each watches only what it waits on: the place just ahead, alone, or (its
        turn) the record and the slots' keys, never the line. A take or a leave then
        wakes one waiter, and etcd streams each change to those it concerns.

        A watch starts from the moment it is made, never from a past revision: etcd
        holds back the news of a watch that starts in the past until its next sweep, up
        to 100 ms later. A watch made after something changed since ``look`` wakes the
        waiter at once to look again; the watch goes on, and streams every later change.

        At its turn a waiter has the lease it will take on granted ahead, and keeps the
        record's keys up to date from what its watch streams, so that its take needs
        neither a grant nor a read."""
        turn = away == 0
        self.told = None
        watching = self._target(ahead, away)
        seen = _revision_seen(look)
        watch = self.watch
        if watch.connection is not None and (watch.watching != watching or watch.watched > seen):
            watch.stop()  # another key, or it cannot vouch for what came after look
        until = _SEAMS.clock() + left
        try:
            if turn:
                self._grant_ahead(place.stale_after)
            kept = self._kept(look) if turn else None
            if watch.connection is None:
                if not watch.start(until, watching):
                    self.pause.sleep(left)
                    return False
                if watch.watched > seen:
                    return True  # changed since the look: what it waits on may have
            while True:
                deleted = watch.deleted(until, kept, seen)
                if turn and (self.key in deleted or self._slot_in(deleted)):
                    if kept is not None:
                        self.told = self._told(kept)
                    return True
                if not turn and watching[0] in deleted:
                    return True
        except TimeoutError:
            return False  # the stream goes on
        except (OSError, ValueError):
            watch.stop()
            self.pause.sleep(max(0.0, until - _SEAMS.clock()))
            return False
        finally:
            self.gateway.next_step()

    def vouches(self, look: _Look) -> bool:
        """While the watch is open, streams every change after ``look`` and has
        streamed none yet: a place ahead that ends, by its leaving or its lease, and
        (its turn) a slot that frees each delete a key it watches, and so wake the
        wait. (A change it streamed that woke nothing, such as a renewal at its turn,
        is in no look yet, so the next wait needs a new one.)"""
        return self.watch.vouches(_revision_seen(look))

    def _target(self, ahead: list[_Place], away: int) -> tuple[bytes, bytes | None]:
        """What a waiter ``away`` from its turn watches: at its turn, the record and
        the slots' keys; else the place just ahead of it."""
        if away == 0:
            return (self.key, self.slot_prefix[:-1] + b"\1")
        return (self._place_key(ahead[-1]), None)

    def _slot_in(self, keys: set[bytes]) -> bool:
        return any(key.startswith(self.slot_prefix) for key in keys)

    def _kept(self, look: _Look) -> dict[bytes, Any] | None:
        """The record's keys of ``look``, by key (None: ``look`` was not this store's
        last range), to keep up to date as the watch streams their changes."""
        seen, kvs = self.ranged
        if seen != _revision_seen(look):
            return None
        return {
            key: kv for kv in kvs if not (key := _unb64(kv["key"])).startswith(self.wait_prefix)
        }

    def _told(self, kept: dict[bytes, Any]) -> _Look:
        """The look the ``kept`` keys give, with the line of this store's last range."""
        seen, kvs = self.ranged
        line = [kv for kv in kvs if _unb64(kv["key"]).startswith(self.wait_prefix)]
        revisions = [int(kv.get("mod_revision", 0)) for kv in kept.values()]
        return _looked(self.key, [*kept.values(), *line], max([seen, *revisions]))

    # -- Changes, the line, and letting go

    def close(self) -> None:
        while self.spares:
            self.revoke(self.spares.pop()[1])
        self.told = self.fresh = None
        self.gateway._give_back()
        self.watch.stop()

    def by_hand(self) -> str:
        return f"delete its key (etcdctl del {_quoted(self.key.decode())})"

    def join(self, look: _Look, place: _Place, now: float) -> None:
        """A key on a lease of its own, kept alive by the waiter; the transaction that
        puts it reads the lock as it then stands, for the waiter's first look."""
        if _ahead_of(_live(look.line, now), place.ticket) is not None:
            return
        answer = self.gateway.post("/v3/lease/grant", {"TTL": str(int(_SEAMS.place_ttl_sec))})
        place.ticket = _answer_field(answer, "ID", "lease/grant", digits=True)
        place.since = int(now // 1)
        place.joined = True
        value = _place_value(place)
        put = {"key": _b64(self._place_key(place)), "value": _b64(value), "lease": place.ticket}
        ops = [{"request_put": put}, {"request_range": self._span(line=True)}]
        self._found(self.gateway.post("/v3/kv/txn", {"success": ops}), 1, line=True)

    def prune(self, look: _Look, now: float) -> None:
        """Nothing to do: etcd ends the place of a waiter that stopped."""

    def beat(self, place: _Place) -> bool:
        """Keep the place's lease alive, and any lease granted ahead with it."""
        self.gateway.next_step()  # each beat a step of its own, with its own deadline
        for spare in list(self.spares):
            ttl, lease, _, ahead = spare
            if ahead:
                self.spares.remove(spare)
                sent = _SEAMS.clock()
                if self._kept_alive(lease):  # else it ended: nothing to revoke
                    self.spares.append((ttl, lease, sent, ahead))
        return self._kept_alive(place.ticket)

    def _kept_alive(self, lease: str) -> bool:
        return self._ttl_kept(lease) > 0

    def _ttl_kept(self, lease: str) -> int:
        """Keep ``lease`` alive: its TTL, to which it was renewed (0: it had ended)."""
        answer = self.gateway.post("/v3/lease/keepalive", {"ID": lease})
        result = answer.get("result")
        ttl = result.get("TTL") if isinstance(result, dict) else None
        return int(ttl) if isinstance(ttl, str) and ttl.isdigit() else 0

    def leave(self, place: _Place) -> None:
        self.gateway.next_step()
        place.joined = False
        self.revoke(place.ticket)

    def apply(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None = None,
    ) -> bool:
        """By a transaction; signals wait while it is sent."""
        # The leases of slots this change renews or releases.
        kept = {holder.mark for holder in _holders(record)}
        gone = [h.mark for h in _holders(look.record) if h.mark not in kept]
        with _SIGNALS_HELD:
            applied = self._swap(look, record, owner, place, gone=gone)
            if applied:
                _Interrupts.disarm()
        if applied:
            # The leases nothing stands on now (else they would only run out): the
            # record's last one, and those of slots renewed or released.
            kept = {holder.mark for holder in _holders(record)} | {self.record_on}
            # A release's record lease is the process's next take's (_grant).
            whole = look.record is not None and look.record.holders is None
            free = look.lease if record is None and whole else None
            for lease in {look.lease, *gone} - kept:
                if lease is not None and lease == free:
                    if len(_FREE_LEASES) >= _LEFT_MAX:
                        _FREE_LEASES.clear()  # a long-lived process keeps it small
                    assert look.record is not None
                    _FREE_LEASES[self.left_as] = (lease, self.lock, look.record.owner or "")
                else:
                    self.revoke(lease)
        if applied and place is not None:
            place.joined = False  # its lease runs out by itself
        return applied

    def _swap(
        self,
        look: _Look,
        record: _Record | None,
        owner: str,
        place: _Place | None,
        *,
        gone: list[str | None],
    ) -> bool:
        """If the record's revision is still ``look``'s: put ``record`` (None: delete
        it). Each new holder of several slots gets a lease of its own and a key on it
        (``slot``, a NUL, the lease), that ends its slot; the record's lease outlives
        them all, so an older version sees the lock held while any slot is live."""
        granted: list[_Spare] = []
        ops: list[dict[str, Any]] = []
        self.record_on = None
        self.freed = None
        puts = b""
        if record is not None:
            lease = self._record_lease(record, look, granted, ops)
            self.record_on = lease
            puts = _bytes_of(record)
            ops += [
                {
                    "request_put": {
                        "key": _b64(self.key),
                        "value": _b64(puts),
                        "lease": lease or "0",
                    }
                },
                {"request_put": {"key": _b64(self.last_key), "value": _b64(puts)}},
            ]
        else:
            ops = [{"request_delete_range": {"key": _b64(k)}} for k in (self.key, self.last_key)]
        for mark in gone:
            if mark is not None:
                ops.append({"request_delete_range": {"key": _b64(self._slot_key(mark))}})
        outcome = _unknown_outcome(owner, taking=owner in [h.owner for h in _holders(record)])
        compare = [
            {
                "key": _b64(self.key),
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": look.revision,
            }
        ]
        if look.remembered:
            # Not read: the last holder's copy and the line must stand as remembered
            # too (an empty line: no place's key created at all).
            compare.append({**compare[0], "key": _b64(self.last_key)})
            if self.line_read:
                compare.append(
                    {
                        "key": _b64(self.wait_prefix),
                        "range_end": _b64(self.wait_prefix[:-1] + b"\1"),
                        "target": "CREATE",
                        "result": "EQUAL",
                        "create_revision": "0",
                    }
                )
        if place is not None:
            key = _b64(self._place_key(place))
            compare.append(
                {"key": key, "target": "CREATE", "result": "GREATER", "create_revision": "0"}
            )
            ops.append({"request_delete_range": {"key": key}})
        # Lost, the transaction reads the lock instead, for the next try's read.
        failure = [{"request_range": self._span(self.line_read)}]
        txn = {"compare": compare, "success": ops, "failure": failure}
        _LEFT.pop(self.left_as, None)  # known again only once this change is
        answer = self.gateway.post("/v3/kv/txn", txn, outcome=outcome, resendable=True)
        landed = self.gateway.resent and self._landed(answer, record, puts)
        if answer.get("succeeded") or landed:
            committed = landed or _answer_revision(answer)
            created = 0
            if record is not None and look.revision == "0":
                _raise_fences(record, committed)
                created = committed
            self._leave_known(record, committed, puts, created)
            return True
        self.spares += granted  # those granted ahead serve the next try; all revoked at close
        if self.freed is not None:
            _FREE_LEASES[self.left_as] = self.freed  # nothing was put on it
        self._found(answer, 0, self.line_read)
        return False

    def _landed(self, answer: Any, record: _Record | None, value: bytes) -> int:
        """The revision the change (``record``, None: a delete) committed at when its
        first sending, whose answer was lost, landed: seen in what the second, which
        then found the lock changed, read instead (0: it did not). A put is known by its
        ``value`` on its lease (the record's times, to the second, and its fence); a
        delete by both keys gone (an expiry leaves the last holder's)."""
        if answer.get("succeeded"):
            return 0
        try:
            kvs = answer["responses"][0]["response_range"].get("kvs", [])
            keys = {_unb64(kv["key"]): kv for kv in kvs}
            header = int(answer["header"]["revision"])
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            return 0
        if record is None:
            return header if self.key not in keys and self.last_key not in keys else 0
        kv = keys.get(self.key)
        if record.holders is not None or kv is None or kv.get("lease") != self.record_on:
            return 0
        return int(kv.get("mod_revision", 0)) if _unb64(kv.get("value", "")) == value else 0

    def _record_lease(
        self,
        record: _Record,
        look: _Look,
        granted: list[_Spare],
        ops: list[dict[str, Any]],
    ) -> str | None:
        """The lease ``record`` goes on: one slot's, its holder's timeout. Of several,
        each new holder gets a lease of its timeout and a key on it; the record stays
        on a lease that outlives every slot: a release leaves it on its own; a take
        puts it on the new holder's when no other holder has a longer timeout (every
        other slot's lease was granted earlier), else on a lease of the longest. A
        renewal of one slot keeps its lease (``look``'s), kept alive, if it serves."""
        current = look.lease
        if record.holders is None:
            assert record.stale_after is not None
            was = look.record
            mine = was is not None and was.holders is None and was.owner == record.owner
            return self._grant(record.stale_after, granted, record.owner, current if mine else None)
        lease = None
        newest = 0.0
        for holder in record.holders:
            if holder.mark is None:
                assert holder.stale_after is not None
                holder.mark = self._grant(holder.stale_after, granted, holder.owner)
                marker = {"key": _b64(self._slot_key(holder.mark)), "lease": holder.mark}
                marker["value"] = _b64((holder.owner or "").encode())
                ops.append({"request_put": marker})
                lease, newest = holder.mark, holder.stale_after
        if lease is None:
            return current  # a release: the lease it is on outlives the rest
        longest = max(h.stale_after or 0.0 for h in record.holders)
        return lease if newest >= longest else self._grant(longest, granted)


def _raise_fences(record: _Record, created: int) -> None:
    """Raise each fence of ``record``, whose key was created at revision ``created``, to
    at least that revision. A take that finds the key absent cannot tell from what it
    read whether another run took and released the lock before its transaction commits
    (a revision of 0 compares equal either way), so its fence is the revision that
    creates the key: larger than that of every take committed before it."""
    for holder in _holders(record):
        if holder.fence is not None and holder.fence < created:
            holder.fence = min(created, _MAX_FENCE)


def _answer_revision(answer: Any) -> int:
    """The revision a transaction's ``answer`` committed at (its header's)."""
    header = answer.get("header")
    revision = header.get("revision") if isinstance(header, dict) else None
    if not (isinstance(revision, str) and revision.isdigit()):
        raise _not_etcd("txn", "header")
    return int(revision)


def _looked(key: bytes, kvs: list[Any], seen: int) -> _Look:
    """The look at the lock ``key`` that its keys ``kvs`` (of one range) give: its
    record (on a lease: live), the last holder's, and the line in the order joined. Of
    several slots, a holder's is live while the key on its lease is."""
    record = last = None
    revision = "0"
    lease = None
    line: list[tuple[int, _Place]] = []
    now = int(time.time())
    last_key = key + b"\0last"
    wait_prefix = key + b"\0wait\0"
    slot_prefix = key + b"\0slot\0"
    live_slots = set()
    for kv in kvs:
        name = _unb64(kv["key"])
        if name.startswith(slot_prefix):
            if kv.get("lease") == name[len(slot_prefix) :].decode("ascii", "replace"):
                live_slots.add(kv["lease"])
            continue
        value = _unb64(kv.get("value", ""))
        if name.startswith(wait_prefix):
            place = _wait_place(value, kv.get("lease"))
            if place is not None:
                line.append((int(kv["create_revision"]), place))
            continue
        parsed = _parse_record(value, now)  # a foreign value is dated now
        if name == key:
            revision = _answer_field(kv, "mod_revision", "range", digits=True)
            created = kv.get("create_revision", "0")  # etcd leaves out a 0
            _raise_fences(parsed, int(created) if str(created).isdigit() else 0)
            record = parsed
            lease = kv.get("lease")
            if lease:
                record.lease = "live"
        elif name == last_key:
            last = parsed
            last.lease = "expired"
    for holder in record.holders or [] if record is not None else []:
        holder.lease = "live" if holder.mark in live_slots else "expired"
    for holder in last.holders or [] if last is not None else []:
        holder.lease = "expired"
    line.sort(key=lambda entry: entry[0])
    return _Look(record, last, revision, lease, line=[p for _, p in line], seen=_EtcdSeen(seen))


atexit.register(_revoke_free_leases)
if hasattr(os, "register_at_fork"):  # a forked child's are its parent's
    os.register_at_fork(after_in_child=_FREE_LEASES.clear)


def _open_etcd(address: str) -> _Store:
    """The registry's opener: an etcd lock (mypy checks the class against _Store here)."""
    return _EtcdStore(address)
