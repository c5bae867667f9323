"""For the tests of holds that must end on the holder's side first (tests/
test_lease_end.py, test_renewal_on_a_file.py): the run whose hold it is, started, and
another caller that takes the lock once the hold ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

from loader import SCRIPT


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
        self.command_alive: bool | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._take, daemon=True)
        self.thread.start()

    def _take(self) -> None:
        while not self.stop.is_set():
            began = time.time()
            try:
                taken = self.skf.acquire(self.lock, "wf:other", 60.0)["acquired"]
            except OSError:
                taken = False
            if taken:
                self.began = began
                self.took = time.time()
                if self.watched is not None:
                    self.command_alive = alive(self.watched)
                return
            time.sleep(0.05)

    def join(self) -> None:
        self.thread.join(timeout=60)
        self.stop.set()


def started_run(
    argv: list[str], ready: Path, started: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
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
