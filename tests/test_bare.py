"""bench/bare.py, the bare semaphore on etcd that ``bench/slots.py --bare`` measures
as a ceiling for the lock's line, and slots.py's count of holds at once: the ceiling
means something only if the bare line lets in at most N, first come, first served."""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

import bare
import pytest
from bare import BareBusy, BareSemaphore, line_range, parts_of  # conftest puts bench/ on the path
from h2grpc import Channel, message_fields, pb_field
from slots import most_held

KINDS = ["gateway", "grpc"]
EVERY_RULE = [f"{transport}+record+call+values+place" for transport in KINDS]


def record_names(channel: Channel, lock: str) -> list[bytes]:
    """The holders' names the record of ``lock`` (at its key) lists."""
    answer = channel.call("/etcdserverpb.KV/Range", pb_field(1, parts_of(lock)[2]))
    return bare._record_of(answer)[1].split(b"\n")[:-1]


def wait_for_line(channel: Channel, lock: str, length: int) -> None:
    """Until ``length`` keys stand in the bare line of ``lock`` (holders and waiters)."""
    prefix, end = line_range(parts_of(lock)[2])
    count_only = pb_field(1, prefix) + pb_field(2, end) + pb_field(9, 1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        answer = channel.call("/etcdserverpb.KV/Range", count_only)
        if dict(message_fields(answer)).get(4, 0) == length:
            return
        time.sleep(0.01)
    raise AssertionError(f"the line never had {length} keys")


def holding(skf: ModuleType, kind: str, lock: str) -> BareSemaphore:
    """A bare semaphore of ``kind`` holding the one slot of ``lock``."""
    holder = BareSemaphore(skf, kind)
    holder.acquire_within(lock, "w:s:holder", 30, 1, slots=1)
    return holder


@pytest.mark.parametrize("kind", KINDS + EVERY_RULE)
def test_lets_in_n_and_refuses_the_next_until_one_leaves(
    kind: str, skf: ModuleType, etcd_lock: str
) -> None:
    holders = [BareSemaphore(skf, kind) for _ in range(3)]
    for n, semaphore in enumerate(holders[:2]):
        assert semaphore.acquire_within(etcd_lock, f"w:s:{n}", 30, 1, slots=2)["acquired"]
    with pytest.raises(BareBusy):
        holders[2].acquire_within(etcd_lock, "w:s:2", 30, 0.3, slots=2)
    holders[0].release(etcd_lock, "w:s:0")
    assert holders[2].acquire_within(etcd_lock, "w:s:2", 30, 1, slots=2)["held_by"] == "w:s:2"


@pytest.mark.parametrize("kind", KINDS + EVERY_RULE)
def test_waiters_get_freed_slots_in_the_order_they_came(
    kind: str, skf: ModuleType, etcd_lock: str, grpc_channel: Channel
) -> None:
    holder = holding(skf, kind, etcd_lock)
    got: list[str] = []

    def wait(name: str) -> None:
        semaphore = BareSemaphore(skf, kind)
        semaphore.acquire_within(etcd_lock, name, 30, 20, slots=1)
        got.append(name)
        time.sleep(0.2)
        semaphore.release(etcd_lock, name)

    waiters = []
    for length, name in enumerate(("w:s:first", "w:s:second"), start=2):
        waiters.append(threading.Thread(target=wait, args=(name,)))
        waiters[-1].start()
        wait_for_line(grpc_channel, etcd_lock, length)  # in line before the next comes
    assert got == []
    holder.release(etcd_lock, "w:s:holder")
    for waiter in waiters:
        waiter.join(20)
    assert got == ["w:s:first", "w:s:second"]


@pytest.mark.parametrize("kind", [f"{transport}+record" for transport in KINDS])
def test_the_record_names_the_holders_and_empties_when_they_leave(
    kind: str, skf: ModuleType, etcd_lock: str, grpc_channel: Channel
) -> None:
    semaphores = [BareSemaphore(skf, kind) for _ in range(2)]
    for n, semaphore in enumerate(semaphores):
        semaphore.acquire_within(etcd_lock, f"w:s:{n}", 30, 1, slots=3)
    assert sorted(record_names(grpc_channel, etcd_lock)) == [b"w:s:0", b"w:s:1"]
    semaphores[1].release(etcd_lock, "w:s:1")
    assert record_names(grpc_channel, etcd_lock) == [b"w:s:0"]
    semaphores[0].release(etcd_lock, "w:s:0")
    assert record_names(grpc_channel, etcd_lock) == []


@pytest.mark.parametrize(
    ("takes", "most"),
    [
        ([], 0),
        ([(0.0, 1.0, 2.0)], 1),
        ([(0.0, 1.0, 3.0), (0.0, 2.0, 4.0), (0.0, 2.5, 2.8)], 3),
        ([(0.0, 1.0, 2.0), (0.0, 2.0, 3.0)], 1),  # one released as the other took
        ([(0.0, 1.0, 2.0), (0.0, 3.0, 4.0), (0.0, 3.5, 5.0)], 2),
    ],
)
def test_most_held_counts_the_holds_that_overlap(
    takes: list[tuple[float, float, float]], most: int
) -> None:
    assert most_held(takes) == most


@pytest.mark.parametrize("kind", EVERY_RULE)
def test_a_waiter_that_beats_keeps_its_watch_and_wakes_when_the_slot_frees(
    kind: str,
    skf: ModuleType,
    etcd_lock: str,
    grpc_channel: Channel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    beats: list[int] = []
    for transport in (bare._Grpc, bare._Gateway):
        kept_alive = transport.keep_alive

        def counted(line: Any, lease: int, kept_alive: Any = kept_alive) -> None:
            beats.append(lease)
            kept_alive(line, lease)

        monkeypatch.setattr(transport, "keep_alive", counted)
    holder = holding(skf, kind, etcd_lock)
    got: list[str] = []

    def wait() -> None:
        semaphore = BareSemaphore(skf, kind)
        got.append(semaphore.acquire_within(etcd_lock, "w:s:waiter", 30, 10, slots=1)["held_by"])

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for_line(grpc_channel, etcd_lock, 2)
    time.sleep(2.5)  # two beats, each ending a wait on the same watch
    holder.release(etcd_lock, "w:s:holder")
    waiter.join(10)
    assert len(beats) >= 2  # the waits did end at beats, so the watch was kept across them
    # A beat reads nothing again: only the kept watch can wake the waiter in time.
    assert got == ["w:s:waiter"]


@pytest.mark.parametrize("kind", [f"{transport}+record" for transport in KINDS])
def test_a_record_change_that_lost_its_race_keeps_the_change_that_won(
    kind: str, skf: ModuleType, etcd_lock: str, grpc_channel: Channel
) -> None:
    first, second = (BareSemaphore(skf, kind)._line(etcd_lock) for _ in range(2))
    first.read_record()
    second.read_record()
    second.swap(lambda names: names + b"w:s:second\n")
    first.swap(lambda names: names + b"w:s:first\n")  # read before the second's change
    assert record_names(grpc_channel, etcd_lock) == [b"w:s:second", b"w:s:first"]
