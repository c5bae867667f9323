"""held(): a lock held for a with block, renewed from a daemon thread, on every store."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
from lockfiles import beside, taken_over, write_record
from servers import Etcd
from signals import INTERRUPTING
from stores import StoreUnderTest
from test_run import contend, revoke_lease, time_now
from wrapped import WrappedStore, wrap_stores

SHORT = 3.0  # seconds: the smallest timeout held() renews, every second


def holder(skf: ModuleType, lock: str) -> str | None:
    """Who holds ``lock`` now (None when it is free or stale), from one look."""
    now = skf.status(lock, 60.0)
    held_by: str | None = now["held_by"]
    return held_by if now["state"] == "held" else None


@pytest.mark.timeout(60)
def test_a_block_outliving_several_timeouts_keeps_the_lock(
    skf: ModuleType, tmp_path: Path, etcd_lock: str, redis_lock: str
) -> None:
    """On every store at once: blocks with a 3 s timeout, each held while a process
    tries to take its lock as often as it can for 6.5 s, started once the blocks hold
    their locks and ended before the blocks end."""
    locks = [str(tmp_path / "locks" / "held.lock"), etcd_lock, redis_lock]
    failures: list[BaseException] = []
    done = threading.Event()  # the blocks end once the rivals have stopped

    def hold(lock: str) -> None:
        try:
            with skf.held(lock, "wf:held", SHORT) as lease:
                assert lease.owner.startswith("wf:held:") and lease.result["acquired"]
                assert lease.result["owner"] == lease.owner
                while not done.wait(0.5):
                    lease.check()  # never raises: the lock stays this block's
                    assert holder(skf, lock) == lease.owner
                assert not lease.lost
        except BaseException as exc:  # reported below, from the test's own thread
            failures.append(exc)

    threads = [threading.Thread(target=hold, args=(lock,)) for lock in locks]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while not all(holder(skf, lock) for lock in locks) and not failures:
        assert time.monotonic() < deadline, "the blocks never took their locks"
        time.sleep(0.05)
    started = time.time()
    rivals = [contend(lock, started + 6.5) for lock in locks]
    outcomes = [json.loads(rival.communicate(timeout=60)[0]) for rival in rivals]
    done.set()
    for thread in threads:
        thread.join(timeout=40)
    assert not failures, failures
    for lock, outcome in zip(locks, outcomes, strict=True):
        assert outcome["took"] == 0, outcome
        assert [at for at in outcome["tries"] if at > started + 3.5], "no try past a timeout"
        assert holder(skf, lock) is None  # released when the block ended


def test_an_exception_in_the_block_releases_and_propagates(skf: ModuleType, any_lock: str) -> None:
    with pytest.raises(ZeroDivisionError), skf.held(any_lock, "wf:held", SHORT):
        assert holder(skf, any_lock) is not None
        _ = 1 / 0
    assert holder(skf, any_lock) is None


def test_a_keyboard_interrupt_in_the_block_releases(skf: ModuleType, any_lock: str) -> None:
    # Python's own Ctrl-C handler, as in a terminal, even where pytest started with
    # SIGINT ignored (a shell's background job, as CI runs it, does that).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), skf.held(any_lock, "wf:held", SHORT):
            signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, delivered to this block
            time.sleep(5)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert holder(skf, any_lock) is None


def stale_at_of(skf: ModuleType, lock: str, owner: str, slots: int = 1) -> str | None:
    """When ``owner``'s live hold of ``lock`` goes stale (None: it holds nothing live)."""
    seen = skf.status(lock, 60.0, slots=slots)
    holds = seen["holders"] if seen["holders"] else [seen] if seen["state"] == "held" else []
    found: str | None = next(
        (h["stale_at"] for h in holds if h.get("owner", h.get("held_by")) == owner), None
    )
    return found


@pytest.mark.parametrize("slots", [1, 3])
def test_a_block_inside_its_owners_hold_leaves_it_held_and_no_shorter(
    skf: ModuleType, any_lock: str, slots: int
) -> None:
    """The owner holds the lock (or a slot) for an hour; a block under the same owner
    with a 3 s timeout ends in an exception: the hold stays, going stale no sooner."""
    taken = skf.acquire(any_lock, "wf:flow", 3600.0, slots=slots)
    with pytest.raises(ZeroDivisionError), skf.held(any_lock, taken["owner"], SHORT, slots=slots):
        _ = 1 / 0
    after = stale_at_of(skf, any_lock, taken["owner"], slots)
    assert after is not None and after >= taken["stale_at"], (after, taken)


