"""The etcd store, through etcd's HTTP/JSON gateway: the record at KEY on a lease (the
holder's timeout, on the server's clock), every change one transaction compared against
the revision it read, and waiters in line as keys on leases of their own that they keep
alive, each watching the key ahead of it. Compiled only for an etcd lock."""

from __future__ import annotations

import errno
import json
import os
import re
import time

from .contract import _OutcomeUnknown
from .decisions import _PLACE_TTL_SEC, _ahead_of, _holders, _live
from .http1 import _HttpConnection
from .interrupts import _SIGNALS_HELD, _Interrupts
from .outputs import _quoted
from .records import _bytes_of, _Look, _parse_record, _Place, _Record
from .server_store import (
    _TLS_FAILURE,
    _Pause,
    _place_of,
    _place_value,
    _ServerStore,
    _unknown_outcome,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .interface import _Store

_DURATION = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)"
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# gRPC's status codes, as etcd's gateway answers them.
_GRPC_UNAVAILABLE = 14
_GRPC_PERMISSION_DENIED = 7
_GRPC_UNAUTHENTICATED = 16


def _etcd_duration(text: str) -> float:
    """Seconds of an etcdctl duration (Go's format: ``5s``, ``500ms``, ``1m30s``)."""
    parts = re.findall(_DURATION, text)
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    if "".join(number + unit for number, unit in parts) != text or not seconds > 0:
        raise ValueError(
            f"ETCDCTL_COMMAND_TIMEOUT must be a duration like 5s or 500ms, not {text!r}"
        )
    return seconds


def _answer_field(answer: dict[str, Any], name: str, request: str, digits: bool = False) -> str:
    """The text field ``name`` of etcd's answer; OSError if it has none."""
    value = answer.get(name)
    if isinstance(value, str) and value and (value.isdigit() or not digits):
        return value
    raise _not_etcd(request, name)


def _not_etcd(request: str, name: str) -> OSError:
    return OSError(
        errno.EPROTO,
        f"the answer to {request} had no valid {name!r}: is this etcd's client port?",
    )


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def _wait_place(value: bytes, lease: object) -> _Place | None:
    """The place a line key gives; None if not one (or leaseless: it could never end)."""
    if not (isinstance(lease, str) and lease.isdigit()):
        return None
    return _place_of(lease, value)


