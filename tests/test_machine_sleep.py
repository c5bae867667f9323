"""A machine that sleeps: every deadline of a hold counts on a clock that goes on while
the machine is suspended (``_SEAMS.clock``), and no wait on the system's own clock lasts
more than a second, so a hold that lapsed in the machine's sleep is found lost on waking.
The tests make that clock jump in a child process, as a wake does, past the hold's stop
point: nothing else changes, so only a holder that reads the clock sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from proxy import proxy_to
from servers import Redis

TESTS = Path(__file__).resolve().parent

# A child that loads the built file by path, as a sibling script does, and counts its
# deadlines on a clock that jumps ahead once the file argv[1] names exists (a wake
# after a long sleep): by the seconds that file says, else two hours; then it runs the
# CLI on the rest of its arguments, or holds the lock with held() when they start with
# "held".
_SLEEPER = f"""
import json, os, sys, time
sys.path.insert(0, {str(TESTS)!r})
from loader import load_script
skf = load_script()
real = skf._SEAMS.clock
woken = sys.argv[1]

def slept():
    try:
        with open(woken) as jump:
            return float(jump.read() or 7200.0)
    except (FileNotFoundError, ValueError):
        return 0.0

skf._SEAMS.clock = lambda: real() + slept()
if sys.argv[2] != "held":
    sys.exit(skf.main(sys.argv[2:]))
lock, started = sys.argv[3], sys.argv[4]
try:
    with skf.held(lock, "wf:sleep:1", 3600.0) as lease:
        open(started, "w").close()
        while not lease.lost:
            time.sleep(0.05)
except skf.LockLost as lost:
    print(json.dumps({{"lost": str(lost)}}), flush=True)
"""

# A command that says it started, then runs until it is stopped (and one that says so
# with its process id).
_COMMAND = "import sys, time\nopen(sys.argv[1], 'w').close()\nwhile True: time.sleep(0.05)"
_COMMAND_WITH_PID = (
    "import os, sys, time\n"
    "with open(sys.argv[1] + '.tmp', 'w') as f: f.write(str(os.getpid()))\n"
    "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "while True: time.sleep(0.05)"
)


def _wait_for(path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


@pytest.mark.timeout(90)
def test_run_stops_its_command_once_the_clock_jumps_past_its_hold(tmp_path: Path) -> None:
    """``run --stale-after 60m`` renews every 20 minutes: a wake two hours on finds its
    hold lost within a second or two, not at its next renewal, stops the command and
    exits 3, saying the renewals could not keep up."""
    lock, woken, started = tmp_path / "run.lock", tmp_path / "woken", tmp_path / "started"
    command = [sys.executable, "-c", _COMMAND, str(started)]
    argv = ["run", "--lock", str(lock), "--owner", "wf:sleep:1", "--stale-after", "60m"]
    child = subprocess.Popen(
        [sys.executable, "-c", _SLEEPER, str(woken), *argv, "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(started, child)
        time.sleep(1.5)  # run is deep in its wait for the next renewal
        woken.touch()
        # Generous: on waking, a second's wait at most and the command's SIGTERM.
        _, err = child.communicate(timeout=20)
    finally:
        child.kill()
        child.communicate()
    assert child.returncode == 3, err
    message = json.loads(err.splitlines()[-1])["message"]
    assert "renewals failed" in message, message
    assert "was stopped" in message, message
    assert not lock.exists(), "run left its lapsed hold behind"


@pytest.mark.timeout(90)
def test_held_reports_its_hold_lost_once_the_clock_jumps_past_it(tmp_path: Path) -> None:
    """A held() block of an hour's hold: a wake two hours on makes ``lease.lost`` true
    and the block's end raise LockLost at once."""
    lock, woken, started = tmp_path / "held.lock", tmp_path / "woken", tmp_path / "started"
    child = subprocess.Popen(
        [sys.executable, "-c", _SLEEPER, str(woken), "held", str(lock), str(started)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(started, child)
        assert json.loads(lock.read_text())["owner"] == "wf:sleep:1"
        time.sleep(1.5)  # the renewal thread is deep in its wait
        woken.touch()
        out, err = child.communicate(timeout=20)
    finally:
        child.kill()
        child.communicate()
    assert child.returncode == 0, err
    assert "renewals failed" in json.loads(out)["lost"], out
    # A hold lost by the clock is left to end by its own time: a release would wait
    # past the stop point (on a server, on the network).
    assert json.loads(lock.read_text())["owner"] == "wf:sleep:1"


@pytest.mark.timeout(120)
def test_a_renewal_stuck_on_the_network_ends_once_the_clock_jumps_past_its_hold(
    redis: Redis, tmp_path: Path
) -> None:
    """``run --stale-after 60m`` on Redis, whose every answer is swallowed (a step may
    wait 30 s): its renewal, due 20 minutes on, waits on the network when the machine
    sleeps past the hold; on waking that wait ends within a second or two, and the
    command is stopped, not after the network's own timeout."""
    woken, started = tmp_path / "woken", tmp_path / "started"
    command = [sys.executable, "-c", _COMMAND_WITH_PID, str(started)]
    with proxy_to(redis.port) as proxy:
        lock = f"redis://127.0.0.1:{proxy.port}/sleep-{tmp_path.name}"
        argv = ["run", "--lock", lock, "--owner", "wf:sleep:1", "--stale-after", "60m"]
        child = subprocess.Popen(
            [sys.executable, "-c", _SLEEPER, str(woken), *argv, "--", *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SKF_REDIS_TIMEOUT": "30"},
        )
        try:
            _wait_for(started, child)
            pid = int(started.read_text())
            proxy.cut("blackhole")
            woken.write_text("1250")  # the renewal is due: it waits on the network
            time.sleep(3)
            assert child.poll() is None and _alive(pid), "run gave up before the jump"
            woken.write_text("7200")  # past the hold's stop point
            deadline = time.monotonic() + 10  # generous: a second's wait, then SIGTERM
            while _alive(pid):
                assert time.monotonic() < deadline, "the command ran on past the wake"
                time.sleep(0.05)
            proxy.close()  # its release is refused at once, not swallowed
            _, err = child.communicate(timeout=60)
        finally:
            child.kill()
            child.communicate()
    assert child.returncode == 3, err
    assert "renewals failed" in err, err


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_clock_of_deadlines_counts_the_machines_sleep(skf: ModuleType) -> None:
    """The clock every deadline counts on is one that goes on while the machine is
    suspended: Linux's CLOCK_BOOTTIME; macOS's CLOCK_MONOTONIC (its time.monotonic
    stops); Windows' time.monotonic (GetTickCount64 or QueryPerformanceCounter, both
    counting sleep)."""
    clock = skf._SEAMS.clock
    if sys.platform == "linux":
        assert (clock.func, clock.args) == (time.clock_gettime, (time.CLOCK_BOOTTIME,))
    elif sys.platform == "darwin":
        assert (clock.func, clock.args) == (time.clock_gettime, (time.CLOCK_MONOTONIC,))
    else:
        assert clock is time.monotonic
    assert abs(clock() - clock()) < 1.0
