"""What one CLI call costs, by how it is got: the copied file or the installed command.

    uv run python bench/entry.py                  # 60 interleaved rounds
    uv run python bench/entry.py --rounds 200 --against 4061bd4

Builds the wheel (``uv build``) and installs it into a fresh environment, then runs,
round after round and in turn, a ``status`` of a held file lock on tmpfs with: the
installed command ``skf-run-lock``; this checkout's ``skf-run-lock.py`` under the same
Python; each ``--against`` revision's file (default: 4061bd4, the last hand-edited one,
and 1.2.0 as released). Fresh processes, site on, as users run them. It prints the
median of each and its ratio to the file's, and the syntax nodes each file compiles
on every call (a server store carried as text is one node: a string).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from versus import other_script  # bench/versus.py, beside this file

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "skf-run-lock.py"
OLD = ROOT / "tests" / "fixtures" / "skf-run-lock-1.2.0.py"
TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def nodes(path: Path) -> int:
    """The syntax nodes a call of ``path`` as a script compiles."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(1 for _ in ast.walk(tree))


def installed(folder: Path) -> Path:
    """The ``skf-run-lock`` command of the wheel, installed in a fresh environment with
    its bytecode compiled, as pip installs a wheel (uv does so when asked)."""
    uv = shutil.which("uv")
    base = [uv] if uv else [sys.executable, "-m", "uv"]
    build = [*base, "build", "--wheel", "--out-dir", str(folder)]
    subprocess.run(build, cwd=ROOT, check=True, capture_output=True)
    (wheel,) = folder.glob("skf_run_lock-*.whl")
    venv = folder / "venv"
    make = [*base, "venv", "--python", sys.executable, str(venv)]
    subprocess.run(make, check=True, capture_output=True)
    env = {"VIRTUAL_ENV": str(venv), "PATH": ""}
    install = [*base, "pip", "install", "--compile-bytecode", str(wheel)]
    subprocess.run(install, env=env, check=True, capture_output=True)
    return venv / "bin" / "skf-run-lock"


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--against", nargs="*", default=["4061bd4"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory(dir=TMPFS) as locks:
        folder = Path(scratch)
        lock = str(Path(locks) / "bench.lock")
        files = {"this file": SCRIPT}
        files |= {f"file at {spec}": other_script(spec, folder) for spec in args.against}
        files["1.2.0 file"] = OLD
        calls = {"installed command": [str(installed(folder)), "status", "--lock", lock]}
        calls |= {
            name: [sys.executable, str(p), "status", "--lock", lock] for name, p in files.items()
        }
        subprocess.run(
            [*calls["this file"][:2], "acquire", "--lock", lock, "--owner", "b:e:1"],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        for argv in calls.values():  # warm the caches: the first calls are not counted
            once(argv)
            once(argv)
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, argv in calls.items():
                times[name].append(once(argv))
        counts = {name: nodes(path) for name, path in files.items()}
    base = statistics.median(times["this file"])
    print(
        f"Python {sys.version.split()[0]}, {args.rounds} interleaved rounds, status of a held lock"
    )
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<22} {median * 1000:7.1f} ms  {median / base:5.2f}x the file")
    for name, count in counts.items():
        print(f"  {name:<22} compiles {count:,} syntax nodes per call")


if __name__ == "__main__":
    main()
