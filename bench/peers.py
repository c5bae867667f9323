"""This tool's lock beside the library a Python user would pick instead, on each store:
acquire + release of one lock in one process, alternating call by call.

    uv run --group bench python bench/peers.py                    # the built file
    uv run --group bench python bench/peers.py built 455eaeb      # and 1.11.0 beside it
    uv run --group bench python bench/peers.py PATH --pairs 1000 --only time --stores redis

Each SPEC is a version of this tool: ``built`` (this checkout's skf-run-lock.py, or
the build SKF_RUN_LOCK_UNDER_TEST names), a git revision of this repository, or the
path of a copy; the first is the one the others are compared to in sections 4 and 5.
A Redis and an etcd are started as the tests start them; files go on tmpfs.

1. Time: each version's ``acquire()`` + ``release()`` beside the peers', one pair of
   each in turn (the order shuffled each round), medians and their ratio to the peer.
   A file: filelock's ``FileLock`` and ``SoftFileLease``; Redis: redis-py's ``Lock``;
   etcd: python-etcd3's ``Lock`` (gRPC) and etcd3gw's (etcd's JSON gateway, as this
   tool speaks). The peers keep their client (a connection pool, a gRPC channel, a
   requests session) from pair to pair, as a program does; this tool keeps its
   connection to each server from call to call too (from 1.12.1; a CLI call, a
   process of its own, keeps none).
2. On the wire, per pair: new TCP connections, round trips (a client's turn to speak
   that starts a request) and requests (Redis commands; etcd HTTP or gRPC requests),
   counted twice: at the socket level in this process (``socket.socket``'s connect,
   sendall, recv and recv_into wrapped, as tests/wire.py does; this tool, redis-py and
   etcd3gw speak through them), and by a counting TCP proxy in front of the server,
   which reads every client's requests (RESP, HTTP/1.1, HTTP/2 frames: etcd3's gRPC
   runs on C sockets). With one pair's requests in order.
3. System calls of a file pair: a child process runs the pairs under ``strace -f``
   (threads too), each pair between two marker calls (a ``stat`` of a path that does
   not exist); per pair, by name, and one pair of this tool's, call by call.
4. What must never get slower: serve's renewal of a session hold (``_Renewer.renew``,
   as serve's renewal thread runs it, in this process, as bench/serve.py does) on each
   store, and a CLI acquire + release in fresh ``python3 -S`` processes (bench/versus.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
sys.path.insert(0, str(ROOT / "tests"))

from proc import SCRIPT  # noqa: E402 (bench/proc.py, beside this file)
from servers import Etcd, Redis, start_etcd, start_redis  # noqa: E402
from trips import loaded  # noqa: E402
from versus import other_script, pair_seconds  # noqa: E402

STALE_AFTER = 60.0  # every side's lease: this tool's timeout, the peers' TTLs
OWNER = "bench:peers:r1"
MARK = "/skf-peers-bench-mark/"  # a path no machine has: a stat of it marks the trace
Pair = Callable[[], None]


# --- Versions of this tool


@dataclass
class Version:
    """A version of this tool: its label (the SPEC), its file, and its module loaded."""

    label: str
    script: Path
    skf: ModuleType


def versions_of(specs: list[str], folder: Path) -> list[Version]:
    found = []
    for number, spec in enumerate(specs):
        script = SCRIPT if spec == "built" else other_script(spec, folder).resolve()
        module = loaded(script, f"skf_peers_{number}")
        if "serve" in getattr(module, "_CARRIED", {}):
            module._compile_carried("serve")
        found.append(Version(spec, script, module))
    return found


def ours(skf: ModuleType, lock: str) -> Pair:
    """A pair of this tool's library calls on ``lock`` (a path or an address)."""

    def pair() -> None:
        assert skf.acquire(lock, OWNER, STALE_AFTER)["acquired"]
        assert skf.release(lock, OWNER)["released"]

    return pair


# --- The peers


def filelock_pair(path: Path, lease: bool) -> Pair:
    """filelock's FileLock (an flock on the file), or its SoftFileLease (a marker file
    holding a token, and a heartbeat thread that refreshes it while held), made once."""
    import filelock

    lock = (
        filelock.SoftFileLease(str(path), lease_duration=STALE_AFTER)
        if lease
        else filelock.FileLock(str(path))
    )

    def pair() -> None:
        lock.acquire()
        lock.release()

    return pair


