"""CLI acquire + release of this script against another version of it, side by side.

    uv run python bench/versus.py af2bcc1            # a git revision of this repository
    uv run python bench/versus.py path/to/other.py   # or any copy of the script
    uv run python bench/versus.py af2bcc1 --rounds 250

Each round runs, for each script in turn, `acquire` then `release` of a file lock on
tmpfs in fresh `python3 -S` processes (no site: what the script itself costs; with
``--site``, as users run it), and prints the medians and their ratio. Interleaving
the two keeps a noisy machine fair.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "skf-run-lock.py"
TMPFS = Path("/dev/shm")


def other_script(spec: str, folder: Path) -> Path:
    """The script named by ``spec``: a file, or a git revision of this repository's."""
    if Path(spec).is_file():
        return Path(spec)
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{spec}:skf-run-lock.py"],
        capture_output=True,
        check=True,
    ).stdout
    path = folder / f"skf-run-lock-{spec}.py"
    path.write_bytes(source)
    return path


def pair_seconds(script: Path, lock: Path, site: bool) -> float:
    """Seconds for one CLI acquire plus one CLI release."""
    started = time.perf_counter()
    flags = [] if site else ["-S"]
    for command in ("acquire", "release"):
        argv = [
            sys.executable,
            *flags,
            str(script),
            command,
            "--lock",
            str(lock),
            "--owner",
            "v:s:1",
        ]
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="a git revision, or the path of another copy")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--site", action="store_true", help="site on, as users run it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=TMPFS if TMPFS.is_dir() else None) as folder:
        scripts = {args.other: other_script(args.other, Path(folder)), "this": SCRIPT}
        times: dict[str, list[float]] = {name: [] for name in scripts}
        for round_number in range(args.rounds):
            # Each goes first every other round: the first of a pair ran measurably
            # slower (1-2%) on a busy machine.
            pairs = list(scripts.items())
            for name, script in pairs if round_number % 2 else pairs[::-1]:
                times[name].append(
                    pair_seconds(script, Path(folder) / f"{len(name)}.lock", args.site)
                )
    base = statistics.median(times[args.other])
    print(f"| script | acquire + release (CLI, median of {args.rounds}) | ratio |\n|---|---|---|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| {name} | {median * 1e3:.2f} ms | {median / base:.3f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
