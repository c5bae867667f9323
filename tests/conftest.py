"""The fixtures: the script loaded by path, a lock on every store, CLI runners, real
servers for the session, and the hooks that make a skipped test fail the run on Linux.

Helpers live in modules of their own: calls.py (a CLI call's outcome, processes),
lockfiles.py, contenders.py, servers.py, pki.py, signals.py, stores.py, waiters.py and
sessions.py (agent sessions over serve's stdio); what a test sets through the built
file's seams (a store of its own around each store a call opens, the platform in force)
in wrapped.py, and what it sees on the wire in wire.py.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import (
    NOT_ON_WINDOWS,
    SYSTEM_TOOL,
    WORKER,
    Run,
    Started,
    call_to_end,
    reaped,
    started,
)
from fork_server import forks_importing
from loader import SCRIPT, build_if_stale, load_script
from pki import Pki, make_pki
from servers import (
    Etcd,
    Redis,
    RedisCluster,
    start_etcd,
    start_redis,
    start_redis_cluster,
    start_tls_redis,
)
from sessions import SDK_MODULES, SERVE, Served
from stores import PlaceUnderTest, StoreUnderTest
from windows_rules import FakeMsvcrt, follow_windows_rules
from wrapped import WrappedStore, wrap_stores

if sys.platform == "win32" and os.environ.get("SKF_WINDOWS_LANE"):
    # Wine 8 lacks CopyFile2, which shutil.copy2 (and so copytree) calls first on
    # Windows, and aborts the process; without it shutil copies as it did before 3.12.
    import _winapi

    del _winapi.CopyFile2

    # Wine 8's CreateProcess now and then fails with ERROR_INTERNAL_ERROR (1359) while
    # many processes start at once (seen once in a thousand tests); Windows documents
    # no such failure for it. The start is tried again, with the same handles.
    _create_process = _winapi.CreateProcess

    def _create_process_despite_wine(*args: Any) -> Any:
        for attempt in range(5):
            try:
                return _create_process(*args)
            except OSError as exc:
                if getattr(exc, "winerror", None) != 1359 or attempt == 4:
                    raise
                time.sleep(0.2)
        raise AssertionError("unreachable")

    _winapi.CreateProcess = _create_process_despite_wine


def pytest_configure(config: pytest.Config) -> None:
    """Test the modules as they are: the built file is made anew where an edit left it
    stale (once, before xdist starts its workers), unless the run names another copy
    to test (SKF_RUN_LOCK_UNDER_TEST: a mutant, an older version)."""
    if os.environ.get("SKF_RUN_LOCK_UNDER_TEST") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if build_if_stale():
        sys.stderr.write(
            "conftest: skf-run-lock.py was not what src/ builds: built it anew"
            " (python3 tools/bundle.py); commit it with the modules\n"
        )


@pytest.fixture(scope="session")
def skf() -> ModuleType:
    """The script, with its server stores' code compiled (as a call naming a server's
    lock compiles it) and the parts of a tree's (as a call naming parts will), so that
    tests can reach their classes and functions."""
    module = load_script()
    module._compile_carried("parts")
    module._compile_carried("etcd_store")
    module._compile_carried("redis_store")
    module._compile_carried("etcd_listing")
    module._compile_carried("redis_listing")
    module._compile_carried("file_listing")
    return module


@pytest.fixture
def windows_rules(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> FakeMsvcrt | None:
    """``skf`` following Windows' rules for one test, on any system (``_WINDOWS`` the
    platform in force): on POSIX its guard locks through a fake msvcrt, returned."""
    return follow_windows_rules(skf, monkeypatch)


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    """A lock path whose folder does not exist yet."""
    return tmp_path / "locks" / "run.lock"


@pytest.fixture
def cli() -> Callable[..., Run]:
    """Run the script in a process of its own, to its end: cli("acquire", "--lock", ...)."""

    def run(
        *args: str | os.PathLike[str],
        timeout: float = 60,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Run:
        return call_to_end([sys.executable, str(SCRIPT), *map(str, args)], timeout, cwd)

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


@pytest.fixture
def worker() -> Iterator[Callable[..., Started]]:
    """Start tests/worker.py in a process of its own (with its three pipes, as text);
    every one still running is killed at the end."""
    with reaped() as processes:

        def start(*args: str | os.PathLike[str]) -> Started:
            proc = started([sys.executable, str(WORKER), *map(str, args)])
            processes.append(proc)
            return proc

        yield start


@pytest.fixture
def serving() -> Iterator[Callable[..., Served]]:
    """Start ``skf-run-lock.py serve ARGS`` (or the process ``argv``, with its
    ``Popen`` keywords), to be driven line by line over its stdio; every one still
    running at the end is killed."""
    with reaped() as processes:

        def start(*args: str, argv: list[str] | None = None, **popen: Any) -> Served:
            forks = forks_importing(SDK_MODULES)
            served = Served(argv or [*SERVE, *args], forks=forks, **popen)
            processes.append(served.proc)
            return served

        yield start


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On Linux as root (as CI runs here) every test can run: a skip there means less
    proven, so it fails the run. Outside CI, one skip may stand there: a test that
    needs a system tool no PyPI package ships (``needs_system_tool``), which names
    what to install; in CI (``CI`` set), where .ci/run installs it, that fails too.
    In the Windows lane only the tests that say they need what Windows lacks
    (``posix_only``) may skip. Elsewhere, tests skip only what the platform lacks,
    each saying what."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    skipped = reporter.stats.get("skipped", [])
    if sys.platform == "win32" and os.environ.get("SKF_WINDOWS_LANE"):
        skipped = [report for report in skipped if NOT_ON_WINDOWS not in str(report.longrepr)]
        where = "in the Windows lane"
    elif sys.platform == "linux" and os.geteuid() == 0:
        if not os.environ.get("CI"):
            skipped = [report for report in skipped if SYSTEM_TOOL not in str(report.longrepr)]
        where = "on Linux"
    else:
        return
    if skipped:
        reporter.write_line(f"{len(skipped)} test(s) skipped {where}, where none may be", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- A real etcd, started by the tests -------------------------------------------


def key_of_its_own(request: pytest.FixtureRequest) -> str:
    """A key on a session's server that no other test uses, named for the test. Braces
    in the name become parentheses: in a Redis Cluster the text between the first "{"
    and "}" picks the key's slot, and a fixed one made cluster_lock's search for a
    key on a given node endless (a test id with a JSON parameter)."""
    name = request.node.name.replace("{", "(").replace("}", ")")
    return f"skf-tests/{name}/{os.urandom(4).hex()}"


def started_elsewhere() -> dict[str, Any] | None:
    """The servers and certificates the Windows lane's Linux side started for this
    worker (a Windows process under Wine can start no Linux server), or None: the suite
    starts its own. Each pytest worker has a set of its own, as each starts its own."""
    named = os.environ.get("SKF_TEST_SERVERS")
    if not named:
        return None
    sets: list[dict[str, Any]] = json.loads(Path(named).read_text())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return sets[int(worker.removeprefix("gw")) % len(sets)]


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    """One etcd for the session; tests use keys of their own."""
    elsewhere = started_elsewhere()
    if elsewhere is not None:
        yield Etcd(None, elsewhere["etcd"])
        return
    server = start_etcd(tmp_path_factory.mktemp("etcd"))
    yield server
    server.stop()


@pytest.fixture
def etcd_lock(etcd: Etcd, request: pytest.FixtureRequest) -> str:
    """A lock address on the session's etcd, with a key no other test uses."""
    return etcd.url(key_of_its_own(request))


