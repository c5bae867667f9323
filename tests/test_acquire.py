"""acquire: taking, renewing, refusing and replacing stale locks (library and CLI)."""

from __future__ import annotations

import os
import shlex
import threading
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import first_arguments_of
from lockfiles import NOW, ago, beside, read_json, write_record
from wrapped import WrappedStore, wrap_stores

ACQUIRE_KEYS = [
    "acquired",
    "refreshed",
    "lock",
    "owner",
    "run_id",
    "held_by",
    "held_since",
    "stale_at",
    "stale_after_minutes",
    "stale_replaced",
    "message",
]


def test_free_lock_is_taken_and_its_folders_created(skf: ModuleType, lock: Path) -> None:
    result = skf.acquire(lock, "wf:sk:run1", 3600.0, now=NOW)
    assert list(result) == ACQUIRE_KEYS
    assert result == result | {
        "acquired": True,
        "refreshed": False,
        "lock": str(lock),
        "owner": "wf:sk:run1",
        "run_id": "run1",
        "held_by": "wf:sk:run1",
        "held_since": "2026-09-30T10:15:00Z",
        "stale_at": "2026-09-30T11:15:00Z",
        "stale_after_minutes": 60,
        "stale_replaced": None,
    }
    assert lock.read_bytes() == (
        b'{"owner": "wf:sk:run1", "acquired_at": "2026-09-30T10:15:00Z",'
        b' "stale_after_seconds": 3600, "tool": "skf-run-lock", "fence": '
        + str(skf.fence_of(result)).encode()
        + b"}\n"
    )
    assert beside(lock) == ["run.lock"]


@pytest.mark.parametrize("owner", ["wf:sk", "wf:sk:"])
def test_missing_run_id_is_added(skf: ModuleType, lock: Path, owner: str) -> None:
    result = skf.acquire(lock, owner, 60.0, now=NOW)
    assert skf.RUN_ID_RE.match(result["run_id"])
    assert result["run_id"].startswith("20260930T101500Z-")
    assert result["owner"] == "wf:sk:" + result["run_id"] == result["held_by"]
    assert read_json(lock)["owner"] == result["owner"]


def test_own_lock_is_renewed(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 3600.0, now=NOW)
    later = NOW + timedelta(minutes=30)
    result = skf.acquire(lock, "wf:sk:r1", 3600.0, now=later)
    assert (result["acquired"], result["refreshed"], result["stale_replaced"]) == (True, True, None)
    assert result["held_since"] == "2026-09-30T10:45:00Z"
    assert result["stale_at"] == "2026-09-30T11:45:00Z"
    assert read_json(lock)["acquired_at"] == "2026-09-30T10:45:00Z"
    assert "renewed" in result["message"]


def test_own_stale_lock_is_renewed_not_replaced(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 60.0, now=NOW)
    result = skf.acquire(lock, "wf:sk:r1", 60.0, now=NOW + timedelta(hours=5))
    assert (result["refreshed"], result["stale_replaced"]) == (True, None)


def test_lock_held_by_another_run_is_refused_untouched(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 3600.0, now=NOW)
    before = lock.read_bytes()
    result = skf.acquire(lock, "wf:sk:r2", 3600.0, now=NOW + timedelta(minutes=59, seconds=59))
    assert list(result) == ACQUIRE_KEYS
    assert result == result | {
        "acquired": False,
        "refreshed": False,
        "owner": "wf:sk:r2",
        "run_id": "r2",
        "held_by": "wf:sk:r1",
        "held_since": "2026-09-30T10:15:00Z",
        "stale_at": "2026-09-30T11:15:00Z",
        "stale_replaced": None,
    }
    message = result["message"]
    assert str(lock) in message and "wf:sk:r1" in message and "stale" in message
    assert f"release --lock {shlex.quote(str(lock))} --owner wf:sk:r1" in message
    assert lock.read_bytes() == before
    assert beside(lock) == ["run.lock"]


