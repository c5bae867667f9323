"""A bare first-come semaphore on etcd: the fewest requests a line on slots can send,
for a ceiling the lock's own line can be measured against.

    uv run --group bench python bench/slots.py --procs 64 --slots 4 --stores etcd --bare grpc
    uv run --group bench python bench/slots.py --procs 64 --slots 4 --stores etcd --bare gateway

``bench/slots.py --bare`` runs its processes on this instead of the built file: the
same line of processes, the same clock, the same figures. It is not a lock and is
not safe to use as one. It keeps what every design of a first-come line on etcd must
send, and leaves out what the lock's rules add:

- A taker's key (``KEY/`` and its lease's ID) is its place in line and then its slot:
  the first N keys by creation hold the N slots. One lease serves both, of the
  holder's timeout, so a waiter that died would hold up the line for that long (the
  lock's place has a lease of its own, of 3 s, kept alive).
- There is no record: nothing an older version could read, and no count in force.
- Each process keeps one connection for all its calls (the lock opens one a call).

A take then sends: a lease granted; a transaction that puts the key and reads the
line's keys (keys only, no values); a watch; a read of the keys when it wakes; a
second watch and read for the first waiter; a put of its own key again when it got
in after waiting (below); and a revoke that releases. Each waiter wakes once per
step: the first waiter (place N) watches the deletes of the line, which each free a
slot it is next for; every waiter behind it watches the key just ahead of it, whose
put (that waiter got in) or delete (it left) moves it up one place.

Two transports send it: etcd's JSON gateway, through the built file's own HTTP/1.1
client (``gateway``), and gRPC through ``bench/h2grpc.py`` (``grpc``), a watch being a
stream on the process's one connection there.

What the lock's rules add can be added back to either, one at a time, joined with
``+`` (``grpc+record+call+values+place``):

- ``record``: the one record the lock keeps, so that older versions see it held:
  the holders' names at ``KEY``, which every take and release changes by a
  transaction compared against the revision it read, tried again when it lost its
  race. The line's reads read it too (a transaction of two ranges), so a take adds
  one request and a release two (a read and the transaction), as on the lock.
- ``call``: a connection of its own for each call (``acquire_within``, ``release``),
  as the lock opens one a call, instead of one a process.
- ``values``: the line's reads bring each place's value (a JSON text like the
  lock's places) and take it apart, remembered by value as the lock does, instead
  of keys only.
- ``place``: the cost of a place's lease of its own, as the lock's: a second lease,
  of 3 s, granted as a taker joins, kept alive each second while it waits (its
  watch kept across the beat) and left to run out after the take. The key stays
  on the first lease, so what the line decides is as without it.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Callable
from typing import Any

from h2grpc import Channel, message_fields, pb_field

__all__ = ["BareBusy", "BareSemaphore", "checked_kind", "line_range", "parts_of"]

# What the bare semaphore can add of the lock's rules (see the docstring).
_FLAGS = {"record", "call", "values", "place"}

# A place's lease and its beat (``place``), as the lock's.
_PLACE_TTL = 3
_BEAT = 1.0

# etcd's RangeRequest enums and WatchCreateRequest's filter (rpc.proto).
_ASCEND = 1
_BY_CREATION = 2
_NOPUT = 0


class BareBusy(Exception):
    """The wait ran out (the name the bench catches is ``LockBusy``)."""


def checked_kind(kind: str) -> tuple[str, set[str]]:
    """The transport and the flags ``kind`` names; ValueError if it names none."""
    transport, *flags = kind.split("+")
    if transport not in ("gateway", "grpc") or not set(flags) <= _FLAGS:
        raise ValueError(f"not a bare semaphore: {kind}")
    return transport, set(flags)


def parts_of(lock: str) -> tuple[str, int, bytes]:
    """The host, port and key of an address ``etcd://HOST:PORT/KEY``."""
    where, _, key = lock.split("://", 1)[1].partition("/")
    host, _, port = where.rpartition(":")
    return host, int(port), key.encode()


def line_range(key: bytes) -> tuple[bytes, bytes]:
    """Where the line of the lock at ``key`` lies: its keys' prefix (``KEY/``), and
    the end of their range. The record, when kept, is at ``key`` itself."""
    return key + b"/", key + b"0"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _field(message: bytes, number: int) -> int | bytes | None:
    """The last field ``number`` of a protobuf message (None if absent)."""
    found = None
    for got, value in message_fields(message):
        if got == number:
            found = value
    return found