@pytest.mark.timeout(60)
def test_a_block_renews_its_owners_hold_past_its_timeout(skf: ModuleType, any_lock: str) -> None:
    taken = skf.acquire(any_lock, "wf:flow", SHORT)
    with skf.held(any_lock, taken["owner"], SHORT) as lease:
        assert lease.result["refreshed"]
        time.sleep(4.5)
        lease.check()
    after = stale_at_of(skf, any_lock, taken["owner"])
    assert after is not None and after > taken["stale_at"], (after, taken)
    assert skf.release(any_lock, taken["owner"])["released"]


@pytest.mark.timeout(60)
def test_a_lock_taken_over_raises_lock_lost_from_check_and_on_exit(
    skf: ModuleType, tmp_path: Path
) -> None:
    lock = tmp_path / "held.lock"
    with pytest.raises(skf.LockLost) as lost, skf.held(lock, "wf:held", SHORT) as lease:
        taken_over(skf, lock, "wf:intruder:1")
        deadline = time.monotonic() + 10
        while not lease.lost:
            assert time.monotonic() < deadline, "the take-over was never noticed"
            time.sleep(0.1)
        with pytest.raises(skf.LockLost):
            lease.check()
    assert lost.value.held_by == "wf:intruder:1" and lost.value.held_since is not None
    assert "wf:intruder:1 holds it" in str(lost.value)
    assert json.loads(lock.read_text())["owner"] == "wf:intruder:1"  # left to its holder


@pytest.mark.timeout(60)
def test_a_revoked_etcd_lease_is_a_lost_lock(skf: ModuleType, etcd: Etcd, etcd_lock: str) -> None:
    with pytest.raises(skf.LockLost) as lost, skf.held(etcd_lock, "wf:held", SHORT) as lease:
        revoke_lease(etcd, etcd_lock)
        deadline = time.monotonic() + 10
        while not lease.lost:
            assert time.monotonic() < deadline, "the revoked lease was never noticed"
            time.sleep(0.1)
    assert lost.value.held_by is None and "no run holds it now" in str(lost.value)
    assert holder(skf, etcd_lock) is None  # the lost lock was not taken back


