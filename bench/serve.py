"""What ``serve`` costs an agent session: its start, a tool call beside a CLI call, and
a session hold's renewal on etcd and Redis.

    uv run python bench/serve.py
    uv run python bench/serve.py --rounds 20 --cold-rounds 5 --calls 200 --cli-calls 50

1. Start to first answer: from the process's start to the initialize response, each
   way of starting it in turn, round after round. ``.venv/bin/python skf-run-lock.py
   serve`` (the SDK in the environment), and ``uv run --with "mcp>=2.3,<3"
   skf-run-lock.py serve`` in a folder outside any project, warm (uv's cache has the
   SDK) and cold (a fresh ``UV_CACHE_DIR`` each time: the SDK downloaded from PyPI).
   Where ``PYTHONDONTWRITEBYTECODE`` is set (as on this project's machines) Python
   compiles every module the SDK imports on each start; the rows "bytecode kept" start
   as Python does by default once it has run, from a venv installed with
   ``--compile-bytecode`` and from a cache of uv's own to which the first start wrote it.
   A warm ``uv run`` still asks the index whether the SDK and its dependencies changed
   (unless its cached answers are fresh); ``--offline`` shows what it costs without.
2. A tool call on a file lock (tmpfs): ``acquire`` renewing the session's own hold, and
   ``status``, as raw JSON-RPC lines over one server's pipes, beside the CLI's
   ``acquire`` renewing its own and ``status``, a fresh process each, interleaved.
3. One renewal of a session hold on etcd and Redis (both started as the tests start
   them): the server's renewer (``_Renewer.renew``, run here in this process as the
   server's renewal thread runs it), the acquire tool again through a server, and a
   plain ``acquire()`` renewing its own (what bench/trips.py counts). Round trips are
   counted twice: the gateway's requests (bench/trips.py's way) and, on the wire, by a
   proxy in front of the server (connections, and the client's turns to speak); the
   times are taken without the proxy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "skf-run-lock.py"
TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
SDK = "mcp>=2.3,<3"
sys.path.insert(0, str(ROOT / "tests"))

from servers import start_etcd, start_redis  # noqa: E402
from trips import counted, loaded, sender  # noqa: E402 (bench/trips.py, beside this file)

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "bench-serve", "version": "0"},
}


def spread(samples: list[float]) -> str:
    """The median and the middle half (quartiles) of ``samples`` (seconds), in ms."""

    def ms(value: float) -> str:
        return f"{value * 1e3:,.0f}" if value >= 0.1 else f"{value * 1e3:.2f}"

    median = statistics.median(samples)
    if len(samples) < 2:
        return f"{ms(median)} ms"
    low, _, high = statistics.quantiles(samples, n=4, method="inclusive")
    return f"{ms(median)} ms ({ms(low)}-{ms(high)})"


def users_env(**changes: str | None) -> dict[str, str]:
    """This environment as a user's shell has it: without the venv ``uv run`` puts in
    front of this bench (a nested ``uv run`` would build on it), with ``changes``
    (None: removed)."""
    env = dict(os.environ)
    venv = env.pop("VIRTUAL_ENV", None)
    if venv:
        path = env.get("PATH", "").split(os.pathsep)
        env["PATH"] = os.pathsep.join(p for p in path if p != str(Path(venv) / "bin"))
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# --- A client of raw JSON-RPC lines


class Session:
    """A ``serve`` process and its pipes: requests written as lines, answers read."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; its answer (notifications before it are passed over)."""
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"serve ended: {self.stderr_tail()}")
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer["result"]
                return result

    def send(self, message: dict[str, Any]) -> None:
        stdin: IO[bytes] | None = self.proc.stdin
        assert stdin is not None
        stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        stdin.flush()

    def initialize(self) -> float:
        """Initialize the session: seconds from the process's start to the answer."""
        self.ask("initialize", INITIALIZE)
        took = time.perf_counter() - self.started
        self.send({"method": "notifications/initialized"})
        return took

    def tool(self, name: str, **arguments: object) -> dict[str, Any]:
        result = self.ask("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name}: {result['content'][0]['text']}")
        answer: dict[str, Any] = result["structuredContent"]
        return answer

    def stderr_tail(self) -> str:
        self.proc.kill()
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-600:]

    def close(self) -> None:
        """End the session as a client does: stdin closed (its holds are released)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def first_answer(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    session = Session(argv, env, cwd)
    try:
        return session.initialize()
    finally:
        session.close()


# --- 1. Start to first answer


def starts(args: argparse.Namespace, scratch: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is not on PATH")
    # A copy outside any project: uv runs it as a user's copy, no project synced first.
    folder = scratch / "user"
    folder.mkdir()
    script = folder / "skf-run-lock.py"
    shutil.copy(SCRIPT, script)
    here = users_env()
    kept = users_env(PYTHONDONTWRITEBYTECODE=None)
    # A venv with the SDK's bytecode compiled at install, from uv's cache.
    venv = scratch / "compiled"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=here)
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--compile-bytecode",
            "--python",
            str(venv / "bin/python"),
            SDK,
        ],
        check=True,
        env=here,
    )
    kept_cache = {**kept, "UV_CACHE_DIR": str(scratch / "uv-cache-kept")}
    with_sdk = [uv, "run", "--with", SDK, "skf-run-lock.py", "serve"]
    ways: dict[str, tuple[list[str], dict[str, str]]] = {
        ".venv/bin/python skf-run-lock.py serve": ([sys.executable, str(script), "serve"], here),
        "the same, bytecode kept (a venv installed --compile-bytecode)": (
            [str(venv / "bin/python"), str(script), "serve"],
            kept,
        ),
        "uv run --with, warm": (with_sdk, here),
        "uv run --with, warm, bytecode kept (a cache of its own)": (with_sdk, kept_cache),
        "the same, --offline (no index asked)": (
            [*with_sdk[:2], "--offline", *with_sdk[2:]],
            kept_cache,
        ),
    }
    cold_name = "uv run --with, cold (a fresh UV_CACHE_DIR)"
    times: dict[str, list[float]] = {name: [] for name in [*ways, cold_name]}
    cold_failed = ""

    def cold() -> None:
        nonlocal cold_failed
        cache = Path(tempfile.mkdtemp(prefix="uv-cache-", dir=scratch))
        try:
            times[cold_name].append(
                first_answer(with_sdk, {**here, "UV_CACHE_DIR": str(cache)}, folder)
            )
        except RuntimeError as exc:
            cold_failed = str(exc)
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    # The first start of each fills what it keeps (the script's code cache, uv's
    # cached environment, the bytecode); not counted.
    first_answer(*ways[".venv/bin/python skf-run-lock.py serve"], folder)
    first_answer(with_sdk, kept_cache, folder)  # downloads the SDK into its own cache
    for argv, env in ways.values():
        first_answer(argv, env, folder)
    cold_every = max(1, args.rounds // max(1, args.cold_rounds))
    for round_number in range(args.rounds):
        order = list(ways.items())
        for name, (argv, env) in order if round_number % 2 else order[::-1]:
            times[name].append(first_answer(argv, env, folder))
        if round_number % cold_every == 0 and len(times[cold_name]) < args.cold_rounds:
            cold()
    while not cold_failed and len(times[cold_name]) < args.cold_rounds:
        cold()
    base = statistics.median(times[".venv/bin/python skf-run-lock.py serve"])
    print(
        f"\n1. Start to the initialize answer ({args.rounds} interleaved rounds;"
        f" cold: {len(times[cold_name])}), median (quartiles)\n"
    )
    print("| start | time | ratio |\n|---|---|---|")
    for name, samples in times.items():
        if samples:
            ratio = statistics.median(samples) / base
            print(f"| {name} | {spread(samples)} | {ratio:.2f}x |")
    if cold_failed:
        print(f"\ncold could not be measured here: {cold_failed}")


# --- 2. A tool call beside a CLI call


def cli_seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def tool_calls(args: argparse.Namespace, locks: Path) -> None:
    served, own = str(locks / "served.lock"), str(locks / "cli.lock")
    session = Session([sys.executable, str(SCRIPT), "serve"])
    cli = [sys.executable, str(SCRIPT)]
    cli_acquire = [*cli, "acquire", "--lock", own, "--owner", "bench:cli:r1"]
    cli_status = [*cli, "status", "--lock", own]
    times: dict[str, list[float]] = {
        name: [] for name in ("serve acquire", "serve status", "CLI acquire", "CLI status")
    }
    try:
        session.initialize()
        assert session.tool("acquire", lock=served, owner="bench:serve:r1")["acquired"]
        cli_seconds(cli_acquire)

        def renew() -> None:
            answer = session.tool("acquire", lock=served, owner="bench:serve:r1")
            assert answer["acquired"] and answer["refreshed"], answer

        def look() -> None:
            assert session.tool("status", lock=served)["state"] == "held"

        per_round = max(1, args.calls // args.cli_calls)
        for round_number in range(args.cli_calls):
            in_cli = [("CLI acquire", cli_acquire), ("CLI status", cli_status)]
            for name, argv in in_cli if round_number % 2 else in_cli[::-1]:
                times[name].append(cli_seconds(argv))
            for _ in range(per_round):
                times["serve acquire"].append(timed(renew))
                times["serve status"].append(timed(look))
    finally:
        session.close()
        release = [*cli, "release", "--lock", own, "--owner", "bench:cli:r1"]
        subprocess.run(release, check=True, capture_output=True)
    print(
        f"\n2. A call on a file lock (tmpfs): through one server ({len(times['serve status'])}"
        f" calls each), beside the CLI (a fresh process each, {args.cli_calls}), interleaved\n"
    )
    print("| call | through serve | CLI | ratio |\n|---|---|---|---|")
    for call, label in (("acquire", "`acquire`, renewing its own"), ("status", "`status`")):
        served_times, cli_times = times[f"serve {call}"], times[f"CLI {call}"]
        ratio = statistics.median(served_times) / statistics.median(cli_times)
        print(f"| {label} | {spread(served_times)} | {spread(cli_times)} | {ratio:.3f}x |")


# --- 3. A session hold's renewal on etcd and Redis


class CountingProxy:
    """A TCP proxy on loopback in front of 127.0.0.1:``target``: it counts the
    connections made through it and the client's turns (bytes from the client after the
    server last answered, or first on a connection: one round trip each)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.connections = 0
        self.turns = 0
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def counts(self) -> tuple[int, int]:
        return self.connections, self.turns

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
            self.connections += 1
            answered = [True]  # the client's next bytes are a new turn
            for source, sink, from_client in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(source, sink, from_client, answered), daemon=True
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, from_client: bool, answered: list[bool]
    ) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                break
            if not data:
                break
            if from_client and answered[0]:
                self.turns += 1
                answered[0] = False
            elif not from_client:
                answered[0] = True  # before the client can have read it
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def wire_counts(proxy: CountingProxy, call: Callable[[], object], times: int) -> str:
    """Connections and turns per call of ``call`` on the wire: the same each time, or
    their range."""
    seen = []
    for _ in range(times):
        before = proxy.counts()
        call()
        time.sleep(0.005)  # the last answer's bytes through the proxy's threads
        after = proxy.counts()
        seen.append((after[0] - before[0], after[1] - before[1]))
    connects, turns = {c for c, _ in seen}, {t for _, t in seen}

    def shown(values: set[int]) -> str:
        return str(min(values)) if len(values) == 1 else f"{min(values)}-{max(values)}"

    return f"{shown(connects)} connect + {shown(turns)}"