def _revision_of(answer: bytes) -> int:
    """The revision in an answer's ResponseHeader (field 1; its revision is field 3)."""
    header = _field(answer, 1)
    revision = _field(header, 3) if isinstance(header, bytes) else None
    return revision if isinstance(revision, int) else 0


def _keys_of(range_answer: bytes) -> list[bytes]:
    """The keys of a RangeResponse (kvs, field 2; each KeyValue's key, field 1)."""
    keys = []
    for number, kv in message_fields(range_answer):
        if number == 2 and isinstance(kv, bytes):
            key = _field(kv, 1)
            keys.append(key if isinstance(key, bytes) else b"")
    return keys


# What a read of the record gave: its mod_revision (0: absent) and its value.
_Record = tuple[int, bytes]


def _record_of(range_answer: bytes) -> _Record:
    """The record a RangeResponse of its key gives (KeyValue: mod_revision 3, value 5)."""
    for number, kv in message_fields(range_answer):
        if number == 2 and isinstance(kv, bytes):
            revision, value = _field(kv, 3), _field(kv, 5)
            assert isinstance(revision, int)
            return revision, value if isinstance(value, bytes) else b""
    return 0, b""


def _ranges_of(txn_answer: bytes) -> list[bytes]:
    """The RangeResponses of a TxnResponse (responses 3; response_range 1), in order."""
    ranges = []
    for number, response in message_fields(txn_answer):
        if number == 3 and isinstance(response, bytes):
            ranged = _field(response, 1)
            if isinstance(ranged, bytes):
                ranges.append(ranged)
    return ranges


# Each place's value taken apart, by value (``values``), as the lock remembers them.
_PLACES: dict[bytes, Any] = {}


def _take_apart(value: bytes) -> None:
    """A place's value taken apart, once for each value, as the lock's looks do."""
    if value not in _PLACES:
        _PLACES[value] = json.loads(value)


class _Line:
    """What both transports share: the line's keys, its flags, the record as the
    last read found it, and the loop that changes the record."""

    def __init__(self, key: bytes, flags: set[str]) -> None:
        self.prefix, self.end = line_range(key)
        self.values = "values" in flags
        self.record_key = key if "record" in flags else None
        self.record: _Record = (0, b"")

    def swap(self, change: Callable[[bytes], bytes]) -> None:
        """Put ``change(value)`` as the record if it is still as last read; else read
        it again (the failed transaction's read) and try again."""
        for _ in range(100):
            revision, value = self.record
            changed, self.record = self._swap_once(revision, change(value))
            if changed:
                return
        raise OSError("the record kept changing")

    def _swap_once(self, revision: int, value: bytes) -> tuple[bool, _Record]:
        """One compared transaction: whether it put ``value``, and the record now."""
        raise NotImplementedError


