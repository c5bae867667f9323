"""A hold that cannot be renewed ends on the holder's side before its lease can end on
the server: ``run`` (a real process of the built file) and ``held()`` hold a lock on
the real etcd and Redis through a proxy (tests/proxy.py) that is cut 2 s in, by a
blackhole, a reset or a slow link (or that delays each answer, then swallows
everything), while another caller connected directly tries to take the lock until it
does. The command must be gone, and held() must have reported the hold lost, before
that take: the times compared are the ones each side recorded as it went (an order,
not a duration).

Each fault has a lock, a proxy, a holder and a taker of its own, and the faults of a
test run side by side, each on the timeline it would have alone (its own start, its
cut 2 s in): a hold of 6 s that must end takes some 12 s, and the fourteen of them,
one after another, were the suite's longest file (160 s of a worker's time)."""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import posix_only, reaped
from conftest import key_of_its_own
from proxy import Fault, proxy_to
from takers import COMMAND, Taker, each_holds, side_by_side, started_run

FAULTS: tuple[Fault, ...] = ("blackhole", "reset", "slow")
SERVERS = ["etcd", "redis"]


def server_port(server: str, request: pytest.FixtureRequest) -> int:
    """The port of the session's ``server`` (its fixture asked for here, in the test's
    own thread: pytest's fixtures are not for threads)."""
    if server == "etcd":
        return int(request.getfixturevalue("etcd").client.rpartition(":")[2])
    return int(request.getfixturevalue("redis").port)


def addresses(server: str, port: int, request: pytest.FixtureRequest) -> tuple[str, str]:
    """The address of a lock of its own on ``server`` (a new key each call), and the
    same with ``{port}`` for the port it is reached at (the server's, or the proxy's)."""
    through = f"{server}://127.0.0.1:{{port}}/{key_of_its_own(request)}"
    return through.format(port=port), through


@dataclass
class RunEnded:
    """What a ``run`` whose renewals were cut left: its exit and stderr, its command's
    last marker and the time it ended (None: killed without its SIGTERM), and the
    taker that took the lock once the hold ended."""

    code: int
    err: str
    last_marker: float
    exited: float | None
    taker: Taker


def run_cut_by(
    skf: ModuleType,
    request: pytest.FixtureRequest,
    folder: Path,
    server: tuple[str, int],
    fault: Fault,
) -> RunEnded:
    """A ``run`` through a proxy to ``server`` (its name and port) that ``fault`` cuts 2 s
    in, and a taker."""
    port = server[1]
    direct, through = addresses(*server, request)
    folder.mkdir()
    with proxy_to(port) as proxy, reaped() as started:
        argv = ["run", "--lock", through.format(port=proxy.port), "--owner", "wf:sk"]
        argv += ["--stale-after", "6s", "--", sys.executable, "-c", COMMAND, str(folder)]
        run = started_run(argv, folder / "marker", started)
        time.sleep(2)
        proxy.cut(fault)
        taker = Taker(skf, direct, watched=int((folder / "pid").read_text()))
        _, err = run.communicate(timeout=60)
        taker.join()
    exited = folder / "exited"  # written on SIGTERM: it had its grace
    return RunEnded(
        run.returncode,
        err,
        float((folder / "marker").read_text()),
        float(exited.read_text()) if exited.exists() else None,
        taker,
    )


@pytest.mark.timeout(90)
@posix_only("SIGTERM handled by the command, which records when it ended")
@pytest.mark.parametrize("server", SERVERS)
def test_run_stops_its_command_before_a_hold_it_cannot_renew_ends(
    skf: ModuleType, request: pytest.FixtureRequest, tmp_path: Path, server: str
) -> None:
    """Under each fault (side by side), the run's command is stopped, with its SIGTERM,
    before another caller takes the lock."""
    at = (server, server_port(server, request))
    ended = side_by_side(
        {
            fault: functools.partial(run_cut_by, skf, request, tmp_path / fault, at, fault)
            for fault in FAULTS
        }
    )

    def check(fault: str, run: RunEnded) -> None:
        taker = run.taker
        assert taker.began is not None, "the lock was never taken directly"
        assert run.last_marker < taker.began, "the command ran on after the other take"
        assert taker.command_alive is False, "the command's process outlived the hold"
        assert run.exited is not None, "the command was killed without its SIGTERM"
        assert run.last_marker <= run.exited < taker.began
        assert run.code == 3, run.err  # the lock was lost: its command was stopped
        assert "was stopped" in run.err and "renewals failed" in run.err, run.err

    each_holds(ended, check)


@dataclass
class BlockEnded:
    """What a held() block whose renewals were cut saw: its last step, when it was told
    the hold was lost (by check(), or by the renewal thread's own verdict), what it was
    told, whether the lease says lost, and the taker."""

    last_step: float
    seen_lost: float
    raised: BaseException | None
    lost: bool
    taker: Taker


