"""release: deletes only its owner's lock, never creates anything."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run
from lockfiles import NOW, beside

RELEASE_KEYS = ["released", "reason", "lock", "owner", "held_by", "held_since", "message"]


def test_own_lock_is_deleted(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 60.0, now=NOW)
    result = skf.release(lock, "wf:sk:r1")
    assert list(result) == RELEASE_KEYS
    assert result == result | {
        "released": True,
        "reason": None,
        "lock": str(lock),
        "owner": "wf:sk:r1",
        "held_by": None,
        "held_since": None,
    }
    assert beside(lock) == []


def test_missing_lock_is_absent(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    result = skf.release(lock, "wf:sk:r1")
    assert (result["released"], result["reason"], result["held_by"]) == (False, "absent", None)
    assert beside(lock) == []


def test_missing_folder_is_absent_and_not_created(skf: ModuleType, lock: Path) -> None:
    result = skf.release(lock / "deeper" / "x.lock", "wf:sk:r1")
    assert result["reason"] == "absent"
    assert not lock.parent.exists()


def test_parent_that_is_a_file_is_absent(skf: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert skf.release(tmp_path / "file" / "x.lock", "wf:sk:r1")["reason"] == "absent"


def test_lock_of_another_owner_is_left_in_place(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 60.0, now=NOW)
    before = lock.read_bytes()
    result = skf.release(lock, "wf:sk:r2")
    assert result == result | {
        "released": False,
        "reason": "not-owner",
        "held_by": "wf:sk:r1",
        "held_since": "2026-09-30T10:15:00Z",
    }
    assert lock.read_bytes() == before and beside(lock) == ["run.lock"]


@pytest.mark.parametrize("content", [b"", b"1234\n2026-09-30T10:00:00Z\n", b'{"owner": ""}'])
def test_lock_naming_no_owner_is_never_released(
    skf: ModuleType, lock: Path, content: bytes
) -> None:
    lock.parent.mkdir()
    lock.write_bytes(content)
    result = skf.release(lock, "wf:sk:r1")
    assert (result["reason"], result["held_by"]) == ("not-owner", None)
    assert isinstance(result["held_since"], str)
    assert lock.read_bytes() == content


def test_stale_own_lock_is_still_released(skf: ModuleType, lock: Path) -> None:
    skf.acquire(lock, "wf:sk:r1", 60.0, now=NOW)
    assert skf.release(lock, "wf:sk:r1")["released"]


@pytest.mark.parametrize("owner", ["wf:sk", "wf:sk:", "bad", "wf:sk:a b"])
def test_owner_without_run_id_is_a_bad_argument(skf: ModuleType, lock: Path, owner: str) -> None:
    skf.acquire(lock, "wf:sk:r1", 60.0)
    with pytest.raises(ValueError):
        skf.release(lock, owner)
    assert beside(lock) == ["run.lock"]


def test_an_owner_without_its_run_id_is_told_where_the_whole_owner_is_printed(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """The message's status command, run as printed, prints the owner to release."""
    lock = tmp_path / "a folder" / "run.lock"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    run = cli("release", "--lock", lock, "--owner", "wf:sk")
    assert run.code == 1, run
    assert "release needs the whole owner with its run id" in run.error
    assert "lists every holder" in run.error
    printed = run.error.split("not 'wf:sk': ", 1)[1].split(" prints the holder's", 1)[0]
    done = subprocess.run(
        shlex.split(printed), capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (3, taken.json["owner"] + "\n"), done
    released = cli("release", "--lock", lock, "--owner", done.stdout.strip())
    assert released.json["released"] is True
    assert beside(lock) == []


def test_folder_is_a_bad_argument(skf: ModuleType, lock: Path) -> None:
    lock.mkdir(parents=True)
    with pytest.raises(ValueError, match="folder"):
        skf.release(lock, "wf:sk:r1")
