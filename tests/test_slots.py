"""Slots: a lock held by up to N runs at once, each under its own owner and timeout, on
every store, through the CLI, the library, ``run`` and ``held()``; the count in force;
the line across slots; older versions on the same lock. Real processes throughout."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, Started, pipe
from contenders import turns_taken
from holders import run_and_held
from older import assert_older_version_takes_it_only_once_past, assert_older_versions_see_it_held
from servers import etcd_post
from stores import THREE_STORES, StoreUnderTest, status_now
from test_acquire import ACQUIRE_KEYS
from test_release import RELEASE_KEYS
from wrapped import WrappedStore, wrap_stores

# Minutes: a timeout for slots that must go stale within a test, and outlast the
# calls made before it should: 3 s, and 8 s where a process starts in half a second
# (Windows under Wine, three test workers beside it).
SHORT = "0.1333" if sys.platform == "win32" else "0.05"
LONGER = "0.2" if sys.platform == "win32" else "0.1"  # 12 s or 6 s: stale after SHORT


def take(cli: Callable[..., Run], lock: str, owner: str, slots: int | None = 3, *extra: str) -> Run:
    args = ["acquire", "--lock", lock, "--owner", owner, *extra]
    return cli(*args, *(["--slots", str(slots)] if slots is not None else []))


def waiting_are(skf: ModuleType, store: StoreUnderTest, count: int) -> Callable[[], bool]:
    """A check that ``count`` waiters stand in ``store``'s line."""
    return lambda: len(status_now(skf, store)["waiting"]) == count


def wait_until(
    check: Callable[[], object], seconds: float = 30.0, what: str = "the condition"
) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- Taking, renewing and releasing slots --------------------------------------------------