def renewals(args: argparse.Namespace, scratch: Path) -> None:
    skf: ModuleType = loaded(SCRIPT, "skf_serve_bench")
    skf._compile_carried("serve")
    lease = 300.0  # the server's: no renewal of its own during the counts
    for name in ("etcd", "redis"):
        (scratch / name).mkdir()
    etcd = start_etcd(scratch / "etcd")
    redis = start_redis(scratch / "redis")
    proxies = {
        "etcd": CountingProxy(int(etcd.client.rpartition(":")[2])),
        "redis": CountingProxy(redis.port),
    }
    session = Session([sys.executable, str(SCRIPT), "serve", "--lease", "5m"])
    ways = ("renewer", "tool", "plain")
    rows: dict[str, list[str]] = {way: [] for way in ways}
    try:
        session.initialize()
        for store, server, gateway in (
            ("etcd", etcd, sender(skf, ("_EtcdGateway",))),
            ("redis", redis, sender(skf, ("_RedisGateway",))),
        ):
            sends = "post" if store == "etcd" else "call"
            proxy = proxies[store]

            def at(key: str, proxied: bool, store: str = store, server: Any = server) -> str:
                url: str = server.url(f"serve-bench/{key}")
                if proxied:
                    direct = etcd.client if store == "etcd" else f"127.0.0.1:{redis.port}"
                    url = url.replace(direct, f"127.0.0.1:{proxies[store].port}")
                return url

            renew: dict[tuple[str, bool], Callable[[], object]] = {}
            for proxied in (False, True):
                tail = "proxied" if proxied else "direct"
                request, _ = skf._session_request(
                    {"lock": at(f"renewer/{tail}", proxied), "owner": "bench:renewer:r1"}, lease
                )
                hold = skf._take(request)
                assert isinstance(hold, skf._Hold), hold
                renewer = skf._Renewer(request, hold)

                def by_renewer(renewer: Any = renewer) -> None:
                    assert renewer.renew() is None

                tool_lock = at(f"tool/{tail}", proxied)
                assert session.tool("acquire", lock=tool_lock, owner="bench:tool:r1")["acquired"]

                def by_tool(lock: str = tool_lock) -> None:
                    assert session.tool("acquire", lock=lock, owner="bench:tool:r1")["refreshed"]

                plain_lock = at(f"plain/{tail}", proxied)
                assert skf.acquire(plain_lock, "bench:plain:r1", lease)["acquired"]

                def by_plain(lock: str = plain_lock) -> None:
                    assert skf.acquire(lock, "bench:plain:r1", lease)["refreshed"]

                renew.update(
                    {("renewer", proxied): by_renewer, ("tool", proxied): by_tool}
                    | {("plain", proxied): by_plain}
                )
            times: dict[str, list[float]] = {way: [] for way in ways}
            for round_number in range(args.calls):
                order = list(ways) if round_number % 2 else list(ways)[::-1]
                for way in order:
                    times[way].append(timed(renew[(way, False)]))
            for way in ways:
                requests = counted(gateway, sends, renew[(way, True)]) if way != "tool" else None
                wire = wire_counts(proxy, renew[(way, True)], 10)
                told = "-" if requests is None else str(requests)
                rows[way].append(f"{told} | {wire} | {spread(times[way])}")
    finally:
        session.close()
        for proxy in proxies.values():
            proxy.close()
        etcd.stop()
        redis.stop()
    labels = {
        "renewer": "the server's renewer (`_Renewer.renew`), in this process",
        "tool": "the acquire tool again, through the server",
        "plain": "`acquire()` renewing a plain hold (bench/trips.py's)",
    }
    print(
        f"\n3. One renewal on etcd and Redis (loopback): requests the gateway sent, on the"
        f" wire: TCP connections made + the client's turns, median of {args.calls} (quartiles)\n"
    )
    print(
        "| renewal | etcd requests | on the wire | time | Redis round trips | on the wire | time |"
        "\n|---|---|---|---|---|---|---|"
    )
    for way in ways:
        print(f"| {labels[way]} | {' | '.join(rows[way])} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="starts of each warm way")
    parser.add_argument("--cold-rounds", type=int, default=5, help="cold starts (each downloads)")
    parser.add_argument("--calls", type=int, default=200, help="calls through the server")
    parser.add_argument("--cli-calls", type=int, default=50, help="CLI calls (fresh processes)")
    parser.add_argument("--only", choices=("starts", "calls", "renewals"), help="one section")
    args = parser.parse_args()
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"{sys.executable} lacks the MCP SDK: run uv sync (the dev group)"
        ) from None
    load = os.getloadavg()
    uv = subprocess.run(["uv", "--version"], check=True, capture_output=True, text=True).stdout
    print(
        f"uv run python bench/serve.py {' '.join(sys.argv[1:])}".rstrip()
        + f"\n{os.cpu_count()} cores,"
        f" {platform.python_implementation()} {platform.python_version()}, {uv.strip()},"
        f" PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r},"
        f" load average at the start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory(dir=TMPFS) as locks:
        if args.only in (None, "starts"):
            starts(args, Path(scratch))
        if args.only in (None, "calls"):
            tool_calls(args, Path(locks))
        if args.only in (None, "renewals"):
            renewals(args, Path(scratch))
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
