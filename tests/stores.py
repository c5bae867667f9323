"""A lock on each store as the contract suite sees it: its address, and a way to plant a
value where the lock keeps its record and to read back what the store holds of it.

A planted value bypasses the product (another tool, an older helper, a person by hand),
so that the suite can put the same record, or the same foreign bytes, on every store.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from servers import etcd_post, redis_client, redis_keys

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# The longest proofs, and those that start a session server per store, run on the three
# stores: a Redis Cluster is Redis's code, and its routing has proofs of its own
# (test_cluster.py), as a session's renewal through it does.
THREE_STORES = pytest.mark.parametrize("store", ["file", "etcd", "redis"], indirect=True)
THREE_PLACES = pytest.mark.parametrize("place", ["file", "etcd", "redis"], indirect=True)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass
class StoreUnderTest:
    """One lock on one store: ``kind`` is "file", "etcd", "redis" or "cluster" (a Redis
    Cluster, through one node's address); ``lock`` its address."""

    kind: str
    lock: str

    def _server_key(self) -> tuple[str, str]:
        """(host:port, key) of a server lock's address."""
        where, key = self.lock.split("/", 3)[2:]
        return where, key

    def plant(self, value: bytes) -> None:
        """Put ``value`` where the lock keeps its record, with no lease or expiry."""
        if self.kind == "file":
            Path(self.lock).parent.mkdir(parents=True, exist_ok=True)
            Path(self.lock).write_bytes(value)
        elif self.kind == "etcd":
            client, key = self._server_key()
            etcd_post(client, "/v3/kv/put", {"key": _b64(key.encode()), "value": _b64(value)})
        else:
            redis_client(self.lock).set(self._server_key()[1], value)

    def remove(self) -> None:
        """Delete the lock's record by hand, as a person clearing it would."""
        if self.kind == "file":
            Path(self.lock).unlink()
        elif self.kind == "etcd":
            client, key = self._server_key()
            etcd_post(client, "/v3/kv/deleterange", {"key": _b64(key.encode())})
        else:
            redis_client(self.lock).delete(self._server_key()[1])

    def value(self) -> bytes | None:
        """What the store holds where the lock keeps its record (None: nothing)."""
        if self.kind == "file":
            try:
                return Path(self.lock).read_bytes()
            except FileNotFoundError:
                return None
        if self.kind == "etcd":
            client, key = self._server_key()
            kvs = etcd_post(client, "/v3/kv/range", {"key": _b64(key.encode())}).get("kvs", [])
            return base64.b64decode(kvs[0].get("value", "")) if kvs else None
        found: bytes | None = redis_client(self.lock).get(self._server_key()[1])
        return found

    def record(self) -> dict[str, Any]:
        """The record the lock holds, as JSON (it must hold one)."""
        value = self.value()
        assert value is not None, f"no record at {self.lock}"
        record: dict[str, Any] = json.loads(value)
        return record

    def holders(self) -> list[str]:
        """The owners a record of several slots, or of shared holds, lists."""
        return [holder["owner"] for holder in self.record()["holders"]]

    def left_behind(self) -> list[str]:
        """What the store holds of the lock: the names in a file lock's folder, or the
        keys of a server's lock (its record, last holder, line and places in line)."""
        return left_behind(self.lock)

    def line_tickets(self) -> list[str]:
        """The tickets the store keeps in the lock's line, lapsed places included, in
        the line's order (etcd: in the order of their keys)."""
        if self.kind == "file":
            try:
                text = Path(self.lock + ".skf-line").read_text(encoding="utf-8")
            except FileNotFoundError:
                return []
            return [json.loads(line)["ticket"] for line in text.splitlines()]
        if self.kind == "etcd":
            client, key = self._server_key()
            prefix = key.encode() + b"\0wait\0"
            ends = {"key": _b64(prefix), "range_end": _b64(prefix[:-1] + b"\1")}
            kvs = etcd_post(client, "/v3/kv/range", ends).get("kvs", [])
            return [base64.b64decode(kv["key"])[len(prefix) :].decode() for kv in kvs]
        line = redis_client(self.lock).lrange("{" + self._server_key()[1] + "}\0line", 0, -1)
        return [ticket.decode() for ticket in line]

    def plant_waiter(self, owner: str, ticket: str = "7") -> None:
        """Put a live place in the lock's line for ``owner`` (alive for a minute on a
        server; on a file, as if it had just beaten), as a waiter would keep it."""
        since = shown_time(0)
        place = {"owner": owner, "since": since, "stale_after_seconds": 3600}
        if self.kind == "file":
            line = Path(self.lock + ".skf-line")
            line.parent.mkdir(parents=True, exist_ok=True)
            entry = {"ticket": ticket, **place, "beat": time.time()}
            with line.open("a") as out:
                out.write(json.dumps(entry) + "\n")
        elif self.kind == "etcd":
            client, key = self._server_key()
            lease = etcd_post(client, "/v3/lease/grant", {"TTL": "60"})["ID"]
            name = key.encode() + b"\0wait\0" + lease.encode()
            put = {"key": _b64(name), "value": _b64(json.dumps(place).encode()), "lease": lease}
            etcd_post(client, "/v3/kv/put", put)
        else:
            key = self._server_key()[1]
            client = redis_client(self.lock)
            base = "{" + key + "}"
            client.set(f"{base}\0wait\0{ticket}", json.dumps(place), px=60_000)
            client.rpush(f"{base}\0line", ticket)


def left_behind(lock: str) -> list[str]:
    """What the store of ``lock`` holds of it (see :meth:`StoreUnderTest.left_behind`)."""
    if lock.startswith("redis://"):
        return redis_keys(lock)
    if not lock.startswith("etcd://"):
        folder = Path(lock).parent
        return sorted(os.listdir(folder)) if folder.exists() else []
    client, key = lock.split("/", 3)[2:]
    ends = {"key": _b64(key.encode()), "range_end": _b64(key.encode() + b"\1")}
    kvs = etcd_post(client, "/v3/kv/range", ends).get("kvs", [])
    return sorted(base64.b64decode(kv["key"]).decode()[len(key) :] for kv in kvs)


def planted_record(owner: str | None, acquired_at: str, **fields: object) -> bytes:
    """A record as a file holds it, acquired at ``acquired_at`` (see :func:`shown_time`),
    with ``fields`` after (none: the tool's name alone, as older helpers wrote)."""
    content: dict[str, object] = {"owner": owner, "acquired_at": acquired_at}
    content.update(fields or {"tool": "skf-run-lock"})
    return json.dumps(content).encode() + b"\n"


def shown_time(seconds_ago: float, since: str | None = None) -> str:
    """The time ``seconds_ago`` before now (or before ``since``, a shown time) as records
    and outputs show it."""
    base = datetime.now(UTC) if since is None else datetime.strptime(since, TIME_FORMAT)
    return (base.replace(tzinfo=UTC) - timedelta(seconds=seconds_ago)).strftime(TIME_FORMAT)


@dataclass
class PlaceUnderTest:
    """A place to list on one store: a folder, or a server's address whose KEY is a
    prefix; ``lock(name)`` is a lock under it, ``store(name)`` that lock to plant on."""

    kind: str
    under: str

    def lock(self, name: str) -> str:
        if self.kind == "file":  # "a/b" is a folder and a file, in this system's words
            return os.path.join(self.under, *name.split("/"))
        return self.under + name

    def store(self, name: str) -> StoreUnderTest:
        return StoreUnderTest(self.kind, self.lock(name))


def status_now(skf: ModuleType, store: StoreUnderTest) -> dict[str, Any]:
    """The lock's status, read in this process: the cheap way to wait for a state, where
    a poll through the CLI would start a process each time. What a test asserts it
    still asks the CLI."""
    status: dict[str, Any] = skf.status(store.lock, 60.0)
    return status