@pytest.mark.timeout(60)
def test_a_record_deleted_under_a_block_is_a_lost_lock(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    with pytest.raises(skf.LockLost) as lost, skf.held(store.lock, "wf:held", SHORT) as lease:
        store.remove()
        deadline = time.monotonic() + 10
        while not lease.lost:
            assert time.monotonic() < deadline, "the deleted record was never noticed"
            time.sleep(0.1)
    assert lost.value.held_by is None and "no run holds it now" in str(lost.value)
    assert holder(skf, store.lock) is None  # the lost lock was not taken back
    assert store.value() is None


def test_a_busy_lock_raises_lock_busy_on_entering(skf: ModuleType, tmp_path: Path) -> None:
    lock = tmp_path / "held.lock"
    write_record(lock, "wf:other:1", time_now())
    with pytest.raises(skf.LockBusy) as busy, skf.held(lock, "wf:held", SHORT, wait=0.2):
        pytest.fail("the block ran without the lock")
    assert busy.value.result["held_by"] == "wf:other:1"


@pytest.mark.timeout(60)
def test_passing_renewal_failures_are_retried_until_too_little_is_left_of_the_hold(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "held.lock"
    failures = {"left": 2}
    mine = threading.current_thread()  # it takes and releases; the renewals are another's

    class Flaky(WrappedStore):
        def change(self, create: bool) -> WrappedStore:
            if threading.current_thread() is not mine and failures["left"]:
                failures["left"] -= 1
                raise OSError(5, "Input/output error")
            return super().change(create)

    wrap_stores(skf, monkeypatch, Flaky)
    with skf.held(lock, "wf:held", SHORT) as lease:
        time.sleep(3)  # two failed renewals (at 1 s and 1.3 s), then good ones
        assert not lease.lost and failures["left"] == 0
    failures["left"] = 10**6
    monkeypatch.chdir(tmp_path)  # a relative path: LockLost names the lock as outputs do
    with pytest.raises(skf.LockLost) as lost, skf.held("held.lock", "wf:held", SHORT) as lease:
        time.sleep(4)  # failing for as long as the timeout (3 s)
        assert lease.lost
    assert "renewals failed" in str(lost.value) and "go stale" in str(lost.value)
    assert lost.value.lock == lease.result["lock"] == str(lock)
    assert beside(lock) == ["held.lock"]  # a lost hold is left to end: no guard, no temp


@pytest.mark.parametrize("bad", [2.9, 0.5, float("nan"), -1])
def test_a_timeout_too_short_to_renew_is_a_value_error(
    skf: ModuleType, tmp_path: Path, bad: float
) -> None:
    with pytest.raises(ValueError, match="stale_after"):
        skf.held(tmp_path / "held.lock", "wf:held", bad)
    assert beside(tmp_path / "held.lock") == []


def test_held_installs_no_signal_handlers(skf: ModuleType, tmp_path: Path) -> None:
    before = {s: signal.getsignal(s) for s in INTERRUPTING if s in signal.valid_signals()}
    with skf.held(tmp_path / "held.lock", "wf:held", SHORT):
        assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.timeout(60)
def test_a_renewal_that_writes_after_its_block_was_told_lost_lets_the_hold_go(
    skf: ModuleType, any_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every store: a renewal whose write lands only after the block was told the hold
    was lost (its write held back past the stop point, as a process paused between its
    last look at the clock and its send) releases what it wrote: the work stopped, and
    the lock is not left held by nobody's work for a whole timeout."""
    writing = threading.Event()
    told = threading.Event()

    class LateWrite(WrappedStore):
        def apply(self, *args: object, **kwargs: object) -> object:
            if threading.current_thread().name == "skf-run-lock renewal" and not writing.is_set():
                writing.set()
                told.wait(30)  # until the block was told the hold was lost
            return self.real.apply(*args, **kwargs)

    wrap_stores(skf, monkeypatch, LateWrite)
    with pytest.raises(skf.LockLost) as lost, skf.held(any_lock, "wf:held:1", SHORT) as lease:
        assert writing.wait(10), "no renewal came"
        while not lease.lost:
            time.sleep(0.05)
    told.set()
    assert "renewals failed" in str(lost.value)
    assert lease.thread is not None
    lease.thread.join(30)
    assert not lease.thread.is_alive()
    # Released (a file), or never written (a server: its deadline had passed): never
    # held on past the first hold's own end.
    assert lease.result is not None
    after = skf.status(any_lock, 60.0)
    assert after["state"] != "held" or after["stale_at"] == lease.result["stale_at"], after


@pytest.mark.timeout(60)
def test_a_block_ends_at_its_stop_point_while_a_renewal_is_stuck_which_then_writes_nothing(
    skf: ModuleType, any_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every store: a block that ends while its renewal is stuck in the store (a read
    that does not return, which no network deadline cuts) waits for it no later than
    the hold's stop point, and is told LockLost while the renewal is still stuck. Once
    the read returns, that renewal writes nothing: its holder's time to stop has passed."""
    stuck = threading.Event()
    resumed = threading.Event()
    go_on = threading.Event()
    late: list[str] = []  # what the stuck renewal did once its read returned

    class StuckRenewal(WrappedStore):
        def read(self, *args: object, **kwargs: object) -> object:
            if threading.current_thread().name == "skf-run-lock renewal" and not stuck.is_set():
                stuck.set()
                go_on.wait(30)
                resumed.set()
            return self.real.read(*args, **kwargs)

        def apply(self, *args: object, **kwargs: object) -> object:
            if resumed.is_set():
                late.append("apply")
            return self.real.apply(*args, **kwargs)

    wrap_stores(skf, monkeypatch, StuckRenewal)
    with pytest.raises(skf.LockLost) as lost, skf.held(any_lock, "wf:held", SHORT) as lease:
        assert stuck.wait(10), "no renewal came"  # the first, a second in
    ended_while_stuck = not resumed.is_set()
    go_on.set()
    assert lease.thread is not None
    lease.thread.join(10)
    assert ended_while_stuck, "the block waited for the stuck renewal"
    assert late == [], "the renewal wrote after its holder's time to stop"
    assert "renewals failed" in str(lost.value)
