"""What a line of waiters parked behind a holder costs, per second: a lock held for
the whole run, and waiters that only keep their places and wait.

    uv run --group bench python bench/parked.py
    uv run --group bench python bench/parked.py --waiters 64 --seconds 10 --against OLD.py

For each store (a file, etcd, Redis), one holder takes a lock for 600 s and
``--waiters`` processes wait for it (``acquire_within``, with a budget longer than
the run). Once every one is in line, the CPU of the server and of the waiters is
read over ``--seconds`` (from ``/proc``). With ``--against``, another build (a
built file) is measured the same way, each on a lock of its own, in the order
this, that, that, this (the first measured of a store runs some 10% higher), and
each row gives the two means and their ratio. The waiters are then killed (their
places lapse) and the holder releases. The servers are started here on loopback
and stopped by their process ids.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from proc import SCRIPT, cpu_of, load_script  # noqa: E402  (bench/proc.py, beside this file)
from slots import lock_on  # noqa: E402


def waiter(lock: str, owner: str) -> int:
    """One waiter (``--waiter LOCK OWNER``): the build SKF_RUN_LOCK_UNDER_TEST names
    (bench/proc.py), waiting far longer than a run, until it is killed."""
    skf = load_script()
    try:
        skf.acquire_within(lock, owner, 60.0, 3600.0)
    except (skf.LockBusy, OSError):
        pass
    return 0


def parked(script: Path, lock: str, server: int | None, waiters: int, seconds: float) -> Any:
    """CPU seconds a second, over ``seconds``, of ``server`` (None: no server) and of
    ``waiters`` processes of the build ``script`` waiting for ``lock``, held meanwhile."""
    skf = load_script("skf_run_lock_parked", script)
    skf.acquire(lock, "bench:holder:1", 600.0)
    env = {**os.environ, "SKF_RUN_LOCK_UNDER_TEST": str(script)}
    argv = [sys.executable, __file__, "--waiter", lock]
    procs = [subprocess.Popen([*argv, f"bench:w{n}:1"], env=env) for n in range(waiters)]
    try:
        deadline = time.monotonic() + 60
        while len(skf.status(lock, 60.0)["waiting"]) < waiters:
            if time.monotonic() > deadline:
                raise SystemExit(f"{lock}: the waiters never all got into line")
            time.sleep(0.2)
        time.sleep(2.0)  # past the first beats
        server_before = 0.0 if server is None else cpu_of(server)
        waiters_before = sum(cpu_of(proc.pid) for proc in procs)
        time.sleep(seconds)
        server_cpu = None if server is None else (cpu_of(server) - server_before) / seconds
        waiters_cpu = (sum(cpu_of(proc.pid) for proc in procs) - waiters_before) / seconds
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        skf.release(lock, "bench:holder:1")
    return server_cpu, waiters_cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="file,etcd,redis")
    parser.add_argument("--waiters", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--against", type=Path, help="another build, measured after each")
    options = parser.parse_args()
    builds = [SCRIPT] + ([options.against.resolve()] if options.against else [])
    folder = Path(tempfile.mkdtemp(prefix="skf-parked-"))
    servers: list[tuple[str, Any]] = []
    made: list[Path] = []
    print(f"# {options.waiters} waiters parked behind a holder, {options.seconds:g} s each")
    if options.against:
        print("# each cell: this build / the build --against names (and the ratio)")
    print("| store | server CPU/s | waiters' CPU/s |")
    print("|---|---|---|")
    try:
        for store in options.stores.split(","):
            order = [0, 1, 1, 0] if options.against else [0]
            runs: list[list[Any]] = [[] for _ in builds]
            for n, which in enumerate(order):
                lock, server = lock_on(store, f"parked-{n}-{os.getpid()}", folder, servers, made)
                runs[which].append(
                    parked(builds[which], lock, server, options.waiters, options.seconds)
                )
            cells = []
            for column in range(2):
                if runs[0][0][column] is None:
                    cells.append("-")
                    continue
                taken = [sum(run[column] for run in done) / len(done) for done in runs]
                text = " / ".join(f"{value:.3f}" for value in taken)
                if len(taken) == 2 and taken[1]:
                    text += f" ({taken[0] / taken[1]:.2f}x)"
                cells.append(text)
            print(f"| {store} | {cells[0]} | {cells[1]} |", flush=True)
    finally:
        for _, server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--waiter"]:
        sys.exit(waiter(*sys.argv[2:4]))
    sys.exit(main())