class _Grpc(_Line):
    """The semaphore's requests by gRPC, on one connection."""

    def __init__(self, host: str, port: int, key: bytes, flags: set[str]) -> None:
        super().__init__(key, flags)
        self.channel = Channel(host, port)
        self.line = pb_field(1, self.prefix) + pb_field(2, self.end)
        self.line += pb_field(5, _ASCEND) + pb_field(6, _BY_CREATION)
        if not self.values:
            self.line += pb_field(8, 1)  # keys_only
        self.watch: tuple[bytes, int] | None = None  # the open watch: its request, stream

    def _keys(self, range_answer: bytes) -> list[bytes]:
        """The line's keys; with ``values``, each value taken apart too."""
        if not self.values:
            return _keys_of(range_answer)
        keys = []
        for number, kv in message_fields(range_answer):
            if number == 2 and isinstance(kv, bytes):
                fields = dict(message_fields(kv))
                key, value = fields.get(1, b""), fields.get(5, b"")
                assert isinstance(key, bytes) and isinstance(value, bytes)
                _take_apart(value)
                keys.append(key)
        return keys

    def _reads(self) -> bytes:
        """The RequestOps that read the line (and the record)."""
        ops = pb_field(2, pb_field(1, self.line))
        if self.record_key is not None:
            ops += pb_field(2, pb_field(1, pb_field(1, self.record_key)))
        return ops

    def _read(self, answer: bytes) -> tuple[int, list[bytes]]:
        """The line of a transaction's reads (and the record, kept)."""
        ranges = _ranges_of(answer)
        if self.record_key is not None:
            self.record = _record_of(ranges[-1])
        return _revision_of(answer), self._keys(ranges[0])

    def _swap_once(self, revision: int, value: bytes) -> tuple[bool, _Record]:
        assert self.record_key is not None
        compare = pb_field(1, 0) + pb_field(2, 2) + pb_field(3, self.record_key)
        compare += pb_field(6, revision)  # EQUAL, MOD
        put = pb_field(1, self.record_key) + pb_field(2, value)
        txn = pb_field(1, compare) + pb_field(2, pb_field(2, put))
        txn += pb_field(3, pb_field(1, pb_field(1, self.record_key)))
        answer = self.channel.call("/etcdserverpb.KV/Txn", txn)
        if _field(answer, 2):
            return True, (_revision_of(answer), value)
        return False, _record_of(_ranges_of(answer)[0])

    def read_record(self) -> None:
        assert self.record_key is not None
        answer = self.channel.call("/etcdserverpb.KV/Range", pb_field(1, self.record_key))
        self.record = _record_of(answer)

    def grant(self, ttl: int) -> int:
        answer = self.channel.call("/etcdserverpb.Lease/LeaseGrant", pb_field(1, ttl))
        lease = _field(answer, 2)
        assert isinstance(lease, int)
        return lease

    def revoke(self, lease: int) -> None:
        self.channel.call("/etcdserverpb.Lease/LeaseRevoke", pb_field(1, lease))

    def join(self, key: bytes, value: bytes, lease: int) -> tuple[int, list[bytes]]:
        put = pb_field(1, key) + pb_field(2, value) + pb_field(3, lease)
        ops = pb_field(2, pb_field(2, put)) + self._reads()
        return self._read(self.channel.call("/etcdserverpb.KV/Txn", ops))

    def keys(self) -> tuple[int, list[bytes]]:
        if self.record_key is not None:
            return self._read(self.channel.call("/etcdserverpb.KV/Txn", self._reads()))
        answer = self.channel.call("/etcdserverpb.KV/Range", self.line)
        return _revision_of(answer), self._keys(answer)

    def touch(self, key: bytes, value: bytes, lease: int) -> None:
        put = pb_field(1, key) + pb_field(2, value) + pb_field(3, lease)
        self.channel.call("/etcdserverpb.KV/Put", put)

    def wait(self, key: bytes, end: bytes | None, deletes: bool, seen: int, until: float) -> bool:
        """Watch ``key`` (to ``end``) from now: True once something changed after
        revision ``seen``, False at ``until``. A watch that ran out is kept for the
        next wait on the same keys (after a beat), as the lock keeps its own."""
        create = pb_field(1, key)
        if end is not None:
            create += pb_field(2, end)
        if deletes:
            create += pb_field(5, bytes([_NOPUT]))
        try:
            if self.watch is not None and self.watch[0] == create:
                stream = self.watch[1]
            else:
                self.end_watch()
                stream = self.channel.open("/etcdserverpb.Watch/Watch", pb_field(1, create))
                self.watch = (create, stream)
                created = self.channel.receive(stream, max(0.001, until - time.monotonic()))
                if _revision_of(created) > seen:
                    self.end_watch()
                    return True
            while (left := until - time.monotonic()) > 0:
                message = self.channel.receive(stream, left)
                if any(number == 11 for number, _ in message_fields(message)):
                    self.end_watch()
                    return True
            return False
        except TimeoutError:
            return False

    def end_watch(self) -> None:
        if self.watch is not None:
            self.channel.cancel(self.watch[1])
            self.watch = None

    def keep_alive(self, lease: int) -> None:
        """One keep-alive of ``lease``, on a stream of its own."""
        stream = self.channel.open("/etcdserverpb.Lease/LeaseKeepAlive", pb_field(1, lease))
        try:
            self.channel.receive(stream, 5.0)
        finally:
            self.channel.cancel(stream)

    def close(self) -> None:
        self.channel.close()


