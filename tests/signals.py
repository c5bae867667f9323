"""Interrupts, delivered where a real signal would land."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run
from wire import when_blocked

# SIGHUP's number on every POSIX system; Windows has no SIGHUP, and a test that sends one
# to a real process says it needs POSIX signals (posix_only).
SIGHUP = getattr(signal, "SIGHUP", 1)
INTERRUPTING = (signal.SIGINT, signal.SIGTERM, SIGHUP)


def deliver(state: Any, signum: int) -> None:
    """What the OS and Python do when signal ``signum`` arrives at this point."""
    state._on_signal(signum, None)


def assert_signal_outcome(run: Run, code: int) -> None:
    """A CLI acquire hit by a signal: exit 0 with the lock taken (the change had been
    sent, so it finished), or exit 129 saying SIGHUP ended it before any change."""
    assert run.code == code
    if code == 0:
        assert run.json["acquired"] is True
    else:
        assert "SIGHUP" in run.error and "before it changed anything" in run.error


def a_wait_ended_by_sigint(
    skf: ModuleType,
    main: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    armed: Any,
    lock: str,
) -> dict[str, Any]:
    """ "wf:holder:1" holds ``lock``, on a server; a CLI ``acquire --wait`` gets SIGINT
    each time it blocks on the server (wire.when_blocked): it ends with 130 naming
    SIGINT, the holder keeps the lock and nobody is left in line. Returns the status
    after."""
    skf.acquire(lock, "wf:holder:1", 600.0)
    armed.armed = True  # that take disarmed the CLI state, as a finished change does
    when_blocked(monkeypatch, lock.partition("://")[0], lambda: deliver(armed, signal.SIGINT))
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--wait", "600")
    assert run.code == 130 and "SIGINT" in run.error
    monkeypatch.undo()
    after: dict[str, Any] = skf.status(lock, 60.0)
    assert after["held_by"] == "wf:holder:1" and after["waiting"] == []  # it left the line
    return after


def until_stopped(pid: int) -> None:
    """Wait until ``pid``, sent SIGSTOP, has stopped: as its parent waits for that, or
    (a process forked for this one by fork_server.py, on Linux) as /proc tells it."""
    try:
        os.waitpid(pid, os.WUNTRACED)
    except ChildProcessError:
        stat = Path(f"/proc/{pid}/stat")
        # The state follows the command's name, in parentheses that it may contain.
        while stat.read_text().rpartition(")")[2].split()[0] != "T":
            time.sleep(0.001)


def freeze_outside_the_guard(pid: int, lock: str) -> None:
    """SIGSTOP ``pid``, a waiter on ``lock``, at a moment it holds no file lock's guard.
    A waiter takes the guard for a moment at each beat and each try, and one frozen
    inside it would keep every call out: a stuck holder, which such a test is not about.
    A file's guard exists only while it is held (or being taken), so a waiter frozen
    while it exists is woken and frozen again a little later."""
    guard = Path(lock + ".skf-guard")
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        until_stopped(pid)
        if "://" in lock or not guard.exists():
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError(f"the waiter held {guard} at each of 200 tries")
