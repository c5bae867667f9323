"""A hold of a file lock that cannot be renewed ends on the holder's side before
another caller can take it, as on a server (tests/test_lease_end.py): ``run`` (a real
process of the built file) must have stopped its command before another caller's take.

Two ways a file lock's renewal could fail to end the work in time: the guard held by
another call that is stuck in its change (the renewal waited for it up to
GUARD_WAIT_SEC, past the moment the work must stop); and a record dated in whole
seconds (rounded down, so that others find it stale up to a second before the
renewer counted)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest
from calls import Started, posix_only, reaped
from takers import Taker, started_run

# run's command: the time every 50 ms, written whole; SIGTERM ignored (a command slow to
# stop), so that it is gone only once SIGKILL comes.
STUBBORN = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    folder = sys.argv[1]
    while True:
        part = os.path.join(folder, "marker.part")
        with open(part, "w") as out:
            out.write(repr(time.time()))
        os.replace(part, os.path.join(folder, "marker"))
        time.sleep(0.05)
    """
)


def start_run(lock: Path, folder: Path, started: list[Started]) -> subprocess.Popen[str]:
    argv = ["run", "--lock", str(lock), "--owner", "wf:sk", "--stale-after", "3s", "--"]
    argv += [sys.executable, "-c", STUBBORN, str(folder)]
    return started_run(argv, folder / "marker", started)


@pytest.mark.timeout(90)
@posix_only("flock on the guard, SIGTERM ignored by the command")
def test_run_stops_its_command_before_a_take_when_a_stuck_call_holds_the_guard(
    skf: ModuleType, tmp_path: Path
) -> None:
    lock = tmp_path / "site.lock"
    with reaped() as started:
        run = start_run(lock, tmp_path, started)
        time.sleep(0.5)
        # Another call stuck in its change (stopped, swapped out) holds the guard 4.5 s:
        # the run's renewals wait on it past the moment its command must stop. Taken as
        # a call takes it: a guard opened bare while a renewal held it was that
        # renewal's, removed as it ended, and held up nobody.
        with skf._Guard(lock):
            taker = Taker(skf, str(lock))
            time.sleep(4.5)
        _, err = run.communicate(timeout=60)
        taker.join()
    assert taker.took is not None, "the lock was never taken"
    last_marker = float((tmp_path / "marker").read_text())
    assert last_marker < taker.took, f"the command ran on after the other take: {err}"


# As STUBBORN, also writing "termed" when SIGTERM comes (and going on).
TERMED = STUBBORN.replace(
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
    "signal.signal(signal.SIGTERM,"
    " lambda *_: open(os.path.join(sys.argv[1], 'termed'), 'w').close())",
)


@pytest.mark.timeout(120)
@posix_only("SIGTERM handled by the command")
def test_run_stops_its_command_before_a_take_of_a_record_dated_in_whole_seconds(
    skf: ModuleType, tmp_path: Path
) -> None:
    lock = tmp_path / "site.lock"
    guard = str(lock) + ".skf-guard"
    with reaped() as started:
        for _ in range(30):
            # Late in a second: the record's time, rounded down, is over 0.6 s earlier.
            while not 0.55 < time.time() % 1 < 0.58:
                time.sleep(0.002)
            argv = ["run", "--lock", str(lock), "--owner", "wf:sk", "--stale-after", "3s", "--"]
            argv += [sys.executable, "-c", TERMED, str(tmp_path)]
            run = started_run(argv, lock, started)
            # Each renewal fails at once (an OS error, as a disk may give), from now on;
            # a renewal may hold the guard (a file) for a moment.
            while True:
                try:
                    os.mkdir(guard)
                    break
                except FileExistsError:
                    time.sleep(0.001)
            # The hold, as last written: dated over 0.6 s before now (a start slowed by
            # load makes it more so), it is what others judge the hold by.
            since = skf._parse_record(lock.read_bytes(), 0).since
            if time.time() - since > 0.6:
                break
            run.kill()
            run.communicate()
            os.rmdir(guard)
            lock.unlink()
        else:
            pytest.fail("the hold was never written over 0.6 s before its second ended")
        # Once run gives up, its command gets SIGTERM, and SIGKILL after the grace.
        while not (tmp_path / "termed").exists():
            assert run.poll() is None, run.communicate()
            time.sleep(0.005)
        os.rmdir(guard)
        taker = Taker(skf, str(lock))
        _, err = run.communicate(timeout=60)
        taker.join()
    assert taker.took is not None, "the lock was never taken"
    last_marker = float((tmp_path / "marker").read_text())
    assert last_marker < taker.took, f"the command ran on after the other take: {err}"
