"""How the tests call the product: a CLI call's outcome, the worker process, and
keeping every process a test starts from outliving it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, AnyStr, Protocol

import pytest
from fork_server import ForkedProcess, forks_importing, popen_text
from loader import SCRIPT

WORKER = Path(__file__).resolve().parent / "worker.py"

# The suite runs under `uv run pytest`, whose variable UV (uv's own path) says that a
# call ran under uv run: each call a test makes is a plain `python3 FILE` call unless
# the test gives it UV again. Kept under another name for the workers xdist starts.
UV = os.environ.pop("UV", None) or os.environ.get("SKF_TESTS_UV")
if UV is not None:
    os.environ["SKF_TESTS_UV"] = UV


# The words of a skip on Windows: the only skip the Windows lane allows.
NOT_ON_WINDOWS = "needs what Windows lacks:"


def posix_only(needs: str) -> pytest.MarkDecorator:
    """Skip a test on Windows, naming what it needs that Windows lacks (POSIX signals,
    fork, another user, a POSIX path, a server started by the test itself)."""
    return pytest.mark.skipif(sys.platform == "win32", reason=f"{NOT_ON_WINDOWS} {needs}")


def linux_only(needs: str) -> pytest.MarkDecorator:
    """Skip a test off Linux, naming what Linux has that it needs."""
    lacks = NOT_ON_WINDOWS if sys.platform == "win32" else "Linux only:"
    return pytest.mark.skipif(sys.platform != "linux", reason=f"{lacks} {needs}")


def root_only(needs: str) -> pytest.MarkDecorator:
    """Skip a test that needs POSIX's root (to give a file to another user, to mount)."""
    if sys.platform == "win32":
        return posix_only(f"POSIX's root: {needs}")
    return pytest.mark.skipif(os.geteuid() != 0, reason=f"root: {needs}")


# The words of a skip for a system tool that no PyPI package ships; the only skip a
# machine that is not CI may have (conftest.py's pytest_sessionfinish).
SYSTEM_TOOL = "needs a system tool no PyPI package ships"


def needs_system_tool(name: str, install: str) -> str:
    """The path of the command ``name``; skip the test where it is missing, saying how
    to ``install`` it."""
    import shutil

    if sys.platform == "win32":  # the tools these tests run are POSIX ones
        pytest.skip(f"{NOT_ON_WINDOWS} {name}, a POSIX tool")
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{SYSTEM_TOOL}: {name} ({install})")
    return found


def pipe(stream: IO[AnyStr] | None) -> IO[AnyStr]:
    """A pipe of a process the test started with that pipe (``stdout=subprocess.PIPE``)."""
    assert stream is not None, "the process was started without this pipe"
    return stream


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict[str, Any]:
        """The one JSON line on stdout (asserting it is one ASCII line)."""
        assert self.out.endswith("\n") and self.out.count("\n") == 1, self.out
        assert self.out.isascii()
        assert self.err == "", self.err
        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data

    @property
    def error(self) -> str:
        """The message of the one JSON error line on stderr (asserting stdout is empty)."""
        assert self.out == ""
        assert self.err.endswith("\n") and self.err.count("\n") == 1, self.err
        data = json.loads(self.err)
        assert list(data) == ["status", "message"] and data["status"] == "error"
        assert isinstance(data["message"], str) and data["message"]
        return data["message"]


# What the CLI's calls import of the standard library, a call of each kind (a file's,
# a server's over TLS, run, list), and worker.py's: a fork server imports it once for
# all the processes it forks (fork_server.py). Their own code is compiled and run in each.
CLI_MODULES = [
    *("base64", "binascii", "collections", "contextlib", "copyreg", "ctypes"),
    *("enum", "errno", "fcntl", "functools", "importlib.util", "itertools", "json"),
    *("keyword", "locale", "math", "operator", "pathlib", "re", "reprlib", "select"),
    *("selectors", "signal", "socket", "ssl", "string", "struct", "subprocess"),
    *("threading", "tomllib", "types", "typing", "warnings"),
]


def _forked(argv: list[str], cwd: str | os.PathLike[str] | None) -> ForkedProcess | None:
    """``argv`` forked from this process's fork server (fork_server.py), with its three
    pipes, as text; None where it cannot be."""
    forks = forks_importing(CLI_MODULES)
    if forks is None or not forks.can_fork(argv, None, {"cwd": cwd}):
        return None
    return forks.start(argv, None, cwd)


