"""``run`` and ``held()`` holding a lock in the background while a test looks at it:
``run``'s command and ``held()``'s block last until the test's ``with`` block ends."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from loader import SCRIPT

# A command that ends once the file its argument names exists.
_UNTIL_DONE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)"


def _took(skf: ModuleType, lock: str, owner: str) -> None:
    deadline = time.monotonic() + 30
    while owner not in [h["owner"] for h in skf.status(lock, 60.0)["holders"]]:
        assert time.monotonic() < deadline, f"{owner} never took {lock}"
        time.sleep(0.05)


@contextlib.contextmanager
def run_and_held(
    skf: ModuleType, lock: str, folder: Path, kind: list[str], **held_kind: Any
) -> Iterator[None]:
    """``run`` as wf:run:1 and ``held()`` as wf:held:1, each with a 3 s timeout and the
    options of its kind of hold (``kind``: run's flags, ``held_kind``: held()'s), hold
    ``lock`` until the block ends; each has taken its hold when the block starts, and
    both must end cleanly after it, their command and block done."""
    done = folder / "done"
    argv = ["run", "--lock", lock, "--owner", "wf:run:1", *kind, "--stale-after", "3s"]
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), *argv, "--", sys.executable, "-c", _UNTIL_DONE, str(done)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    left: list[bool] = []

    def hold() -> None:
        with skf.held(lock, "wf:held:1", 3.0, wait=30.0, **held_kind):
            while not done.exists():
                time.sleep(0.05)
        left.append(True)

    thread = threading.Thread(target=hold)
    try:
        _took(skf, lock, "wf:run:1")
        thread.start()
        _took(skf, lock, "wf:held:1")
        yield
        done.touch()
        thread.join(timeout=60)
        assert left == [True], "held()'s block did not end cleanly"
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
    finally:
        done.touch()
        run.kill()
        run.communicate()
