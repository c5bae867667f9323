"""Shared holds: many readers hold a lock at once, a writer alone, on every store,
through the CLI, the library, ``run`` and ``held()``; kinds that do not mix; the line
across both kinds, first come, first served; older versions on the same lock. Real
processes throughout."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, Started, let_go, pipe, posix_only
from contenders import turns_taken
from holders import run_and_held
from older import assert_older_version_takes_it_only_once_past, assert_older_versions_see_it_held
from signals import freeze_outside_the_guard
from stores import THREE_STORES, StoreUnderTest, status_now
from test_acquire import ACQUIRE_KEYS
from test_release import RELEASE_KEYS
from test_slots import wait_until


def read(cli: Callable[..., Run], lock: str | Path, owner: str, *extra: str) -> Run:
    """acquire --shared, by the CLI in a fresh process."""
    return cli("acquire", "--lock", lock, "--owner", owner, "--shared", *extra)


def write(cli: Callable[..., Run], lock: str | Path, owner: str, *extra: str) -> Run:
    """acquire without --shared: the lock alone."""
    return cli("acquire", "--lock", lock, "--owner", owner, *extra)


def shared(skf: ModuleType, lock: str | Path, owner: str, minutes: float = 60) -> Any:
    """A shared hold taken in this process, where what is tested is not the CLI: each
    CLI call starts a process, and a suite of them runs on every Python in CI."""
    return skf.acquire(lock, owner, minutes * 60, shared=True)


def alone(skf: ModuleType, lock: str | Path, owner: str, minutes: float = 60) -> Any:
    """The lock taken alone, in this process."""
    return skf.acquire(lock, owner, minutes * 60)


# A function that starts tests/worker.py in a real process (conftest's ``worker``).
Worker = Callable[..., Started]


def in_line(skf: ModuleType, store: StoreUnderTest) -> list[str]:
    return [waiter["owner"] for waiter in status_now(skf, store)["waiting"]]


# --- Readers share, a writer is alone ---------------------------------------------------


def test_readers_share_a_writer_is_refused_then_writes_alone(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    for n, owner in enumerate(("wf:r1:1", "wf:r2:1", "wf:r3:1"), start=1):
        taken = read(main, lock, owner)
        assert taken.code == 0 and list(taken.json) == ACQUIRE_KEYS, taken
        assert (taken.json["acquired"], taken.json["refreshed"]) == (True, False)
        assert taken.json["held_by"] == owner and taken.json["stale_replaced"] is None
        runs = "1 run holds" if n == 1 else f"{n} runs hold"
        assert (
            f"acquired a shared hold on {lock} for {owner}; {runs} it shared"
            in (taken.json["message"])
        )
    record = store.record()
    assert list(record) == [
        "owner",
        "acquired_at",
        "stale_after_seconds",
        "tool",
        "mode",
        "holders",
    ]
    assert (record["owner"], record["mode"]) == ("shared holds", "shared")
    assert store.holders() == ["wf:r1:1", "wf:r2:1", "wf:r3:1"]
    before = store.value()
    refused = write(main, lock, "wf:w:1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert refused.json["acquired"] is False and refused.json["held_by"] == "wf:r1:1"
    message = refused.json["message"]
    assert message.startswith(
        f"lock {lock} is held shared by 3 runs, wf:r1:1, wf:r2:1 and wf:r3:1; the first to"
        " go stale is wf:r1:1's"
    )
    assert [f" --owner wf:r{n}:1" in message for n in (1, 2, 3)] == [True] * 3
    assert message.endswith(
        "Never clear a run that is still active: it would go on as if it held the lock"
    )
    assert store.value() == before
    for owner in ("wf:r1:1", "wf:r2:1", "wf:r3:1"):
        released = main("release", "--lock", lock, "--owner", owner)
        assert released.code == 0 and released.json["released"], released
    assert store.value() is None and store.left_behind() == []
    alone = write(main, lock, "wf:w:1")
    assert alone.code == 0 and alone.json["acquired"]
    refused = read(main, lock, "wf:r4:1")
    assert refused.code == 3 and refused.json["held_by"] == "wf:w:1"
    assert f"lock {lock} is held exclusively by wf:w:1 since" in refused.json["message"]
    assert list(store.record()) == ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]


@pytest.mark.parametrize("readers", [2, 5])
def test_a_writers_refusal_clears_every_reader_when_followed_as_printed(
    cli: Callable[..., Run], tmp_path: Path, readers: int
) -> None:
    """A shared lock frees only once every reader is gone: the advice names a release
    of each (a few, then the status that lists the rest), and warns off live ones."""
    lock = tmp_path / "a folder" / "run.lock"
    owners = [read(cli, lock, f"wf:reader{n}").json["owner"] for n in range(readers)]
    message = write(cli, lock, "wf:writer").json["message"]
    assert "clear it with" not in message
    assert f"It is free only once all {readers} are gone." in message
    assert message.endswith(
        "Never clear a run that is still active: it would go on as if it held the lock"
    )
    steps = message.split("clear each with: ", 1)[1].split(". Never", 1)[0].split("; ")
    releases = steps[:3]
    assert len(releases) == min(readers, 3)
    for printed in releases:
        done = subprocess.run(
            shlex.split(printed), capture_output=True, text=True, timeout=60, check=False
        )
        assert json.loads(done.stdout)["released"] is True, printed
    if readers > 3:
        assert steps[3].startswith(f"then the other {readers - 3} holders that ")
        listing = steps[3].split(" that ", 1)[1].removesuffix(" lists")
        done = subprocess.run(
            shlex.split(listing), capture_output=True, text=True, timeout=60, check=False
        )
        rest = [holder["owner"] for holder in json.loads(done.stdout)["holders"]]
        assert sorted(rest) == sorted(owners[3:])
        for owner in rest:
            assert cli("release", "--lock", lock, "--owner", owner).json["released"] is True
    assert write(cli, lock, "wf:writer").code == 0


def test_status_and_list_say_the_mode_and_every_shared_holder(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    free = main("status", "--lock", store.lock)
    assert free.code == 0 and free.json["mode"] is None
    assert list(free.json)[-4:] == ["holders", "mode", "fence", "message"]
    assert shared(skf, store.lock, "wf:r1:1", 10)["acquired"]
    assert shared(skf, store.lock, "wf:r2:1", 5)["acquired"]
    held = main("status", "--lock", store.lock)
    assert held.code == 3 and held.json["state"] == "held" and held.json["mode"] == "shared"
    assert [h["owner"] for h in held.json["holders"]] == ["wf:r1:1", "wf:r2:1"]
    assert held.json["held_by"] == "wf:r2:1"  # its hold goes stale first
    assert held.json["message"].startswith(
        f"{store.lock} is held shared by 2 runs, wf:r1:1 and wf:r2:1"
    )
    assert main("status", "--lock", store.lock, "--get", "mode").out == "shared\n"
    for owner in ("wf:r1:1", "wf:r2:1"):
        assert skf.release(store.lock, owner)["released"]
    assert alone(skf, store.lock, "wf:w:1")["acquired"]
    held = main("status", "--lock", store.lock)
    assert held.code == 3 and held.json["mode"] == "exclusive"


def test_a_listing_shows_each_locks_mode(
    skf: ModuleType, cli: Callable[..., Run], tmp_path: Path
) -> None:
    folder = tmp_path / "locks"
    assert shared(skf, folder / "read.lock", "wf:r1:1")["acquired"]
    assert shared(skf, folder / "read.lock", "wf:r2:1")["acquired"]
    assert alone(skf, folder / "write.lock", "wf:w:1")["acquired"]
    listed = cli("list", "--under", folder)
    modes = {Path(entry["lock"]).name: entry["mode"] for entry in listed.json["locks"]}
    assert modes == {"read.lock": "shared", "write.lock": "exclusive"}
    table = cli("list", "--under", folder, "--table").out.splitlines()
    assert table[0].split() == ["LOCK", "STATE", "MODE", "HOLDER", "AGE", "STALE", "IN", "WAITING"]
    assert table[1].split()[1:5] == ["held", "shared", "wf:r1:1", "and"]
    assert table[2].split()[1:4] == ["held", "exclusive", "wf:w:1"]


def test_each_reader_renews_and_releases_only_its_own_hold(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    lock = store.lock
    assert shared(skf, lock, "wf:r1:1", 30)["acquired"]
    assert shared(skf, lock, "wf:r2:1", 30)["acquired"]
    other = store.record()["holders"][1]
    renewed = shared(skf, lock, "wf:r1:1", 90)
    assert renewed["acquired"] and renewed["refreshed"] is True
    assert renewed["stale_after_minutes"] == 90
    assert "renewed a shared hold on" in renewed["message"]
    holders = store.record()["holders"]
    assert [h["owner"] for h in holders] == ["wf:r1:1", "wf:r2:1"]
    assert holders[0]["stale_after_seconds"] == 5400 and holders[1] == other
    stranger = skf.release(lock, "wf:x:1")
    assert list(stranger) == RELEASE_KEYS and stranger["reason"] == "not-owner"
    assert stranger["message"].startswith(
        f"left {lock} in place: wf:x:1 holds none of its shared holds (held by wf:r"
    )  # wf:r1:1 and wf:r2:1, longest held first: either, as they came in the same second
    mine = skf.release(lock, "wf:r2:1")
    assert mine["released"] and mine["message"].endswith("; 1 run holds it shared")
    assert store.holders() == ["wf:r1:1"]
    assert skf.release(lock, "wf:r1:1")["released"]
    assert store.value() is None and store.left_behind() == []


def test_a_stale_reader_is_replaced_and_the_live_ones_kept(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    old = shared(skf, store.lock, "wf:old:1", 0.05)
    assert shared(skf, store.lock, "wf:live:1")["acquired"]
    stale_at = skf._parse_time(old["stale_at"])
    # Its time is shown in whole seconds: its hold ends within a second after.
    wait_until(lambda: time.time() > stale_at + 1.1, 30, "wf:old:1's hold to go stale")
    taken = shared(skf, store.lock, "wf:new:1")
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] == "wf:old:1"
    assert "replacing the stale shared hold of wf:old:1" in taken["message"]
    assert sorted(store.holders()) == ["wf:live:1", "wf:new:1"]


# --- Kinds that do not mix -------------------------------------------------------------


def test_an_exclusive_holder_asking_for_a_shared_hold_is_exit_1_and_nothing_changes(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert write(main, store.lock, "wf:a:1").code == 0
    before = store.value()
    refused = read(main, store.lock, "wf:a:1")
    assert refused.code == 1 and refused.out == ""
    message = refused.error
    assert "wf:a:1 holds" in message and "a hold never changes kind" in message
    assert " release --lock " in message and "--owner wf:a:1), then ask again" in message
    assert store.value() == before


def test_an_acquire_naming_no_kind_renews_a_shared_hold_as_shared(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    """The README's renewal line names no kind: it renews a reader's hold as it is."""
    assert read(main, store.lock, "wf:a:1").code == 0
    assert read(main, store.lock, "wf:b:1").code == 0
    renewed = write(main, store.lock, "wf:a:1")
    assert renewed.code == 0, renewed
    assert renewed.json["refreshed"] is True
    assert renewed.json["message"].startswith(f"renewed a shared hold on {store.lock} for")
    status = main("status", "--lock", store.lock).json
    assert status["mode"] == "shared" and status["state"] == "held"
    assert sorted(store.holders()) == ["wf:a:1", "wf:b:1"]


def test_run_never_renews_a_shared_hold_as_exclusive_and_says_to_add_shared(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """A writer's step must never run beside readers."""
    assert read(cli, store.lock, "wf:a:1").code == 0
    before = store.value()
    refused = cli("run", "--lock", store.lock, "--owner", "wf:a:1", "--", sys.executable, "-V")
    assert refused.code == 1 and refused.out == ""
    message = refused.error
    assert "a hold never changes kind; to keep it shared, add --shared" in message
    assert " release --lock " in message and "--owner wf:a:1), then ask again" in message
    assert store.value() == before