def call_to_end(
    argv: list[str],
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    stdin: bytes | None = None,
) -> Run:
    """The outcome of ``argv`` in a process of its own, run to its end as
    ``subprocess.run`` with its output captured runs it (``stdin``: what it reads, or
    nothing to read); forked (fork_server.py) where it can be."""
    forked = _forked(argv, cwd)
    if forked is not None:
        try:
            out, err = forked.exchange(stdin or b"", timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            forked.wait()
            raise
        assert forked.returncode is not None
        return Run(forked.returncode, out, err)
    done = subprocess.run(
        argv,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
    return Run(done.returncode, popen_text(done.stdout), popen_text(done.stderr))


# The Popen keywords of a process the tests drive through its three pipes, as text.
THREE_TEXT_PIPES: dict[str, Any] = {
    "stdin": subprocess.PIPE,
    "stdout": subprocess.PIPE,
    "stderr": subprocess.PIPE,
    "text": True,
}


def started(argv: list[str], cwd: str | os.PathLike[str] | None = None) -> Started:
    """``argv`` started with its three pipes (text), forked (fork_server.py) where it can
    be, else as ``subprocess.Popen``."""
    forked = _forked(argv, cwd)
    if forked is not None:
        return forked
    return subprocess.Popen(argv, cwd=cwd, **THREE_TEXT_PIPES)


def let_go(holder: Started) -> int:
    """Tell a hold-in-line worker to release its hold: how it ended."""
    pipe(holder.stdin).write("\n")
    pipe(holder.stdin).flush()
    return holder.wait(timeout=60)


class Started(Protocol):
    """A process a test started: a ``subprocess.Popen``, or one forked for it
    (fork_server.py)."""

    @property
    def stdin(self) -> IO[str] | None: ...
    @property
    def stdout(self) -> IO[str] | None: ...
    @property
    def stderr(self) -> IO[str] | None: ...
    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...
    def send_signal(self, signum: int) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def communicate(
        self, input: str | None = None, timeout: float | None = None
    ) -> tuple[str, str]: ...


@contextlib.contextmanager
def reaped() -> Iterator[list[Started]]:
    """A list for the processes a test starts: every one still running at the end is
    killed, and every one is waited for, its pipes closed."""
    started: list[Started] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()  # a test may have closed one already: that is fine


# --- What a call compiles ---------------------------------------------------------------

# Runs the script as `python3 skf-run-lock.py ARGS` does, and prints on exit, for
# everything compiled after the script itself, its file name and how many newlines
# lead its source: a carried module is compiled behind as many as there are lines up to
# its opening quotes, the line the build records for it in _CARRIED.
RECORD_COMPILES = """
import atexit, builtins, json, runpy, sys
compiled, real = [], builtins.compile
def recording(source, filename, *args, **kwargs):
    text = source if isinstance(source, str) else ""
    compiled.append([str(filename), len(text) - len(text.lstrip("\\n"))])
    return real(source, filename, *args, **kwargs)
builtins.compile = recording
atexit.register(lambda: print(json.dumps(compiled[1:]), file=sys.stderr))
script, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


# The variable naming the folder the bytecode cache is kept under (in skf-run-lock/).
CACHE_BASE = "LOCALAPPDATA" if sys.platform == "win32" else "XDG_CACHE_HOME"


# The variables naming the temp folder, where the cache goes when its own folder
# cannot be made (tempfile reads the same, in this order).
TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def temp_folder_at(folder: Path) -> dict[str, str]:
    """The settings that make ``folder`` (made here) a call's temp folder."""
    folder.mkdir(parents=True, exist_ok=True)
    return dict.fromkeys(TEMP_VARIABLES, str(folder))


def compiled_by_cli(
    *args: str,
    script: Path = SCRIPT,
    cache: Path | None = None,
    temp: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, list[list[object]], str]:
    """The exit code of a CLI call of ``script`` in a fresh process, what it compiled
    beyond the script itself (file name, leading newlines), and the last line it wrote to
    stderr before that. ``cache``: the folder its bytecode cache is kept under (none:
    no cache, so it compiles what it runs); ``temp``: its temp folder (default: one
    beside ``cache``, so that no call reaches the machine's); ``env``: its whole
    environment instead of this one's, its cache where that puts it."""
    settings = {CACHE_BASE: str(cache)} if cache else {"SKF_RUN_LOCK_NO_CACHE": "1"}
    if env is not None and cache is None:
        settings = {}
    if cache and temp is None:
        temp = cache.parent / f"{cache.name}-temp"
    if temp is not None:
        settings |= temp_folder_at(temp)
    done = subprocess.run(
        [sys.executable, "-c", RECORD_COMPILES, str(script), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**(os.environ if env is None else env), **settings},
    )
    lines = done.stderr.strip().splitlines()
    return done.returncode, json.loads(lines[-1]), lines[-2] if len(lines) > 1 else ""


def first_arguments_of(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[Any]:
    """Watch calls of ``owner.name`` for the rest of a test: each call goes through as
    before and its first argument is added to the list returned."""
    real = getattr(owner, name)
    seen: list[Any] = []

    def watched(first: Any, *rest: Any) -> Any:
        seen.append(first)
        return real(first, *rest)

    monkeypatch.setattr(owner, name, watched)
    return seen