class _Gateway(_Line):
    """The semaphore's requests through etcd's JSON gateway, by the built file's
    HTTP/1.1 client: one connection for requests, one more for each watch."""

    def __init__(self, skf: Any, address: str, key: bytes, flags: set[str]) -> None:
        super().__init__(key, flags)
        skf._compile_carried("etcd_store")
        self.store = skf._EtcdStore(address)
        self.line: dict[str, Any] = {
            "key": _b64(self.prefix),
            "range_end": _b64(self.end),
            "sort_order": "ASCEND",
            "sort_target": "CREATE",
            "keys_only": not self.values,
        }
        self.watch: tuple[dict[str, Any], Any] | None = None  # the open watch: request, stream

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        self.store.next_step()
        return self.store.post(path, body)

    def _keys(self, ranged: dict[str, Any]) -> list[bytes]:
        """The line's keys; with ``values``, each value taken apart too."""
        kvs = ranged.get("kvs", [])
        if self.values:
            for kv in kvs:
                _take_apart(base64.b64decode(kv.get("value", "")))
        return [base64.b64decode(kv["key"]) for kv in kvs]

    def _reads(self) -> list[dict[str, Any]]:
        """The operations that read the line (and the record)."""
        ops = [{"request_range": self.line}]
        if self.record_key is not None:
            ops.append({"request_range": {"key": _b64(self.record_key)}})
        return ops

    def _read(self, answer: dict[str, Any]) -> tuple[int, list[bytes]]:
        """The line of a transaction's reads (and the record, kept)."""
        ranges = [op["response_range"] for op in answer["responses"] if "response_range" in op]
        if self.record_key is not None:
            self.record = self._record_of(ranges[-1])
        return int(answer["header"]["revision"]), self._keys(ranges[0])

    @staticmethod
    def _record_of(ranged: dict[str, Any]) -> _Record:
        kvs = ranged.get("kvs") or []
        if not kvs:
            return 0, b""
        return int(kvs[0]["mod_revision"]), base64.b64decode(kvs[0].get("value", ""))

    def _swap_once(self, revision: int, value: bytes) -> tuple[bool, _Record]:
        assert self.record_key is not None
        key = _b64(self.record_key)
        compare = {"key": key, "target": "MOD", "result": "EQUAL", "mod_revision": str(revision)}
        txn = {
            "compare": [compare],
            "success": [{"request_put": {"key": key, "value": _b64(value)}}],
            "failure": [{"request_range": {"key": key}}],
        }
        answer = self._post("/v3/kv/txn", txn)
        if answer.get("succeeded"):
            return True, (int(answer["header"]["revision"]), value)
        return False, self._record_of(answer["responses"][0]["response_range"])

    def read_record(self) -> None:
        assert self.record_key is not None
        self.record = self._record_of(self._post("/v3/kv/range", {"key": _b64(self.record_key)}))

    def grant(self, ttl: int) -> int:
        return int(self._post("/v3/lease/grant", {"TTL": str(ttl)})["ID"])

    def revoke(self, lease: int) -> None:
        self._post("/v3/lease/revoke", {"ID": str(lease)})

    def join(self, key: bytes, value: bytes, lease: int) -> tuple[int, list[bytes]]:
        put = {"key": _b64(key), "value": _b64(value), "lease": str(lease)}
        answer = self._post("/v3/kv/txn", {"success": [{"request_put": put}, *self._reads()]})
        return self._read(answer)

    def keys(self) -> tuple[int, list[bytes]]:
        if self.record_key is not None:
            return self._read(self._post("/v3/kv/txn", {"success": self._reads()}))
        answer = self._post("/v3/kv/range", self.line)
        return int(answer["header"]["revision"]), self._keys(answer)

    def touch(self, key: bytes, value: bytes, lease: int) -> None:
        self._post("/v3/kv/put", {"key": _b64(key), "value": _b64(value), "lease": str(lease)})

    def wait(self, key: bytes, end: bytes | None, deletes: bool, seen: int, until: float) -> bool:
        """As _Grpc.wait, on a connection of its own, kept across a beat as there."""
        create: dict[str, Any] = {"key": _b64(key)}
        if end is not None:
            create["range_end"] = _b64(end)
        if deletes:
            create["filters"] = ["NOPUT"]
        store = self.store
        try:
            if self.watch is not None and self.watch[0] == create:
                watcher = self.watch[1]
            else:
                self.end_watch()
                store.next_step()
                watcher = store._open(store.endpoints[0])
                self.watch = (create, watcher)
                payload = json.dumps({"create_request": create}).encode()
                watcher.send("/v3/watch", payload, store.headers, until)
                if watcher.start_answer(until) != 200:
                    raise OSError("the watch was refused")
                created = json.loads(watcher.readline(until))["result"]
                if int(created["header"]["revision"]) > seen:
                    self.end_watch()
                    return True
            while until - time.monotonic() > 0:
                if json.loads(watcher.readline(until))["result"].get("events"):
                    self.end_watch()
                    return True
            return False
        except TimeoutError:
            return False

    def keep_alive(self, lease: int) -> None:
        self._post("/v3/lease/keepalive", {"ID": str(lease)})

    def end_watch(self) -> None:
        if self.watch is not None:
            self.watch[1].close()
            self.watch = None

    def close(self) -> None:
        self.end_watch()
        self.store.close()


