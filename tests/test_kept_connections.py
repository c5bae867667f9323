"""A process keeps its connection to a server from call to call: one per server, user,
secret and TLS files, lent to one call at a time, replaced when the server restarted
or a proxy reset it between calls, never used by a forked child. Every call still
answers what it answered on a connection of its own, with the same exit code: each
test counts the connections on the wire and checks the outputs whole."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import WORKER, Run, posix_only
from pki import Pki
from proxy import proxy_to
from servers import (
    STARTED_BY_THE_TEST,
    Etcd,
    Redis,
    RedisCluster,
    restarted_in_place,
    start_etcd,
    start_redis,
    start_redis_with_agent,
    start_replica,
    started_again,
)
from sessions import Served
from wire import after_each_send, connections_to, etcd_requests

OWNER = "wf:kept:r1"


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[Redis]:
    """A Redis of this test's own: no connection to it is kept from an earlier test."""
    (tmp_path / "redis").mkdir()
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


def sockets_sending(monkeypatch: pytest.MonkeyPatch) -> list[socket.socket]:
    """The socket of each request sent from now on (plain TCP), in order."""
    sockets: list[socket.socket] = []
    after_each_send(monkeypatch, lambda sock, data: sockets.append(sock))
    return sockets


def acquired(lock: str, owner: str, *, refreshed: bool = False) -> dict[str, Any]:
    """The keys of an acquire's output that a test can know before it runs."""
    return {"acquired": True, "refreshed": refreshed, "lock": lock, "owner": owner}


def released(lock: str, owner: str) -> dict[str, Any]:
    return {
        "released": True,
        "reason": None,
        "lock": lock,
        "owner": owner,
        "held_by": None,
        "held_since": None,
        "message": f"released {lock} held by {owner}",
    }