def test_shared_with_slots_is_exit_1_and_creates_nothing(
    skf: ModuleType, cli: Callable[..., Run], tmp_path: Path
) -> None:
    lock = tmp_path / "locks" / "x.lock"
    for slots in ("1", "3"):
        refused = read(cli, lock, "wf:a:1", "--slots", slots)
        assert refused.code == 1 and refused.out == ""
        assert "--shared and --slots cannot be given together" in refused.error
    with pytest.raises(ValueError, match="a shared hold has no count of slots"):
        skf.acquire(lock, "wf:a:1", 60.0, shared=True, slots=3)
    with pytest.raises(ValueError, match="shared must be True or False"):
        skf.acquire(lock, "wf:a:1", 60.0, shared="yes")
    assert not lock.parent.exists()


def test_slots_and_shared_holds_never_share_a_lock(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert skf.acquire(store.lock, "wf:s:1", 3600.0, slots=3)["acquired"]
    refused = read(main, store.lock, "wf:r:1")
    assert refused.code == 1 and "a slot is never shared" in refused.error
    assert skf.release(store.lock, "wf:s:1")["released"]
    assert shared(skf, store.lock, "wf:r:1")["acquired"]
    slots = main("acquire", "--lock", store.lock, "--owner", "wf:s:1", "--slots", "3")
    assert slots.code == 1 and "shared holds have no slots" in slots.error
    assert store.holders() == ["wf:r:1"]


# --- The line, first come, first served across both kinds -------------------------------


def test_readers_at_the_head_of_the_line_go_in_together(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, worker: Worker
) -> None:
    assert alone(skf, store.lock, "wf:w:1")["acquired"]
    readers = []
    for n in (1, 2):
        readers.append(worker("hold-in-line", store.lock, f"wf:r{n}:1", "r"))
        wait_until(lambda: len(in_line(skf, store)) == len(readers), what=f"reader {n} in line")
    assert skf.release(store.lock, "wf:w:1")["released"]
    for reader in readers:  # each says "in" while the other holds on too
        assert pipe(reader.stdout).readline() == "in\n"
    assert sorted(store.holders()) == ["wf:r1:1", "wf:r2:1"]
    for reader in readers:
        assert let_go(reader) == 0
    assert store.value() is None and store.left_behind() == []


def test_a_reader_never_passes_a_writer_waiting_ahead_of_it(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, worker: Worker
) -> None:
    """While readers hold the lock, a writer waits in line; a reader that comes after
    it waits behind it, and one that does not wait is refused, naming the writer. The
    writer goes in once the readers are out, then the reader."""
    assert shared(skf, store.lock, "wf:r0:1")["acquired"]
    writer = worker("hold-in-line", store.lock, "wf:w:1", "w")
    wait_until(lambda: in_line(skf, store) == ["wf:w:1"], what="the writer in line")
    reader = worker("hold-in-line", store.lock, "wf:r1:1", "r")
    wait_until(lambda: len(in_line(skf, store)) == 2, what="the reader in line")
    jumper = shared(skf, store.lock, "wf:jump:1")
    assert not jumper["acquired"] and jumper["held_by"] == "wf:w:1"
    assert "but wf:w:1 waits in line ahead for an exclusive hold" in jumper["message"]
    assert store.holders() == ["wf:r0:1"]
    assert skf.release(store.lock, "wf:r0:1")["released"]
    assert pipe(writer.stdout).readline() == "in\n"
    assert store.record()["owner"] == "wf:w:1" and in_line(skf, store) == ["wf:r1:1"]
    assert let_go(writer) == 0
    assert pipe(reader.stdout).readline() == "in\n"
    assert store.holders() == ["wf:r1:1"]
    assert let_go(reader) == 0
    assert store.value() is None and store.left_behind() == []


@posix_only("SIGSTOP")
def test_a_reader_is_never_held_up_by_a_reader_waiting_ahead_of_it(
    skf: ModuleType, store: StoreUnderTest, worker: Worker
) -> None:
    """A reader waits in line behind a writer and is frozen there; once the writer is
    out, a reader that does not wait goes in beside the frozen one's place, which a
    writer may not pass."""
    assert skf.acquire(store.lock, "wf:w:1", 60.0)["acquired"]
    frozen = worker("hold-in-line", store.lock, "wf:r1:1", "r")
    wait_until(lambda: in_line(skf, store) == ["wf:r1:1"], what="the reader in line")
    freeze_outside_the_guard(frozen.pid, store.lock)
    try:
        assert skf.release(store.lock, "wf:w:1")["released"]
        beside = skf.acquire(store.lock, "wf:r2:1", 60.0, shared=True)
        assert beside["acquired"], beside["message"]
        writer = skf.acquire(store.lock, "wf:w:2", 60.0)
        assert not writer["acquired"] and writer["held_by"] == "wf:r2:1"
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    assert pipe(frozen.stdout).readline() == "in\n"
    assert sorted(store.holders()) == ["wf:r1:1", "wf:r2:1"]
    assert let_go(frozen) == 0
    assert skf.release(store.lock, "wf:r2:1")["released"]
    assert store.value() is None and store.left_behind() == []


@THREE_STORES
@pytest.mark.timeout(120)
def test_six_readers_and_two_writers_take_turns_never_a_writer_beside_anyone(
    store: StoreUnderTest, worker: Worker, tmp_path: Path
) -> None:
    """6 reader and 2 writer processes take turns for 6 s, each looking who else is
    inside: never a writer beside anyone, readers inside together, no 5 s wait runs
    out, and each writer gets in."""
    kinds = ["r"] * 6 + ["w"] * 2
    workers = [("read-or-write", store.lock, f"wf:{k}{n}", k) for n, k in enumerate(kinds)]
    entries = turns_taken(worker, tmp_path, workers, 6)  # each exits 3 if crowded
    assert all(entries[n] for n in (6, 7)), "a writer never got in"
    inside = [int(line.split()[4]) for lines in entries[:6] for line in lines]
    assert max(inside) >= 2  # readers were inside together (a writer never is with anyone)
    assert store.left_behind() == []


# --- A killed reader, run and held() ------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_killed_reader_frees_its_hold_only_when_its_timeout_passes(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, worker: Worker
) -> None:
    reader = worker("hold-shared", store.lock, "wf:killed:1", "4")
    assert pipe(reader.stdout).readline() == "held\n"
    stale_at = skf._parse_time(status_now(skf, store)["holders"][0]["stale_at"])
    reader.kill()  # SIGKILL; on Windows TerminateProcess, as sudden
    reader.wait(timeout=30)
    refused = alone(skf, store.lock, "wf:w:1")
    assert not refused["acquired"] and refused["held_by"] == "wf:killed:1"
    assert "held shared by 1 run, wf:killed:1" in refused["message"]
    wait_until(lambda: status_now(skf, store)["state"] != "held", 30, "its hold to go stale")
    assert time.time() >= stale_at - 1  # its 4 s, on a clock of whole seconds
    taken = alone(skf, store.lock, "wf:w:1")
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] == "wf:killed:1"
    assert list(store.record()) == ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]


