"""The README's examples, run as written: the workflow snippet and run's and held()'s
(uv run stands for python3 here), and every console example, whose output must be what
the tool prints today but for times, run ids and the home folder; and the fencing
scripts (the README's workflow, design.md's shell recipe) in bash and dash, ended
normally and by signals."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from calls import needs_system_tool, posix_only
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


def shell_path(name: str) -> str:
    """bash, or dash (Debian's /bin/sh), which runs an EXIT trap on ``exit`` only."""
    if name == "dash":
        return needs_system_tool("dash", "Debian: apt-get install dash")
    return "bash"


def run_snippet(home: Path, shell: str = "bash") -> subprocess.CompletedProcess[str]:
    script = 'uv() { shift; python3 "$@"; }\n' + workflow_snippet() + "echo steps-ran\n"
    return run_as_written([shell_path(shell), "-c", script], home)


SHELLS = pytest.mark.parametrize("shell", ["bash", "dash"])


@SHELLS
def test_the_snippet_takes_runs_and_releases(tmp_path: Path, shell: str) -> None:
    done = run_snippet(tmp_path, shell)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "steps-ran\n"
    assert os.listdir(tmp_path / ".skf" / "locks") == []  # released by the trap


@SHELLS
def test_the_snippet_stops_without_the_lock_when_another_run_holds_it(
    tmp_path: Path, shell: str
) -> None:
    lock = tmp_path / ".skf" / "locks" / "update-skill.lock"
    write_record(lock, "update-skill:other:run", ago(seconds=5))
    done = run_snippet(tmp_path, shell)
    assert done.returncode == 3 and "steps-ran" not in done.stdout
    refusal, said = done.stderr.splitlines()  # --get writes a refusal's JSON there too
    assert json.loads(refusal)["held_by"] == "update-skill:other:run"
    assert said == "held by update-skill:other:run"
    assert json.loads(lock.read_text())["owner"] == "update-skill:other:run"


@SHELLS
def test_the_snippet_names_no_holder_for_a_lock_file_that_names_none(
    tmp_path: Path, shell: str
) -> None:
    """--get prints nothing for null: never "held by null"."""
    lock = tmp_path / ".skf" / "locks" / "update-skill.lock"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(b"")  # flock(1)'s, just now: held by a file naming no owner
    done = run_snippet(tmp_path, shell)
    assert done.returncode == 3 and "steps-ran" not in done.stdout
    assert done.stderr.splitlines()[-1] == "held by a file naming no owner"
    assert lock.read_bytes() == b""


@SHELLS
def test_the_snippet_stops_on_an_error_without_parsing_it(tmp_path: Path, shell: str) -> None:
    (tmp_path / ".skf").write_text("a file where the folder should be")
    done = run_snippet(tmp_path, shell)
    assert done.returncode == 2 and "steps-ran" not in done.stdout
    assert "Traceback" not in done.stderr
    assert json.loads(done.stderr)["status"] == "error"


# --- The fencing scripts, as printed: the README's workflow and design.md's recipe ------

# `uv run skf-run-lock.py ARG...` runs the script under test, noting each command it runs.
STAND_IN = 'uv() { shift 2; echo "$1" >> "$SKF_CALLS"; "$SKF_PYTHON" "$SKF_SCRIPT" "$@"; }\n'
LOCKS = {"README": ".skf/locks/update-skill.lock", "design": ".locks/site.lock"}
# Run by the script after the docs' lines: what its holder sees, and what it kept.
SEEN = (
    'uv run skf-run-lock.py status --lock "$lock" --get held_by --get fence > seen\n'
    'printf "%s\\n" "$owner" "$fence" > kept\n'
)
DOCS = pytest.mark.parametrize("doc", ["README", "design"])


def fencing_script(doc: str) -> str:
    """The README's workflow snippet, or design.md's shell recipe for a resource that
    checks the fence."""
    if doc == "README":
        return workflow_snippet()
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## Fencing: telling the holder from a late writer", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


# Started before the shell, in its place: a shell cannot trap a signal it was started
# with ignored, and a suite run under nohup passes SIGHUP ignored to its children.
SIGNALS_AT_THEIR_DEFAULTS = (
    "import os, signal, sys\n"
    "for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):\n"
    "    signal.signal(signum, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


@contextlib.contextmanager
def script_running(shell: str, doc: str, steps: str, home: Path) -> Iterator[subprocess.Popen[str]]:
    """The doc's script, then ``steps``, in ``shell`` from ``home`` (its home folder),
    in a session of its own: whatever it left running is killed at the end."""
    env = {
        **os.environ,
        "HOME": str(home),
        "SKF_CALLS": str(home / "calls"),
        "SKF_PYTHON": sys.executable,
        "SKF_SCRIPT": str(SCRIPT),
    }
    script = STAND_IN + fencing_script(doc) + steps
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGNALS_AT_THEIR_DEFAULTS, shell_path(shell), "-c", script],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    """Until ``path`` exists (the script got that far), at most 30 s."""
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, f"the script ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {path.name} after 30 s"
        time.sleep(0.05)


def ended(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def calls(home: Path) -> list[str]:
    """The commands the script ran, in order."""
    return (home / "calls").read_text().split()


def state(home: Path, doc: str) -> str:
    argv = [sys.executable, str(SCRIPT), "status", "--lock", str(home / LOCKS[doc])]
    done = subprocess.run(
        [*argv, "--get", "state"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.strip()


@SHELLS
@DOCS
def test_a_fencing_script_takes_the_lock_once_keeps_its_fence_and_releases(
    tmp_path: Path, shell: str, doc: str
) -> None:
    """One acquire gives the owner and the fence the holder has (as status shows it);
    design.md's recipe writes the data with that fence; the lock is free at the end."""
    with script_running(shell, doc, SEEN, tmp_path) as proc:
        code, out, err = ended(proc)
    assert (code, err) == (0, ""), (out, err)
    owner, fence = (tmp_path / "kept").read_text().splitlines()
    assert (tmp_path / "seen").read_text() == f"{owner}\n{fence}\n" and int(fence) > 0
    assert calls(tmp_path) == ["acquire", "status", "release"]
    if doc == "design":
        assert (tmp_path / "resource.fence").read_text() == f"{fence}\n"
        assert (tmp_path / "resource.data").read_text() == "the new contents\n"
    assert state(tmp_path, doc) == "free"


@SHELLS
@DOCS
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_a_fencing_script_ended_by_a_signal_releases_the_lock(
    tmp_path: Path, shell: str, doc: str, signum: int
) -> None:
    """The signal reaches the script's shell while a step runs: it exits 128 + n, and
    its EXIT trap released the lock (dash runs it because the signal's trap exits)."""
    # Short steps in the foreground: the shell runs its trap once the one under way
    # ends. (A trap for a signal that came as `wait` began was seen by bash only when
    # its child ended, under load: a minute later.)
    steps = SEEN + "while :; do sleep 0.1; done\necho not-reached\n"
    with script_running(shell, doc, steps, tmp_path) as proc:
        wait_for(tmp_path / "kept", proc)
        assert state(tmp_path, doc) == "held"
        os.kill(proc.pid, signum)
        code, out, err = ended(proc)
    assert (code, out, err) == (128 + signum, "", "")
    assert calls(tmp_path) == ["acquire", "status", "release"]
    assert state(tmp_path, doc) == "free"


@SHELLS
def test_the_readmes_renewal_reads_the_fence_again(tmp_path: Path, shell: str) -> None:
    """A step renewed the hold with an older version (1.4.0), which writes no fence:
    the next renewal gives the hold a new one, and the script keeps that."""
    steps = (
        'printf "%s\\n" "$fence" > before\nwhile [ ! -e go ]; do sleep 0.05; done\nrenew\n' + SEEN
    )
    with script_running(shell, "README", steps, tmp_path) as proc:
        wait_for(tmp_path / "before", proc)
        lock = tmp_path / LOCKS["README"]
        owner = json.loads(lock.read_text())["owner"]
        older = ROOT / "tests" / "fixtures" / "skf-run-lock-1.4.0.py"
        argv = [sys.executable, str(older), "acquire", "--lock", str(lock), "--owner", owner]
        assert subprocess.run(argv, capture_output=True, timeout=60, check=False).returncode == 0
        assert "fence" not in json.loads(lock.read_text())
        (tmp_path / "go").touch()
        code, out, err = ended(proc)
    assert (code, err) == (0, ""), (out, err)
    before = (tmp_path / "before").read_text()
    kept = (tmp_path / "kept").read_text()
    assert (tmp_path / "seen").read_text() == kept == f"{owner}\n{kept.split()[1]}\n"
    assert kept.split()[1] != before.strip()
    assert calls(tmp_path) == ["acquire", "acquire", "status", "release"]
    assert state(tmp_path, "README") == "free"


@SHELLS
def test_the_readmes_renewal_stops_a_run_that_lost_its_lock(tmp_path: Path, shell: str) -> None:
    steps = (
        'uv run skf-run-lock.py release --lock "$lock" --owner "$owner" >/dev/null\n'
        'uv run skf-run-lock.py acquire --lock "$lock" --owner other:run:1 >/dev/null\n'
        "renew\necho not-reached\n"
    )
    with script_running(shell, "README", steps, tmp_path) as proc:
        code, out, _ = ended(proc)
    assert (code, out) == (3, "")
    assert calls(tmp_path) == ["acquire", "release", "acquire", "acquire", "release"]
    lock = tmp_path / LOCKS["README"]
    assert json.loads(lock.read_text())["owner"] == "other:run:1"  # not released by it


@SHELLS
def test_the_design_recipe_refuses_an_older_fence_and_still_releases(
    tmp_path: Path, shell: str
) -> None:
    (tmp_path / "resource.fence").write_text("99999999999999999\n")
    (tmp_path / "resource.data").write_text("newer\n")
    with script_running(shell, "design", "", tmp_path) as proc:
        code, out, err = ended(proc)
    assert (code, out) == (1, "")
    assert err.startswith("refused: fence ") and err.endswith(" is older than 99999999999999999\n")
    assert (tmp_path / "resource.data").read_text() == "newer\n"
    assert calls(tmp_path) == ["acquire", "release"]
    assert state(tmp_path, "design") == "free"


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