def part_of(result: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    return {key: result[key] for key in keys}


# --- One connection serves every call


def test_one_kept_connection_serves_every_call_of_a_process(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Takes, renewals, looks and releases, one after another, all go over the one
    connection the first call made."""
    opened = connections_to(monkeypatch, own_redis.port)
    sockets = sockets_sending(monkeypatch)
    lock = own_redis.url("locks/kept")
    for _ in range(5):
        taken = skf.acquire(lock, OWNER, 60.0)
        assert part_of(taken, acquired(lock, OWNER)) == acquired(lock, OWNER)
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER)) == acquired(lock, OWNER, refreshed=True)
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        assert skf.release(lock, OWNER) == released(lock, OWNER)
    assert len(opened) == 1 and set(sockets) == set(opened)


def test_one_kept_connection_serves_every_call_on_etcd(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd's gateway keeps its connection the same way: the requests of many calls go
    over one socket (kept from an earlier test, or made by the first call)."""
    port = int(etcd.client.rpartition(":")[2])
    opened = connections_to(monkeypatch, port)
    sockets = sockets_sending(monkeypatch)
    sent = etcd_requests(monkeypatch)
    for _ in range(3):
        assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
        assert skf.status(etcd_lock, 60.0)["held_by"] == OWNER
        assert skf.release(etcd_lock, OWNER)["released"]
    assert len(sent) >= 3 * 4 and len(set(sockets)) == 1 and len(opened) <= 1


def test_a_kept_connection_is_never_lent_for_other_credentials(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main: Callable[..., Run]
) -> None:
    """A connection authenticated for one user and password serves only calls made with
    both (it is authenticated once): a wrong password is refused as on a connection of
    its own (exit 2, naming REDISCLI_AUTH), another user gets a connection of its own."""
    server = start_redis_with_agent(
        tmp_path, "get mget pttl lrange set del rpush lrem pexpire watch unwatch multi exec time"
    )
    try:
        opened = connections_to(monkeypatch, server.port)
        auths: list[bytes] = []
        after_each_send(
            monkeypatch, lambda sock, data: auths.append(data) if b"AUTH" in data else None
        )
        monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
        lock = server.url("locks/creds", user="agent")
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        assert skf.acquire(lock, OWNER, 60.0)["refreshed"]
        assert len(opened) == 1 and len(auths) == 1
        monkeypatch.setenv("REDISCLI_AUTH", "wrong-pw")
        refused = main("status", "--lock", lock)
        assert refused.code == 2
        assert "Redis refused user 'agent'" in refused.error
        assert "check the user in the address and REDISCLI_AUTH" in refused.error
        assert len(opened) == 2  # its own connection, refused at AUTH
        monkeypatch.setenv("REDISCLI_AUTH", "root-pw")
        root = server.url("locks/creds")
        assert skf.status(root, 60.0)["held_by"] == OWNER
        assert len(opened) == 3
        monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
        assert skf.release(lock, OWNER)["released"]
        assert len(opened) == 3  # the agent's, kept
    finally:
        server.stop()


def test_a_password_changed_on_the_server_keeps_a_connection_signed_in_and_a_new_one_needs_it(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main: Callable[..., Run]
) -> None:
    """A kept connection stays signed in when its user's password changes on the server,
    as Redis keeps any connection signed in; once that connection is gone, the old
    password is refused as on a connection of its own (exit 2, naming REDISCLI_AUTH,
    showing neither password), and the new one is served on a connection of its own."""
    server = start_redis_with_agent(
        tmp_path, "get mget pttl lrange set del rpush lrem pexpire watch unwatch multi exec time"
    )
    try:
        root = server.client(password="root-pw")
        assert root.ping()  # its connection, made before the count
        opened = connections_to(monkeypatch, server.port)
        monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
        lock = server.url("locks/password", user="agent")
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        root.acl_setuser("agent", enabled=True, reset_passwords=True, passwords=["+agent-pw2"])
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER)) == acquired(lock, OWNER, refreshed=True)
        assert len(opened) == 1  # still signed in: kept
        assert root.client_kill_filter(user="agent") == 1  # the kept connection, gone
        refused = main("status", "--lock", lock)
        assert refused.code == 2
        assert "Redis refused user 'agent'" in refused.error
        assert "check the user in the address and REDISCLI_AUTH" in refused.error
        assert "agent-pw" not in refused.error
        assert len(opened) == 2  # a new connection, refused at AUTH
        monkeypatch.setenv("REDISCLI_AUTH", "agent-pw2")
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert len(opened) == 3  # signed in with the new password
        assert root.keys("*") == []  # the record and the last holder's copy, deleted
    finally:
        server.stop()


# --- A kept connection that broke between calls


