"""The holder's timeout decides: a lock means what its holder declared, for every caller."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run
from lockfiles import NOW, ago, read_json, write_record


def test_a_tiny_caller_timeout_cannot_take_a_live_lock(cli: Callable[..., Run], lock: Path) -> None:
    """The issue's report: --stale-after 0.01 took a lock held for 600 minutes."""
    taken = cli("acquire", "--lock", lock, "--owner", "long:run", "--stale-after", "600")
    assert taken.code == 0 and taken.json["stale_after_minutes"] == 600
    assert read_json(lock)["stale_after_seconds"] == 36000
    refused = cli("acquire", "--lock", lock, "--owner", "other:run", "--stale-after", "0.0001")
    assert refused.code == 3
    out = refused.json
    assert (out["acquired"], out["held_by"]) == (False, taken.json["owner"])
    assert (out["stale_at"], out["stale_after_minutes"]) == (taken.json["stale_at"], 600)
    assert read_json(lock)["owner"] == taken.json["owner"]


def test_the_readme_library_snippet_cannot_take_a_cli_runs_lock(
    skf: ModuleType, lock: Path
) -> None:
    """A CLI run holding with the default 60 minutes keeps it from stale_after=15.0 seconds."""
    holder = skf.acquire(lock, "cli:run:1", 60 * 60.0, now=NOW)
    later = NOW + timedelta(seconds=20)
    result = skf.acquire(lock, "sibling:script", 15.0, now=later, empty_is_stale=True)
    assert (result["acquired"], result["held_by"]) == (False, "cli:run:1")
    assert (result["stale_at"], result["stale_after_minutes"]) == (holder["stale_at"], 60)


def test_a_holders_short_timeout_decides_for_a_patient_caller(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "quick:run:1", 60.0, now=NOW)
    before = skf.acquire(lock, "patient:run:1", 3600.0, now=NOW + timedelta(seconds=59))
    assert not before["acquired"] and before["stale_after_minutes"] == 1
    assert before["stale_at"] == "2026-09-30T10:16:00Z"
    at = skf.acquire(lock, "patient:run:1", 3600.0, now=NOW + timedelta(seconds=60))
    assert at["acquired"] and at["stale_replaced"]["held_by"] == "quick:run:1"
    assert (at["stale_after_minutes"], at["stale_at"]) == (60, "2026-09-30T11:16:00Z")
    assert read_json(lock)["stale_after_seconds"] == 3600


def test_renewal_rewrites_the_record_with_the_renewing_calls_timeout(
    skf: ModuleType, lock: Path
) -> None:
    taken = skf.acquire(lock, "wf:sk:r1", 3600.0, now=NOW)
    renewed = skf.acquire(lock, "wf:sk:r1", 90.5, now=NOW + timedelta(minutes=5))
    assert renewed["refreshed"] and renewed["stale_after_minutes"] == 1.5083
    record = read_json(lock)
    assert record == {
        "owner": "wf:sk:r1",
        "acquired_at": "2026-09-30T10:20:00Z",
        "stale_after_seconds": 90.5,
        "tool": "skf-run-lock",
        "fence": skf.fence_of(taken),  # a renewal keeps its fence
    }
    assert list(record) == ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]


@pytest.mark.parametrize(("seconds", "written"), [(3600.0, b"3600"), (60, b"60"), (0.5, b"0.5")])
def test_timeout_is_written_as_an_int_when_whole(
    skf: ModuleType, lock: Path, seconds: float, written: bytes
) -> None:
    skf.acquire(lock, "wf:sk:r1", seconds, now=NOW)
    assert b'"stale_after_seconds": ' + written + b", " in lock.read_bytes()


@pytest.mark.parametrize(
    "value",
    ["0", "-5", '"60"', "true", "null", "NaN", "Infinity", "31536000.5", "1e999", "[60]"],
)
def test_an_invalid_holder_timeout_falls_back_to_the_callers(
    skf: ModuleType, lock: Path, value: str
) -> None:
    lock.parent.mkdir()
    lock.write_text(
        '{"owner": "wf:sk:old", "acquired_at": "2026-09-30T10:15:00Z",'
        f' "stale_after_seconds": {value}}}\n'
    )
    held = skf.acquire(lock, "wf:sk:new", 120.0, now=NOW + timedelta(seconds=119))
    assert not held["acquired"] and held["stale_after_minutes"] == 2
    assert skf.status(lock, 120.0, now=NOW + timedelta(seconds=119))["state"] == "held"
    taken = skf.acquire(lock, "wf:sk:new", 120.0, now=NOW + timedelta(seconds=120))
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] == "wf:sk:old"


def test_the_largest_holder_timeout_is_valid(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:old", NOW, stale_after_seconds=31_536_000, tool="skf-run-lock")
    result = skf.acquire(lock, "wf:sk:new", 60.0, now=NOW + timedelta(days=364))
    assert not result["acquired"] and result["stale_after_minutes"] == 525600


def test_a_record_from_an_older_helper_is_judged_by_the_callers_timeout(
    skf: ModuleType, lock: Path
) -> None:
    write_record(lock, "wf:sk:old", NOW)  # owner, acquired_at, tool: no timeout
    assert list(read_json(lock)) == ["owner", "acquired_at", "tool"]
    assert not skf.acquire(lock, "wf:sk:new", 600.0, now=NOW + timedelta(seconds=599))["acquired"]
    assert skf.acquire(lock, "wf:sk:new", 600.0, now=NOW + timedelta(seconds=600))["acquired"]


def test_status_describes_the_holders_timeout(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:r1", NOW, stale_after_seconds=300, tool="skf-run-lock")
    held = skf.status(lock, 3600.0, now=NOW + timedelta(seconds=299))
    assert (held["state"], held["stale_at"], held["stale_after_minutes"]) == (
        "held",
        "2026-09-30T10:20:00Z",
        5,
    )
    assert skf.status(lock, 3600.0, now=NOW + timedelta(seconds=300))["state"] == "stale"
    assert skf.status(lock, 1.0, now=NOW + timedelta(seconds=299))["state"] == "held"


def test_status_of_a_free_lock_describes_the_callers_timeout(
    cli: Callable[..., Run], lock: Path
) -> None:
    run = cli("status", "--lock", lock, "--stale-after", "7")
    assert run.code == 0 and run.json["stale_after_minutes"] == 7


def test_cli_refusal_and_status_agree_on_the_holders_timeout(
    cli: Callable[..., Run], lock: Path
) -> None:
    write_record(lock, "wf:sk:r1", ago(seconds=30), stale_after_seconds=36000, tool="x")
    refused = cli("acquire", "--lock", lock, "--owner", "wf:sk:r2", "--stale-after", "0.1")
    status = cli("status", "--lock", lock, "--stale-after", "0.1")
    assert (refused.code, status.code) == (3, 3)
    assert refused.json["stale_at"] == status.json["stale_at"]
    assert refused.json["stale_after_minutes"] == status.json["stale_after_minutes"] == 600
    assert json.loads(lock.read_text())["owner"] == "wf:sk:r1"
