"""Churn: processes that take and release slots of one lock as fast as they can.

    uv run --group bench python bench/churn.py
    uv run --group bench python bench/churn.py --procs 16 --slots 16 --seconds 20

Each of ``--procs`` processes loops for ``--seconds``: take a slot of a lock of
``--slots`` (``acquire``, no wait), release it at once, again; nobody holds a slot for
long, so the lock's record changes as often as the store lets it. A change whose read
is overtaken by another's loses its race and is tried again; a call gives up with
"kept changing; try again" once it has lost too many in a row, and a release that
gives up leaves its slot held until its timeout. Printed per store, side by side:

  calls/s      takes and releases that landed per second, by all the processes
  gave up      calls that gave up (kept changing), takes and releases
  left         slots still held once every process has stopped (given-up releases)

The servers are started here on loopback and stopped by their process ids. A file
lock changes under its guard and never loses a race: it is here as the reference.
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
    """One process: ``LOCK NAME SLOTS UNTIL``; prints ``landed gave_up_take gave_up_release``."""
    lock, name, slots, until = args
    skf = load_script()
    landed = gave_up_take = gave_up_release = 0
    n = 0
    while time.time() < float(until):
        n += 1
        owner = f"churn:{name}:{n}"
        try:
            taken = skf.acquire(lock, owner, 600.0, slots=int(slots))
        except BlockingIOError:
            gave_up_take += 1
            continue
        landed += 1
        if not taken["acquired"]:
            continue  # every slot held: a given-up release keeps one
        try:
            skf.release(lock, owner)
            landed += 1
        except BlockingIOError:
            gave_up_release += 1
    print(landed, gave_up_take, gave_up_release)
    return 0


def one_run(lock: str, procs: int, slots: int, seconds: float) -> dict[str, float]:
    """Churn ``lock`` with ``procs`` processes for ``seconds``: the figures."""
    start = time.time() + 1.0 + 0.05 * procs  # every process loaded first
    until = start + seconds
    running = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", lock, f"p{n}", str(slots), str(until)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(procs)
    ]
    landed = gave_up = 0
    for proc in running:
        out, _ = proc.communicate()
        calls, takes, releases = map(int, out.split())
        landed += calls
        gave_up += takes + releases
    skf = load_script()
    left = len(skf.status(lock, 600.0, slots=slots)["holders"])
    return {"calls_per_s": landed / seconds, "gave_up": gave_up, "left": left}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="file,redis,etcd")
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    options = parser.parse_args()
    from servers import start_etcd, start_redis

    folder = Path(tempfile.mkdtemp(prefix="skf-churn-"))
    print(
        f"# Python {sys.version.split()[0]}, {os.cpu_count()} cores; {options.procs} processes"
        f" on {options.slots} slots, {options.seconds:g} s a run"
    )
    print("| store | calls/s | gave up | left |")
    print("|---|---|---|---|")
    for store in options.stores.split(","):
        name = f"churn-{random.getrandbits(32):08x}"
        server = None
        if store == "file":
            lock = str(folder / "file" / name)
        else:
            server = start_etcd(folder / "etcd") if store == "etcd" else start_redis(folder)
            lock = server.url(name)
        try:
            run = one_run(lock, options.procs, options.slots, options.seconds)
        finally:
            if server is not None:
                server.stop()
        print(f"| {store} | {run['calls_per_s']:.0f} | {run['gave_up']:.0f} | {run['left']:.0f} |")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker(sys.argv[2:]))
    sys.exit(main())
