"""Coverage of the modules, measured on the built file the suite tests.

    uv run python tools/cover.py              # the whole suite, then the table
    uv run python tools/cover.py -- -k etcd   # pytest arguments after --
    uv run python tools/cover.py --report     # the table of the last run again

The suite tests skf-run-lock.py as it is, mostly in fresh processes, so coverage.py
measures that file, in every Python process the suite starts (``[run] patch =
subprocess``, coverage 7.10 and later). Coverage's own report of the built file would
miss the server stores: their modules are carried as text, which a parser of the built
file sees as one string. So this tool maps each line that ran, by the build's own map
(tools/bundle.py: every built line knows its module and line), back to the modules,
and lets coverage.py report on the modules: their statements, the lines that ran.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "skf_run_lock"
SCRIPT = ROOT / "skf-run-lock.py"
DATA = ROOT / ".coverage-run"  # the raw measurements of the built file, one per process
MAPPED = ROOT / ".coverage"  # the modules' lines, as coverage.py reports them
sys.path.insert(0, str(ROOT / "tools"))
import bundle  # noqa: E402  (tools/bundle.py, beside this file)

# What the build takes out of a module's place, so it can never run there: imports
# (the standard library's are hoisted to the top of the built file, the package's
# dropped, as one namespace holds every name), the TYPE_CHECKING flag and what only type
# checkers read, and the package's ``python -m`` entry.
BUILD_MOVES = [
    r"^(import|from) ",
    r"^    from \.",
    r"^TYPE_CHECKING = False",
    r"^if TYPE_CHECKING:",
    r"^if __name__ == .__main__.:",
]

CONFIG = """\
[run]
patch = subprocess
parallel = true
data_file = {data}/raw
include = {script}
"""


def measure(pytest_args: list[str]) -> int:
    """Run the suite under coverage, every process it starts measured; pytest's code."""
    shutil.rmtree(DATA, ignore_errors=True)
    DATA.mkdir()
    config = DATA / "coveragerc"
    config.write_text(CONFIG.format(data=DATA, script=SCRIPT), encoding="utf-8")
    env = {**os.environ, "COVERAGE_RCFILE": str(config)}
    # One pytest process: coverage follows it and every process it starts.
    command = [sys.executable, "-m", "coverage", "run", "-m", "pytest", "-n", "0", *pytest_args]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


def mapped_lines() -> dict[str, set[int]]:
    """The lines that ran, by module file: the built file's, mapped back."""
    import coverage

    raw = coverage.CoverageData(basename=str(DATA / "raw"))
    combiner = coverage.Coverage(data_file=str(DATA / "raw"), config_file=False)
    combiner.combine([str(DATA)], keep=True)
    combiner.save()
    raw.read()
    ran = raw.lines(str(SCRIPT)) or []
    origin = bundle.build(PACKAGE)
    by_module: dict[str, set[int]] = {}
    for number in ran:
        line = origin[number - 1]
        if line.module is not None:
            path = str(bundle.source_of(line.module, PACKAGE))
            by_module.setdefault(path, set()).add(line.number)
    return by_module


def report() -> float:
    """Write the modules' coverage data and print coverage.py's table; the total %."""
    import coverage

    by_module = mapped_lines()
    MAPPED.unlink(missing_ok=True)
    data = coverage.CoverageData(basename=str(MAPPED))
    # Every module is reported, one no test ran as 0%.
    data.add_lines({str(path): sorted(by_module.get(str(path), ())) for path in _modules()})
    data.write()
    # No config file: the project's settings are for pytest's own run.
    cov = coverage.Coverage(data_file=str(MAPPED), config_file=False)
    cov.set_option("report:exclude_lines", BUILD_MOVES)
    cov.load()
    total = cov.report(show_missing=False, skip_covered=False)
    return float(total)


def _modules() -> list[Path]:
    """The files the built file is made of: the modules, and the build's boot code."""
    return [*sorted(PACKAGE.glob("*.py")), bundle.BOOT]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="the last run's table again")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args(argv)
    code = 0
    if not args.report:
        code = measure(args.pytest_args)
    report()
    return code


if __name__ == "__main__":
    sys.exit(main())