@contextlib.contextmanager
def held_through_a_proxy(
    skf: ModuleType, request: pytest.FixtureRequest, server: tuple[str, int]
) -> Iterator[tuple[Any, Callable[[Fault], Taker]]]:
    """held() on ``server`` (its name and port) through a proxy, unentered, and a
    function that cuts the proxy by a fault and starts the taker (connected directly)."""
    port = server[1]
    direct, through = addresses(*server, request)
    with proxy_to(port) as proxy:

        def cut(fault: Fault) -> Taker:
            proxy.cut(fault)
            return Taker(skf, direct)

        yield skf.held(through.format(port=proxy.port), "wf:sk", 6.0), cut


def block_cut_by(
    skf: ModuleType, request: pytest.FixtureRequest, server: tuple[str, int], fault: Fault
) -> BlockEnded:
    """A held() block through a proxy that ``fault`` cuts 2 s in, doing a step every
    100 ms and checking the lease at each, until check() raises LockLost."""
    taker: Taker | None = None
    last_step = seen_lost = 0.0
    with held_through_a_proxy(skf, request, server) as (lease, cut):
        try:
            with pytest.raises(skf.LockLost) as lost, lease as entered:
                started = time.monotonic()
                while True:  # the block's work: a step every 100 ms, checking the lease
                    if taker is None and time.monotonic() - started >= 2:
                        taker = cut(fault)
                    try:
                        entered.check()
                    except skf.LockLost:
                        seen_lost = time.time()
                        raise
                    last_step = time.time()
                    time.sleep(0.1)
        finally:
            if taker is not None:
                taker.join()
    assert taker is not None
    return BlockEnded(last_step, seen_lost, lost.value, entered.lost, taker)


def renewal_thread_cut(
    skf: ModuleType, request: pytest.FixtureRequest, server: tuple[str, int]
) -> BlockEnded:
    """A held() block through a proxy blackholed 2 s in, that never calls check(): it
    waits on the renewal thread's own verdict (``lease.renewer.lost``)."""
    taker: Taker | None = None
    thread_found_it_lost = 0.0
    raised: BaseException | None = None
    with held_through_a_proxy(skf, request, server) as (lease, cut):
        try:
            with lease as entered:
                assert entered.renewer is not None
                time.sleep(2)
                taker = cut("blackhole")
                while entered.renewer.lost is None:  # the thread's own verdict
                    time.sleep(0.05)
                thread_found_it_lost = time.time()
        except Exception as exc:
            raised = exc
        finally:
            if taker is not None:
                taker.join()
    assert taker is not None
    return BlockEnded(0.0, thread_found_it_lost, raised, entered.lost, taker)


THREAD = "blackhole, the renewal thread by itself"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("server", SERVERS)
def test_held_reports_a_hold_it_cannot_renew_lost_before_it_ends(
    skf: ModuleType, request: pytest.FixtureRequest, server: str
) -> None:
    """Under each fault (side by side), the block is told LockLost before another
    caller takes the lock, and does no step after it was told. Beside them, a block
    that never calls check(): held()'s renewal thread itself, not only check()'s look
    at the clock, finds the hold lost before another caller can take it, since its
    renewal waits on the network no longer than its holder may, not the server's 5 s
    timeout."""
    at = (server, server_port(server, request))
    cases: dict[str, Callable[[], BlockEnded]] = {
        fault: functools.partial(block_cut_by, skf, request, at, fault) for fault in FAULTS
    }
    cases[THREAD] = functools.partial(renewal_thread_cut, skf, request, at)
    ended = side_by_side(cases)

    def check(name: str, block: BlockEnded) -> None:
        taker = block.taker
        assert taker.began is not None, "the lock was never taken directly"
        assert block.last_step < block.seen_lost < taker.began, "worked on after the other take"
        assert isinstance(block.raised, skf.LockLost), block.raised
        assert block.lost and "renewals failed" in str(block.raised), block.raised
        # A lost hold is not released: that would wait on the network past its stop.
        assert not getattr(block.raised, "__notes__", None), block.raised.__notes__

    each_holds(ended, check)


# --- A hold is counted from when the try that renewed it began

# Each answer held back this long (seconds) once a renewal has read the lock (the
# proxy's delay): a Redis renewal's change is answered late, an etcd renewal's lease,
# change and revoke of the old lease each in turn. A renewal must be answered before
# its hold's stop point, 8.3 s after it begins; a renewer that counted from the answer
# would stop its work more than a second after the hold ended on the server (by 5.5 s,
# and by three answers of 2.5 s, less the 3.7 s it keeps to stop the work).
ANSWERS_DELAYED_BY = {"etcd": 2.5, "redis": 5.5}
DELAYED_HOLD = 18.0  # its grace and margin: 3.68 s; renewed every 6 s