@posix_only(STARTED_BY_THE_TEST)
def test_a_redis_restarted_between_two_calls_costs_one_new_connection(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, main: Callable[..., Run]
) -> None:
    """Redis stopped by its process id and started again on its port between two calls:
    the kept connection is found closed before anything is sent on it, and the next
    call answers on a new one as a fresh process would (the lock went with the server,
    which keeps nothing on disk)."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    server = start_redis(tmp_path / "a")
    opened = connections_to(monkeypatch, server.port)
    lock = server.url("locks/restarted")
    try:
        assert main("acquire", "--lock", lock, "--owner", OWNER).code == 0
        assert main("status", "--lock", lock).json["held_by"] == OWNER
        assert len(opened) == 1
        server.stop()
        server = start_redis(tmp_path / "b", port=server.port)
        before = len(opened)  # and the ones start_redis made, asking if it answers
        status = main("status", "--lock", lock)
        assert status.code == 0 and status.json["state"] == "free"
        taken = main("acquire", "--lock", lock, "--owner", OWNER)
        assert taken.code == 0 and taken.json["refreshed"] is False
        released_now = main("release", "--lock", lock, "--owner", OWNER)
        assert released_now.json == released(lock, OWNER)
        assert len(opened) == before + 1
    finally:
        server.stop()


@posix_only(STARTED_BY_THE_TEST)
def test_an_etcd_restarted_in_place_under_a_hold_costs_its_renewal_one_new_connection(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """etcd killed and started again on its ports with its data while a process holds
    a lock: the kept connection is found broken, the renewal answers on a new one as a
    fresh process's would (the record and its lease outlived the restart), another
    owner is still refused, and the release frees it."""
    server = start_etcd(tmp_path / "etcd")
    port = int(server.client.rsplit(":", 1)[1])
    opened = connections_to(monkeypatch, port)
    lock = server.url("locks/restarted-in-place")
    try:
        assert skf.acquire(lock, OWNER, 60.0)["acquired"] is True
        fence = skf.status(lock, 60.0)["fence"]
        assert len(opened) == 1
        server = restarted_in_place(server)
        before = len(opened)
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER, refreshed=True)) == acquired(
            lock, OWNER, refreshed=True
        )
        assert renewed["stale_replaced"] is None
        refused = skf.acquire(lock, "wf:other:r1", 60.0)
        assert refused["acquired"] is False and refused["held_by"] == OWNER
        assert skf.status(lock, 60.0)["fence"] == fence
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert len(opened) == before + 1
    finally:
        server.stop()


def test_a_cluster_node_restarted_in_place_is_out_of_reach_then_served_anew(
    skf: ModuleType, own_cluster: RedisCluster
) -> None:
    """The node that keeps a lock's key is killed, then started again on its ports with
    its cluster config (and no data, as it keeps none on disk), while calls go through
    another node: a renewal while it is down fails naming it, as a fresh process's
    would; once it is back the owner takes the lock anew, another owner is refused,
    and the release frees it."""
    key = own_cluster.key_served_by(1, "locks/node-restarted")
    lock = own_cluster.url(key, node=0)
    assert skf.acquire(lock, OWNER, 60.0)["acquired"] is True
    node = own_cluster.nodes[1]
    stopped = node.proc
    assert stopped is not None
    node.stop()
    with pytest.raises(ConnectionRefusedError, match=f"127.0.0.1:{node.port} refused"):
        skf.acquire(lock, OWNER, 60.0)
    node.proc = started_again(stopped)
    own_cluster.wait_ok()
    taken = skf.acquire(lock, OWNER, 60.0)
    assert part_of(taken, acquired(lock, OWNER)) == acquired(lock, OWNER)
    assert skf.acquire(lock, "wf:other:r1", 60.0)["acquired"] is False
    assert skf.release(lock, OWNER) == released(lock, OWNER)


def test_a_cluster_failover_moves_a_hold_to_the_promoted_replica_and_calls_follow_it(
    skf: ModuleType, own_cluster: RedisCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The primary that keeps a held lock's keys hands its slots to its replica (a
    manual failover, as an operator or the cluster itself makes one) while this process
    keeps its connection to the old primary: the next renewal is redirected to the
    promoted replica, on one new connection that the calls after it keep using, and
    renews the hold, which the replica has; another owner is still refused, and the
    release frees the lock on the new primary."""
    key = own_cluster.key_served_by(1, "locks/failover")
    lock = own_cluster.url(key, node=0)
    replica = start_replica(own_cluster, tmp_path / "replica", of=1)
    try:
        taken = skf.acquire(lock, OWNER, 60.0)
        assert part_of(taken, acquired(lock, OWNER)) == acquired(lock, OWNER)
        replica.client().execute_command("CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 30
        while replica.client().execute_command("ROLE")[0] != b"master":
            assert time.monotonic() < deadline, "the replica was never promoted"
            time.sleep(0.05)
        own_cluster.wait_ok()
        promoted = replica.client()
        assert promoted.ping()  # its connection, made before the count
        opened = connections_to(monkeypatch, replica.port)
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER)) == acquired(lock, OWNER, refreshed=True)
        assert skf.acquire(lock, "wf:other:r1", 60.0)["acquired"] is False
        assert promoted.get(key) is not None  # the hold is on the new primary
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert promoted.get(key) is None
        assert skf.status(lock, 60.0)["state"] == "free"
        assert len(opened) == 1  # the promoted replica's, kept
    finally:
        replica.stop()


