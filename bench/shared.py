"""Shared holds under load: readers and writers taking turns on one lock.

    uv run --group bench python bench/shared.py
    uv run --group bench python bench/shared.py --readers 12 --writers 4 --seconds 30

Each process loops for the run's length: wait in line (``acquire_within``, a 10 s
budget) for a shared hold (a reader) or the lock alone (a writer), hold it 40-120 ms,
release it, work 0-40 ms, again. Per store, side by side in one run, the mix of
``--readers`` and ``--writers`` beside as many processes that all take the lock
alone:

  takes/s      holds taken per second, readers' and writers'
  writer wait  the longest and the 99th percentile wait of a writer
  inside       the most readers that held the lock at once
  gave up      waits whose budget ran out

The servers are started here on loopback and stopped by their process ids.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proc import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def worker(args: list[str]) -> int:
    """One process: ``LOCK NAME KIND UNTIL``; prints a line ``KIND WAIT START END`` a
    hold, and ``gave-up`` a wait that ran out."""
    lock, name, kind, until = args
    skf = load_script()
    n = 0
    while time.time() < float(until):
        n += 1
        owner = f"bench:{name}:{n}"
        asked = time.time()
        try:
            skf.acquire_within(lock, owner, 60.0, 10.0, shared=kind == "r")
        except skf.LockBusy:
            print("gave-up")
            continue
        start = time.time()
        time.sleep(random.uniform(0.04, 0.12))
        end = time.time()
        skf.release(lock, owner)
        print(kind, f"{start - asked:.4f}", f"{start:.4f}", f"{end:.4f}")
        time.sleep(random.uniform(0, 0.04))
    return 0


def most_inside(holds: list[tuple[float, float]]) -> int:
    """The most of ``holds`` (start, end) that overlap at one moment."""
    events = sorted([(start, 1) for start, _ in holds] + [(end, -1) for _, end in holds])
    inside = most = 0
    for _, step in events:
        inside += step
        most = max(most, inside)
    return most


def one_run(lock: str, kinds: list[str], seconds: float) -> dict[str, float]:
    """``kinds`` ("r" or "w", one a process) on ``lock`` for ``seconds``: the figures."""
    start = time.time() + 1.0 + 0.05 * len(kinds)  # every process loaded first
    until = start + seconds
    running = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", lock, f"p{n}", kind, str(until)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n, kind in enumerate(kinds)
    ]
    lines = [line.split() for proc in running for line in proc.communicate()[0].splitlines()]
    holds = [
        (kind, float(w), float(s), float(e)) for kind, w, s, e in (x for x in lines if len(x) == 4)
    ]
    writes = sorted(wait for kind, wait, _, _ in holds if kind == "w")
    reads = [(s, e) for kind, _, s, e in holds if kind == "r"]
    elapsed = max((e for _, _, _, e in holds), default=until) - start
    return {
        "reads_per_s": len(reads) / elapsed,
        "writes_per_s": len(writes) / elapsed,
        "longest": writes[-1] if writes else 0.0,
        "p99": writes[int(0.99 * (len(writes) - 1))] if writes else 0.0,
        "inside": most_inside(reads),
        "gave_up": sum(1 for line in lines if line == ["gave-up"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="file,etcd,redis")
    parser.add_argument("--readers", type=int, default=12)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    options = parser.parse_args()
    from servers import start_etcd, start_redis

    folder = Path(tempfile.mkdtemp(prefix="skf-shared-"))
    count = options.readers + options.writers
    mixes = {
        f"{options.readers} readers + {options.writers} writers": ["r"] * options.readers
        + ["w"] * options.writers,
        f"{count} writers": ["w"] * count,
    }
    print(
        f"# Python {sys.version.split()[0]}, {os.cpu_count()} cores;"
        f" {options.seconds:g} s a run; holds of 40-120 ms"
    )
    print(
        "| store | processes | reads/s | writes/s | writer wait longest | p99 | inside | gave up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for store in options.stores.split(","):
        server = None
        if store != "file":
            server = start_etcd(folder / "etcd") if store == "etcd" else start_redis(folder)
        try:
            for mix, kinds in mixes.items():
                name = f"shared-{random.getrandbits(32):08x}"
                lock = str(folder / "file" / name) if server is None else server.url(name)
                run = one_run(lock, kinds, options.seconds)
                print(
                    f"| {store} | {mix} | {run['reads_per_s']:.1f} | {run['writes_per_s']:.1f}"
                    f" | {run['longest']:.2f} s | {run['p99']:.2f} s | {run['inside']:.0f}"
                    f" | {run['gave_up']:.0f} |",
                    flush=True,
                )
        finally:
            if server is not None:
                server.stop()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker(sys.argv[2:]))
    sys.exit(main())
