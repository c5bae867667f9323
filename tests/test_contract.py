"""The contract on every store: acquire, release, status and the holder's timeout, run
unchanged on a lock file, on a real etcd and on a real Redis.

Each test gets ``store`` (or just its address, ``any_lock``): a lock on each store in
turn, with a way to plant a record or a foreign value where the lock keeps its record,
and to read back what the store holds. What only one store does (its folders and bytes
on disk, leases, expiries, hash slots, TLS, failover) is tested in that store's file;
the line of waiters, run and held() run on every store in test_line.py, test_run.py and
test_held.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, Started
from contenders import assert_exclusive_counter, assert_one_winner_of_a_race
from stores import THREE_STORES, StoreUnderTest, planted_record, shown_time
from test_acquire import ACQUIRE_KEYS
from test_line import place_in_line, wait_for
from test_release import RELEASE_KEYS
from test_status import STATUS_KEYS
from waiters import joined, waiter_thread
from wrapped import WrappedStore, wrap_stores


def test_take_renew_refuse_with_every_key_in_order(main: Callable[..., Run], any_lock: str) -> None:
    taken = main("acquire", "--lock", any_lock, "--owner", "wf:sk:r1", "--stale-after", "30")
    assert taken.code == 0 and list(taken.json) == ACQUIRE_KEYS
    out = taken.json
    assert (out["acquired"], out["refreshed"], out["lock"], out["owner"], out["run_id"]) == (
        True,
        False,
        any_lock,
        "wf:sk:r1",
        "r1",
    )
    assert (out["held_by"], out["stale_after_minutes"], out["stale_replaced"]) == (
        "wf:sk:r1",
        30,
        None,
    )
    renewed = main("acquire", "--lock", any_lock, "--owner", "wf:sk:r1")
    assert renewed.code == 0 and renewed.json["refreshed"] is True
    assert renewed.json["stale_after_minutes"] == 60  # the renewing call's timeout
    refused = main("acquire", "--lock", any_lock, "--owner", "wf:sk:r2", "--stale-after", "0.1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert (refused.json["acquired"], refused.json["held_by"]) == (False, "wf:sk:r1")
    assert refused.json["stale_after_minutes"] == 60  # the holder's, not this caller's
    message = refused.json["message"]
    assert any_lock in message and "wf:sk:r1" in message and "stale" in message


def test_a_missing_run_id_is_added_and_printed(
    main: Callable[..., Run], skf: ModuleType, any_lock: str
) -> None:
    run = main("acquire", "--lock", any_lock, "--owner", "wf:sk")
    assert run.code == 0 and skf.RUN_ID_RE.match(run.json["run_id"])
    assert run.json["owner"] == "wf:sk:" + run.json["run_id"] == run.json["held_by"]


def test_release_answers_released_not_owner_and_absent(
    main: Callable[..., Run], any_lock: str
) -> None:
    main("acquire", "--lock", any_lock, "--owner", "wf:sk:r1")
    other = main("release", "--lock", any_lock, "--owner", "wf:sk:r2")
    assert other.code == 0 and list(other.json) == RELEASE_KEYS
    assert (other.json["released"], other.json["reason"], other.json["held_by"]) == (
        False,
        "not-owner",
        "wf:sk:r1",
    )
    assert other.json["held_since"] is not None
    mine = main("release", "--lock", any_lock, "--owner", "wf:sk:r1")
    assert (mine.json["released"], mine.json["reason"], mine.json["held_by"]) == (True, None, None)
    absent = main("release", "--lock", any_lock, "--owner", "wf:sk:r1")
    assert (absent.json["released"], absent.json["reason"]) == (False, "absent")


def test_status_says_free_then_held(main: Callable[..., Run], any_lock: str) -> None:
    free = main("status", "--lock", any_lock)
    assert free.code == 0 and list(free.json) == STATUS_KEYS
    assert (free.json["state"], free.json["held_by"], free.json["age_seconds"]) == (
        "free",
        None,
        None,
    )
    main("acquire", "--lock", any_lock, "--owner", "wf:sk:r1")
    held = main("status", "--lock", any_lock)
    assert held.code == 3 and (held.json["state"], held.json["held_by"]) == ("held", "wf:sk:r1")


def test_acquire_within_gives_up_with_lock_busy(skf: ModuleType, any_lock: str) -> None:
    skf.acquire(any_lock, "wf:sk:holder", 600.0)
    with pytest.raises(skf.LockBusy) as busy:
        skf.acquire_within(any_lock, "wf:sk:waiter", 600.0, 0.2)
    assert busy.value.result["held_by"] == "wf:sk:holder"
    assert busy.value.result["acquired"] is False


def test_wait_on_the_cli_gives_up_with_exit_3(main: Callable[..., Run], any_lock: str) -> None:
    main("acquire", "--lock", any_lock, "--owner", "wf:sk:holder")
    run = main("acquire", "--lock", any_lock, "--owner", "wf:sk:me", "--wait", "0.3")
    assert run.code == 3 and run.json["message"].startswith("gave up after waiting ")


@pytest.mark.parametrize("owner", ["nocolon", "wf::r", "wf:sk:a b"])
def test_a_bad_owner_changes_nothing(main: Callable[..., Run], any_lock: str, owner: str) -> None:
    assert main("acquire", "--lock", any_lock, "--owner", owner).code == 1
    assert main("status", "--lock", any_lock).json["state"] == "free"


def test_release_needs_the_run_id(main: Callable[..., Run], any_lock: str) -> None:
    run = main("release", "--lock", any_lock, "--owner", "wf:sk")
    assert run.code == 1 and "run id" in run.error


# --- What a record planted on the store means ---------------------------------------------


def record_of(store: StoreUnderTest) -> dict[str, object]:
    """The record the store holds (a JSON object, one line)."""
    value = store.value()
    assert value is not None and value.endswith(b"\n") and value.count(b"\n") == 1, value
    record = json.loads(value)
    assert isinstance(record, dict)
    return record


def test_a_stale_record_is_replaced_and_reported(skf: ModuleType, store: StoreUnderTest) -> None:
    since = shown_time(7200)
    store.plant(planted_record("wf:sk:old", since, stale_after_seconds=3600))
    taken = skf.acquire(store.lock, "wf:sk:new", 600.0)
    assert (taken["acquired"], taken["refreshed"], taken["held_by"]) == (True, False, "wf:sk:new")
    assert taken["stale_replaced"] == {"held_by": "wf:sk:old", "held_since": since}
    keys = ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]
    assert list(record_of(store)) == keys
    assert record_of(store)["owner"] == "wf:sk:new"
    assert record_of(store)["fence"] == skf.fence_of(taken)


def test_a_live_record_is_refused_and_left_byte_for_byte(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    since = shown_time(30)
    planted = planted_record("wf:sk:r1", since, stale_after_seconds=3600, tool="skf-run-lock")
    store.plant(planted)
    refused = skf.acquire(store.lock, "wf:sk:r2", 0.5)
    assert list(refused) == ACQUIRE_KEYS
    assert (refused["acquired"], refused["held_by"]) == (False, "wf:sk:r1")
    assert (refused["held_since"], refused["stale_after_minutes"]) == (since, 60)
    assert "wf:sk:r1" in refused["message"] and "stale" in refused["message"]
    assert store.value() == planted


def test_a_record_dated_in_the_future_is_held(skf: ModuleType, store: StoreUnderTest) -> None:
    planted = planted_record("wf:sk:r1", shown_time(-3 * 86400), stale_after_seconds=60)
    store.plant(planted)
    assert skf.acquire(store.lock, "wf:sk:r2", 60.0)["acquired"] is False
    status = skf.status(store.lock, 60.0)
    assert status["state"] == "held" and status["age_seconds"] < -3 * 86400 + 5
    assert store.value() == planted


def test_a_value_that_is_no_record_names_no_owner_and_is_never_released(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    store.plant(b"written by some other tool")
    refused = skf.acquire(store.lock, "wf:sk:r", 60.0)
    assert (refused["acquired"], refused["held_by"]) == (False, None)
    by_hand = skf._store_for(store.lock).by_hand()
    assert "clear it with" not in refused["message"] and by_hand in refused["message"]
    assert skf.release(store.lock, "wf:sk:r")["reason"] == "not-owner"
    assert skf.status(store.lock, 60.0)["state"] == "held"
    assert store.value() == b"written by some other tool"


@pytest.mark.parametrize("planted", [b"4242\n", b'{"owner": ""}\n'])
def test_a_record_naming_no_owner_goes_stale_by_its_time(
    skf: ModuleType, store: StoreUnderTest, planted: bytes
) -> None:
    """An older helper's "PID, time" lines, or a record whose owner is empty."""
    old = planted.replace(b"\n", f"\n{shown_time(7200)}\n".encode(), 1)
    if planted.startswith(b"{"):
        old = planted_record("", shown_time(7200))
    store.plant(old)
    assert skf.status(store.lock, 3600.0)["state"] == "stale"
    assert skf.release(store.lock, "wf:sk:r")["reason"] == "not-owner"
    taken = skf.acquire(store.lock, "wf:sk:new", 3600.0)
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] is None


