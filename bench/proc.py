"""What the bench scripts share: the built file loaded by path, and a process's CPU."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The build under measure: the built file, or another build that
# SKF_RUN_LOCK_UNDER_TEST names (as for the tests), which every process of a bench
# run loads, since they inherit the environment.
SCRIPT = Path(os.environ.get("SKF_RUN_LOCK_UNDER_TEST") or ROOT / "skf-run-lock.py").resolve()


def load_script(name: str = "skf_run_lock_bench", path: Path = SCRIPT) -> Any:
    """The built file (or another build at ``path``), loaded by path as a sibling
    script would load it."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    skf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(skf)
    return skf


def own_cpu() -> float:
    """CPU seconds (user and system) this process has spent, all its threads."""
    times = os.times()
    return times.user + times.system


def cpu_of(pid: int) -> float:
    """CPU seconds (user and system) the process ``pid`` has spent (Linux: /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
