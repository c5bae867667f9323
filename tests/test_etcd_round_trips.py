"""etcd in the fewest requests: a process's change of a lock decides on what its own
last change of it left, rather than reading first, and its transaction compares that
the lock still stands so (the record's key, the last holder's, an empty line). Each
test counts the requests on the wire, or changes the lock behind the process's back
and checks that every call still answers what a call that read first answers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from proxy import proxy_to
from servers import Etcd, etcd_post, start_cluster, start_etcd
from wire import after_each_send, before_each_receive, etcd_requests

OWNER = "wf:trips:r1"
OTHER = "wf:trips:r2"
TESTS = Path(__file__).parent


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[Etcd]:
    """An etcd of this test's own, so that every lease on it is this test's."""
    server = start_etcd(tmp_path)
    yield server
    server.stop()


def b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


def keys_on(etcd: Etcd, key: str) -> dict[str, str]:
    """Every key of the lock ``key`` on the server, with its value."""
    import base64

    answer = etcd_post(etcd.client, "/v3/kv/range", {"key": b64(key), "range_end": b64(key + "\1")})
    return {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
        for kv in answer.get("kvs", [])
    }


def leases_on(etcd: Etcd) -> list[str]:
    return [
        lease["ID"] for lease in etcd_post(etcd.client, "/v3/lease/leases", {}).get("leases", [])
    ]


def lease_keys(etcd: Etcd, lease: str) -> list[str]:
    """The keys on ``lease``."""
    import base64

    answer = etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": lease, "keys": True})
    return [base64.b64decode(key).decode() for key in answer.get("keys", [])]


def in_another_process(code: str) -> None:
    """Run ``code`` with ``skf`` (the built file) in a process of its own."""
    prelude = f"import sys; sys.path.insert(0, {str(TESTS)!r}); from loader import load_script; "
    done = subprocess.run(
        [sys.executable, "-c", prelude + "skf = load_script(); " + code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_a_process_takes_and_releases_etcd_by_a_keepalive_and_two_transactions(
    skf: ModuleType, etcd_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a process has changed a lock, each acquire is one transaction, its record
    on the lease the last release left (kept alive: no lease granted), each renewal
    the same on its own lease, each release one transaction: no read, no revoke."""
    assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
    assert skf.release(etcd_lock, OWNER)["released"]
    sent = etcd_requests(monkeypatch)
    for _ in range(3):
        taken = skf.acquire(etcd_lock, OWNER, 60.0)
        assert (taken["acquired"], taken["refreshed"], taken["stale_replaced"]) == (
            True,
            False,
            None,
        )
        fence = skf.status(etcd_lock, 60.0)["fence"]
        renewed = skf.acquire(etcd_lock, OWNER, 60.0)
        assert (renewed["acquired"], renewed["refreshed"]) == (True, True)
        assert skf.status(etcd_lock, 60.0)["fence"] == fence  # a renewal keeps its fence
        assert skf.release(etcd_lock, OWNER)["released"]
    paths = [path.rpartition("/")[2] for _, path, _ in sent]
    # A take; status; a renewal; status; a release.
    once = ["keepalive", "txn", "range", "keepalive", "txn", "range", "txn"]
    assert paths == once * 3


