"""Waiters in threads and processes: one that waits in line, and its outcome."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from calls import Run
from loader import SCRIPT


def held_with_a_waiter(cli: Callable[..., Run], lock: str) -> subprocess.Popen[str]:
    """``lock`` held by wf:holder:1, and a real waiter process (``acquire --wait``, as
    wf:waiter:1) in its line, seen by ``status``: the waiter, still waiting."""
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    waiter = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "acquire",
            "--lock",
            lock,
            "--owner",
            "wf:waiter:1",
            "--wait",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while cli("status", "--lock", lock).json["waiting"] == []:
        if time.monotonic() > deadline:
            waiter.kill()
            waiter.communicate()
            raise AssertionError("the waiter never got into line")
        time.sleep(0.05)
    return waiter


def served_after_a_release(cli: Callable[..., Run], lock: str) -> dict[str, Any]:
    """A holder takes ``lock``; a waiter process (``acquire --wait``, as "wf:waiter:1")
    gets into line (seen by ``status``) and takes the lock once the holder releases:
    the waiter's JSON answer. Credentials come from the environment, as set."""
    waiter = held_with_a_waiter(cli, lock)
    try:
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
        waiter.communicate()
    assert waiter.returncode == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def waiter_thread(
    skf: ModuleType, lock: str, owner: str
) -> tuple[threading.Thread, list[dict[str, Any] | BaseException]]:
    """``owner`` waits for ``lock`` in acquire_within, in a thread: (thread, its outcome)."""
    outcome: list[dict[str, Any] | BaseException] = []

    def run() -> None:
        try:
            outcome.append(skf.acquire_within(lock, owner, 60.0, 3600.0))
        except BaseException as exc:  # reported by the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def joined(
    thread: threading.Thread, outcome: list[dict[str, Any] | BaseException]
) -> dict[str, Any]:
    """The waiter's result; a failure if it is still waiting after 30 s (it missed a wake-up)."""
    thread.join(timeout=30)
    assert not thread.is_alive(), "the waiter never woke: it missed the change"
    (result,) = outcome
    assert isinstance(result, dict), result
    return result


def handed_over_to_a_waiter(skf: ModuleType, lock: str, waiting: Callable[[], bool]) -> None:
    """A holder takes ``lock``, a waiter in a thread waits for it, and once ``waiting()``
    says the waiter waits, the release hands the lock to it; both then release."""
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    thread, outcome = waiter_thread(skf, lock, "wf:waiter:1")
    deadline = time.monotonic() + 30
    while not waiting():
        assert time.monotonic() < deadline, "the waiter never waited"
        time.sleep(0.02)
    assert skf.release(lock, "wf:holder:1")["released"]
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    assert skf.release(lock, "wf:waiter:1")["released"]
