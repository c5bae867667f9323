"""A hold that cannot be renewed ends on the holder's side before its lease can end on
the server: ``run`` (a real process of the built file) and ``held()`` hold a lock on
the real etcd and Redis through a proxy (tests/proxy.py) that is cut 2 s in, by a
blackhole, a reset or a slow link, while another caller connected directly tries to
take the lock until it does. The command must be gone, and held() must have reported
the hold lost, before that take: the times compared are the ones each side recorded
as it went (an order, not a duration)."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType

import pytest
from calls import posix_only, reaped
from conftest import key_of_its_own
from proxy import Fault, proxy_to
from takers import Taker, started_run

FAULTS = ["blackhole", "reset", "slow"]
SERVERS = ["etcd", "redis"]

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


def server_port_and_addresses(server: str, request: pytest.FixtureRequest) -> tuple[int, str, str]:
    """The server's port, and the address of a lock of the test's own there, with
    ``{port}`` for the port it is reached at (the server's, or the proxy's)."""
    key = key_of_its_own(request)
    if server == "etcd":
        port = int(request.getfixturevalue("etcd").client.rpartition(":")[2])
        return port, f"etcd://127.0.0.1:{port}/{key}", "etcd://127.0.0.1:{port}/" + key
    port = request.getfixturevalue("redis").port
    return port, f"redis://127.0.0.1:{port}/{key}", "redis://127.0.0.1:{port}/" + key


@pytest.mark.timeout(90)
@posix_only("SIGTERM handled by the command, which records when it ended")
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("server", SERVERS)
def test_run_stops_its_command_before_a_hold_it_cannot_renew_ends(
    skf: ModuleType,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    server: str,
    fault: Fault,
) -> None:
    port, direct, through = server_port_and_addresses(server, request)
    with proxy_to(port) as proxy, reaped() as started:
        argv = ["run", "--lock", through.format(port=proxy.port), "--owner", "wf:sk"]
        argv += ["--stale-after", "6s", "--", sys.executable, "-c", COMMAND, str(tmp_path)]
        run = started_run(argv, tmp_path / "marker", started)
        time.sleep(2)
        proxy.cut(fault)
        taker = Taker(skf, direct, watched=int((tmp_path / "pid").read_text()))
        _, err = run.communicate(timeout=60)
        taker.join()
    assert taker.began is not None, "the lock was never taken directly"
    last_marker = float((tmp_path / "marker").read_text())
    assert last_marker < taker.began, "the command ran on after the other take"
    assert taker.command_alive is False, "the command's process outlived the hold"
    exited = tmp_path / "exited"  # written on SIGTERM: it had its grace
    assert exited.exists(), "the command was killed without its SIGTERM"
    assert last_marker <= float(exited.read_text()) < taker.began
    assert run.returncode == 3, err  # the lock was lost: its command was stopped
    assert "was stopped" in err and "renewals failed" in err, err


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("server", SERVERS)
def test_held_reports_a_hold_it_cannot_renew_lost_before_it_ends(
    skf: ModuleType, request: pytest.FixtureRequest, server: str, fault: Fault
) -> None:
    port, direct, through = server_port_and_addresses(server, request)
    taker: Taker | None = None
    last_step = seen_lost = 0.0
    with proxy_to(port) as proxy:
        with (
            pytest.raises(skf.LockLost) as lost,
            skf.held(through.format(port=proxy.port), "wf:sk", 6.0) as lease,
        ):
            started = time.monotonic()
            while True:  # the block's work: a step every 100 ms, checking the lease
                if taker is None and time.monotonic() - started >= 2:
                    proxy.cut(fault)
                    taker = Taker(skf, direct)
                try:
                    lease.check()
                except skf.LockLost:
                    seen_lost = time.time()
                    raise
                last_step = time.time()
                time.sleep(0.1)
        assert taker is not None
        taker.join()
    assert taker.began is not None, "the lock was never taken directly"
    assert last_step < seen_lost < taker.began, "the block worked on after the other take"
    assert lease.lost and "renewals failed" in str(lost.value)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("server", SERVERS)
def test_a_renewal_through_a_blackhole_gives_up_in_time_by_itself(
    skf: ModuleType, request: pytest.FixtureRequest, server: str
) -> None:
    """held()'s renewal thread itself, not only check()'s look at the clock, finds the
    hold lost before another caller can take it: its renewal waits on the network no
    longer than its holder may, not the server's 5 s timeout."""
    port, direct, through = server_port_and_addresses(server, request)
    thread_found_it_lost = 0.0
    raised: BaseException | None = None
    with proxy_to(port) as proxy:
        lease = skf.held(through.format(port=proxy.port), "wf:sk", 6.0)
        try:
            with lease:
                assert lease.renewer is not None
                time.sleep(2)
                proxy.cut("blackhole")
                taker = Taker(skf, direct)
                while lease.renewer.lost is None:  # the thread's own verdict
                    time.sleep(0.05)
                thread_found_it_lost = time.time()
        except Exception as exc:
            raised = exc
        taker.join()
    assert taker.began is not None, "the lock was never taken directly"
    assert thread_found_it_lost < taker.began
    # The block is told LockLost, its failed release (no server in reach) a note on it.
    assert isinstance(raised, skf.LockLost), raised
    assert "could not be released" in str(raised.__notes__)
