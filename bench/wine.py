"""A file lock taken in turns by 8 processes for 30 s: Windows CPython under Wine beside
Linux CPython on the same machine, in one run.

Each process is tests/worker.py's ``share-slots`` with one slot: wait in line (5 s at
most) for the lock, note itself inside (exit 3 if another is there), hold it 40-120 ms,
release it, work 0-40 ms, again. Printed for each side: takes per second by all the
processes, the longest wait and its 99th percentile, waits that ran out, and whether
anything but the lock's folder was left. No figure is a pass or a fail.

Usage (needs Debian's wine64; tools/windows.py fetches the Windows CPython once)::

    uv run python bench/wine.py                 # 8 processes, 30 s each side
    uv run python bench/wine.py --procs 4 --seconds 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import windows  # noqa: E402 - tools/windows.py, the lane's set-up


def _side(command: list[str], env: dict[str, str], folder: Path, procs: int, seconds: float) -> str:
    """Run ``procs`` take-turns workers for ``seconds``; one line of figures."""
    (folder / "inside").mkdir(parents=True)
    lock = folder / "locks" / "run.lock"
    logs = [folder / f"out{n}" for n in range(procs)]
    workers = [
        subprocess.Popen(
            [*command, "share-slots", str(lock), f"wf:turn{n}", "1", str(folder), str(log)],
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for n, log in enumerate(logs)
    ]
    time.sleep(seconds)
    (folder / "stop").touch()
    codes = [worker.wait(timeout=120) for worker in workers]
    lines = [line for log in logs for line in log.read_text().splitlines()]
    took = [line.split() for line in lines if line.startswith("took")]
    waits = sorted(float(fields[1]) for fields in took)
    gave_up = sum(line.startswith("gave-up") for line in lines)
    first = min(float(fields[2]) for fields in took)
    last = max(float(fields[3]) for fields in took)
    rate = len(took) / (last - first)
    p99 = waits[int(0.99 * (len(waits) - 1))]
    left = sorted(os.listdir(lock.parent)) if lock.parent.exists() else []
    return (
        f"{rate:6.1f} takes/s  longest wait {waits[-1]:.2f} s  p99 {p99:.2f} s"
        f"  median {statistics.median(waits):.2f} s  gave up {gave_up}"
        f"  exits {sorted(set(codes))}  left {left or 'nothing'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    wine = windows.wine()
    python = windows.prepare_python()
    site = windows.prepare_site()
    environment = windows.wine_environment(site)
    windows.wineserver(wine, "-p", environment)
    try:
        windows.boot(wine, environment)
        worker = ROOT / "tests" / "worker.py"
        with tempfile.TemporaryDirectory() as scratch:
            linux = _side(
                [sys.executable, str(worker)],
                {**os.environ},
                Path(scratch) / "linux",
                args.procs,
                args.seconds,
            )
            wine_command = [wine, str(python / "python.exe"), windows.windows_path(worker)]
            under_wine = _side(
                wine_command, environment, Path(scratch) / "wine", args.procs, args.seconds
            )
    finally:
        windows.wineserver(wine, "-k", environment)
    print(f"{args.procs} processes taking turns on one file lock for {args.seconds:g} s")
    print(f"Linux CPython {sys.version.split()[0]}: {linux}")
    print(f"Windows CPython under Wine:   {under_wine}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