def redis_py_pair(port: int, name: str) -> Pair:
    """redis-py's Lock: SET NX PX to take, a Lua script (EVALSHA) to release; its
    client's pool keeps the connection."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)

    def pair() -> None:
        lock = client.lock(name, timeout=STALE_AFTER)
        assert lock.acquire(blocking=False)
        lock.release()

    return pair


def etcd3_pair(port: int, name: str) -> Pair:
    """python-etcd3's Lock: a lease granted and a transaction to take (put on the lease
    if the key was never created), a transaction to release (delete if it holds this
    lock's token; the lease is left to run out); one gRPC channel kept."""
    import etcd3

    client = etcd3.client(host="127.0.0.1", port=port, timeout=10)

    def pair() -> None:
        lock = client.lock(name, ttl=int(STALE_AFTER))
        assert lock.acquire(timeout=0)
        assert lock.release()

    return pair


def etcd3gw_pair(port: int, name: str) -> Pair:
    """etcd3gw's Lock: the same three requests as etcd3's, as JSON over HTTP/1.1 to
    etcd's gateway, on a requests session kept alive."""
    import etcd3gw

    client = etcd3gw.client(host="127.0.0.1", port=port, timeout=10, api_path="/v3/")

    def pair() -> None:
        lock = client.lock(name, ttl=int(STALE_AFTER))
        assert lock.acquire()
        assert lock.release()

    return pair


# --- This tool's floor: its pair's own system calls or bytes, with no work between


def bare_file_pair(folder: Path) -> Pair:
    """The 25 system calls of this tool's file pair (section 3), made from Python with
    nothing between them: no decision, no output, a fixed record. What the guard rules
    cost on their own; the rest of a pair is this tool's Python."""
    import fcntl

    lock = str(folder / "bare.lock")
    guard, line, temp = lock + ".skf-guard", lock + ".skf-line", lock + ".skf-00000000-tmp"
    common = os.O_NOFOLLOW | os.O_CLOEXEC
    read = os.O_RDONLY | os.O_NONBLOCK | common
    record = json.dumps(
        {
            "owner": OWNER,
            "acquired_at": "2026-12-08T03:00:00Z",
            "stale_after_seconds": 60,
            "tool": "skf-run-lock",
            "fence": 1796698827945168,
        }
    ).encode()

    def take_guard() -> int:
        fd = os.open(guard, os.O_RDWR | os.O_CREAT | os.O_EXCL | common, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.lstat(guard)
        os.fstat(fd)
        return fd

    def absent(path: str) -> None:
        try:
            os.close(os.open(path, read))
        except FileNotFoundError:
            pass

    def pair() -> None:
        held = take_guard()
        os.access(line, os.F_OK)  # the line: asked for, as the tool does
        absent(lock)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | common, 0o666)
        os.write(fd, record)
        os.fsync(fd)
        os.close(fd)
        os.rename(temp, lock)
        os.unlink(guard)
        os.close(held)
        held = take_guard()
        os.access(line, os.F_OK)  # the line: asked for, as the tool does
        fd = os.open(lock, read)
        os.fstat(fd)
        os.read(fd, 65537)
        os.close(fd)
        os.unlink(lock)
        os.unlink(guard)
        os.close(held)

    return pair


def replies_end(data: bytes | bytearray, replies: int, at: int = 0) -> int | None:
    """Where ``replies`` whole RESP replies in ``data`` from ``at`` end (None: not yet)."""
    while replies:
        end = data.find(b"\r\n", at)
        if end < 0:
            return None
        kind, head = data[at : at + 1], data[at + 1 : end]
        at = end + 2
        if kind == b"$" and head != b"-1":
            at += int(head) + 2
            if at > len(data):
                return None
        elif kind == b"*" and head != b"-1":
            inner = replies_end(data, int(head), at)
            if inner is None:
                return None
            at = inner
        replies -= 1
    return at


def commands_in(data: bytes) -> int:
    """How many commands a client's turn sends (each a RESP array): as many replies."""
    count, at = 0, 0
    while at < len(data):
        end = replies_end(data, 1, at)
        assert end is not None, "a turn sent half a command"
        count, at = count + 1, end
    return count


def bare_redis_pair(skf: ModuleType, port: int, key: str) -> Pair:
    """The bytes this tool sends for one pair on ``key`` (its turns as it sends them,
    recorded from a real pair), sent again on one kept connection, each turn's replies
    read whole before the next: the round trips and commands without the Python that
    builds and reads them. A replayed take writes the recorded record again (its times
    too), which nothing else reads."""
    turns: list[bytes] = []
    real_sendall = socket.socket.sendall

    def recording(sock: socket.socket, data: Any, *args: Any) -> None:
        if sock.getpeername()[1] == port:
            turns.append(bytes(data))
        real_sendall(sock, data, *args)

    real_pair = ours(skf, f"redis://127.0.0.1:{port}/{key}")
    real_pair()  # its connection made and kept: the next pair's bytes are a pair's alone
    setattr(socket.socket, "sendall", recording)  # noqa: B010 (a method replaced for a pair)
    try:
        real_pair()
    finally:
        setattr(socket.socket, "sendall", real_sendall)  # noqa: B010
    replies = [commands_in(data) for data in turns]
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    weakref.finalize(conn, conn.close)

    def pair() -> None:
        for data, count in zip(turns, replies, strict=True):
            conn.sendall(data)
            got = bytearray()
            while replies_end(got, count) is None:
                got += conn.recv(65536)

    return pair


def etcd3_client_name() -> str:
    """Which build of python-etcd3 is installed, and protobuf's backend under it."""
    from importlib.metadata import PackageNotFoundError, version

    import etcd3  # noqa: F401  (protobuf's backend is chosen once etcd3's stubs load)
    from google.protobuf.internal import api_implementation

    for dist in ("cslab-etcd3", "etcd3"):
        try:
            return f"{dist} {version(dist)}, protobuf {api_implementation.Type()}"
        except PackageNotFoundError:
            continue
    return "etcd3"


def load_etcd3() -> None:
    """PyPI's etcd3 0.12.0 stubs load only on protobuf's pure-Python backend (2020's
    protoc): chosen before the import if that release is what is installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("etcd3")
    except PackageNotFoundError:
        return
    os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")


# What each side does for a pair, as the tables say it: this tool's, by store.
THIS_DOES = {
    "Redis": "a connection kept from call to call (before 1.12.1: a new one per call);"
    " reads the record, its expiry, the last holder's, the line and TIME under WATCH,"
    " then MULTI/EXEC: the record and the last holder's copy (the release reads the"
    " record, the line and TIME, then deletes both)",
    "etcd": "a connection kept from call to call (before 1.12.1: a new one per call);"
    " decides on what its last change left (1.12.1; before, it read the lock's keys),"
    " keeps alive the lease its last release left (before: granted one), commits a"
    " transaction comparing the record's and the last holder's revisions and an empty"
    " line (the record on the lease, the last holder's copy); the release deletes both"
    " by a transaction (before: read first, revoked the lease after)",
}
PEER_DOES = {
    "redis-py Lock": "SET NX PX on a pooled connection; the release runs a Lua script"
    " (EVALSHA) that deletes the key if it holds the token",
    "etcd3": "LeaseGrant, then a Txn (put on the lease if the key was never created), on"
    " one gRPC channel; the release a Txn (delete if it holds the token; the lease is"
    " left to run out)",
    "etcd3gw Lock": "the same three requests as etcd3's, JSON over HTTP/1.1 to etcd's"
    " gateway on a kept-alive requests session",
}


# --- Timing


def interleaved(sides: dict[str, Pair], pairs: int, warm: int = 50) -> dict[str, list[float]]:
    """Seconds of each of ``pairs`` pairs of each side, one pair of each in turn, in an
    order shuffled each round: with the order only rotated, a side always ran right
    after the same other one (after SoftFileLease's thread ended, 9% slower than the
    same code placed elsewhere), and the first of a round ran slower on a busy machine."""
    order = list(sides.items())
    for _ in range(warm):  # connections, scripts, the code cache: made before timing
        for _, pair in order:
            pair()
    times: dict[str, list[float]] = {name: [] for name in sides}
    shuffled = random.Random(pairs)  # the same orders on each run
    for _ in range(pairs):
        shuffled.shuffle(order)
        for name, pair in order:
            began = time.perf_counter()
            pair()
            times[name].append(time.perf_counter() - began)
    return times


def shown_time(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs" if seconds < 0.01 else f"{seconds * 1e3:,.2f} ms"


def spread(samples: list[float]) -> str:
    """The median, and the middle half (quartiles)."""
    low, median, high = statistics.quantiles(samples, n=4, method="inclusive")
    return f"{shown_time(median)} ({shown_time(low)}-{shown_time(high)})"


# --- Counting what goes on the wire


class Requests:
    """The requests in a client's byte stream, read as they come: Redis commands
    (RESP arrays), HTTP/1.1 requests (by their length), or HTTP/2 streams opened
    (HEADERS frames on a new stream: one gRPC call each). ``names``: each one's name
    (a Redis command, an HTTP path; "gRPC" for HTTP/2)."""

    H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    def __init__(self) -> None:
        self.data = bytearray()
        self.kind = ""
        self.names: list[str] = []
        self.streams: set[int] = set()

    def feed(self, data: bytes) -> int:
        """Read ``data``: how many requests it began."""
        self.data += data
        if not self.kind:
            if len(self.data) < 4:
                return 0
            self.kind = {b"PRI ": "h2", b"*": "resp"}.get(bytes(self.data[:4]), "")
            self.kind = self.kind or ("resp" if self.data[:1] == b"*" else "http")
            if self.kind == "h2":
                if len(self.data) < len(self.H2_PREFACE):
                    self.kind = ""
                    return 0
                del self.data[: len(self.H2_PREFACE)]
        before = len(self.names)
        while (taken := self.one()) is not None:
            del self.data[:taken]
        return len(self.names) - before

    def one(self) -> int | None:
        """The length of the next whole unit in ``data`` (None: not yet whole)."""
        data = self.data
        if self.kind == "h2":
            return self.frame(data)
        if self.kind == "resp":
            return self.command(data)
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = data[:end].decode("latin-1")
        found = re.search(r"(?im)^content-length:\s*([0-9]+)", head)
        whole = end + 4 + (int(found[1]) if found else 0)
        if len(data) < whole:
            return None
        self.names.append(" ".join(head.split(" ", 2)[:2]))
        return whole

    def frame(self, data: bytearray) -> int | None:
        """An HTTP/2 frame: a HEADERS frame on a new stream opens a gRPC call."""
        if len(data) < 9:
            return None
        length = int.from_bytes(data[:3], "big")
        kind, stream = data[3], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
        if len(data) < 9 + length:
            return None
        if kind == 1 and stream not in self.streams:
            self.streams.add(stream)
            self.names.append("gRPC")
        return 9 + length

    def command(self, data: bytearray) -> int | None:
        end = data.find(b"\r\n")
        if end < 0:
            return None
        if data[:1] != b"*":  # an inline command
            self.names.append(data[:end].split(b" ")[0].decode("latin-1").upper())
            return end + 2
        position = end + 2
        name = ""
        for _ in range(int(data[1:end])):
            line = data.find(b"\r\n", position)
            if line < 0:
                return None
            start = line + 2
            position = start + int(data[position + 1 : line]) + 2
            if position > len(data):
                return None
            name = name or data[start : position - 2].decode("latin-1").upper()
        self.names.append(name)
        return position


@dataclass
class Tally:
    """What crossed the wire: connections made, round trips, requests in order."""

    connections: int = 0
    trips: int = 0
    names: list[str] = field(default_factory=list)

    def since(self, before: Tally) -> Tally:
        return Tally(
            self.connections - before.connections,
            self.trips - before.trips,
            self.names[len(before.names) :],
        )

    def copy(self) -> Tally:
        return Tally(self.connections, self.trips, list(self.names))


class Conversation:
    """One connection's side of the tally: its requests, and whether the server spoke
    last (the client's next request is then a new round trip)."""

    def __init__(self) -> None:
        self.requests = Requests()
        self.answered = True

    def sent(self, data: bytes, tally: Tally) -> None:
        began = self.requests.feed(data)
        tally.names += self.requests.names[len(self.requests.names) - began :]
        if began and self.answered:
            tally.trips += 1
            self.answered = False


@contextmanager
def sockets_watched(port: int) -> Iterator[Tally]:
    """What this process sends to 127.0.0.1:``port`` while the block runs, seen by
    wrapping ``socket.socket``'s connect, sendall, send, recv and recv_into."""
    tally = Tally()
    # By the socket itself (an id could be a closed socket's again).
    talks: weakref.WeakKeyDictionary[socket.socket, Conversation] = weakref.WeakKeyDictionary()
    real = {name: getattr(socket.socket, name) for name in ("connect", "sendall", "send")}
    real |= {name: getattr(socket.socket, name) for name in ("recv", "recv_into")}

    def watched(sock: socket.socket) -> Conversation | None:
        return talks.get(sock)

    def connect(sock: socket.socket, address: Any) -> None:
        real["connect"](sock, address)
        if isinstance(address, tuple) and address[1] == port:
            tally.connections += 1
            talks[sock] = Conversation()

    def sendall(sock: socket.socket, data: Any, *args: Any) -> None:
        real["sendall"](sock, data, *args)
        if (talk := watched(sock) or kept(sock)) is not None:
            talk.sent(bytes(data), tally)

    def send(sock: socket.socket, data: Any, *args: Any) -> int:
        sent: int = real["send"](sock, data, *args)
        if (talk := watched(sock) or kept(sock)) is not None:
            talk.sent(bytes(data)[:sent], tally)
        return sent

    def kept(sock: socket.socket) -> Conversation | None:
        """A connection to the port made before the block (kept from call to call)."""
        try:
            if sock.getpeername()[1] != port:
                return None
        except (OSError, IndexError, TypeError):
            return None
        talk = talks[sock] = Conversation()
        return talk

    def recv(sock: socket.socket, *args: Any) -> bytes:
        data: bytes = real["recv"](sock, *args)
        if data and (talk := watched(sock)) is not None:
            talk.answered = True
        return data

    def recv_into(sock: socket.socket, *args: Any) -> int:
        size: int = real["recv_into"](sock, *args)
        if size and (talk := watched(sock)) is not None:
            talk.answered = True
        return size

    wrappers = {"connect": connect, "sendall": sendall, "send": send}
    wrappers |= {"recv": recv, "recv_into": recv_into}
    for name, wrapper in wrappers.items():
        setattr(socket.socket, name, wrapper)
    try:
        yield tally
    finally:
        for name, function in real.items():
            setattr(socket.socket, name, function)


class Proxy:
    """A TCP proxy on loopback in front of 127.0.0.1:``target`` that counts the
    connections made through it, the client's round trips and its requests."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.tally = Tally()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def counts(self) -> Tally:
        time.sleep(0.01)  # the last bytes through the pumps
        with self.lock:
            return self.tally.copy()

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sockets += [client, server]
            with self.lock:
                self.tally.connections += 1
            talk = Conversation()
            for source, sink, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, sink, upstream, talk), daemon=True
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, upstream: bool, talk: Conversation
    ) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                break
            if not data:
                break
            with self.lock:
                if upstream:
                    talk.sent(data, self.tally)
                else:
                    talk.answered = True  # before the client can have read it
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@dataclass
class Counted:
    """Per pair: connections, round trips, requests (each as one number or a range),
    and one pair's requests in order."""

    connections: str
    trips: str
    requests: str
    order: list[str]

    def cell(self) -> str:
        return f"{self.connections} + {self.trips} ({self.requests})"


def per_pair(pair: Pair, counts: Callable[[], Tally], pairs: int) -> Counted:
    """Count ``pairs`` pairs one by one (after two not counted)."""
    pair()
    pair()
    seen = []
    for _ in range(pairs):
        before = counts()
        pair()
        seen.append(counts().since(before))

    def shown(values: list[int]) -> str:
        low, high = min(values), max(values)
        return str(low) if low == high else f"{low}-{high}"

    return Counted(
        shown([t.connections for t in seen]),
        shown([t.trips for t in seen]),
        shown([len(t.names) for t in seen]),
        seen[-1].names,
    )


def requests_in_order(names: list[str]) -> str:
    """``names`` run-length shortened: ``GET x3`` for three GETs in a row."""
    runs: list[list[Any]] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return ", ".join(name if count == 1 else f"{name} x{count}" for name, count in runs)


# --- System calls of a file pair


def file_pair(side: str, script: Path | None, folder: Path) -> Pair:
    if side == "this":
        assert script is not None
        return ours(loaded(script, "skf_traced"), str(folder / "this.lock"))
    return filelock_pair(folder / f"{side}.lock", lease=side == "SoftFileLease")


def mark(what: str) -> None:
    try:
        os.stat(MARK + what)
    except OSError:
        pass


def traced_child(side: str, script: str, folder: str, pairs: int) -> int:
    """The child that ``strace`` follows: warm pairs, then ``pairs`` between markers."""
    pair = file_pair(side, Path(script) if script else None, Path(folder))
    for _ in range(50):
        pair()
    for _ in range(pairs):
        mark("pair")
        pair()
    mark("end")
    return 0


CALL = re.compile(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]")


def traced_pairs(side: str, script: Path | None, folder: Path, pairs: int) -> list[list[str]]:
    """Each traced pair's system calls, as strace wrote them (the pid dropped)."""
    out = folder / f"{side}.trace"
    child = [sys.executable, __file__, "--traced-child", side, str(script or ""), str(folder)]
    subprocess.run(
        ["strace", "-f", "-qq", "-o", str(out), *child, str(pairs)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found: list[list[str]] = []
    for line in out.read_text(errors="replace").splitlines():
        if MARK in line:
            if line.split(MARK, 1)[1].startswith("end"):
                break
            found.append([])
        elif found and CALL.match(line) and "resumed>" not in line:
            found[-1].append(line.split(None, 1)[1])
    out.unlink()
    return found


def syscall_name(line: str) -> str:
    return line.split("(", 1)[0]


# --- The sections


@dataclass
class Store:
    """A store's sides: each version of this tool, then the peers."""

    name: str
    ours: dict[str, Pair]
    peers: dict[str, Pair]
    pairs: int


def timing(stores: list[Store], versions: list[Version]) -> None:
    print(
        "\n## 1. Acquire + release of one lock, in one process, alternating call by call"
        "\n\nMedian (quartiles) of each side's pairs; the ratio is this tool's median over"
        " the peer's.\n"
    )
    heads = " | ".join(f"{v.label} | ratio" for v in versions)
    print(f"| store | pairs | the peer | the peer's pair | {heads} |")
    print("|---" * (4 + 2 * len(versions)) + "|")
    for store in stores:
        times = interleaved(store.ours | store.peers, store.pairs)
        for peer in store.peers:
            base = statistics.median(times[peer])
            cells = []
            for version in versions:
                mine = times[version.label]
                cells.append(f"{spread(mine)} | {statistics.median(mine) / base:.2f}x")
            print(
                f"| {store.name} | {store.pairs:,} | {peer} | {spread(times[peer])}"
                f" | {' | '.join(cells)} |"
            )


def wire(etcd: Etcd, redis: Redis, versions: list[Version], pairs: int, etcd3_name: str) -> None:
    print(
        f"\n## 2. On the wire, per pair ({pairs} pairs each)\n\nNew TCP connections + round"
        " trips (requests: Redis commands, etcd HTTP or gRPC requests), counted at Python's"
        " sockets in this process (etcd3's gRPC uses C's: not seen there) and by a counting"
        " proxy in front of the server.\n"
    )
    print("| store | side | at the sockets | at the proxy | what it does per pair |")
    print("|---|---|---|---|---|")
    servers = {"Redis": redis.port, "etcd": int(etcd.client.rpartition(":")[2])}
    orders: list[tuple[str, str, list[str]]] = []
    for store, port in servers.items():
        sides = sides_on(store, versions, etcd3_name)
        by_socket = {}
        for side, (make, _) in sides.items():
            with sockets_watched(port) as tally:
                by_socket[side] = per_pair(make(port, "sock"), tally.copy, pairs)
        # The proxy only once no socket is watched: its own would be counted.
        proxy = Proxy(port)
        try:
            for side, (make, does) in sides.items():
                by_proxy = per_pair(make(proxy.port, "proxy"), proxy.counts, pairs)
                seen = by_socket[side]
                at_sockets = seen.cell() if seen.requests != "0" else "-"
                print(f"| {store} | {side} | {at_sockets} | {by_proxy.cell()} | {does} |")
                orders.append((store, side, by_proxy.order))
        finally:
            proxy.close()
    print("\nOne pair's requests, in order (at the proxy):\n")
    for store, side, order in orders:
        print(f"- {store}, {side}: {requests_in_order(order)}")


Maker = Callable[[int, str], Pair]


def sides_on(store: str, versions: list[Version], etcd3_name: str) -> dict[str, tuple[Maker, str]]:
    """Each side on ``store`` (a maker of its pair for a server on a port, with a key of
    its own for each tag) and what it does per pair."""
    scheme = "redis" if store == "Redis" else "etcd"
    made: dict[str, tuple[Maker, str]] = {}
    for number, version in enumerate(versions):

        def this(port: int, tag: str, skf: ModuleType = version.skf, n: int = number) -> Pair:
            return ours(skf, f"{scheme}://127.0.0.1:{port}/peers/wire/{tag}/this{n}")

        made[version.label] = (this, THIS_DOES[store])
    if store == "Redis":

        def redis_py(port: int, tag: str) -> Pair:
            return redis_py_pair(port, f"peers/wire/{tag}/py")

        made["redis-py Lock"] = (redis_py, PEER_DOES["redis-py Lock"])
        return made

    def python_etcd3(port: int, tag: str) -> Pair:
        return etcd3_pair(port, f"peers-wire-{tag}-etcd3")

    def gateway(port: int, tag: str) -> Pair:
        return etcd3gw_pair(port, f"peers-wire-{tag}-gw")

    made[etcd3_name] = (python_etcd3, PEER_DOES["etcd3"])
    made["etcd3gw Lock"] = (gateway, PEER_DOES["etcd3gw Lock"])
    return made


def syscalls(versions: list[Version], pairs: int, folder: Path) -> None:
    if shutil.which("strace") is None:
        print("\n## 3. System calls of a file pair\n\nSkipped: strace is not installed.")
        return
    print(
        f"\n## 3. System calls of a file pair (tmpfs; strace -f, threads too; {pairs} pairs"
        " each, after 50 not counted)\n"
    )
    print("| side | per pair | the most frequent |\n|---|---|---|")
    listings = []
    sides: list[tuple[str, str, Path | None]] = [("this", v.label, v.script) for v in versions]
    sides += [
        ("FileLock", "filelock FileLock", None),
        ("SoftFileLease", "filelock SoftFileLease", None),
    ]
    for number, (side, label, script) in enumerate(sides):
        where = folder / f"trace{number}"
        where.mkdir()
        traced = traced_pairs(side, script, where, pairs)
        counts = [len(calls) for calls in traced]
        names = Counter(syscall_name(line) for calls in traced for line in calls)
        top = ", ".join(f"{name} {count / len(traced):.3g}" for name, count in names.most_common(8))
        low, high = min(counts), max(counts)
        shown = f"{statistics.mean(counts):.1f}" + ("" if low == high else f" ({low}-{high})")
        print(f"| {label} | {shown} | {top} |")
        if side == "this":
            listings.append((label, traced[len(traced) // 2]))
    for label, calls in listings:
        print(f"\nOne pair of {label}, call by call (paths shortened to their names):\n")
        print("```")
        for line in calls:
            print(re.sub(r'"/[^"]*/([^"/]*)"', r'"\1"', line))
        print("```")


def renewals(versions: list[Version], etcd: Etcd, redis: Redis, folder: Path, rounds: int) -> None:
    print(
        f"\n## 4. serve's renewal of a session hold (`_Renewer.renew`, in this process, as"
        f" serve's renewal thread runs it; {rounds} rounds, versions in turn)\n"
    )
    places: dict[str, tuple[Callable[[str], str], int | None]] = {
        "a file (tmpfs)": (lambda key: str(folder / f"{key}.lock"), None),
        "Redis": (redis.url, redis.port),
        "etcd": (etcd.url, int(etcd.client.rpartition(":")[2])),
    }
    first = versions[0].label
    orders: list[str] = []
    print(f"| store | version | a renewal | on the wire | beside {first} |\n|---|---|---|---|---|")
    for store, (place, port) in places.items():
        renew: dict[str, Pair] = {}
        counted: dict[str, str] = {}
        for number, version in enumerate(versions):
            skf = version.skf
            if not (hasattr(skf, "_Renewer") and hasattr(skf, "_session_request")):
                continue  # a version without serve, or whose renewer is named otherwise
            lock = place(f"peers-renewal-{number}")
            asked = skf._session_request({"lock": lock, "owner": OWNER}, 300.0)
            request = asked[0] if isinstance(asked, tuple) else asked  # 1.11.1: (request, cut)
            hold = skf._take(request)
            assert isinstance(hold, skf._Hold), hold
            renewer = skf._Renewer(request, hold)

            def once(renewer: Any = renewer) -> None:
                assert renewer.renew() is None

            renew[version.label] = once
            counted[version.label] = "-"
            if port is not None:
                with sockets_watched(port) as tally:
                    seen = per_pair(once, tally.copy, 10)
                counted[version.label] = seen.cell()
                orders.append(f"- {store}, {version.label}: {requests_in_order(seen.order)}")
        if not renew:
            continue
        times = interleaved(renew, rounds, warm=5)
        for version in versions:
            if version.label not in times:
                print(f"| {store} | {version.label} | n/a | - | - |")
                continue
            median = statistics.median(times[version.label])
            ratio = f"{median / statistics.median(times[first]):.3f}x" if first in times else "-"
            print(
                f"| {store} | {version.label} | {spread(times[version.label])}"
                f" | {counted[version.label]} | {ratio} |"
            )
    print(
        "\nOn the wire: new connections + round trips (requests) per renewal, at the"
        " sockets; a renewal's requests in order:\n"
    )
    print("\n".join(orders))


def cli_pairs(versions: list[Version], folder: Path, rounds: int) -> None:
    print(
        f"\n## 5. A CLI acquire + release (fresh `python3 -S` processes, a file on tmpfs;"
        f" {rounds} rounds, versions in turn)\n"
    )
    sides: dict[str, Pair] = {}
    for number, version in enumerate(versions):
        lock = folder / f"cli{number}.lock"

        def pair(script: Path = version.script, lock: Path = lock) -> None:
            pair_seconds(script, lock, site=False)

        sides[version.label] = pair
    times = interleaved(sides, rounds, warm=3)
    first = statistics.median(times[versions[0].label])
    print("| version | acquire + release | ratio |\n|---|---|---|")
    for version in versions:
        samples = times[version.label]
        print(
            f"| {version.label} | {spread(samples)} | {statistics.median(samples) / first:.3f}x |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", default=["built"], metavar="SPEC")
    parser.add_argument("--pairs", type=int, default=4000, help="pairs each, file and Redis")
    parser.add_argument("--etcd-pairs", type=int, default=1000, help="pairs each, etcd")
    parser.add_argument("--count-pairs", type=int, default=20, help="pairs counted on the wire")
    parser.add_argument("--trace-pairs", type=int, default=200, help="file pairs traced")
    parser.add_argument("--renewals", type=int, default=300, help="renewals each")
    parser.add_argument("--cli-rounds", type=int, default=100, help="CLI pairs each")
    sections = ("time", "wire", "syscalls", "renewal", "cli")
    parser.add_argument("--only", default=",".join(sections), help="sections, comma-separated")
    kinds = ("file", "redis", "etcd")
    parser.add_argument("--stores", default=",".join(kinds), help="stores timed, comma-separated")
    parser.add_argument("--traced-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.traced_child:
        side, script, folder, pairs = args.traced_child
        return traced_child(side, script, folder, int(pairs))
    only = set(args.only.split(","))
    if only - set(sections):
        parser.error(f"--only takes {', '.join(sections)}")
    timed = set(args.stores.split(","))
    if timed - set(kinds):
        parser.error(f"--stores takes {', '.join(kinds)}")
    load_etcd3()
    import filelock
    import redis as redis_py

    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(
        f"uv run --group bench python bench/peers.py {' '.join(sys.argv[1:])}".rstrip()
        + f"\n\ncheckout {commit}; {os.cpu_count()} cores; {platform.python_implementation()}"
        f" {platform.python_version()}; filelock {filelock.__version__}; redis-py"
        f" {redis_py.__version__}; {etcd3_client_name()}; load average at the start"
        f" {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    etcd3_name = f"etcd3 Lock ({etcd3_client_name().split(',')[0]})"
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory(dir=TMPFS) as shm:
        scratch_path, files = Path(scratch), Path(shm)
        versions = versions_of(args.specs, scratch_path)
        labels = [v.label for v in versions]
        if len(set(labels)) != len(labels):
            parser.error("each SPEC once")
        for server in ("etcd", "redis"):
            (scratch_path / server).mkdir()
        etcd = start_etcd(scratch_path / "etcd")
        redis = start_redis(scratch_path / "redis")
        etcd_port = int(etcd.client.rpartition(":")[2])
        try:
            if "time" in only:
                file_ours = {
                    v.label: ours(v.skf, str(files / f"{n}.lock")) for n, v in enumerate(versions)
                }
                redis_ours = {
                    v.label: ours(v.skf, redis.url(f"peers/time/this{n}"))
                    for n, v in enumerate(versions)
                }
                etcd_ours = {
                    v.label: ours(v.skf, etcd.url(f"peers/time/this{n}"))
                    for n, v in enumerate(versions)
                }
                stores = [
                    Store(
                        "a file (tmpfs)",
                        file_ours,
                        {
                            "filelock FileLock": filelock_pair(files / "filelock.lock", False),
                            "filelock SoftFileLease": filelock_pair(files / "lease.lock", True),
                            "its system calls, bare": bare_file_pair(files),
                        },
                        args.pairs,
                    ),
                    Store(
                        "Redis",
                        redis_ours,
                        {
                            "redis-py Lock": redis_py_pair(redis.port, "peers/time/py"),
                            "its bytes, bare": bare_redis_pair(
                                versions[0].skf, redis.port, "peers/time/bare"
                            ),
                        },
                        args.pairs,
                    ),
                    Store(
                        "etcd",
                        etcd_ours,
                        {
                            etcd3_name: etcd3_pair(etcd_port, "peers-time-etcd3"),
                            "etcd3gw Lock": etcd3gw_pair(etcd_port, "peers-time-gw"),
                        },
                        args.etcd_pairs,
                    ),
                ]
                chosen = [s for s, kind in zip(stores, kinds, strict=True) if kind in timed]
                timing(chosen, versions)
            if "wire" in only:
                wire(etcd, redis, versions, args.count_pairs, etcd3_name)
            if "syscalls" in only:
                syscalls(versions, args.trace_pairs, files)
            if "renewal" in only:
                renewals(versions, etcd, redis, files, args.renewals)
            if "cli" in only:
                cli_pairs(versions, files, args.cli_rounds)
        finally:
            etcd.stop()
            redis.stop()
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
