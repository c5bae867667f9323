"""Waiting on a server without polling: a waiter blocks on what its store offers (a watch
on etcd, a bell on Redis) and tries again only when the lock may have come free.

Each test runs on a real etcd and a real Redis. ``counted_tries`` records every try a
waiter makes; ``blocked`` is set once the waiter sits blocked on its store, so a try
the test did not cause (a poll) would show as one try too many.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

import pytest
from waiters import joined, waiter_thread
from wire import when_blocked
from wrapped import WrappedStore, wrap_stores


@pytest.fixture(params=["etcd", "redis"])
def server_lock(request: pytest.FixtureRequest) -> str:
    """A lock on the session's etcd, then on its Redis."""
    address: str = request.getfixturevalue(f"{request.param}_lock")
    return address


@pytest.fixture
def blocked(server_lock: str, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a waiter sits blocked on its store: on etcd, reading a watch etcd said
    it made; on Redis, waiting for its bell."""
    event = threading.Event()
    when_blocked(monkeypatch, server_lock.partition("://")[0], event.set)
    return event


@pytest.mark.usefixtures("no_beats")
def test_a_waiter_wakes_when_the_holder_releases(
    skf: ModuleType, server_lock: str, counted_tries: list[bool], blocked: threading.Event
) -> None:
    """Only the release can wake it: no time limit, no poll."""
    skf.acquire(server_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, server_lock, "wf:waiter:1")
    assert blocked.wait(timeout=30)
    time.sleep(0.3)
    assert counted_tries == [False]
    assert skf.release(server_lock, "wf:holder:1")["released"]
    result = joined(thread, outcome)
    assert result["acquired"] and result["owner"] == "wf:waiter:1"
    assert counted_tries == [False, True]  # refused and in line; the take after the release


@pytest.mark.usefixtures("no_beats")
def test_a_waiter_wakes_when_the_holders_time_runs_out(
    skf: ModuleType, server_lock: str, counted_tries: list[bool], blocked: threading.Event
) -> None:
    """etcd ends the lease and says so on the watch; Redis publishes nothing when a key
    expires, so the first in line waits out the time to live the server told it."""
    skf.acquire(server_lock, "wf:crashed:1", 2.0)  # never released
    thread, outcome = waiter_thread(skf, server_lock, "wf:waiter:1")
    assert blocked.wait(timeout=30)
    result = joined(thread, outcome)
    assert result["acquired"] and result["stale_replaced"]["held_by"] == "wf:crashed:1"
    assert counted_tries == [False, True]


@pytest.mark.usefixtures("no_beats")
def test_a_waiter_does_not_try_while_the_holder_renews(
    skf: ModuleType, server_lock: str, counted_tries: list[bool], blocked: threading.Event
) -> None:
    """A renewal wakes nobody; a caller that does not wait cannot take the lock between
    the release and the waiter's take."""
    skf.acquire(server_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, server_lock, "wf:waiter:1")
    assert blocked.wait(timeout=30)
    for _ in range(3):
        assert skf.acquire(server_lock, "wf:holder:1", 600.0)["refreshed"]
    time.sleep(0.5)
    assert counted_tries == [False]
    assert skf.release(server_lock, "wf:holder:1")["released"]
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    assert counted_tries == [False, True]


@pytest.mark.usefixtures("no_beats")
def test_two_slots_freed_in_a_row_wake_two_waiters(
    skf: ModuleType, server_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two releases in a row must wake the first two in line. The first waiter is slow
    to take (0.5 s), so the second release finds it still first in line: the second is
    woken by that release and takes its slot first (woken only by the first's take, it
    would come after it; with no beats, never woken, it would wait for good)."""

    class SlowFirst(WrappedStore):
        """The first waiter's second try (the first after its place joined the line)
        begins half a second late."""

        joined_by = ""
        slowed = False

        def join(self, look: Any, place: Any, now: float) -> None:
            self.real.join(look, place, now)
            self.joined_by = place.owner

        def change(self, create: bool) -> WrappedStore:
            if self.joined_by == "wf:waiter:1" and not self.slowed:
                self.slowed = True
                time.sleep(0.5)
            return super().change(create)

    wrap_stores(skf, monkeypatch, SlowFirst)
    for owner in ("wf:h1:1", "wf:h2:1"):
        skf.acquire(server_lock, owner, 600.0, slots=2)
    outcomes: dict[str, list[dict[str, Any]]] = {}
    served: list[str] = []
    threads = []
    for n in (1, 2):
        outcome: list[dict[str, Any]] = []
        owner = f"wf:waiter:{n}"

        def wait(owner: str = owner, outcome: list[dict[str, Any]] = outcome) -> None:
            outcome.append(skf.acquire_within(server_lock, owner, 60.0, 3600.0, slots=2))
            served.append(owner)

        threads.append(threading.Thread(target=wait, daemon=True))
        outcomes[owner] = outcome
        threads[-1].start()
        deadline = time.monotonic() + 30
        while len(skf.status(server_lock, 60.0)["waiting"]) < n:
            assert time.monotonic() < deadline, "a waiter never got into line"
            time.sleep(0.02)
    assert skf.release(server_lock, "wf:h1:1")["released"]
    assert skf.release(server_lock, "wf:h2:1")["released"]
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a waiter never woke: a freed slot rang nobody"
    holders = [holder["owner"] for holder in skf.status(server_lock, 60.0)["holders"]]
    assert sorted(holders) == ["wf:waiter:1", "wf:waiter:2"]
    assert served == ["wf:waiter:2", "wf:waiter:1"]


# --- Waiting on from one look: etcd's watch vouches that nothing changed -------------


@pytest.fixture
def quick_beats(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Beats every 0.2 s (five a second), each beat recorded as it is sent."""
    monkeypatch.setattr(skf._SEAMS, "beat_sec", 0.2)
    beats: list[float] = []

    class Beating(WrappedStore):
        def beat(self, place: object) -> bool:
            beats.append(time.monotonic())
            return bool(self.real.beat(place))

    wrap_stores(skf, monkeypatch, Beating)
    return beats


@pytest.fixture
def looks(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each look a waiter takes at an etcd lock, recorded."""
    seen: list[float] = []

    class Looking(WrappedStore):
        def look(self, upto: str | None = None) -> object:
            seen.append(time.monotonic())
            return self.real.look(upto)

    wrap_stores(skf, monkeypatch, Looking)
    return seen


def test_an_etcd_waiter_goes_on_from_one_look_while_its_watch_saw_nothing(
    skf: ModuleType, etcd_lock: str, quick_beats: list[float], looks: list[float]
) -> None:
    """A wait that ended only for its beat goes on from the look before it, as the watch
    would have woken it for any change it waits on: one look every fifth beat, not one
    a beat (with 64 waiting, a look of the whole lock each second cost etcd about a
    tenth of a core). The release still wakes it at once."""
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
    time.sleep(2.5)
    beats, taken = len(quick_beats), len(looks)
    assert beats >= 8
    assert taken <= 2 + beats // (skf._VOUCHED_WAITS + 1), (beats, taken)
    released = time.monotonic()
    assert skf.release(etcd_lock, "wf:holder:1")["released"]
    result = joined(thread, outcome)
    assert result["acquired"] and result["owner"] == "wf:waiter:1"
    # Woken by the release, not by the look it would take after its next beats.
    assert len([at for at in looks if at >= released]) <= 1


def test_an_etcd_waiter_whose_watch_went_silent_still_looks_every_few_beats(
    skf: ModuleType,
    etcd_lock: str,
    quick_beats: list[float],
    looks: list[float],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A watch whose connection died unseen streams nothing, and the waiter cannot tell
    it from a quiet one: the look it takes every fifth beat all the same finds the lock
    released, about a second later here (five beats of 0.2 s), not when its budget ends.
    Here its store's waits see nothing, as such a watch would, and vouch that nothing
    changed, as the store does while its watch is open and streamed nothing."""

    class Silent(WrappedStore):
        def wait(self, left: float, *args: object) -> bool:
            time.sleep(left)
            return False

        def vouches(self, look: object) -> bool:
            return True

    wrap_stores(skf, monkeypatch, Silent)
    skf.acquire(etcd_lock, "wf:holder:1", 600.0)
    thread, outcome = waiter_thread(skf, etcd_lock, "wf:waiter:1")
    deadline = time.monotonic() + 30
    while len(quick_beats) < 2:
        assert time.monotonic() < deadline, "the waiter never beat"
        time.sleep(0.05)
    assert skf.release(etcd_lock, "wf:holder:1")["released"]
    thread.join(timeout=5)
    assert not thread.is_alive(), "the waiter trusted a silent watch: it never looked again"
    (result,) = outcome
    assert isinstance(result, dict), result
    assert result["acquired"] and result["owner"] == "wf:waiter:1"