class _EtcdStore(_ServerStore):
    """One lock on etcd: ``etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY``. The record is
    at KEY on a lease; beside it, after a NUL, the last holder's (``last``) and each
    waiter's place (``wait``, a NUL, its lease), on a lease the waiter keeps alive."""

    name = "etcd"
    env = "ETCDCTL_"
    port = "etcd's client"
    timeout_var = "ETCDCTL_COMMAND_TIMEOUT"
    form = "{0}://HOST:PORT[,HOST:PORT...]/KEY"
    many = True
    secure = "etcd+https"
    credentials = (
        "names a user: credentials never go in the address; set ETCDCTL_USER (and"
        " ETCDCTL_PASSWORD) instead"
    )

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        env = os.environ
        timeout = _etcd_duration(env.get("ETCDCTL_COMMAND_TIMEOUT") or "5s")
        super().__init__(address, timeout, prefix)
        key = self.key_text
        self.key = key.encode()
        self.last_key = (key + "\0last").encode()
        self.wait_prefix = (key + "\0wait\0").encode()
        self.slot_prefix = (key + "\0slot\0").encode()
        user, _, password = (env.get("ETCDCTL_USER") or "").partition(":")
        self.user = user
        self.password = password or env.get("ETCDCTL_PASSWORD", "")
        self.headers = {"Content-Type": "application/json"}
        self.connection: _HttpConnection | None = None
        self.watcher: _HttpConnection | None = None  # a waiter's open watch
        # The keys it watches: from a key to a range's end (None: that key alone).
        self.watching: tuple[bytes, bytes | None] | None = None
        self.pause = _Pause()
        self.spares: list[tuple[int, str]] = []  # leases of tries that lost their race
        self.record_on: str | None = None  # the lease the last change put the record on

    def _connect(self, endpoint: str) -> _HttpConnection:
        if self.connection is not None:
            self.connection.close()
        self.connection = None
        self.connection = self._open(endpoint)
        return self.connection

    def _open(self, endpoint: str) -> _HttpConnection:
        return _HttpConnection(endpoint, self.tls_context(), self.deadline)

    def post(self, path: str, body: dict[str, Any], *, outcome: str | None = None) -> Any:
        """POST ``body`` to the first endpoint that answers. ``outcome``: a write's."""
        if path != "/v3/auth/authenticate":
            self._authorize()
        payload = json.dumps(body).encode()
        # Each endpoint's first reason (later ones are often the deadline).
        failures: dict[str, str] = {}
        broken: set[str] = set()  # TLS failed: trying again cannot help
        while True:
            for endpoint in self.endpoints:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    break
                if endpoint in broken:
                    continue
                try:
                    status, answer = self._exchange(endpoint, path, payload, outcome)
                except _OutcomeUnknown:
                    raise
                except (OSError, ValueError) as exc:
                    reason = failures.setdefault(endpoint, self.describe(exc))
                    if reason.startswith(_TLS_FAILURE):
                        broken.add(endpoint)
                    continue
                if status == 200:
                    return answer
                code = answer.get("code")
                message = answer.get("message") or answer.get("error")
                if code == _GRPC_UNAVAILABLE or status in (502, 503, 504):
                    failures.setdefault(endpoint, message or f"HTTP status {status}")
                    continue
                raise self._refusal(code, message or f"HTTP status {status}")
            # No member answered (down, electing): nothing applied.
            left = self.deadline - time.monotonic()
            if left <= 0 or broken.issuperset(self.endpoints):
                break
            time.sleep(min(0.05, left))
        reasons = "; ".join(f"{endpoint}: {why}" for endpoint, why in failures.items())
        raise self.unreachable(", ".join(self.endpoints), reasons)

    def _authorize(self) -> None:
        if self.user and "Authorization" not in self.headers:
            credentials = {"name": self.user, "password": self.password}
            answer = self.post("/v3/auth/authenticate", credentials)
            self.headers["Authorization"] = _answer_field(answer, "token", "authenticate")

    def _exchange(
        self, endpoint: str, path: str, payload: bytes, outcome: str | None
    ) -> tuple[int, dict[str, Any]]:
        """One request to ``endpoint``: (status, answer)."""
        sent = False
        try:
            connection = self.connection
            if connection is None or connection.endpoint != endpoint or not connection.reusable:
                connection = self._connect(endpoint)
            connection.send(path, payload, self.headers, self.deadline)
            sent = True
            status = connection.start_answer(self.deadline)
            body = connection.rest(self.deadline)
            try:
                answer = json.loads(body.decode("utf-8") or "{}")
            except ValueError:
                raise ValueError("the answer was not JSON") from None
        except BaseException as exc:
            self.close()  # cut short (an interrupt too): never read it out of step
            if sent and outcome is not None and isinstance(exc, OSError | ValueError):
                raise self.lost_answer(endpoint, exc, outcome) from None
            raise
        return status, answer if isinstance(answer, dict) else {}

    def close(self) -> None:
        while self.spares:
            self.revoke(self.spares.pop()[1])
        for connection in (self.connection, self.watcher):
            if connection is not None:
                connection.close()
        self.connection = None
        self.watcher = None

    def by_hand(self) -> str:
        return f"delete its key (etcdctl del {_quoted(self.key.decode())})"

    def _refusal(self, code: object, message: str) -> OSError:
        if code == _GRPC_PERMISSION_DENIED:
            who = f"user {self.user!r}" if self.user else "an anonymous user"
            return PermissionError(
                errno.EACCES, f"etcd denied {who} access to the key {self.key.decode()}: {message}"
            )
        if "user name is empty" in message:
            return PermissionError(
                errno.EACCES, "etcd wants a user name: set ETCDCTL_USER (and ETCDCTL_PASSWORD)"
            )
        if code == _GRPC_UNAUTHENTICATED or "authentication failed" in message:
            return PermissionError(
                errno.EACCES,
                f"etcd refused authentication ({message}); check ETCDCTL_USER and ETCDCTL_PASSWORD",
            )
        return OSError(errno.EIO, f"etcd refused the request: {message} (code {code})")

    def look(self) -> _Look:
        return self._range(line=True)

    def read(self, line: bool = True) -> _Look:
        """As look (the transaction compares later); without the ``line``, only the
        record's, the last holder's and the slots' keys are read."""
        return self._range(line)

    def _range(self, line: bool) -> _Look:
        end = self.key + b"\1" if line else self.slot_prefix[:-1] + b"\1"
        answer = self.post("/v3/kv/range", {"key": _b64(self.key), "range_end": _b64(end)})
        try:
            seen = str(answer.get("header", {}).get("revision", "0"))
            return _looked(self.key, answer.get("kvs", []), seen)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise _not_etcd("range", "kvs") from None

    def _place_key(self, place: _Place) -> bytes:
        return self.wait_prefix + place.ticket.encode()

    def join(self, look: _Look, place: _Place, now: float) -> None:
        """A key on a lease of its own, kept alive by the waiter."""
        if _ahead_of(_live(look.line, now), place.ticket) is not None:
            return
        answer = self.post("/v3/lease/grant", {"TTL": str(int(_PLACE_TTL_SEC))})
        place.ticket = _answer_field(answer, "ID", "lease/grant", digits=True)
        place.since = int(now // 1)
        place.joined = True
        value = _place_value(place)
        put = {"key": _b64(self._place_key(place)), "value": _b64(value), "lease": place.ticket}
        self.post("/v3/kv/put", put)

    def prune(self, look: _Look, now: float) -> None:
        """Nothing to do: etcd ends the place of a waiter that stopped."""

    def beat(self, place: _Place) -> bool:
        answer = self.post("/v3/lease/keepalive", {"ID": place.ticket})
        result = answer.get("result")
        ttl = result.get("TTL") if isinstance(result, dict) else None
        return isinstance(ttl, str) and ttl.isdigit() and int(ttl) > 0

    def leave(self, place: _Place) -> None:
        self.next_step()
        place.joined = False
        self.revoke(place.ticket)

    def wait(self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int) -> bool:
        """Until the place just ahead is deleted, or (its turn) the record or a slot's
        key. Each watches only what it waits on: the place just ahead, alone, or (its
        turn) the record and the slots' keys, never the line. A take or a leave then
        wakes one waiter, and etcd streams each change to those it concerns."""
        turn = away == 0
        watching: tuple[bytes, bytes | None]
        if turn:
            wake = {self.key}
            watching = (self.key, self.slot_prefix[:-1] + b"\1")
        else:
            wake = {self._place_key(ahead[-1])}
            watching = (self._place_key(ahead[-1]), None)
        if self.watcher is not None and self.watching != watching:
            self._stop_watch()
        until = time.monotonic() + left
        try:
            if self.watcher is None and not self._watch(look.seen, until, watching):
                self.pause.sleep(left)
                return False
            while True:
                deleted = self._deleted(until)
                if wake & deleted:
                    return True
                if turn and any(key.startswith(self.slot_prefix) for key in deleted):
                    return True
        except TimeoutError:
            return False  # the stream goes on
        except (OSError, ValueError):
            self._stop_watch()
            self.pause.sleep(max(0.0, until - time.monotonic()))
            return False
        finally:
            self.next_step()

    def _stop_watch(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def _watch(self, seen: str, until: float, keys: tuple[bytes, bytes | None]) -> bool:
        """Watch ``keys`` (a key and a range's end, or None: that key alone) from after
        revision ``seen``: True once it streams."""
        self.deadline = min(until, time.monotonic() + self.timeout)
        key, end = keys
        watch = {"key": _b64(key)}
        if end is not None:
            watch["range_end"] = _b64(end)
        self.watching = keys
        if seen.isdigit() and seen != "0":
            watch["start_revision"] = str(int(seen) + 1)
        payload = json.dumps({"create_request": watch}).encode()
        try:
            self._authorize()
        except (OSError, ValueError):
            return False  # the next step says why
        for endpoint in self.endpoints:
            try:
                self.watcher = self._open(endpoint)
                self.watcher.send("/v3/watch", payload, self.headers, self.deadline)
                if self.watcher.start_answer(self.deadline) == 200 and self._news(until) == set():
                    return True
            except (OSError, ValueError):
                pass
            self._stop_watch()
        return False

    def _deleted(self, until: float) -> set[bytes]:
        news = self._news(until)
        if news is None:
            raise ConnectionResetError(errno.ECONNRESET, "the watch ended")
        return news

    def _news(self, until: float) -> set[bytes] | None:
        """The keys deleted in the watch's next message; None if the stream ended."""
        import base64

        assert self.watcher is not None
        try:
            message = json.loads(self.watcher.readline(until).decode("utf-8"))
            result = message["result"]
            if result.get("canceled"):
                return None
            # A PUT, the default, has no type in etcd's JSON.
            return {
                base64.b64decode(event["kv"]["key"])
                for event in result.get("events") or []
                if event.get("type") == "DELETE"
            }
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    def revoke(self, lease: str | None) -> None:
        if lease:
            try:
                self.post("/v3/lease/revoke", {"ID": lease})
            except OSError:
                pass  # it runs out by itself

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
            for lease in {look.lease, *gone} - kept:
                self.revoke(lease)
        if applied and place is not None:
            place.joined = False  # its lease runs out by itself
        return applied

    def _grant(self, seconds: float, granted: list[tuple[int, str]]) -> str:
        """A lease of ``seconds`` (rounded up), added to ``granted``: one granted for a
        try that lost its race, if one has that TTL, else a new one."""
        ttl = int(max(1, -(-seconds // 1)))
        for at, (spare_ttl, spare) in enumerate(self.spares):
            if spare_ttl == ttl:
                del self.spares[at]
                granted.append((ttl, spare))
                return spare
        answer = self.post("/v3/lease/grant", {"TTL": str(ttl)})
        lease = _answer_field(answer, "ID", "lease/grant", digits=True)
        granted.append((ttl, lease))
        return lease

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
        granted: list[tuple[int, str]] = []
        ops: list[dict[str, Any]] = []
        self.record_on = None
        if record is not None:
            lease = self._record_lease(record, look.lease, granted, ops)
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
        if place is not None:
            key = _b64(self._place_key(place))
            compare.append(
                {"key": key, "target": "CREATE", "result": "GREATER", "create_revision": "0"}
            )
            ops.append({"request_delete_range": {"key": key}})
        txn = {"compare": compare, "success": ops}
        if self.post("/v3/kv/txn", txn, outcome=outcome).get("succeeded"):
            return True
        self.spares += granted  # for the next try, or revoked at close
        return False

    def _record_lease(
        self,
        record: _Record,
        current: str | None,
        granted: list[tuple[int, str]],
        ops: list[dict[str, Any]],
    ) -> str | None:
        """The lease ``record`` goes on: one slot's, its holder's timeout. Of several,
        each new holder gets a lease of its timeout and a key on it; the record stays
        on a lease that outlives every slot: a release leaves it on its own; a take
        puts it on the new holder's when no other holder has a longer timeout (every
        other slot's lease was granted earlier), else on a lease of the longest."""
        if record.holders is None:
            assert record.stale_after is not None
            return self._grant(record.stale_after, granted)
        lease = None
        newest = 0.0
        for holder in record.holders:
            if holder.mark is None:
                assert holder.stale_after is not None
                holder.mark = self._grant(holder.stale_after, granted)
                marker = {"key": _b64(self._slot_key(holder.mark)), "lease": holder.mark}
                marker["value"] = _b64((holder.owner or "").encode())
                ops.append({"request_put": marker})
                lease, newest = holder.mark, holder.stale_after
        if lease is None:
            return current  # a release: the lease it is on outlives the rest
        longest = max(h.stale_after or 0.0 for h in record.holders)
        return lease if newest >= longest else self._grant(longest, granted)

    def _slot_key(self, lease: str) -> bytes:
        return self.slot_prefix + lease.encode()


def _looked(key: bytes, kvs: list[Any], seen: str) -> _Look:
    """The look at the lock ``key`` that its keys ``kvs`` (of one range) give: its
    record (on a lease: live), the last holder's, and the line in the order joined. Of
    several slots, a holder's is live while the key on its lease is."""
    import base64

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
        name = base64.b64decode(kv["key"])
        if name.startswith(slot_prefix):
            if kv.get("lease") == name[len(slot_prefix) :].decode("ascii", "replace"):
                live_slots.add(kv["lease"])
            continue
        value = base64.b64decode(kv.get("value", ""))
        if name.startswith(wait_prefix):
            place = _wait_place(value, kv.get("lease"))
            if place is not None:
                line.append((int(kv["create_revision"]), place))
            continue
        parsed = _parse_record(value, now)  # a foreign value is dated now
        if name == key:
            revision = _answer_field(kv, "mod_revision", "range", digits=True)
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
    return _Look(record, last, revision, lease, line=[p for _, p in line], seen=seen)


def _open_etcd(address: str) -> _Store:
    """The registry's opener: an etcd lock (mypy checks the class against _Store here)."""
    return _EtcdStore(address)