def test_a_lock_another_process_took_since_is_refused_and_leaves_its_lease_free(
    skf: ModuleType, own_etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What this process left (the lock free) no longer stands: another took it. The
    take's transaction finds that, and the call answers as one that read first: held
    by the other, whose hold stays; the lease it kept alive for its record stays free
    for its next take, and is revoked when the process ends."""
    lock = own_etcd.url("locks/taken-since")
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    assert skf.release(lock, OWNER)["released"]
    in_another_process(f"assert skf.acquire({lock!r}, {OTHER!r}, 60.0)['acquired']")
    held = keys_on(own_etcd, "locks/taken-since")
    refused = skf.acquire(lock, OWNER, 60.0)
    assert (refused["acquired"], refused["held_by"]) == (False, OTHER)
    assert keys_on(own_etcd, "locks/taken-since") == held
    keys = [lease_keys(own_etcd, lease) for lease in leases_on(own_etcd)]
    assert sorted(keys) == [[], ["locks/taken-since"]]  # its free one; the other's record's
    released = skf.release(lock, OWNER)
    assert (released["released"], released["reason"], released["held_by"]) == (
        False,
        "not-owner",
        OTHER,
    )
    in_another_process(f"assert skf.release({lock!r}, {OTHER!r})['released']")
    sent = etcd_requests(monkeypatch)
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]  # on the free lease, kept alive
    assert [path for _, path, _ in sent] == ["/v3/kv/range", "/v3/lease/keepalive", "/v3/kv/txn"]


def test_a_waiter_who_joined_since_is_not_passed(skf: ModuleType, own_etcd: Etcd) -> None:
    """What this process left (the lock free, nobody in line) no longer stands: a
    waiter joined the line. A take that does not wait yields to it, as one that read
    first does, and writes nothing."""
    lock = own_etcd.url("locks/joined-since")
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    assert skf.release(lock, OWNER)["released"]
    lease = etcd_post(own_etcd.client, "/v3/lease/grant", {"TTL": "60"})["ID"]
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    place = {"owner": OTHER, "since": since, "stale_after_seconds": 60.0}
    put = {"key": b64(f"locks/joined-since\0wait\0{lease}"), "value": b64(json.dumps(place))}
    etcd_post(own_etcd.client, "/v3/kv/put", {**put, "lease": lease})
    refused = skf.acquire(lock, OWNER, 60.0)
    assert (refused["acquired"], refused["held_by"], refused["held_since"]) == (False, OTHER, since)
    assert "it goes to the first run waiting in line" in refused["message"]
    assert list(keys_on(own_etcd, "locks/joined-since")) == [f"locks/joined-since\0wait\0{lease}"]


def test_a_hold_that_lapsed_since_is_reported_as_replaced(skf: ModuleType, etcd_lock: str) -> None:
    """What this process left (the lock free, no last holder) no longer stands: another
    process held it and its lease ran out. The take reports the hold it replaced, as
    one that read first does."""
    assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
    assert skf.release(etcd_lock, OWNER)["released"]
    in_another_process(f"assert skf.acquire({etcd_lock!r}, {OTHER!r}, 1.0)['acquired']")
    deadline = time.monotonic() + 30
    while (state := skf.status(etcd_lock, 60.0))["state"] != "stale":
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    taken = skf.acquire(etcd_lock, OWNER, 60.0)
    assert taken["acquired"] and taken["stale_replaced"] == {
        "held_by": OTHER,
        "held_since": state["held_since"],
    }
    assert skf.release(etcd_lock, OWNER)["released"]


def test_a_release_lost_on_a_kept_connection_is_sent_again_and_answers_released(
    skf: ModuleType, etcd: Etcd, request: pytest.FixtureRequest
) -> None:
    """A release, now a transaction and the first request of its call, goes on a kept
    connection a proxy forgot: reset as it arrives. It is sent again on a new one and
    the call answers released; its key is gone."""
    port = int(etcd.client.rpartition(":")[2])
    key = f"skf-tests/{request.node.name}"
    with proxy_to(port) as proxy:
        lock = f"etcd://127.0.0.1:{proxy.port}/{key}"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        proxy.cut("stale")
        released = skf.release(lock, OWNER)
        assert (released["released"], released["reason"]) == (True, None)
        assert keys_on(etcd, key) == {}


def test_a_hold_another_process_released_since_is_taken(skf: ModuleType, etcd_lock: str) -> None:
    """What this process left (its own hold) no longer stands: another process released
    it. Another owner's take here, which that hold would refuse, reads the lock itself
    and takes it."""
    assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
    in_another_process(f"assert skf.release({etcd_lock!r}, {OWNER!r})['released']")
    taken = skf.acquire(etcd_lock, OTHER, 60.0)
    assert (taken["acquired"], taken["refreshed"], taken["held_by"]) == (True, False, OTHER)
    assert skf.release(etcd_lock, OTHER)["released"]


def test_a_hold_another_process_took_since_for_the_same_owner_is_released(
    skf: ModuleType, etcd_lock: str
) -> None:
    """What this process left (the lock free) no longer stands: another process took it
    for the same owner. This process's release of that owner, which the free lock would
    answer "absent", reads the lock itself and releases it."""
    assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
    assert skf.release(etcd_lock, OWNER)["released"]
    in_another_process(f"assert skf.acquire({etcd_lock!r}, {OWNER!r}, 60.0)['acquired']")
    released = skf.release(etcd_lock, OWNER)
    assert (released["released"], released["reason"], released["message"]) == (
        True,
        None,
        f"released {etcd_lock} held by {OWNER}",
    )


@pytest.mark.timeout(60)
def test_a_refused_renewal_never_keeps_alive_the_lease_another_owners_hold_stands_on(
    skf: ModuleType, own_etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process holds the lock. Another long-lived process releases that hold (the
    same owner, as a session may) and takes the lock for another owner, then dies; its
    take kept alive the lease its release left free, the one this process's record
    stood on. This process's renewal, refused (held by the other), must not keep that
    lease alive: the dead holder's hold would outlive its timeout, renewed by a process
    that never held it."""
    lock = own_etcd.url("locks/not-mine")
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    code = (
        f"import os, sys; sys.path.insert(0, {str(TESTS)!r});"
        " from loader import load_script; skf = load_script();"
        f" assert skf.release({lock!r}, {OWNER!r})['released'];"
        f" assert skf.acquire({lock!r}, {OTHER!r}, 60.0)['acquired'];"
        " os._exit(7)"  # dies holding: no release, no revoke at exit
    )
    died = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=50, check=False
    )
    assert died.returncode == 7, died.stderr
    (theirs,) = [lease for lease in leases_on(own_etcd) if lease_keys(own_etcd, lease)]
    assert lease_keys(own_etcd, theirs) == ["locks/not-mine"]
    sent = etcd_requests(monkeypatch)
    refused = skf.acquire(lock, OWNER, 60.0)
    assert (refused["acquired"], refused["held_by"]) == (False, OTHER)
    kept_alive = [body for _, path, body in sent if path == "/v3/lease/keepalive"]
    assert all(body["ID"] != theirs for body in kept_alive), kept_alive


