"""How the tests call the product: a CLI call's outcome, the worker process, and
keeping every process a test starts from outliving it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, AnyStr

import pytest

WORKER = Path(__file__).resolve().parent / "worker.py"


def posix_only(needs: str) -> pytest.MarkDecorator:
    """Skip a test on Windows, naming the POSIX feature it needs; nothing else is skipped."""
    return pytest.mark.skipif(sys.platform == "win32", reason=f"POSIX only: {needs}")


# The words of a skip for a system tool that no PyPI package ships; the only skip a
# machine that is not CI may have (conftest.py's pytest_sessionfinish).
SYSTEM_TOOL = "needs a system tool no PyPI package ships"


def needs_system_tool(name: str, install: str) -> str:
    """The path of the command ``name``; skip the test where it is missing, saying how
    to ``install`` it."""
    import shutil

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


@contextlib.contextmanager
def reaped() -> Iterator[list[subprocess.Popen[str]]]:
    """A list for the processes a test starts: every one still running at the end is
    killed, and every one is waited for, its pipes closed."""
    started: list[subprocess.Popen[str]] = []
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