def test_a_connection_a_proxy_reset_between_calls_is_replaced(
    own_redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
    main: Callable[..., Run],
    cli: Callable[..., Run],
) -> None:
    """A proxy resets the kept connection (a RST) between two calls, and resets every
    new one until it is mended: the next call sees the reset before it sends and makes
    a new connection; while new ones are reset too it fails as a call of its own does."""
    with proxy_to(own_redis.port) as proxy:
        opened = connections_to(monkeypatch, proxy.port)
        monkeypatch.setenv("SKF_REDIS_TIMEOUT", "2")
        lock = f"redis://127.0.0.1:{proxy.port}/locks/reset"
        assert main("acquire", "--lock", lock, "--owner", OWNER).code == 0
        proxy.cut("reset")
        failed = main("status", "--lock", lock)
        fresh = cli("status", "--lock", lock)  # a process of its own, nothing kept
        assert failed.code == fresh.code == 2
        assert failed.error == fresh.error
        assert failed.error.startswith(
            f"the lock could not be read or written: Redis could not be reached within 2 s"
            f" (SKF_REDIS_TIMEOUT) at 127.0.0.1:{proxy.port}: "
        )
        proxy.mend()
        assert len(opened) >= 2
        before = len(opened)
        assert main("status", "--lock", lock).json["held_by"] == OWNER
        released_now = main("release", "--lock", lock, "--owner", OWNER)
        assert released_now.code == 0 and released_now.json == released(lock, OWNER)
        assert len(opened) == before + 1


def test_a_kept_connection_reset_as_its_call_speaks_is_replaced_at_once(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that forgot the kept connection while it was idle resets it only as the
    next call's request reaches it (nothing showed before it was sent): the request,
    a read, is sent again at once on a new connection, and the call answers as usual."""
    with proxy_to(own_redis.port) as proxy:
        opened = connections_to(monkeypatch, proxy.port)
        lock = f"redis://127.0.0.1:{proxy.port}/locks/stale"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        assert len(opened) == 1
        proxy.cut("stale")
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER)) == acquired(lock, OWNER, refreshed=True)
        assert len(opened) == 2
        proxy.cut("stale")
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert len(opened) == 3


@pytest.mark.timeout(60)
@pytest.mark.parametrize("store", ["redis", "etcd"])
def test_a_kept_connection_a_firewall_dropped_without_a_word_is_replaced(
    skf: ModuleType,
    own_redis: Redis,
    etcd: Etcd,
    store: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy (a NAT, a firewall) forgets the kept connection while it is idle and
    swallows, without a word, whatever comes on it; a new connection passes. The next
    call's first request, a read, gets no answer on it: it is sent again on a new
    connection within the call's deadline, and the call answers as a process of its
    own does, rather than failing as if the server could not be reached."""
    port = own_redis.port if store == "redis" else int(etcd.client.rpartition(":")[2])
    with proxy_to(port) as proxy:
        monkeypatch.setenv("SKF_REDIS_TIMEOUT", "4")
        monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "4s")
        lock = f"{store}://127.0.0.1:{proxy.port}/skf-tests/firewall-forgot-{store}"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        proxy.cut("forget")
        renewed = skf.acquire(lock, OWNER, 60.0)
        assert part_of(renewed, acquired(lock, OWNER)) == acquired(lock, OWNER, refreshed=True)
        proxy.cut("forget")
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        proxy.cut("forget")
        assert skf.release(lock, OWNER) == released(lock, OWNER)