@pytest.fixture(params=["file", "etcd", "redis", "cluster"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """A lock on each store in turn: a file, a key on the session's etcd, one on its
    Redis, and one on its Redis Cluster through one node (its key on each node in
    turn); with a way to plant a value where its record lives."""
    if request.param == "file":
        return StoreUnderTest("file", str(tmp_path / "locks" / "run.lock"))
    address: str = request.getfixturevalue(f"{request.param}_lock")
    return StoreUnderTest(request.param, address)


@pytest.fixture(params=["file", "etcd", "redis", "cluster"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> PlaceUnderTest:
    """A place to list on each store in turn: a folder, and a prefix no other test uses
    on the session's etcd, Redis and Redis Cluster."""
    if request.param == "file":
        return PlaceUnderTest("file", str(tmp_path / "locks"))
    prefix = f"skf-list/{request.node.name}/{os.urandom(4).hex()}/"
    servers = {"etcd": "etcd", "redis": "redis", "cluster": "redis_cluster"}
    server = request.getfixturevalue(servers[request.param])
    return PlaceUnderTest(request.param, server.url(prefix))


@pytest.fixture
def any_lock(store: StoreUnderTest) -> str:
    """The address of ``store``'s lock: a test that needs no planting runs on every store."""
    return store.lock


# --- A real Redis, started by the tests -------------------------------------------------


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    """One Redis for the session; tests use keys of their own."""
    elsewhere = started_elsewhere()
    if elsewhere is not None:
        yield Redis(None, elsewhere["redis"])
        return
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_lock(redis: Redis, request: pytest.FixtureRequest) -> str:
    """A lock address on the session's Redis, with a key no other test uses."""
    return redis.url(key_of_its_own(request))


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """One Redis Cluster of three primaries for the session."""
    elsewhere = started_elsewhere()
    if elsewhere is not None:
        yield RedisCluster([Redis(None, port) for port in elsewhere["cluster"]])
        return
    cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()


_CLUSTER_LOCKS = itertools.count()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    """A cluster of its own, for a test that moves slots or stops a node."""
    cluster = start_redis_cluster(tmp_path)
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_lock(redis_cluster: RedisCluster, request: pytest.FixtureRequest) -> str:
    """A lock address through the cluster's first node, with a key no other test uses,
    served by each node in turn (two in three calls are redirected)."""
    from redis.crc import key_slot

    node = next(_CLUSTER_LOCKS) % len(redis_cluster.nodes)
    owner = redis_cluster.slot_owners()
    while True:
        key = key_of_its_own(request)
        if owner(key_slot(("{" + key + "}").encode())) == node:
            return redis_cluster.url(key)


# --- Certificates for servers that speak TLS ----------------------------------------


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate, a client certificate, and a stranger CA."""
    elsewhere = started_elsewhere()
    if elsewhere is not None:
        return Pki(Path(elsewhere["pki"]))
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_redis(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    """Redis speaking only TLS, wanting a client certificate issued by the test CA."""
    server = start_tls_redis(
        tmp_path_factory.mktemp("tls-redis"),
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    )
    yield server
    server.stop()


# --- Interrupts, delivered where a real signal would land ----------------------------


@pytest.fixture
def armed(skf: ModuleType) -> Iterator[Any]:
    """The CLI's interrupt state, armed as `python3 skf-run-lock.py` arms it (no handlers:
    the tests deliver a signal by calling the handler where a real one would land)."""
    state = skf._Interrupts
    state.armed, state.shield, state.pending = True, 0, None
    yield state
    state.armed, state.shield, state.pending = False, 0, None


# --- Waiters, watched where they block -------------------------------------------


@pytest.fixture
def watching(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a waiter sits waiting on its store (etcd: on its watch)."""
    waiting = threading.Event()

    class Watched(WrappedStore):
        def wait(self, *args: object) -> bool:
            waiting.set()
            return bool(self.real.wait(*args))

    wrap_stores(skf, monkeypatch, Watched)
    return waiting


@pytest.fixture
def counted_tries(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each try a waiter (an owner "wf:waiter:...") makes, as whether it took the lock:
    a try refused puts its place in line (or finds it there), one that takes applies
    its change."""
    tries: list[bool] = []

    class Counted(WrappedStore):
        def join(self, look: Any, place: Any, now: float) -> None:
            if place.owner.startswith("wf:waiter:"):
                tries.append(False)
            self.real.join(look, place, now)

        def apply(self, look: Any, record: Any, owner: str, place: Any = None) -> bool:
            applied = bool(self.real.apply(look, record, owner, place))
            if applied and record is not None and owner.startswith("wf:waiter:"):
                tries.append(True)
            return applied

    wrap_stores(skf, monkeypatch, Counted)
    return tries


@pytest.fixture
def no_beats(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Places in line that need no keeping alive: a waiter wakes only for what it watches."""
    monkeypatch.setattr(skf._SEAMS, "place_ttl_sec", 3600.0)
    monkeypatch.setattr(skf._SEAMS, "beat_sec", 3600.0)


# --- Fuzzing: a sample by default, every mutation with --fuzz-long ---------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-long", action="store_true", help="fuzz every mutation of every shape read"
    )


@pytest.fixture
def fuzz_long(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--fuzz-long"))