def test_a_release_that_landed_before_its_kept_connection_failed_answers_released(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release's transaction reaches etcd on a kept connection, which fails before
    its answer comes. Sent again on a new connection it finds the lock changed: by
    itself, both keys gone. The call answers released, as the first sending did."""
    key = etcd_lock.partition("://")[2].partition("/")[2]
    assert skf.acquire(etcd_lock, OWNER, 60.0)["acquired"]
    deleting: list[socket.socket] = []

    def sent(sock: socket.socket, data: bytes) -> None:
        if b"request_delete_range" in data and not deleting:
            deleting.append(sock)

    def receiving(sock: socket.socket) -> None:
        if deleting and sock is deleting[0] and len(deleting) == 1:
            deleting.append(sock)  # once
            while keys_on(etcd, key):  # the release landed, its answer on its way
                time.sleep(0.01)
            raise ConnectionResetError(104, "reset by a proxy, the request passed on")

    after_each_send(monkeypatch, sent)
    before_each_receive(monkeypatch, receiving, {})
    released = skf.release(etcd_lock, OWNER)
    assert (released["released"], released["reason"], released["message"]) == (
        True,
        None,
        f"released {etcd_lock} held by {OWNER}",
    )
    assert len(deleting) == 2  # reset once, on the kept connection
    assert keys_on(etcd, key) == {}


def leader_first(servers: list[Etcd]) -> list[Etcd]:
    """``servers``, the one that leads first."""
    leads = []
    for server in servers:
        status = etcd_post(server.client, "/v3/maintenance/status", {})
        leads.append(status["header"]["member_id"] == status["leader"])
    return sorted(servers, key=lambda server: not leads[servers.index(server)])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("killed", ["its member", "the leader"])
def test_a_member_lost_between_calls_costs_no_call(
    skf: ModuleType, tmp_path: Path, killed: str
) -> None:
    """Between a take and the release, the member the kept connection goes to is
    killed, or the leader (the kept connection going to a follower, which forwards
    the release, sent without a read first, to the dead leader until it sees it is
    gone). The release releases, sent again until a leader serves; the next take
    takes."""
    servers = leader_first(start_cluster(tmp_path / "cluster"))
    try:
        leader, follower, other = servers
        order = [leader, follower, other] if killed == "its member" else [follower, leader, other]
        lock = f"etcd://{','.join(s.client for s in order)}/locks/failover"
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        assert skf.release(lock, OWNER)["released"]
        assert skf.acquire(lock, OWNER, 60.0)["acquired"]
        leader.stop()  # SIGKILL
        released = skf.release(lock, OWNER)
        assert (released["released"], released["reason"]) == (True, None)
        taken = skf.acquire(lock, OWNER, 60.0)
        assert (taken["acquired"], taken["refreshed"], taken["stale_replaced"]) == (
            True,
            False,
            None,
        )
        assert skf.release(lock, OWNER)["released"]
        assert keys_on(follower, "locks/failover") == {}
    finally:
        for server in servers:
            server.stop()


def test_the_lease_a_release_left_free_is_revoked_when_its_process_ends(
    own_etcd: Etcd,
) -> None:
    """A process's release leaves its lease free for its next take; when the process
    ends, it revokes it: a process that takes and releases leaves no lease behind, as
    each CLI call does."""
    lock = own_etcd.url("locks/exit")
    code = (
        f"assert skf.acquire({lock!r}, {OWNER!r}, 60.0)['acquired']; "
        f"assert skf.release({lock!r}, {OWNER!r})['released']; "
        f"assert skf.acquire({lock!r}, {OWNER!r}, 60.0)['acquired']; "
        f"assert skf.release({lock!r}, {OWNER!r})['released']"
    )
    in_another_process(code)
    assert leases_on(own_etcd) == [] and keys_on(own_etcd, "locks/exit") == {}


def test_a_take_of_another_timeout_gets_a_lease_of_its_own(skf: ModuleType, own_etcd: Etcd) -> None:
    """The lease a release left free (60 s) serves no take of another timeout: a take
    of 120 s gets a lease of 120 s, and the free one is revoked."""
    lock = own_etcd.url("locks/timeouts")
    assert skf.acquire(lock, OWNER, 60.0)["acquired"]
    assert skf.release(lock, OWNER)["released"]
    assert skf.acquire(lock, OWNER, 120.0)["acquired"]
    (lease,) = leases_on(own_etcd)
    answer = etcd_post(own_etcd.client, "/v3/lease/timetolive", {"ID": lease})
    assert answer["grantedTTL"] == "120" and lease_keys(own_etcd, lease) == ["locks/timeouts"]
    assert skf.release(lock, OWNER)["released"]


@pytest.mark.timeout(60)
def test_a_process_whose_etcd_went_silent_exits_at_once(
    etcd: Etcd, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's release left its lease free; then its etcd stops answering (a proxy
    swallows every byte). The process exits 0 within 1 s of trying to revoke the lease,
    not after its call's deadline (30 s here): the lease runs out by itself."""
    port = int(etcd.client.rpartition(":")[2])
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "30s")
    with proxy_to(port) as proxy:
        lock = f"etcd://127.0.0.1:{proxy.port}/skf-tests/{request.node.name}"
        code = (
            f"assert skf.acquire({lock!r}, {OWNER!r}, 60.0)['acquired']; "
            f"assert skf.release({lock!r}, {OWNER!r})['released']; "
            "print('released', flush=True); sys.stdin.readline()"
        )
        prelude = (
            f"import sys; sys.path.insert(0, {str(TESTS)!r}); from loader import load_script; "
        )
        child = subprocess.Popen(
            [sys.executable, "-c", prelude + "skf = load_script(); " + code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "released\n"
        proxy.cut("blackhole")
        told = time.monotonic()
        child.stdin.close()
        assert child.wait(timeout=30) == 0
        assert time.monotonic() - told < 10  # 1 s, generously