def test_release_of_a_stale_own_record_still_releases(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    store.plant(planted_record("wf:sk:r1", shown_time(7200), stale_after_seconds=60))
    released = skf.release(store.lock, "wf:sk:r1")
    assert list(released) == RELEASE_KEYS and released["released"] is True
    assert store.value() is None


def test_only_the_owner_releases_and_a_release_leaves_nothing(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    skf.acquire(store.lock, "wf:sk:r1", 600.0)
    held = store.value()
    kept = skf.release(store.lock, "wf:sk:r2")
    assert (kept["released"], kept["reason"], kept["held_by"]) == (False, "not-owner", "wf:sk:r1")
    assert store.value() == held
    assert skf.release(store.lock, "wf:sk:r1")["released"]
    assert store.value() is None
    assert store.left_behind() == []
    absent = skf.release(store.lock, "wf:sk:r1")
    assert (absent["released"], absent["reason"]) == (False, "absent")


def test_status_of_a_held_record_gives_its_age_and_writes_nothing(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    started = time.monotonic()
    since = shown_time(100)
    planted = planted_record("wf:sk:r1", since, stale_after_seconds=300, tool="skf-run-lock")
    store.plant(planted)
    before = store.left_behind()
    status = skf.status(store.lock, 3600.0)
    taken = time.monotonic() - started  # a loaded machine's Cluster took seconds
    assert list(status) == STATUS_KEYS
    assert (status["state"], status["held_by"], status["held_since"]) == (
        "held",
        "wf:sk:r1",
        since,
    )
    assert 100 <= status["age_seconds"] <= 101 + taken  # rounded down; time passes
    assert (status["stale_after_minutes"], status["stale_at"]) == (5, shown_time(-300, since))
    assert (store.value(), store.left_behind()) == (planted, before)


def test_a_record_exactly_at_its_timeout_is_stale(skf: ModuleType, store: StoreUnderTest) -> None:
    store.plant(planted_record("wf:sk:old", shown_time(300), stale_after_seconds=300))
    assert skf.status(store.lock, 3600.0)["state"] == "stale"


# --- The holder's timeout decides ------------------------------------------------------------


def test_a_tiny_caller_timeout_cannot_take_a_live_lock(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    taken = cli("acquire", "--lock", store.lock, "--owner", "long:run", "--stale-after", "600")
    assert taken.code == 0 and taken.json["stale_after_minutes"] == 600
    assert record_of(store)["stale_after_seconds"] == 36000
    held = store.value()
    refused = cli(
        "acquire", "--lock", store.lock, "--owner", "other:run", "--stale-after", "0.0001"
    )
    assert refused.code == 3
    out = refused.json
    assert (out["acquired"], out["held_by"]) == (False, taken.json["owner"])
    assert (out["stale_at"], out["stale_after_minutes"]) == (taken.json["stale_at"], 600)
    assert store.value() == held


def test_a_holders_short_timeout_decides_for_a_patient_caller(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    store.plant(planted_record("quick:run:1", shown_time(30), stale_after_seconds=60))
    before = skf.acquire(store.lock, "patient:run:1", 3600.0)
    assert not before["acquired"] and before["stale_after_minutes"] == 1
    store.plant(planted_record("quick:run:1", shown_time(61), stale_after_seconds=60))
    at = skf.acquire(store.lock, "patient:run:1", 3600.0)
    assert at["acquired"] and at["stale_replaced"]["held_by"] == "quick:run:1"
    assert record_of(store)["stale_after_seconds"] == 3600


@pytest.mark.parametrize("value", ["0", "-5", '"60"', "true", "null", "NaN", "1e999", "[60]"])
def test_an_invalid_holder_timeout_falls_back_to_the_callers(
    skf: ModuleType, store: StoreUnderTest, value: str
) -> None:
    def planted(seconds_ago: float) -> bytes:
        text = planted_record("wf:sk:old", shown_time(seconds_ago), stale_after_seconds=0).decode()
        return text.replace('"stale_after_seconds": 0', f'"stale_after_seconds": {value}').encode()

    store.plant(planted(100))
    held = skf.acquire(store.lock, "wf:sk:new", 120.0)
    assert not held["acquired"] and held["stale_after_minutes"] == 2
    store.plant(planted(121))
    taken = skf.acquire(store.lock, "wf:sk:new", 120.0)
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] == "wf:sk:old"


def test_a_record_from_an_older_helper_is_judged_by_the_callers_timeout(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    # Owner, acquired_at and tool: no timeout.
    store.plant(planted_record("wf:sk:old", shown_time(500)))
    assert not skf.acquire(store.lock, "wf:sk:new", 600.0)["acquired"]
    assert skf.acquire(store.lock, "wf:sk:new", 400.0)["acquired"]


def test_cli_refusal_and_status_agree_on_the_holders_timeout(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    store.plant(planted_record("wf:sk:r1", shown_time(30), stale_after_seconds=36000, tool="x"))
    refused = main("acquire", "--lock", store.lock, "--owner", "wf:sk:r2", "--stale-after", "0.1")
    status = main("status", "--lock", store.lock, "--stale-after", "0.1")
    assert (refused.code, status.code) == (3, 3)
    assert refused.json["stale_at"] == status.json["stale_at"]
    assert refused.json["stale_after_minutes"] == status.json["stale_after_minutes"] == 600
    assert record_of(store)["owner"] == "wf:sk:r1"


# --- The races every store must win ----------------------------------------------------------


@pytest.fixture
def contender_after_read(
    skf: ModuleType, store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, object]]:
    """Once, right after a change reads the lock, "wf:sk:other" takes it in a thread (the
    lock is stale): on a server it lands between the read and the change; a file's guard
    holds it off until the change is done. The contender's outcome, once it has one."""
    outcome: dict[str, object] = {}
    threads: list[threading.Thread] = []

    def contend() -> None:
        outcome.update(skf.acquire(store.lock, "wf:sk:other", 3600.0))

    class ContendedAfterRead(WrappedStore):
        def read(self, line: bool = True) -> object:
            look = self.real.read(line)
            if not threads:
                threads.append(threading.Thread(target=contend, daemon=True))
                threads[0].start()
                threads[0].join(timeout=1.0)  # a server's contender is done long before
            return look

    wrap_stores(skf, monkeypatch, ContendedAfterRead)
    yield outcome
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "the contender never finished"


def test_a_release_racing_a_takeover_never_deletes_the_new_holders_record(
    skf: ModuleType, store: StoreUnderTest, contender_after_read: dict[str, object]
) -> None:
    store.plant(planted_record("wf:sk:mine", shown_time(7200), stale_after_seconds=60))
    released = skf.release(store.lock, "wf:sk:mine")
    contender = contender_after_read
    deadline = time.monotonic() + 30
    while not contender:
        assert time.monotonic() < deadline, "the contender never answered"
        time.sleep(0.01)
    assert contender["acquired"] is True
    assert record_of(store)["owner"] == "wf:sk:other"  # the new holder's record stands
    if released["released"]:  # the release came first: the contender found it free
        assert contender["stale_replaced"] is None
    else:  # the contender came first: the release saw the new record and kept it
        assert (released["reason"], released["held_by"]) == ("not-owner", "wf:sk:other")
        assert contender["stale_replaced"]["held_by"] == "wf:sk:mine"  # type: ignore[index]
    assert store.kind == "file" or not released["released"]  # a server's race is real


def test_a_renewal_racing_a_takeover_never_makes_two_holders(
    skf: ModuleType, store: StoreUnderTest, contender_after_read: dict[str, object]
) -> None:
    store.plant(planted_record("wf:sk:mine", shown_time(7200), stale_after_seconds=60))
    renewed = skf.acquire(store.lock, "wf:sk:mine", 3600.0)
    contender = contender_after_read
    deadline = time.monotonic() + 30
    while not contender:
        assert time.monotonic() < deadline, "the contender never answered"
        time.sleep(0.01)
    holders = []
    if renewed["acquired"]:
        holders.append("wf:sk:mine")
    if contender["acquired"]:
        holders.append("wf:sk:other")
    assert len(holders) == 1, (renewed, contender)
    assert record_of(store)["owner"] == holders[0]
    assert holders == (["wf:sk:mine"] if store.kind == "file" else ["wf:sk:other"])


def test_a_waiter_not_first_in_line_never_takes_a_free_lock(
    skf: ModuleType, store: StoreUnderTest, no_beats: None
) -> None:
    opened = skf._store_for(store.lock)
    first = skf._Place("", "wf:first:1", 0, 60.0, None)
    try:
        with opened.change(create=True) as change:
            change.join(change.read(), first, time.time())
        refused = skf.acquire(store.lock, "wf:barger:1", 60.0)
        assert (refused["acquired"], refused["held_by"]) == (False, "wf:first:1")
        with pytest.raises(skf.LockBusy):
            skf.acquire_within(store.lock, "wf:waiter:1", 60.0, 0.5)
        assert store.value() is None  # free all along
        status = skf.status(store.lock, 60.0)
        assert status["state"] == "free"
        assert [w["owner"] for w in status["waiting"]] == ["wf:first:1"]  # the waiter left
        opened.leave(first)
    finally:
        opened.close()
    assert skf.acquire(store.lock, "wf:barger:1", 60.0)["acquired"]


# The stores whose waiter's look leaves out the places behind it (etcd reads them all).
LOOKS_UP_TO_ITS_PLACE = {"file", "redis", "cluster"}


def test_a_waiters_look_holds_every_place_ahead_of_it_and_its_own(
    skf: ModuleType, store: StoreUnderTest, no_beats: None
) -> None:
    """A waiter's look (``look(upto=its ticket)``) gives the line up to its own place,
    none left out; a store may leave out the places behind it, which never matter to
    its wait and in a busy line hold most of the newcomers. A look for a place not in
    line, and ``status``, give the whole line."""
    opened = skf._store_for(store.lock)
    places = [skf._Place(f"{n:08x}", f"wf:w{n}:1", 0, 60.0, None) for n in range(5)]
    try:
        for place in places:
            with opened.change(create=True) as change:
                change.join(change.read(), place, time.time())
        tickets = [place.ticket for place in opened.look().line]
        assert len(tickets) == 5
        bounded = store.kind in LOOKS_UP_TO_ITS_PLACE
        for at, ticket in enumerate(tickets):
            seen = [place.ticket for place in opened.look(upto=ticket).line]
            assert seen == (tickets[: at + 1] if bounded else tickets)
        assert [place.ticket for place in opened.look(upto="not-in-line").line] == tickets
        status = skf.status(store.lock, 60.0)
        assert [w["owner"] for w in status["waiting"]] == [p.owner for p in places]
        for place in places:
            opened.leave(place)
    finally:
        opened.close()
    assert store.left_behind() == []


def test_a_place_the_store_wrote_is_left_however_the_join_is_cut_short(
    skf: ModuleType, store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal can land once the store has put a waiter's place in line, before the
    join has returned: the call still leaves the line on its way out, and nothing of
    its place is left behind."""
    assert skf.acquire(store.lock, "wf:holder:1", 600.0)["acquired"]
    before = store.left_behind()
    landed: list[bool] = []

    class CutShort(WrappedStore):
        def join(self, *args: object) -> None:
            self.real.join(*args)
            landed.append(store.left_behind() != before)  # the place is on the store
            raise skf._Interrupted(2)  # as SIGINT would, once the write has landed

    wrap_stores(skf, monkeypatch, CutShort)
    with pytest.raises(skf._Interrupted):
        skf.acquire_within(store.lock, "wf:w:1", 600.0, 30.0)
    monkeypatch.undo()
    assert landed == [True]
    assert skf.status(store.lock, 600.0)["waiting"] == []
    assert store.left_behind() == before


def test_a_dead_waiters_place_is_gone_after_the_next_call_that_reads_it(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """Its waiter stopped beating (it was killed): once its place has lapsed, the next
    call that reads the lock drops it, while the lock is still held."""
    assert skf.acquire(store.lock, "wf:holder:1", 600.0)["acquired"]
    held_alone = store.left_behind()
    place_in_line(skf, store.lock, "wf:dead:1")
    assert store.left_behind() != held_alone  # its place is kept on the store
    assert [w["owner"] for w in skf.status(store.lock, 60.0)["waiting"]] == ["wf:dead:1"]
    time.sleep(skf._SEAMS.place_ttl_sec + 0.2)
    # From the first read that finds it lapsed (etcd's lease may end a moment late),
    # nothing of it is left on the store, and the holder still holds.
    deadline = time.monotonic() + 10
    while True:
        refused = skf.acquire(store.lock, "wf:other:1", 600.0)
        assert (refused["acquired"], refused["held_by"]) == (False, "wf:holder:1")
        if skf.status(store.lock, 60.0)["waiting"] == []:
            break
        assert time.monotonic() < deadline, "the dead waiter's place never lapsed"
        time.sleep(0.1)
    assert store.left_behind() == held_alone


def test_a_dead_waiters_place_leaves_a_line_that_lives_on(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """A live waiter behind it keeps the line itself alive (on Redis its beats keep the
    line's key from expiring), so nothing but the call that reads the lapsed place
    takes it out of the line: it must, or the line fills with the dead."""
    assert skf.acquire(store.lock, "wf:holder:1", 600.0)["acquired"]
    dead = place_in_line(skf, store.lock, "wf:dead:1")
    thread, outcome = waiter_thread(skf, store.lock, "wf:alive:1")
    wait_for("the live waiter behind it", lambda: len(store.line_tickets()) == 2)
    (alive,) = [ticket for ticket in store.line_tickets() if ticket != dead.ticket]
    time.sleep(skf._SEAMS.place_ttl_sec + 0.2)
    deadline = time.monotonic() + 10
    while dead.ticket in store.line_tickets():
        refused = skf.acquire(store.lock, "wf:other:1", 600.0)
        assert (refused["acquired"], refused["held_by"]) == (False, "wf:holder:1")
        assert time.monotonic() < deadline, "the dead waiter's place stayed in the line"
        time.sleep(0.1)
    assert store.line_tickets() == [alive]
    assert [w["owner"] for w in skf.status(store.lock, 60.0)["waiting"]] == ["wf:alive:1"]
    skf.release(store.lock, "wf:holder:1")
    assert joined(thread, outcome)["owner"] == "wf:alive:1"
    skf.release(store.lock, "wf:alive:1")
    assert store.left_behind() == []


# --- Real processes ---------------------------------------------------------------------------


@THREE_STORES
@pytest.mark.timeout(300)
def test_mutual_exclusion_8_processes_25_rounds(
    store: StoreUnderTest, tmp_path: Path, worker: Callable[..., Started]
) -> None:
    assert_exclusive_counter(store.lock, tmp_path, worker, processes=8, rounds=25)
    assert store.left_behind() == []  # no record, guard, temp, line or place


@THREE_STORES
@pytest.mark.timeout(180)
@pytest.mark.parametrize("attempt", range(2))
def test_a_stale_lock_race_has_exactly_one_winner(
    store: StoreUnderTest, tmp_path: Path, attempt: int
) -> None:
    store.plant(planted_record("old:run:1", shown_time(7200), stale_after_seconds=60))
    assert_one_winner_of_a_race(store.lock, tmp_path, "old:run:1")
