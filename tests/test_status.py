"""status: who holds the lock, read-only."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
from calls import first_arguments_of
from lockfiles import NOW, beside, write_record

STATUS_KEYS = [
    "state",
    "lock",
    "held_by",
    "held_since",
    "stale_at",
    "age_seconds",
    "stale_after_minutes",
    "waiting",
    "slots",
    "holders",
    "mode",
    "fence",
    "message",
]


def test_free_when_there_is_no_lock_file_and_nothing_is_created(
    skf: ModuleType, lock: Path
) -> None:
    result = skf.status(lock, 3600.0, now=NOW)
    assert list(result) == STATUS_KEYS
    assert result == result | {
        "state": "free",
        "lock": str(lock),
        "held_by": None,
        "held_since": None,
        "stale_at": None,
        "age_seconds": None,
        "stale_after_minutes": 60,
        "waiting": [],
    }
    assert not lock.parent.exists()


def test_free_when_the_parent_is_a_file(skf: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert skf.status(tmp_path / "f" / "x.lock", 60.0)["state"] == "free"


def test_held_lock_with_its_age_rounded_down(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:r1", NOW)
    result = skf.status(lock, 3600.0, now=NOW + timedelta(seconds=59.9))
    assert result == result | {
        "state": "held",
        "held_by": "wf:sk:r1",
        "held_since": "2026-09-30T10:15:00Z",
        "stale_at": "2026-09-30T11:15:00Z",
        "age_seconds": 59,
    }
    assert "wf:sk:r1" in result["message"]


def test_stale_exactly_at_the_timeout(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:r1", NOW)
    result = skf.status(lock, 3600.0, now=NOW + timedelta(hours=1))
    assert (result["state"], result["age_seconds"]) == ("stale", 3600)


def test_future_record_has_a_negative_age(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:r1", NOW + timedelta(seconds=90))
    result = skf.status(lock, 3600.0, now=NOW)
    assert (result["state"], result["age_seconds"]) == ("held", -90)


def test_lock_naming_no_owner_is_held_or_stale_by_its_time(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    lock.write_text("99\n2026-09-30T10:00:00Z\n")
    assert skf.status(lock, 3600.0, now=NOW)["state"] == "held"
    result = skf.status(lock, 600.0, now=NOW)
    assert (result["state"], result["held_by"]) == ("stale", None)


def test_status_never_writes_or_takes_the_guard(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_record(lock, "wf:sk:r1", NOW)
    before = (lock.read_bytes(), os.stat(lock).st_mtime_ns)
    opened = first_arguments_of(monkeypatch, os, "open")
    skf.status(lock, 60.0)
    assert str(lock) in opened and f"{lock}.skf-guard" not in opened
    assert (lock.read_bytes(), os.stat(lock).st_mtime_ns) == before
    assert beside(lock) == ["run.lock"]


def test_status_of_a_folder_is_a_bad_argument(skf: ModuleType, lock: Path) -> None:
    lock.mkdir(parents=True)
    with pytest.raises(ValueError, match="folder"):
        skf.status(lock, 60.0)
