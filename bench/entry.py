"""What one file-lock CLI call costs, beside the 3.0.0 helper this project replaces.

    uv run python bench/entry.py                       # 40 interleaved rounds
    uv run python bench/entry.py --rounds 100 --against 4061bd4

Runs, round after round and in turn, each call with: the 3.0.0 helper
(``../shared/reference/skf-run-lock-3.0.0.py``, beside the checkout); this checkout's
``skf-run-lock.py`` as users run it (its cache warm); the same without its cache
(``SKF_RUN_LOCK_NO_CACHE=1``: it compiles its code on every call); each ``--against``
revision's file (default: 4061bd4, the last hand-edited one); and the installed
command (the wheel, built and installed with its bytecode into a fresh environment).
Fresh processes, site on, the lock on tmpfs. The calls: ``run-id``; ``acquire`` that
renews its own lock; and ``status`` of a lock another run holds, beside the helper's
``acquire`` refused by it (the helper has no ``status``: that is its read-only call).
It prints the median of each and its ratio to the helper's.
"""

from __future__ import annotations

import argparse
import os
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
HELPER = ROOT.parent / "shared" / "reference" / "skf-run-lock-3.0.0.py"
TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


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


def once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--against", nargs="*", default=["4061bd4"])
    args = parser.parse_args()
    if not HELPER.is_file():
        raise SystemExit(f"the 3.0.0 helper is not at {HELPER}")
    plain = dict(os.environ)
    no_cache = {**plain, "SKF_RUN_LOCK_NO_CACHE": "1"}
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory(dir=TMPFS) as locks:
        folder = Path(scratch)
        own, held = str(Path(locks) / "own.lock"), str(Path(locks) / "held.lock")
        python = [sys.executable]
        takers: dict[str, tuple[list[str], dict[str, str]]] = {
            "the 3.0.0 helper": ([*python, str(HELPER)], plain),
            "this file": ([*python, str(SCRIPT)], plain),
            "this file, no cache": ([*python, str(SCRIPT)], no_cache),
        }
        for spec in args.against:
            takers[f"the file at {spec}"] = ([*python, str(other_script(spec, folder))], plain)
        takers["installed command"] = ([str(installed(folder))], plain)
        take = [*python, str(SCRIPT), "acquire", "--lock", held, "--owner", "b:other:1"]
        subprocess.run(take, stdout=subprocess.DEVNULL, check=True)
        calls = {
            "run-id": (["run-id"], ["run-id"]),
            "acquire (renewing its own)": (
                ["acquire", "--lock", own, "--owner", "b:e:1"],
                ["acquire", "--lock", own, "--owner", "b:e:1"],
            ),
            "status of a held lock": (
                ["acquire", "--lock", held, "--owner", "b:e:2"],  # the helper's read-only call
                ["status", "--lock", held],
            ),
        }
        times: dict[tuple[str, str], list[float]] = {}
        for call, (helper_args, our_args) in calls.items():
            for name, (head, env) in takers.items():
                argv = [*head, *(helper_args if name == "the 3.0.0 helper" else our_args)]
                once(argv, env)  # warm the caches: the first calls are not counted
                once(argv, env)
                times[(call, name)] = []
        for _ in range(args.rounds):
            for call, (helper_args, our_args) in calls.items():
                for name, (head, env) in takers.items():
                    argv = [*head, *(helper_args if name == "the 3.0.0 helper" else our_args)]
                    times[(call, name)].append(once(argv, env))
    print(f"Python {sys.version.split()[0]}, {args.rounds} interleaved rounds, medians\n")
    print("| call | " + " | ".join(takers) + " |")
    print("|---|" + "---|" * len(takers))
    for call in calls:
        base = statistics.median(times[(call, "the 3.0.0 helper")])
        cells = []
        for name in takers:
            median = statistics.median(times[(call, name)])
            cells.append(f"{median * 1000:.1f} ms ({median / base:.2f}x)")
        print(f"| {call} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
