"""Concurrency and crashes, proven with real processes."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, Started, pipe, posix_only
from lockfiles import ago, beside, read_json, write_record


def test_guard_left_by_a_killed_call_does_not_block(
    cli: Callable[..., Run], lock: Path, worker: Callable[..., Started]
) -> None:
    holder = worker("hold-guard", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    holder.kill()  # SIGKILL; on Windows TerminateProcess, as sudden
    holder.wait()
    assert beside(lock) == ["run.lock.skf-guard"]
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 0 and run.json["acquired"]
    assert beside(lock) == ["run.lock"]


def test_guard_held_by_a_live_process_makes_a_call_wait(
    skf: ModuleType,
    lock: Path,
    worker: Callable[..., Started],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder = worker("hold-guard", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep_then_let_go(seconds: float) -> None:
        if pauses or pipe(holder.stdin).closed:  # also subprocess's own waiting below
            return real_sleep(seconds)
        pauses.append(seconds)
        pipe(holder.stdin).close()  # the holder drops the guard and exits
        holder.wait(timeout=30)
        return None

    monkeypatch.setattr(time, "sleep", sleep_then_let_go)
    result = skf.acquire(lock, "wf:sk:r", 60.0)
    assert result["acquired"] and len(pauses) >= 1
    assert holder.returncode == 0
    assert beside(lock) == ["run.lock"]


def test_guard_held_past_the_wait_is_exit_2(
    skf: ModuleType,
    lock: Path,
    worker: Callable[..., Started],
    main: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder = worker("hold-guard", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    monkeypatch.setattr(skf._SEAMS, "guard_wait_sec", 0.2)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2 and "guard" in run.error and "0.2 s" in run.error
    assert beside(lock) == ["run.lock.skf-guard"]  # still the holder's
    run = main("release", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 2


@posix_only("fcntl.flock")
def test_flock_on_the_lock_path_never_blocks(
    cli: Callable[..., Run], lock: Path, worker: Callable[..., Started]
) -> None:
    lock.parent.mkdir()
    holder = worker("flock", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    assert lock.read_bytes() == b""
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", timeout=8)
    # the flock holder left an empty file: a lock naming no owner, fresh by its mtime
    assert taken.code == 3 and taken.json["held_by"] is None
    tiny = ("--stale-after", "0.0001")
    stale = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", *tiny, timeout=8)
    assert stale.code == 0
    released = cli("release", "--lock", lock, "--owner", "wf:sk:r", timeout=8)
    assert released.code == 0 and released.json["released"]
    assert cli("status", "--lock", lock, timeout=8).json["state"] == "free"


@posix_only("fcntl.flock")
def test_flock_on_the_lock_path_never_blocks_the_library(
    skf: ModuleType, lock: Path, worker: Callable[..., Started]
) -> None:
    lock.parent.mkdir()
    holder = worker("flock", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    result = skf.acquire(lock, "wf:sk:r", 15.0, empty_is_stale=True)
    assert result["acquired"] and result["stale_replaced"]["held_by"] is None
    assert skf.release(lock, "wf:sk:r")["released"]


@pytest.mark.parametrize(
    ("argv", "code", "left"),
    [
        (["acquire", "--owner", "wf:sk"], 3, ["run.lock"]),
        (["acquire", "--owner", "other:sk:r", "--stale-after", "0.5"], 0, ["run.lock"]),
        (["acquire", "--owner", "old:sk:r"], 0, ["run.lock"]),
        (["release", "--owner", "old:sk:r"], 0, []),
        (["release", "--owner", "other:sk:r"], 0, ["run.lock"]),
        (["status"], 3, ["run.lock"]),
        (["acquire", "--owner", "bad"], 1, ["run.lock"]),
        (["acquire", "--owner", "other:sk:r", "--stale-after", "0"], 1, ["run.lock"]),
        (["acquire", "--owner", "other:sk:r", "--wait", "0.2"], 3, ["run.lock"]),
    ],
)
def test_only_the_lock_file_is_left_after_any_call(
    cli: Callable[..., Run], lock: Path, argv: list[str], code: int, left: list[str]
) -> None:
    write_record(lock, "old:sk:r", ago(minutes=1))
    run = cli(argv[0], "--lock", lock, *argv[1:])
    assert run.code == code
    if code == 1:
        assert run.error
    else:
        assert run.json
    assert beside(lock) == left


@posix_only("SIGKILL")
def test_killing_calls_at_random_moments_never_corrupts_the_lock(
    lock: Path, skf: ModuleType, worker: Callable[..., Started]
) -> None:
    """At least 200 SIGKILLs of processes looping over acquire and release (each
    forked, with the file loaded, from one helper process)."""
    rng = random.Random(1234)
    kills = 0
    seen_orphans = 0
    owners = [f"torture:w{i}" for i in range(3)]
    lock.parent.mkdir()
    forker = worker("churn-forks", lock, *owners)
    assert pipe(forker.stdout).readline() == "ready\n"
    while kills < 210:
        pipe(forker.stdin).write("go\n")
        pipe(forker.stdin).flush()
        children = [int(pid) for pid in pipe(forker.stdout).readline().split()]
        time.sleep(rng.uniform(0, 0.05))
        for child in children:
            os.kill(child, signal.SIGKILL)
        pipe(forker.stdin).write("reap\n")
        pipe(forker.stdin).flush()
        assert pipe(forker.stdout).readline() == "SIGKILL SIGKILL SIGKILL\n"
        kills += len(children)
        names = beside(lock)
        orphans = [name for name in names if name.endswith("-tmp")]
        assert set(names) <= {"run.lock", "run.lock.skf-guard", *orphans}
        if "run.lock" in names:
            record = read_json(lock)
            keys = ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]
            assert list(record) == keys
            assert record["owner"].startswith("torture:w")
        if orphans:
            # The next call that deletes (or writes) the lock removes every orphan.
            seen_orphans += len(orphans)
            if "run.lock" in names:
                assert skf.release(lock, read_json(lock)["owner"])["released"]
            else:
                assert skf.acquire(lock, "check:orphans:1", 60.0)["acquired"]
                assert skf.release(lock, "check:orphans:1")["released"]
            assert beside(lock) == [], f"orphans {orphans} survived a write"
    result = skf.acquire(lock, "after:torture:1", 3600.0)
    if not result["acquired"]:
        assert result["held_by"].startswith("torture:w")
    assert beside(lock) == ["run.lock"]
    print(f"{kills} kills, {seen_orphans} orphaned temp files seen, each removed by the next call")
