"""The floor: what a take costs the machine when nobody waits, store by store.

    uv run --group bench python bench/floor.py
    uv run --group bench python bench/floor.py --takes 1000 --slots 1,4 --hold 20

One process takes a slot and releases it, ``--takes`` times in a row, through the
library as the processes of ``bench/slots.py`` do, with nobody else on the lock: no
line, no watch, no lost race. Per take (the take and its release) the table gives
the wall time, the CPU the server spent (etcd's and Redis's, read from
``/proc/PID/stat``; a file lock has no server, its kernel time is the caller's), the
CPU the calling process spent, and how many takes a second one whole core could serve
at that cost. The servers are started here on loopback and stopped by their process
ids.

The second table holds that floor against what ``bench/slots.py`` asks of a lock: a
lock of N slots, each held ``--hold`` ms, is busy 70% of the time only if
0.7 * N / hold takes happen each second. It gives, for each store and count, that
rate and the share of one core that the floor alone takes at it, before any waiter
costs anything. A share near or above what the machine has free is a rate no line
can reach on it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from proc import ROOT, cpu_of, load_script

sys.path.insert(0, str(ROOT / "tests"))


def floor_of(skf: Any, lock: str, server: int | None, slots: int, takes: int) -> dict[str, float]:
    """Take and release a slot of ``lock`` ``takes`` times: costs per take, in ms."""
    skf.acquire(lock, "bench:floor:warm", 60.0, slots=slots)
    skf.release(lock, "bench:floor:warm")
    server_before = 0.0 if server is None else cpu_of(server)
    caller_before = time.process_time()
    started = time.perf_counter()
    for n in range(takes):
        taken = skf.acquire(lock, f"bench:floor:{n}", 60.0, slots=slots)
        assert taken["acquired"], taken["message"]
        skf.release(lock, f"bench:floor:{n}")
    wall = time.perf_counter() - started
    caller = time.process_time() - caller_before
    spent = 0.0 if server is None else cpu_of(server) - server_before
    return {
        "wall": wall / takes * 1000,
        "server": spent / takes * 1000,
        "caller": caller / takes * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="file,redis,etcd")
    parser.add_argument("--slots", default="1,4")
    parser.add_argument("--takes", type=int, default=500, help="takes per row")
    parser.add_argument("--hold", type=float, default=20.0, help="ms each slot is held")
    options = parser.parse_args()
    from servers import start_etcd, start_redis

    skf = load_script("skf_run_lock_floor")
    folder = Path(tempfile.mkdtemp(prefix="skf-floor-"))
    started: list[Any] = []
    rows = []
    try:
        for store in options.stores.split(","):
            server: int | None = None
            if store == "file":
                address = str(folder / "file")
            else:
                up = start_etcd(folder / "etcd") if store == "etcd" else start_redis(folder)
                started.append(up)
                assert up.proc is not None  # started here
                server = up.proc.pid
                address = ""
            for slots in map(int, options.slots.split(",")):
                name = f"floor-{slots}-{random.getrandbits(32):08x}"
                lock = str(Path(address) / name) if server is None else up.url(name)
                costs = floor_of(skf, lock, server, slots, options.takes)
                rows.append((store, slots, costs))
    finally:
        for up in started:
            up.stop()
    print(
        f"# Python {sys.version.split()[0]}, {os.cpu_count()} cores;"
        f" {options.takes} takes and releases in a row per row, nobody waiting"
    )
    print(
        "| store | slots | wall ms/take | server CPU ms/take | caller CPU ms/take |"
        " takes/s one core serves |"
    )
    print("|---|---|---|---|---|---|")
    for store, slots, costs in rows:
        cpu = costs["server"] + costs["caller"]
        server_text = "-" if store == "file" else f"{costs['server']:.2f}"
        print(
            f"| {store} | {slots} | {costs['wall']:.2f} | {server_text} |"
            f" {costs['caller']:.2f} | {1000 / cpu:.0f} |"
        )
    print()
    print(f"# busy 70% with each slot held {options.hold:g} ms needs 0.7 * N / hold takes/s")
    print("| store | slots | takes/s needed | share of one core the floor takes |")
    print("|---|---|---|---|")
    for store, slots, costs in rows:
        needed = 0.7 * slots / (options.hold / 1000)
        share = needed * (costs["server"] + costs["caller"]) / 1000
        print(f"| {store} | {slots} | {needed:.0f} | {share:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