class BareSemaphore:
    """What ``bench/slots.py``'s processes call: ``acquire_within``, ``release`` and
    ``LockBusy``, as on the built file, over ``kind``: ``gateway``, or ``grpc`` with
    any of the flags the module's docstring names."""

    LockBusy = BareBusy

    def __init__(self, skf: Any, kind: str) -> None:
        self.skf = skf
        self.transport, self.flags = checked_kind(kind)
        self.transports: dict[str, _Grpc | _Gateway] = {}
        self.leases: dict[str, tuple[_Grpc | _Gateway, int]] = {}

    def _line(self, lock: str) -> _Grpc | _Gateway:
        """The connection a call on ``lock`` sends by: the process's, kept for its
        next calls (a new one each call with ``call``)."""
        if lock in self.transports:
            return self.transports[lock]
        host, port, key = parts_of(lock)
        line: _Grpc | _Gateway
        if self.transport == "grpc":
            line = _Grpc(host, port, key, self.flags)
        else:
            line = _Gateway(self.skf, lock, key, self.flags)
        if "call" not in self.flags:
            self.transports[lock] = line
        return line

    def _done(self, line: _Grpc | _Gateway) -> None:
        """A call's end: its connection closed, with ``call``."""
        if "call" in self.flags:
            line.close()

    def acquire_within(
        self, lock: str, owner: str, stale_after: float, wait: float, *, slots: int = 1
    ) -> dict[str, Any]:
        """Hold one of ``slots`` within ``wait`` seconds, first come, first served."""
        line = self._line(lock)
        try:
            return self._acquire(line, lock, owner, stale_after, wait=wait, slots=slots)
        finally:
            self._done(line)

    def _acquire(
        self,
        line: _Grpc | _Gateway,
        lock: str,
        owner: str,
        stale_after: float,
        *,
        wait: float,
        slots: int,
    ) -> dict[str, Any]:
        until = time.monotonic() + wait
        lease = line.grant(math.ceil(stale_after))
        place = line.grant(_PLACE_TTL) if "place" in self.flags else None
        mine = line.prefix + b"%016x" % lease
        value = json.dumps({"owner": owner, "since": time.time(), "stale_after": stale_after})
        seen, keys = line.join(mine, value.encode(), lease)
        name = owner.encode() + b"\n"  # its line in the record
        waited = False
        while mine in keys:
            at = keys.index(mine)
            if at < slots:
                line.end_watch()
                if line.record_key is not None:
                    line.swap(lambda names: names + name)
                if waited:
                    line.touch(mine, value.encode(), lease)  # wakes the waiter just behind
                self.leases[owner] = (line, lease)
                return {"acquired": True, "held_by": owner}
            waited = True
            woken = False
            while not woken and time.monotonic() < until:
                beat = min(until, time.monotonic() + _BEAT) if place is not None else until
                if at == slots:
                    woken = line.wait(line.prefix, line.end, True, seen, beat)
                else:
                    woken = line.wait(keys[at - 1], None, False, seen, beat)
                if not woken and place is not None:
                    line.keep_alive(place)
            if not woken:
                break
            seen, keys = line.keys()
        line.end_watch()
        line.revoke(lease)
        if place is not None:
            line.revoke(place)
        raise BareBusy(f"no slot of {lock} within {wait} s")

    def release(self, lock: str, owner: str) -> dict[str, Any]:
        """Free ``owner``'s slot (and its name in the record, with ``record``)."""
        line, lease = self.leases.pop(owner)
        if "call" in self.flags:
            line = self._line(lock)
        try:
            if line.record_key is not None:
                line.read_record()
                name = owner.encode() + b"\n"
                line.swap(lambda names: names.replace(name, b"", 1))
            line.revoke(lease)
        finally:
            self._done(line)
        return {"released": True}