@THREE_STORES
@pytest.mark.timeout(120)
def test_run_and_held_keep_shared_holds_past_several_timeouts(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    """``run --shared``'s command and ``held(shared=True)``'s block last until the test
    has looked three times, 3 s apart (a timeout each): each look finds both holding
    and a writer refused; at the end both let go."""
    with run_and_held(skf, store.lock, tmp_path, ["--shared"], shared=True):
        for _ in range(3):  # over three of the 3 s timeouts
            time.sleep(3)
            holders = [h["owner"] for h in status_now(skf, store)["holders"]]
            assert sorted(holders) == ["wf:held:1", "wf:run:1"]
            assert not alone(skf, store.lock, "wf:w:1")["acquired"]
    assert store.value() is None and store.left_behind() == []


def test_run_and_held_leave_a_shared_hold_their_owner_had(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert shared(skf, store.lock, "wf:job:1")["acquired"]
    argv = ["run", "--lock", store.lock, "--owner", "wf:job:1", "--shared"]
    step = cli(*argv, "--", sys.executable, "-c", "pass")
    assert step.code == 0, step.error
    with skf.held(store.lock, "wf:job:1", 60.0, shared=True):
        pass
    assert store.holders() == ["wf:job:1"]


# --- Older versions on the same lock ---------------------------------------------------------


def test_older_versions_see_a_lock_with_a_live_shared_hold_as_held(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """They know one holder: the record's top level names "shared holds", which no
    release can name, going stale with the last shared hold. They never take, renew
    or delete it."""
    assert shared(skf, store.lock, "wf:r:1")["acquired"]
    assert_older_versions_see_it_held(store, "shared holds", "wf:r:1")
    assert store.holders() == ["wf:r:1"]


def test_older_versions_take_a_shared_lock_only_once_every_hold_is_past(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    assert shared(skf, store.lock, "wf:a:1", 0.05)["acquired"]
    last = shared(skf, store.lock, "wf:b:1", 0.1)  # 6 s
    assert_older_version_takes_it_only_once_past(skf, store, last["stale_at"])