def test_a_kept_connection_that_said_something_unasked_is_not_lent(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes nobody asked for came on the kept connection while it was idle (an error a
    server says as it drops a client): the next call sees them before it sends, and
    makes a new connection rather than read them as its answer."""
    with proxy_to(own_redis.port) as proxy:
        opened = connections_to(monkeypatch, proxy.port)
        lock = f"redis://127.0.0.1:{proxy.port}/locks/chatter"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        proxy.cut("chatter")
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert len(opened) == 2


def test_an_etcd_connection_reset_as_its_call_speaks_is_replaced_at_once(
    skf: ModuleType, etcd: Etcd, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The same on etcd: a kept connection reset by a proxy as the next call's first
    request reaches it is replaced at once, and the call answers as usual."""
    port = int(etcd.client.rpartition(":")[2])
    with proxy_to(port) as proxy:
        opened = connections_to(monkeypatch, proxy.port)
        lock = f"etcd://127.0.0.1:{proxy.port}/skf-tests/{request.node.name}"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        assert len(opened) == 1
        proxy.cut("stale")
        assert skf.status(lock, 60.0)["held_by"] == OWNER
        assert len(opened) == 2
        proxy.cut("stale")
        assert skf.release(lock, OWNER)["released"]
        assert len(opened) == 3


def test_a_connection_idle_too_long_is_not_lent(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection idle for a minute is closed rather than lent: a NAT or a proxy may
    have dropped it without a word, and a request sent into that silence would wait
    out its deadline. Within the minute it is lent."""
    opened = connections_to(monkeypatch, own_redis.port)
    real = skf._SEAMS.clock
    later = [0.0]
    monkeypatch.setattr(skf._SEAMS, "clock", lambda: real() + later[0])
    lock = own_redis.url("locks/idle")
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    later[0] = 59.0
    assert skf.status(lock, 60.0)["held_by"] == OWNER
    assert len(opened) == 1
    later[0] = 59.0 + 61.0
    assert skf.release(lock, OWNER) == released(lock, OWNER)
    assert len(opened) == 2


# --- A WATCH and a transaction on a kept connection


def test_a_watch_a_refused_call_left_on_its_connection_costs_the_next_call_nothing(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Run]
) -> None:
    """A refused take reads under WATCH and sends no transaction: its WATCH stays on the
    kept connection. The next call on it undoes it first (UNWATCH, in the same round
    trip), so a change another process made since does not fail its transaction."""
    lock = own_redis.url("locks/watched")
    other = cli("acquire", "--lock", lock, "--owner", "wf:other:1")
    assert other.code == 0
    opened = connections_to(monkeypatch, own_redis.port)
    sent: list[bytes] = []
    after_each_send(monkeypatch, lambda sock, data: sent.append(data))
    refused = skf.acquire(lock, OWNER, 60.0)
    assert refused["acquired"] is False and refused["held_by"] == "wf:other:1"
    assert cli("release", "--lock", lock, "--owner", "wf:other:1").json["released"]
    sent.clear()
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    assert len(opened) == 1
    assert [data.count(b"\r\nEXEC\r\n") for data in sent] == [0, 1]  # one read, one change
    assert sent[0].startswith(b"*1\r\n$7\r\nUNWATCH\r\n*2\r\n$5\r\nWATCH\r\n")
    assert skf.release(lock, OWNER) == released(lock, OWNER)


def test_a_transaction_whose_send_failed_is_never_sent_again_without_its_watch(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection fails as a take's transaction is sent, before any of it left, and
    meanwhile another run took the lock: the take reads again (on a new connection) and
    is refused. Sent again as it was, it would run without its WATCH: two holders."""
    lock = own_redis.url("locks/unsent")
    client = own_redis.client()
    real = socket.socket.sendall
    failed: list[bytes] = []

    def sendall(sock: socket.socket, data: Any, *args: Any) -> None:
        if b"\r\nMULTI\r\n" in bytes(data) and b"wf:kept" in bytes(data) and not failed:
            failed.append(bytes(data))
            assert skf.acquire(lock, "wf:other:1", 60.0)["acquired"]  # another connection
            raise ConnectionResetError(104, "Connection reset by peer")
        real(sock, data, *args)

    monkeypatch.setattr(socket.socket, "sendall", sendall)
    refused = skf.acquire(lock, OWNER, 60.0)
    assert failed and refused["acquired"] is False and refused["held_by"] == "wf:other:1"
    assert json.loads(client.get("locks/unsent"))["owner"] == "wf:other:1"
    assert skf.release(lock, "wf:other:1")["released"]


# --- Threads, forks, TLS and a Cluster


def test_threads_share_the_kept_connections_one_call_a_connection_at_a_time(
    skf: ModuleType, own_redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four threads take and release their locks at once, as serve's tool calls and
    renewals do: each call has a connection to itself (a WATCH is per connection),
    none more than four are ever made, and every answer is its own call's."""
    opened = connections_to(monkeypatch, own_redis.port)
    failures: list[BaseException] = []

    def pairs(number: int) -> None:
        lock = own_redis.url(f"locks/thread-{number}")
        owner = f"wf:thread:{number}"
        try:
            for _ in range(40):
                assert part_of(skf.acquire(lock, owner, 60.0), acquired(lock, owner)) == (
                    acquired(lock, owner)
                )
                assert skf.status(lock, 60.0)["held_by"] == owner
                assert skf.release(lock, owner) == released(lock, owner)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=pairs, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    assert 1 <= len(opened) <= 4


@pytest.mark.timeout(120)
def test_serve_shares_kept_connections_between_tool_calls_and_renewals(
    own_redis: Redis, serving: Callable[..., Served]
) -> None:
    """serve answers tool calls and renews a session hold on threads of their own: they
    share the kept connections (one, two where a call meets a renewal), and each
    answers as it would alone."""
    client = own_redis.client()

    def accepted() -> int:
        """The connections the server accepted so far (the client's own among them)."""
        return int(client.info("stats")["total_connections_received"])

    before = accepted()
    served = serving("--lease", "3s")  # renewed every second
    served.initialize()
    lock = own_redis.url("locks/served")
    taken = served.tool("acquire", lock=lock, owner="wf:session")
    assert taken["acquired"] is True and taken["held_by"] == taken["owner"]
    renewed_at = {json.loads(client.get("locks/served"))["acquired_at"]}
    until = time.monotonic() + 60
    while len(renewed_at) < 4 and time.monotonic() < until:  # three renewals
        renewed_at.add(json.loads(client.get("locks/served"))["acquired_at"])
        time.sleep(0.05)
    assert len(renewed_at) == 4
    status = served.tool("status", lock=lock)
    assert status["held_by"] == taken["owner"] and status["fence"] == taken["fence"]
    gone = served.tool("release", lock=lock, owner=taken["owner"])
    assert gone["released"] is True and gone["reason"] is None
    served.end_input()
    assert served.exit_code() == 0, served.err()
    assert accepted() - before <= 2


@posix_only("fork")
@pytest.mark.timeout(60)
def test_a_forked_child_makes_its_own_connection_and_leaves_its_parents(
    redis_lock: str,
) -> None:
    """A process that keeps a connection forks: the child never uses its parent's (it
    makes its own, and lets go of its copy without a word on the wire), and the parent's
    connection serves the parent's next call after the child has ended."""
    done = subprocess.run(
        [sys.executable, str(WORKER), "fork-kept", redis_lock, OWNER],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [
        {"who": "parent", "acquired": True, "refreshed": False, "made": 1},
        {"who": "child", "released": True, "made": 1},
        {"who": "parent", "acquired": True, "refreshed": False, "made": 0},
    ]


# A process whose first call looks its server's name up in a thread, slowly; it forks
# while that lookup is under way. The child's resolver answers at once.
FORK_DURING_A_LOOKUP = """
import json, os, socket, sys, threading, time
sys.path.insert(0, {tests!r})
from loader import load_script
skf = load_script()
real = socket.getaddrinfo
stalling = [True]
def getaddrinfo(host, port, *args, **kwargs):
    if host == "kept-name.invalid":
        if stalling[0]:
            time.sleep(2.0)
        host = "127.0.0.1"
    return real(host, port, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
lock = {lock!r}
first = threading.Thread(target=skf.acquire, args=(lock, "wf:parent:r1", 60.0))
first.start()
time.sleep(0.5)  # its lookup under way, in a thread of its own
child = os.fork()
if child == 0:
    stalling[0] = False
    try:
        taken = skf.acquire(lock + "-child", "wf:child:r2", 60.0)
        print(json.dumps({{"who": "child", "acquired": taken["acquired"]}}), flush=True)
    except OSError as exc:
        print(json.dumps({{"who": "child", "error": str(exc)}}), flush=True)
    os._exit(0)
os.waitpid(child, 0)
first.join()
print(json.dumps({{"who": "parent", "held_by": skf.status(lock, 60.0)["held_by"]}}), flush=True)
"""


@posix_only("fork")
@pytest.mark.timeout(60)
def test_a_child_forked_while_its_parent_looks_a_name_up_looks_it_up_itself(
    redis: Redis, request: pytest.FixtureRequest
) -> None:
    """A process forks while one of its threads waits for its server's name to be
    looked up (a slow resolver). That lookup's thread is the parent's: the child has
    none. The child's call looks the name up itself and takes its lock, as a process
    of its own would; it never waits for an answer that cannot come to it, nor fails
    with "no answer to the name lookup"."""
    key = f"skf-tests/{request.node.name}"
    lock = f"redis://kept-name.invalid:{redis.port}/{key}"
    code = FORK_DURING_A_LOOKUP.format(tests=str(Path(__file__).parent), lock=lock)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
        env={**os.environ, "SKF_REDIS_TIMEOUT": "3"},
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [
        {"who": "child", "acquired": True},
        {"who": "parent", "held_by": "wf:parent:r1"},
    ]


def test_a_tls_connection_with_a_client_certificate_is_kept_for_its_files(
    skf: ModuleType, tls_redis: Redis, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over TLS with a client certificate, one handshake serves every call; a
    certificate given from another file is a connection of its own."""
    monkeypatch.setenv("SKF_REDIS_CACERT", pki.path("ca.pem"))
    monkeypatch.setenv("SKF_REDIS_CERT", pki.path("client.pem"))
    monkeypatch.setenv("SKF_REDIS_KEY", pki.path("client.key"))
    opened = connections_to(monkeypatch, tls_redis.port)
    lock = tls_redis.url("locks/tls-kept")
    for _ in range(3):
        assert part_of(skf.acquire(lock, OWNER, 60.0), acquired(lock, OWNER)) == (
            acquired(lock, OWNER)
        )
        assert skf.release(lock, OWNER) == released(lock, OWNER)
    assert len(opened) <= 1  # one, or one an earlier test of this module kept
    before = len(opened)
    copied = tmp_path / "client-copy.pem"
    shutil.copy(pki.path("client.pem"), copied)
    monkeypatch.setenv("SKF_REDIS_CERT", str(copied))
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    assert skf.release(lock, OWNER) == released(lock, OWNER)
    assert len(opened) == before + 1


def test_a_cluster_slot_moved_between_calls_is_followed_and_kept(
    skf: ModuleType, redis_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock's slot moves to another node between two calls: the next call is told
    MOVED on the connection kept to the old node and goes on to the new one, whose
    connection is kept in turn for the calls after it."""
    from redis.crc import key_slot

    key = "locks/kept-moved"
    lock = redis_cluster.url(key)
    slot = key_slot(key.encode())
    ports = [node.port for node in redis_cluster.nodes]
    opened: list[int] = []
    real = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[1] in ports:
            opened.append(address[1])
        real(sock, address)

    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    serving_now = redis_cluster.node_of(key)
    to = (serving_now + 1) % len(ports)
    redis_cluster.move_slot(slot, to)
    monkeypatch.setattr(socket.socket, "connect", connect)
    try:
        assert skf.release(lock, OWNER) == released(lock, OWNER)
        for _ in range(3):
            assert skf.acquire(lock, OWNER, 60.0)["acquired"]
            assert skf.release(lock, OWNER) == released(lock, OWNER)
        assert opened in ([], [ports[to]])  # the new node's, unless one was kept already
    finally:
        redis_cluster.move_slot(slot, serving_now)