def renewed_slowly(skf: ModuleType, direct: str) -> None:
    """Wait until a renewal of the hold at ``direct`` has reached the server: its
    ``stale_at`` moves on."""
    first = skf.status(direct, 60.0)["stale_at"]
    deadline = time.monotonic() + 40
    while skf.status(direct, 60.0)["stale_at"] == first:
        assert time.monotonic() < deadline, "no renewal reached the server"
        time.sleep(0.05)


def run_answered_slowly(
    skf: ModuleType, request: pytest.FixtureRequest, folder: Path, server: tuple[str, int]
) -> RunEnded:
    """A ``run`` through a proxy that delays every answer once the lock is taken, then,
    once a renewal reached the server (its answer still on its way), swallows
    everything; and a taker."""
    direct, through = addresses(*server, request)
    folder.mkdir()
    with proxy_to(server[1], slow_by=ANSWERS_DELAYED_BY[server[0]]) as proxy, reaped() as started:
        argv = ["run", "--lock", through.format(port=proxy.port), "--owner", "wf:sk"]
        argv += ["--stale-after", f"{DELAYED_HOLD:g}s", "--"]
        run = started_run(
            [*argv, sys.executable, "-c", COMMAND, str(folder)], folder / "marker", started
        )
        proxy.cut("delay")
        renewed_slowly(skf, direct)
        proxy.cut("blackhole")
        taker = Taker(skf, direct, watched=int((folder / "pid").read_text()))
        taker.join()
        proxy.close()  # run's release, after the loss, is refused at once
        _, err = run.communicate(timeout=60)
    exited = folder / "exited"
    return RunEnded(
        run.returncode,
        err,
        float((folder / "marker").read_text()),
        float(exited.read_text()) if exited.exists() else None,
        taker,
    )


def block_answered_slowly(
    skf: ModuleType, request: pytest.FixtureRequest, server: tuple[str, int]
) -> BlockEnded:
    """A held() block through a proxy that delays every answer once the lock is taken,
    then, once a renewal reached the server, swallows everything; doing a step every
    100 ms and checking the lease at each, until check() raises LockLost."""
    direct, through = addresses(*server, request)
    taker: Taker | None = None
    last_step = seen_lost = 0.0
    with proxy_to(server[1], slow_by=ANSWERS_DELAYED_BY[server[0]]) as proxy:
        lease = skf.held(through.format(port=proxy.port), "wf:sk", DELAYED_HOLD)
        try:
            with pytest.raises(skf.LockLost) as lost, lease as entered:
                proxy.cut("delay")
                renewing = threading.Thread(target=renewed_slowly, args=(skf, direct))
                renewing.start()
                while True:  # the block's work: a step every 100 ms, checking the lease
                    if taker is None and not renewing.is_alive():
                        proxy.cut("blackhole")
                        taker = Taker(skf, direct)
                    try:
                        entered.check()
                    except skf.LockLost:
                        seen_lost = time.time()
                        raise
                    last_step = time.time()
                    time.sleep(0.1)
        finally:
            if taker is not None:
                taker.join()
    assert taker is not None
    return BlockEnded(last_step, seen_lost, lost.value, entered.lost, taker)


@pytest.mark.timeout(120)
@posix_only("SIGTERM handled by the command, which records when it ended")
def test_a_hold_is_counted_from_when_its_renewal_began_however_slowly_it_was_answered(
    skf: ModuleType,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On etcd and Redis, under run and held() (side by side): every answer is delayed
    by seconds, a renewal reaches the server and its answer comes late, then the link
    swallows everything. The hold ends on the server counted from when that renewal
    reached it; the holder counts it from when the renewal began, so its work stops
    before another caller takes the lock. A holder that counted from the answer would
    stop its work more than a second after that take."""
    # Each call's own timeout long enough for the slow answers (run's too).
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "30")
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "30s")
    cases: dict[str, Callable[[], RunEnded | BlockEnded]] = {}
    for server in SERVERS:
        at = (server, server_port(server, request))
        folder = tmp_path / server
        cases[f"run on {server}"] = functools.partial(run_answered_slowly, skf, request, folder, at)
        cases[f"held() on {server}"] = functools.partial(block_answered_slowly, skf, request, at)
    ended = side_by_side(cases)

    def check(name: str, outcome: RunEnded | BlockEnded) -> None:
        taker = outcome.taker
        assert taker.began is not None, "the lock was never taken directly"
        if isinstance(outcome, RunEnded):
            assert outcome.exited is not None, "the command was killed without its SIGTERM"
            assert outcome.last_marker <= outcome.exited < taker.began, "ran on after the take"
            assert taker.command_alive is False, "the command's process outlived the hold"
            assert outcome.code == 3 and "renewals failed" in outcome.err, outcome.err
        else:
            assert outcome.last_step < outcome.seen_lost < taker.began, "worked on after the take"
            assert isinstance(outcome.raised, skf.LockLost), outcome.raised

    each_holds(ended, check)
