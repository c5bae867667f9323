"""For the tests of holds that must end on the holder's side first (tests/
test_lease_end.py, test_renewal_on_a_file.py, test_name_lookup.py): the run whose hold
it is, started, its command, another caller that takes the lock once the hold ends,
and cases run side by side."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from calls import Started
from loader import SCRIPT

# run's command: its process id, then the time every 100 ms; on SIGTERM, the time it
# ended, then it ends. Each file is written whole and renamed into place.
COMMAND = textwrap.dedent(
    """
    import os, signal, sys, time
    folder = sys.argv[1]
    def write(name, text):
        part = os.path.join(folder, name + ".part")
        with open(part, "w") as out:
            out.write(text)
        os.replace(part, os.path.join(folder, name))
    def ended(signum, frame):
        write("exited", repr(time.time()))
        os._exit(143)
    signal.signal(signal.SIGTERM, ended)
    write("pid", str(os.getpid()))
    while True:
        write("marker", repr(time.time()))
        time.sleep(0.1)
    """
)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (one ended, not yet reaped by run, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): it exists
    return state != "Z"


class Taker:
    """Another caller, connected to the server directly, that tries to take the lock
    once and again until it does, from a thread: ``began``, the time (time.time())
    before the try that took it, so the take came after; ``took``, once that try
    returned, so the take came before; ``command_alive``, whether
    the process ``watched`` still existed once it had taken it."""

    def __init__(self, skf: ModuleType, lock: str, watched: int | None = None) -> None:
        self.skf = skf
        self.lock = lock
        self.watched = watched
        self.began: float | None = None
        self.took: float | None = None
        self.taken: dict[str, Any] | None = None  # its acquire's output
        self.command_alive: bool | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._take, daemon=True)
        self.thread.start()

    def _take(self) -> None:
        while not self.stop.is_set():
            began = time.time()
            try:
                result = self.skf.acquire(self.lock, "wf:other", 60.0)
            except OSError:
                result = {"acquired": False}
            if result["acquired"]:
                self.taken = result
                self.began = began
                self.took = time.time()
                if self.watched is not None:
                    self.command_alive = alive(self.watched)
                return
            time.sleep(0.05)

    def join(self) -> None:
        self.thread.join(timeout=60)
        self.stop.set()


def started_run(argv: list[str], ready: Path, started: list[Started]) -> subprocess.Popen[str]:
    """The built file run with ``argv`` (a ``run`` call), kept in ``started`` (reaped()),
    once ``ready`` exists (its command's first marker, or the lock it took)."""
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(run)
    while not ready.exists():
        assert run.poll() is None, run.communicate()
        time.sleep(0.002)
    return run


T = TypeVar("T")


def side_by_side(cases: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Each case run in a thread of its own, all at once: what each returned, once all
    have ended. A case that raised fails the test, named, after every case has ended
    (each cleans up after itself)."""
    results: dict[str, T] = {}
    failures: dict[str, BaseException] = {}

    def run(name: str, case: Callable[[], T]) -> None:
        try:
            results[name] = case()
        except BaseException as exc:  # reported below, with the case's name
            failures[name] = exc

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in cases.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=80)
    assert all(not thread.is_alive() for thread in threads), "a case never ended"
    if failures:
        told = "; ".join(f"{name}: {failure!r}" for name, failure in failures.items())
        raise AssertionError(told) from next(iter(failures.values()))
    return results


def each_holds(ended: dict[str, T], check: Callable[[str, T], None]) -> None:
    """``check`` (asserting) on each case's outcome: every case that fails it is
    named, with what failed, not only the first."""
    failed: list[str] = []
    for name, outcome in ended.items():
        try:
            check(name, outcome)
        except AssertionError as exc:
            failed.append(f"{name}: {exc}")
    assert not failed, "\n".join(failed)
