"""`run-id` where HOME cannot be written (agents' sandboxes), against the 3.0.0 helper.

    uv run python bench/sandbox.py
    uv run python bench/sandbox.py --rounds 60 --python /usr/bin/python3

An agent's sandbox commonly lets a command write only to its workspace and the temp
folder, so the compiled-code cache under HOME cannot be made. Each round runs, in
turn, the helper's `run-id`, this script's with HOME writable, and this script's with
HOME read-only (its `.cache` a file, so that root, whom modes do not stop, cannot make
it either), each in a fresh process as users run them, with site; it prints the
medians and their ratios to the helper's. Interleaving keeps a noisy machine fair.
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
SCRIPT = ROOT / "skf-run-lock.py"
HELPER = ROOT.parent / "shared" / "reference" / "skf-run-lock-3.0.0.py"


def call_seconds(python: str, script: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([python, str(script), "run-id"], stdout=subprocess.DEVNULL, check=True, env=env)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--python", default=sys.executable, help="the interpreter to time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        writable = Path(folder) / "home"
        read_only = Path(folder) / "read-only-home"
        temp = Path(folder) / "temp"
        for made in (writable, read_only, temp):
            made.mkdir()
        (read_only / ".cache").write_text("not a folder")
        read_only.chmod(0o555)
        base = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
        base |= {"TMPDIR": str(temp)}
        runs = {
            "3.0.0 helper": (HELPER, base | {"HOME": str(writable)}),
            "this, HOME writable": (SCRIPT, base | {"HOME": str(writable)}),
            "this, HOME read-only": (SCRIPT, base | {"HOME": str(read_only)}),
        }
        for script, env in runs.values():  # the first calls fill the caches
            call_seconds(args.python, script, env)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, (script, env) in runs.items():
                times[name].append(call_seconds(args.python, script, env))
        read_only.chmod(0o755)
    helper = statistics.median(times["3.0.0 helper"])
    print(f"| `run-id` ({args.python}, median of {args.rounds}) | time | ratio |\n|---|---|---|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| {name} | {median * 1e3:.1f} ms | {median / helper:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
