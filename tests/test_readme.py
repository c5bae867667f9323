"""The README's workflow snippet, run as written (uv run stands for python3 here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loader import ROOT
from lockfiles import ago, write_record

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="runs a POSIX shell snippet")


def workflow_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it in a workflow", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def run_snippet(home: Path) -> subprocess.CompletedProcess[str]:
    """The snippet in bash, from a checkout, with `uv run X` meaning `python3 X`."""
    script = 'uv() { shift; python3 "$@"; }\n' + workflow_snippet() + "echo steps-ran\n"
    return subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_snippet_takes_runs_and_releases(tmp_path: Path) -> None:
    done = run_snippet(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "steps-ran\n"
    assert os.listdir(tmp_path / ".skf" / "locks") == []  # released by the trap


def test_the_snippet_stops_without_the_lock_when_another_run_holds_it(tmp_path: Path) -> None:
    lock = tmp_path / ".skf" / "locks" / "update-skill.lock"
    write_record(lock, "update-skill:other:run", ago(seconds=5))
    done = run_snippet(tmp_path)
    assert done.returncode == 3 and "steps-ran" not in done.stdout
    assert json.loads(done.stderr)["held_by"] == "update-skill:other:run"
    assert json.loads(lock.read_text())["owner"] == "update-skill:other:run"


def test_the_snippet_stops_on_an_error_without_parsing_it(tmp_path: Path) -> None:
    (tmp_path / ".skf").write_text("a file where the folder should be")
    done = run_snippet(tmp_path)
    assert done.returncode == 2 and "steps-ran" not in done.stdout
    assert "Traceback" not in done.stderr
    assert json.loads(done.stderr)["status"] == "error"


def run_example() -> str:
    section = (ROOT / "README.md").read_text().split("### One command under the lock: run", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def test_the_run_example_runs_the_command_under_the_lock(tmp_path: Path) -> None:
    script = 'uv() { shift; python3 "$@"; }\n' + run_example()
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("publishing as publish:site:20")
    assert os.listdir(tmp_path / ".skf" / "locks") == []  # released when it ended


def test_the_held_example_holds_the_lock_for_its_block(tmp_path: Path) -> None:
    section = (ROOT / "README.md").read_text().split("use `held()`:", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    load = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('skf', {str(ROOT / 'skf-run-lock.py')!r})\n"
        "skf = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(skf)\n"
    )
    check = "\nimport os\nprint(os.listdir(os.path.expanduser('~/.skf/locks')))\n"
    done = subprocess.run(
        [sys.executable, "-c", load + block.replace("...", "print(step)") + check],
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read\nmodify\nwrite\n[]\n"
