"""The README's examples, run as written: the workflow snippet and run's and held()'s
(uv run stands for python3 here), and every console example, whose output must be what
the tool prints today but for times, run ids and the home folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from calls import posix_only
from loader import ROOT, SCRIPT
from lockfiles import ago, write_record

pytestmark = posix_only("runs a POSIX shell snippet")


def workflow_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it in a workflow", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def run_as_written(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` (a shell or Python running an example), from a checkout, in a home of
    its own."""
    return subprocess.run(
        argv,
        cwd=ROOT,
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def in_bash(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    """A README's shell example in bash, with `uv run X` meaning `python3 X`."""
    return run_as_written(["bash", "-c", 'uv() { shift; python3 "$@"; }\n' + script], home)


def python_block(after: str) -> str:
    """The README's first Python block after the words ``after``."""
    section = (ROOT / "README.md").read_text().split(after, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def run_snippet(home: Path) -> subprocess.CompletedProcess[str]:
    return in_bash(workflow_snippet() + "echo steps-ran\n", home)


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
    refusal, said = done.stderr.splitlines()  # --get writes a refusal's JSON there too
    assert json.loads(refusal)["held_by"] == "update-skill:other:run"
    assert said == "held by update-skill:other:run"
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
    done = in_bash(run_example(), tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("publishing as publish:site:20")
    assert os.listdir(tmp_path / ".skf" / "locks") == []  # released when it ended


def test_the_library_example_takes_and_releases(tmp_path: Path) -> None:
    code = python_block("## Library use").replace("/path/to/skf-run-lock.py", str(SCRIPT))
    done = run_as_written([sys.executable, "-c", code + "\nprint('wrote')\n"], tmp_path)
    assert done.returncode == 0 and done.stdout == "wrote\n", done.stderr
    assert os.listdir(tmp_path / ".skf" / "locks") == []  # released in the finally


def test_the_held_example_holds_the_lock_for_its_block(tmp_path: Path) -> None:
    block = python_block("use `held()`:")
    load = (
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('skf', {str(ROOT / 'skf-run-lock.py')!r})\n"
        "skf = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(skf)\n"
    )
    check = "\nimport os\nprint(os.listdir(os.path.expanduser('~/.skf/locks')))\n"
    code = load + block.replace("...", "print(step)") + check
    done = run_as_written([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read\nmodify\nwrite\n[]\n"


# --- Console examples: `$ command` lines, each followed by what it prints --------------

RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")
TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
DURATION = re.compile(r"\b[0-9]+ (?:d|h|min|s)(?: [0-9]+ (?:h|min|s))?\b")
HOME = "/home/you"


def console_examples() -> list[list[tuple[str, str]]]:
    """Each console block of the README: its commands, each with what it prints."""
    text = (ROOT / "README.md").read_text()
    blocks = [part.split("```", 1)[0] for part in text.split("```console\n")[1:]]
    examples = []
    for block in blocks:
        pairs: list[tuple[str, str]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                pairs.append((line[2:], ""))
            else:
                command, printed = pairs[-1]
                pairs[-1] = (command, printed + line + "\n")
        examples.append(pairs)
    return examples


def alike(text: str) -> str:
    """``text`` without what differs from run to run: times, run ids, durations, and
    the width of a table's columns."""
    for pattern, word in ((RUN_ID, "<run id>"), (TIME, "<time>"), (DURATION, "<duration>")):
        text = pattern.sub(word, text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def test_there_are_console_examples_to_check() -> None:
    assert len(console_examples()) >= 2


@pytest.mark.parametrize("at", range(len(console_examples())))
def test_each_console_example_prints_what_the_tool_prints(tmp_path: Path, at: int) -> None:
    """Run in a home of its own holding a copy of the file, with what the list example
    shows there: a lock of three slots held by two runs, one held shared by two, and an
    older helper's file.
    A run id the README shows stands for the one the tool printed in its place."""
    home = tmp_path / "you"
    (home / ".locks").mkdir(parents=True)
    shutil.copy(ROOT / "skf-run-lock.py", home)
    env = {**os.environ, "HOME": str(home)}
    seen: dict[str, str] = {}

    def call(command: str) -> str:
        for shown, real in seen.items():
            command = command.replace(shown, real)
        done = subprocess.run(
            ["bash", "-c", command + " 2>&1"],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout.replace(str(home), HOME)

    if "list" in console_examples()[at][0][0]:
        for owner in ("train:gpu", "train:eval"):
            lock = "~/.locks/gpu.lock"
            call(f"python3 skf-run-lock.py acquire --lock {lock} --owner {owner} --slots 3")
        for owner in ("review:cocoindex", "test:cocoindex"):
            lock = "~/.locks/skill.lock"
            call(f"python3 skf-run-lock.py acquire --lock {lock} --owner {owner} --shared")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        (home / ".locks" / "old.lock").write_text(f"12345\n{now}\n")
    for command, shown in console_examples()[at]:
        printed = call(command)
        assert alike(printed) == alike(shown), (command, printed)
        seen.update(zip(RUN_ID.findall(shown), RUN_ID.findall(printed), strict=True))