def test_lock_exactly_at_the_timeout_is_stale_and_replaced(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:old", 3600.0, now=NOW)
    result = skf.acquire(lock, "wf:sk:new", 3600.0, now=NOW + timedelta(hours=1))
    assert (result["acquired"], result["refreshed"]) == (True, False)
    assert result["stale_replaced"] == {
        "held_by": "wf:sk:old",
        "held_since": "2026-09-30T10:15:00Z",
    }
    assert list(result["stale_replaced"]) == ["held_by", "held_since"]
    assert result["held_by"] == "wf:sk:new"
    assert read_json(lock)["owner"] == "wf:sk:new"


def test_stale_lock_naming_no_owner_is_replaced(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    lock.write_text("4242\n2026-09-30T08:00:00Z\n")
    result = skf.acquire(lock, "wf:sk:new", 3600.0, now=NOW)
    assert result["stale_replaced"] == {"held_by": None, "held_since": "2026-09-30T08:00:00Z"}


def test_fresh_lock_naming_no_owner_is_refused_with_held_by_null(
    skf: ModuleType, lock: Path
) -> None:
    lock.parent.mkdir()
    lock.write_text("4242\n2026-09-30T10:00:00Z\n")
    result = skf.acquire(lock, "wf:sk:new", 3600.0, now=NOW)
    assert (result["acquired"], result["held_by"]) == (False, None)
    assert result["held_since"] == "2026-09-30T10:00:00Z"
    assert (
        "names no owner" in result["message"]
        and f"delete the file {shlex.quote(str(lock))}" in result["message"]
    )
    assert lock.read_text() == "4242\n2026-09-30T10:00:00Z\n"


def test_record_dated_in_the_future_is_held(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:r1", NOW + timedelta(days=3))
    assert not skf.acquire(lock, "wf:sk:r2", 60.0, now=NOW)["acquired"]


def test_stale_at_is_capped_at_year_9999(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    lock.write_text('{"owner": "wf:sk:r1", "acquired_at": "9999-12-31T00:00:00Z"}')
    result = skf.acquire(lock, "wf:sk:r2", 31_536_000, now=NOW)
    assert result["stale_at"] == "9999-12-31T23:59:59Z"
    assert result["held_since"] == "9999-12-31T00:00:00Z"


def test_stale_at_rounds_a_fractional_timeout_up(skf: ModuleType, lock: Path) -> None:
    result = skf.acquire(lock, "wf:sk:r1", 90.5, now=NOW)
    assert result["stale_at"] == "2026-09-30T10:16:31Z"


@pytest.mark.parametrize("empty_is_stale", [False, True])
def test_empty_lock_file_is_stale_only_when_asked(
    skf: ModuleType, lock: Path, empty_is_stale: bool
) -> None:
    lock.parent.mkdir()
    lock.touch()
    result = skf.acquire(lock, "wf:sk:r1", 60.0, empty_is_stale=empty_is_stale)
    assert result["acquired"] is empty_is_stale
    if empty_is_stale:
        assert result["stale_replaced"]["held_by"] is None
    else:
        assert lock.read_bytes() == b""


def test_bad_owner_or_folder_changes_nothing(skf: ModuleType, lock: Path) -> None:
    with pytest.raises(ValueError):
        skf.acquire(lock, "no-colon", 60.0)
    assert not lock.parent.exists()
    lock.mkdir(parents=True)
    with pytest.raises(ValueError, match="folder"):
        skf.acquire(lock, "wf:sk:r", 60.0)
    assert beside(lock) == ["run.lock"] and os.listdir(lock) == []


def test_lock_path_expands_home_and_is_made_absolute(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("USERPROFILE", str(tmp_path))  # Windows' home
    monkeypatch.chdir(tmp_path)
    assert skf.acquire("~/a.lock", "wf:sk:r", 60.0)["lock"] == str(tmp_path / "a.lock")
    assert skf.acquire("rel/b.lock", "wf:sk:r", 60.0)["lock"] == str(tmp_path / "rel" / "b.lock")
    assert (tmp_path / "rel" / "b.lock").is_file()


def test_a_relative_lock_path_follows_the_working_folder_from_call_to_call(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process remembers the lock paths it checked, but a relative one names another
    lock once the working folder moves."""
    for folder, owner in (("a", "wf:sk:r1"), ("b", "wf:sk:r2"), ("a", "wf:sk:r1")):
        (tmp_path / folder).mkdir(exist_ok=True)
        monkeypatch.chdir(tmp_path / folder)
        result = skf.acquire("x.lock", owner, 60.0)
        assert result["acquired"] and result["lock"] == str(tmp_path / folder / "x.lock")
    assert read_json(tmp_path / "a" / "x.lock")["owner"] == "wf:sk:r1"
    assert read_json(tmp_path / "b" / "x.lock")["owner"] == "wf:sk:r2"


def test_an_absolute_lock_path_is_checked_once_per_process(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks and names of a lock path are made at its first call, not at every
    call (they were a tenth of a file lock's Python work per call)."""
    skf.acquire(lock, "wf:sk:run1", 60.0)
    made: list[str] = []
    absolute = os.path.abspath

    def counted(path: str) -> str:
        made.append(path)
        return absolute(path)

    monkeypatch.setattr(os.path, "abspath", counted)
    assert skf.acquire(str(lock), "wf:sk:run1", 60.0)["refreshed"]
    assert skf.release(lock, "wf:sk:run1")["released"]
    assert made == []


def test_acquire_within_returns_at_once_when_free(skf: ModuleType, lock: Path) -> None:
    result = skf.acquire_within(lock, "wf:sk", 15.0, 30.0, empty_is_stale=True)
    assert result["acquired"] and skf.RUN_ID_RE.match(result["run_id"])


def test_acquire_within_raises_lock_busy_with_the_last_answer(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:holder", 3600.0)
    with pytest.raises(skf.LockBusy) as busy:
        skf.acquire_within(lock, "wf:sk:waiter", 3600.0, 0.05)
    assert busy.value.result["held_by"] == "wf:sk:holder"
    assert busy.value.result["held_since"] == read_json(lock)["acquired_at"]
    assert busy.value.result["acquired"] is False
    assert "stale" in str(busy.value)


def takes_seen(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Each try this thread's calls make from now on, as the owner it was made for: a
    try refused puts the waiter's place in line (or finds it there), or, of a call that
    does not wait (None: no place, no owner shown), prunes the line; a take applies its
    change."""
    owners: list[str | None] = []
    mine = threading.current_thread()

    class Seen(WrappedStore):
        def join(self, look: Any, place: Any, now: float) -> None:
            if threading.current_thread() is mine:
                owners.append(place.owner)
            self.real.join(look, place, now)

        def prune(self, look: Any, now: float) -> None:
            if threading.current_thread() is mine:
                owners.append(None)
            self.real.prune(look, now)

        def apply(self, look: Any, record: Any, owner: str, place: Any = None) -> bool:
            if threading.current_thread() is mine and record is not None:
                owners.append(owner)
            return bool(self.real.apply(look, record, owner, place))

    wrap_stores(skf, monkeypatch, Seen)
    return owners


def test_acquire_within_keeps_one_owner_across_retries(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skf.acquire(lock, "wf:sk:holder", 3600.0)
    owners = takes_seen(skf, monkeypatch)
    threading.Timer(0.3, skf.release, (lock, "wf:sk:holder")).start()
    result = skf.acquire_within(lock, "wf:sk", 3600.0, 30.0)
    assert result["acquired"] and len(owners) >= 2 and set(owners) == {result["owner"]}


@pytest.mark.parametrize("wait", [-1, -0.001, float("nan"), float("inf"), "5", None, True])
def test_acquire_within_refuses_a_bad_wait_at_once(
    skf: ModuleType, lock: Path, wait: float | str | bool | None
) -> None:
    with pytest.raises(ValueError, match="wait"):
        skf.acquire_within(lock, "wf:sk:r", 60.0, wait)
    assert not lock.parent.exists()


def test_acquire_within_zero_wait_tries_once(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skf.acquire(lock, "wf:sk:holder", 3600.0)
    tries = takes_seen(skf, monkeypatch)
    monkeypatch.setattr(skf.time, "sleep", lambda s: pytest.fail("a zero wait must not pause"))
    with pytest.raises(skf.LockBusy):
        skf.acquire_within(lock, "wf:sk:w", 3600.0, 0)
    assert tries == [None]  # one try, refused: no place in line
    assert beside(lock) == ["run.lock"]  # it never stood in line


def test_a_waiter_takes_the_guard_only_to_keep_its_place(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waiting 2.5 s behind a held lock: the guard is taken to join the line, to show
    the waiter alive about once a second, and to leave; every other look is made
    without it, so a waiter frozen mid-look holds up nobody."""
    skf.acquire(lock, "wf:sk:holder", 3600.0)
    guard = f"{lock}.skf-guard"
    opened = first_arguments_of(monkeypatch, os, "open")  # a guard is opened to be taken
    looks = first_arguments_of(monkeypatch, os, "lstat")  # a look at a file's signature
    with pytest.raises(skf.LockBusy):
        skf.acquire_within(lock, "wf:sk:w", 3600.0, 2.5)
    # join, two beats, the last try, leave (a beat may fall on the deadline)
    guards = opened.count(guard)
    assert 4 <= guards <= 6, guards
    # The first in line looks at the lock file every few milliseconds, without the guard
    # (and at the line's file, with the lock's, when it reads the line); the guard's
    # own check of what it locked looks at it once a take.
    assert looks.count(str(lock)) >= 100, looks.count(str(lock))
    assert set(looks) == {str(lock), f"{lock}.skf-line", guard}
    assert looks.count(guard) == guards
    assert beside(lock) == ["run.lock"]


def test_lock_older_than_the_timeout_by_the_clock_is_replaced(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:old", ago(minutes=61))
    assert skf.acquire(lock, "wf:sk:new", 3600.0)["stale_replaced"]["held_by"] == "wf:sk:old"