def test_n_runs_hold_a_lock_of_n_slots_and_the_next_is_refused(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    for owner in ("wf:a:1", "wf:b:1", "wf:c:1"):
        taken = take(main, lock, owner)
        assert taken.code == 0 and list(taken.json) == ACQUIRE_KEYS
        assert taken.json["acquired"] is True and taken.json["held_by"] == owner
        assert taken.json["refreshed"] is False and taken.json["stale_replaced"] is None
    assert store.holders() == ["wf:a:1", "wf:b:1", "wf:c:1"]
    assert store.record()["slots"] == 3
    refused = take(main, lock, "wf:d:1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert refused.json["acquired"] is False and refused.json["held_by"] == "wf:a:1"
    message = refused.json["message"]
    assert "all 3 of its slots" in message and "wf:a:1, wf:b:1 and wf:c:1" in message
    assert f"release --lock {shlex.quote(lock)} --owner wf:a:1" in message
    assert store.holders() == ["wf:a:1", "wf:b:1", "wf:c:1"]  # refused: nothing changed


def test_a_refusal_names_a_few_holders_then_a_count(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    for n in range(5):
        assert take(main, store.lock, f"wf:h{n}:1", 5).code == 0
    message = take(main, store.lock, "wf:late:1", 5).json["message"]
    assert "by wf:h0:1, wf:h1:1, wf:h2:1 and 2 more;" in message


def test_one_slot_keeps_the_record_bytes_and_outputs_of_a_plain_lock(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    for slots in (None, 1):
        taken = take(main, store.lock, "wf:a:1", slots)
        since = skf._parse_time(taken.json["held_since"])
        assert taken.json["message"].startswith(f"acquired {store.lock} for wf:a:1; it goes")
        status = main("status", "--lock", store.lock, *(["--slots", "1"] if slots else [])).json
        fence = status["fence"]
        assert store.value() == skf._record_bytes("wf:a:1", since, 3600.0, fence)
        assert status["slots"] == 1 and status["held_by"] == "wf:a:1"
        assert status["holders"] == [
            {
                "owner": "wf:a:1",
                "since": taken.json["held_since"],
                "stale_at": status["stale_at"],
                "fence": fence,
                "parts": None,
            }
        ]
        released = main("release", "--lock", store.lock, "--owner", "wf:a:1").json
        assert released["message"] == f"released {store.lock} held by wf:a:1"
    assert store.left_behind() == []


def test_renewing_a_slot_keeps_every_other_slot_as_it_was(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    for owner in ("wf:a:1", "wf:b:1"):
        assert take(main, store.lock, owner).code == 0
    before = store.record()["holders"]
    time.sleep(1.1)  # a renewal is dated a second later
    renewed = take(main, store.lock, "wf:a:1")
    assert renewed.code == 0 and renewed.json["refreshed"] is True
    after = store.record()["holders"]
    assert [h["owner"] for h in after] == ["wf:a:1", "wf:b:1"]
    assert after[1] == before[1]  # wf:b:1's slot: untouched
    assert after[0]["acquired_at"] != before[0]["acquired_at"]


def etcd_leases(store: StoreUnderTest) -> set[str]:
    """The leases etcd holds (none but on etcd): what a lock with slots may leave."""
    if store.kind != "etcd":
        return set()
    client = store.lock.split("/")[2]
    return {lease["ID"] for lease in etcd_post(client, "/v3/lease/leases", {}).get("leases", [])}


def test_release_frees_only_the_callers_slot_and_the_last_leaves_nothing(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    leases = etcd_leases(store)
    for owner in ("wf:a:1", "wf:b:1", "wf:c:1"):
        assert take(main, store.lock, owner).code == 0
    freed = main("release", "--lock", store.lock, "--owner", "wf:b:1")
    assert freed.code == 0 and list(freed.json) == RELEASE_KEYS
    assert freed.json["released"] is True and "2 of its 3 slots are held" in freed.json["message"]
    assert store.holders() == ["wf:a:1", "wf:c:1"]
    again = main("release", "--lock", store.lock, "--owner", "wf:b:1")
    assert again.json["released"] is False and again.json["reason"] == "not-owner"
    assert again.json["held_by"] == "wf:a:1"
    assert store.holders() == ["wf:a:1", "wf:c:1"]
    assert take(main, store.lock, "wf:a:1").json["refreshed"] is True  # its old lease goes
    for owner in ("wf:a:1", "wf:c:1"):
        assert main("release", "--lock", store.lock, "--owner", owner).json["released"]
    assert store.left_behind() == []
    assert etcd_leases(store) <= leases  # every slot's lease revoked, the record's too
    absent = main("release", "--lock", store.lock, "--owner", "wf:a:1").json
    assert absent["reason"] == "absent"


LOST_IN_A_ROW = 50  # races a change loses to other writers, one after another


@pytest.mark.parametrize("kind", ["etcd", "redis", "cluster"])
@pytest.mark.parametrize("call", ["release", "renewal"])
def test_a_change_that_keeps_losing_its_race_to_another_holder_still_lands(
    skf: ModuleType,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    call: str,
) -> None:
    """Between each read of a release (or a renewal) and its change, another holder
    renews its own slot, fifty times in a row: each change loses its race to a real
    write on the server, and the call only tries again. A busy lock of several slots
    never keeps a slot held because its release gave up."""
    lock = request.getfixturevalue(f"{kind}_lock")
    skf.acquire(lock, "wf:mine:1", 600.0, slots=3)
    skf.acquire(lock, "wf:other:1", 600.0, slots=3)
    renewals: list[dict[str, Any]] = []
    renewing = False  # while the other holder renews, its own reads are not beaten

    class BeatenAfterRead(WrappedStore):
        def read(self, line: bool = True) -> object:
            nonlocal renewing
            look = self.real.read(line)
            if len(renewals) < LOST_IN_A_ROW and not renewing:
                renewing = True
                try:
                    renewals.append(skf.acquire(lock, "wf:other:1", 600.0, slots=3))
                finally:
                    renewing = False
            return look

    wrap_stores(skf, monkeypatch, BeatenAfterRead)
    if call == "release":
        done = skf.release(lock, "wf:mine:1")
        assert done["released"] is True and done["reason"] is None
    else:
        done = skf.acquire(lock, "wf:mine:1", 300.0, slots=3)
        assert done["acquired"] is True and done["refreshed"] is True
    monkeypatch.undo()
    assert len(renewals) == LOST_IN_A_ROW
    assert all(renewal["refreshed"] for renewal in renewals)
    # Holders are listed by the time of their last take or renewal, in whole seconds:
    # the two renewals here fall in one second or in two, so their order is not asserted.
    holders = sorted(h["owner"] for h in skf.status(lock, 600.0, slots=3)["holders"])
    assert holders == (["wf:mine:1", "wf:other:1"] if call == "renewal" else ["wf:other:1"])


def test_a_stale_slot_is_replaced_and_the_live_ones_are_kept(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(main, store.lock, "wf:gone:1", 3, "--stale-after", SHORT).code == 0
    for owner in ("wf:b:1", "wf:c:1"):
        assert take(main, store.lock, owner).code == 0
    assert take(main, store.lock, "wf:d:1").code == 3  # every slot live
    wait_until(
        lambda: status_now(skf, store)["state"] == "stale", what="the short slot to go stale"
    )
    taken = take(main, store.lock, "wf:d:1")
    assert taken.code == 0 and taken.json["stale_replaced"]["held_by"] == "wf:gone:1"
    assert "replacing the stale slot of wf:gone:1" in taken.json["message"]
    assert store.holders() == ["wf:d:1", "wf:b:1", "wf:c:1"]


# --- The count in force ---------------------------------------------------------------------


def test_another_count_is_refused_at_once_while_a_slot_is_held(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(main, store.lock, "wf:a:1").code == 0
    held = store.value()
    for slots in (2, None, 1):
        refused = take(main, store.lock, "wf:b:1", slots, "--wait", "30")
        assert refused.code == 1 and refused.out == ""
        assert "has 3 slots while any is held" in refused.error
        assert "--slots 3" in refused.error
    assert store.value() == held
    assert main("status", "--lock", store.lock, "--slots", "3").json["waiting"] == []
    assert main("release", "--lock", store.lock, "--owner", "wf:a:1").json["released"]
    # No slot held: the next taker's count is in force.
    assert take(main, store.lock, "wf:b:1", 2).code == 0
    assert store.record()["slots"] == 2
    assert take(main, store.lock, "wf:c:1", 3).code == 1


def test_a_plain_lock_held_refuses_a_count_of_several(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(main, store.lock, "wf:a:1", None).code == 0
    refused = take(main, store.lock, "wf:b:1", 2)
    assert refused.code == 1 and "has 1 slot while any is held" in refused.error
    assert "no --slots" in refused.error


BAD_COUNTS = ["0", "1001", "-1", "1.5", "3e0", "abc", "", " 3", "٣", "99999999"]


@pytest.mark.parametrize("text", BAD_COUNTS)
def test_a_bad_count_of_slots_is_exit_1_and_creates_nothing(
    main: Callable[..., Run], lock: Path, text: str
) -> None:
    for command in ("acquire", "status"):
        owner = ["--owner", "wf:a:1"] if command == "acquire" else []
        run = main(command, "--lock", lock, *owner, "--slots", text)
        assert run.code == 1 and run.out == "" and "--slots" in run.error
        # The message quotes what was given, as given (no value: it says so).
        assert repr(text) in run.error if text else "needs a value" in run.error
    assert not lock.parent.exists()


@pytest.mark.parametrize("slots", [0, 1001, True, 2.0, "3", None])
def test_a_bad_count_of_slots_is_a_value_error_in_the_library(
    skf: ModuleType, lock: Path, slots: bool | float | str | None
) -> None:
    with pytest.raises(ValueError, match="slots must be a whole number of slots from 1 to 1000"):
        skf.acquire(lock, "wf:a:1", 60.0, slots=slots)
    with pytest.raises(ValueError, match="slots"):
        skf.status(lock, 60.0, slots=slots)
    with pytest.raises(ValueError, match="slots"):
        skf.held(lock, "wf:a:1", 60.0, slots=slots)
    assert not lock.parent.exists()


# --- status ---------------------------------------------------------------------------------


def test_status_lists_holders_longest_held_first_and_says_held_stale_or_free(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    free = main("status", "--lock", store.lock, "--slots", "2")
    assert free.code == 0 and free.json["state"] == "free"
    assert free.json["slots"] == 2 and free.json["holders"] == [] and free.json["held_by"] is None
    assert take(main, store.lock, "wf:old:1", 2, "--stale-after", SHORT).code == 0
    time.sleep(1.1)
    assert take(main, store.lock, "wf:new:1", 2).code == 0
    held = main("status", "--lock", store.lock)  # no --slots: the count in force is shown
    assert held.code == 3 and held.json["state"] == "held" and held.json["slots"] == 2
    assert [h["owner"] for h in held.json["holders"]] == ["wf:old:1", "wf:new:1"]
    assert held.json["held_by"] == "wf:old:1"  # its slot goes stale first
    assert held.json["holders"][0]["stale_at"] == held.json["stale_at"]
    assert "held in all 2 of its slots" in held.json["message"]
    wait_until(lambda: status_now(skf, store)["state"] != "held", what="the short slot to go stale")
    stale = main("status", "--lock", store.lock, "--slots", "2")
    assert stale.code == 0 and stale.json["state"] == "stale" and stale.json["held_by"] is None
    assert main("release", "--lock", store.lock, "--owner", "wf:new:1").json["released"]
    assert main("status", "--lock", store.lock, "--slots", "2").json["state"] == "free"
    assert store.left_behind() == []


def test_status_shows_the_waiters_of_a_lock_with_slots(
    skf: ModuleType,
    cli: Callable[..., Run],
    store: StoreUnderTest,
    worker: Callable[..., Started],
) -> None:
    for owner in ("wf:a:1", "wf:b:1"):
        assert take(cli, store.lock, owner, 2).code == 0
    waiter = worker("slot-append", store.lock, "wf:waiter:1", "2", os.devnull, "w")
    wait_until(lambda: status_now(skf, store)["waiting"] != [], what="the waiter to get into line")
    status = cli("status", "--lock", store.lock).json
    assert [w["owner"] for w in status["waiting"]] == ["wf:waiter:1"]
    assert "1 run waits in line, wf:waiter:1 first" in status["message"]
    assert cli("release", "--lock", store.lock, "--owner", "wf:a:1").json["released"]
    assert waiter.wait(timeout=60) == 0
    assert store.holders() == ["wf:b:1"]


# --- The line across slots ------------------------------------------------------------------


def test_the_line_is_served_in_order_across_slots(
    skf: ModuleType,
    cli: Callable[..., Run],
    store: StoreUnderTest,
    worker: Callable[..., Started],
    tmp_path: Path,
) -> None:
    for owner in ("wf:h1:1", "wf:h2:1"):
        assert take(cli, store.lock, owner, 2).code == 0
    log = tmp_path / "log"
    waiters = []
    for n in range(1, 5):
        waiters.append(worker("slot-append", store.lock, f"wf:w{n}:1", "2", log, f"w{n}"))
        wait_until(waiting_are(skf, store, n), what=f"waiter {n} in line")
    # One slot freed: the waiters pass it on in turn, the other slot held all along.
    # (Two freed at once would let the first two in line race for them, by design.)
    assert cli("release", "--lock", store.lock, "--owner", "wf:h1:1").json["released"]
    for proc in waiters:
        assert proc.wait(timeout=60) == 0
    assert cli("release", "--lock", store.lock, "--owner", "wf:h2:1").json["released"]
    # The waiters' own writes may cross: the fences give the order of their takes.
    taken = [line.split() for line in log.read_text().splitlines()]
    assert [name for name, _ in sorted(taken, key=lambda entry: int(entry[1]))] == [
        "w1",
        "w2",
        "w3",
        "w4",
    ]
    assert store.left_behind() == []


def test_a_call_that_does_not_wait_leaves_a_free_slot_to_the_line(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    for owner in ("wf:a:1", "wf:b:1"):
        assert take(cli, store.lock, owner, 2).code == 0
    assert cli("release", "--lock", store.lock, "--owner", "wf:a:1").json["released"]
    store.plant_waiter("wf:first:1")
    before = store.value()
    refused = take(cli, store.lock, "wf:jump:1", 2)
    assert refused.code == 3 and refused.json["held_by"] == "wf:first:1"
    assert (
        "has a slot that is free or stale, but it goes to the first run waiting in line"
        in (refused.json["message"])
    )
    assert store.value() == before


# --- Many processes, killed holders, run and held() -----------------------------------------


@THREE_STORES
@pytest.mark.timeout(120)
def test_twelve_processes_share_three_slots_never_more_inside(
    store: StoreUnderTest, worker: Callable[..., Started], tmp_path: Path
) -> None:
    """12 real processes take turns on 3 slots for 7 s, each counting who is inside:
    never more than 3, every process served, none gives up on its 5 s budget, and
    several inside at once. (How busy the slots are is measured in bench/slots.py.)"""
    workers = [("share-slots", store.lock, f"wf:p{n}", "3") for n in range(12)]
    entries = turns_taken(worker, tmp_path, workers, 7)
    assert all(lines for lines in entries)  # every process was served
    assert max(int(line.split()[4]) for lines in entries for line in lines) >= 2
    assert store.left_behind() == []


@pytest.mark.timeout(120)
def test_a_killed_holder_frees_its_slot_only_when_its_timeout_passes(
    skf: ModuleType,
    cli: Callable[..., Run],
    store: StoreUnderTest,
    worker: Callable[..., Started],
) -> None:
    holder = worker("hold-slot", store.lock, "wf:killed:1", "2", "4")
    assert pipe(holder.stdout).readline() == "held\n"
    assert take(cli, store.lock, "wf:keeps:1", 2).code == 0
    holder.kill()  # SIGKILL; on Windows TerminateProcess, as sudden
    holder.wait(timeout=30)
    # Its slot stays its own until its 4 s pass: the lock is full meanwhile.
    refused = take(cli, store.lock, "wf:next:1", 2)
    assert refused.code == 3 and refused.json["held_by"] == "wf:killed:1"
    wait_until(lambda: status_now(skf, store)["state"] != "held", 30, "the slot to go stale")
    assert take(cli, store.lock, "wf:next:1", 2).code == 0
    assert sorted(store.holders()) == ["wf:keeps:1", "wf:next:1"]


@THREE_STORES
@pytest.mark.timeout(120)
def test_run_and_held_keep_their_slots_past_several_timeouts(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    """``run``'s command and ``held()``'s block last until the test has looked three
    times, 3 s apart (a timeout each): every look finds their slots still held."""
    with run_and_held(skf, store.lock, tmp_path, ["--slots", "3"], slots=3):
        assert take(cli, store.lock, "wf:third:1", 3).code == 0
        for _ in range(3):  # over three of the 3 s timeouts
            time.sleep(3)
            refused = take(cli, store.lock, "wf:fourth:1", 3)
            assert refused.code == 3, refused.json
    assert store.holders() == ["wf:third:1"]


# --- Older versions on the same lock --------------------------------------------------------


def test_older_versions_see_a_lock_with_a_live_slot_as_held(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(cli, store.lock, "wf:a:1", 3).code == 0
    assert_older_versions_see_it_held(store, "3 slots", "wf:a:1")
    assert store.holders() == ["wf:a:1"]


def test_older_versions_take_a_lock_with_slots_only_once_every_slot_is_past(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(cli, store.lock, "wf:a:1", 2, "--stale-after", SHORT).code == 0
    last = take(cli, store.lock, "wf:b:1", 2, "--stale-after", LONGER).json
    wait_until(lambda: status_now(skf, store)["state"] != "held", 30, "wf:a:1's slot to go stale")
    assert_older_version_takes_it_only_once_past(skf, store, last["stale_at"])  # wf:b:1's


def test_a_partly_held_lock_is_free_with_its_holders_named_whatever_n_status_is_given(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    """As the README says: state free while a slot is free, holders naming who holds
    the others, the count in force whatever --slots status names; the table agrees."""
    lock = store.lock
    for owner in ("wf:a:1", "wf:b:1"):
        assert main("acquire", "--lock", lock, "--owner", owner, "--slots", "3").code == 0
    for asked in ("3", "2", "1"):
        status = main("status", "--lock", lock, "--slots", asked)
        assert status.code == 0, status
        assert (status.json["state"], status.json["slots"]) == ("free", 3)
        assert [h["owner"] for h in status.json["holders"]] == ["wf:a:1", "wf:b:1"]
    refused = main("acquire", "--lock", lock, "--owner", "wf:c:1", "--slots", "2")
    assert refused.code == 1, refused
    if store.kind == "file":
        table = main("list", "--under", str(Path(lock).parent), "--table").out
        assert "2/3 held" in table.splitlines()[1]
