"""The contract, run against both backends: a lock file and a lock on etcd.

Each test gets ``target``, a lock address that is a file path or an etcd:// address
(on the session's real etcd), and must pass for both unchanged.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from test_acquire import ACQUIRE_KEYS
from test_release import RELEASE_KEYS
from test_status import STATUS_KEYS


@pytest.fixture(params=["file", "etcd"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "locks" / "run.lock")
    return str(request.getfixturevalue("etcd_lock"))


def test_take_renew_refuse_with_every_key_in_order(main, target: str) -> None:
    taken = main("acquire", "--lock", target, "--owner", "wf:sk:r1", "--stale-after", "30")
    assert taken.code == 0 and list(taken.json) == ACQUIRE_KEYS
    out = taken.json
    assert (out["acquired"], out["refreshed"], out["lock"], out["owner"], out["run_id"]) == (
        True,
        False,
        target,
        "wf:sk:r1",
        "r1",
    )
    assert (out["held_by"], out["stale_after_minutes"], out["stale_replaced"]) == (
        "wf:sk:r1",
        30,
        None,
    )
    renewed = main("acquire", "--lock", target, "--owner", "wf:sk:r1")
    assert renewed.code == 0 and renewed.json["refreshed"] is True
    assert renewed.json["stale_after_minutes"] == 60  # the renewing call's timeout
    refused = main("acquire", "--lock", target, "--owner", "wf:sk:r2", "--stale-after", "0.1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert (refused.json["acquired"], refused.json["held_by"]) == (False, "wf:sk:r1")
    assert refused.json["stale_after_minutes"] == 60  # the holder's, not this caller's
    message = refused.json["message"]
    assert target in message and "wf:sk:r1" in message and "stale" in message


def test_a_missing_run_id_is_added_and_printed(main, skf: ModuleType, target: str) -> None:
    run = main("acquire", "--lock", target, "--owner", "wf:sk")
    assert run.code == 0 and skf.RUN_ID_RE.match(run.json["run_id"])
    assert run.json["owner"] == "wf:sk:" + run.json["run_id"] == run.json["held_by"]


def test_release_answers_released_not_owner_and_absent(main, target: str) -> None:
    main("acquire", "--lock", target, "--owner", "wf:sk:r1")
    other = main("release", "--lock", target, "--owner", "wf:sk:r2")
    assert other.code == 0 and list(other.json) == RELEASE_KEYS
    assert (other.json["released"], other.json["reason"], other.json["held_by"]) == (
        False,
        "not-owner",
        "wf:sk:r1",
    )
    assert other.json["held_since"] is not None
    mine = main("release", "--lock", target, "--owner", "wf:sk:r1")
    assert (mine.json["released"], mine.json["reason"], mine.json["held_by"]) == (True, None, None)
    absent = main("release", "--lock", target, "--owner", "wf:sk:r1")
    assert (absent.json["released"], absent.json["reason"]) == (False, "absent")


def test_status_says_free_then_held(main, target: str) -> None:
    free = main("status", "--lock", target)
    assert free.code == 0 and list(free.json) == STATUS_KEYS
    assert (free.json["state"], free.json["held_by"], free.json["age_seconds"]) == (
        "free",
        None,
        None,
    )
    main("acquire", "--lock", target, "--owner", "wf:sk:r1")
    held = main("status", "--lock", target)
    assert held.code == 3 and (held.json["state"], held.json["held_by"]) == ("held", "wf:sk:r1")


def test_acquire_within_gives_up_with_lock_busy(skf: ModuleType, target: str) -> None:
    skf.acquire(target, "wf:sk:holder", 600.0)
    with pytest.raises(skf.LockBusy) as busy:
        skf.acquire_within(target, "wf:sk:waiter", 600.0, 0.2)
    assert busy.value.result["held_by"] == "wf:sk:holder"
    assert busy.value.result["acquired"] is False


def test_wait_on_the_cli_gives_up_with_exit_3(main, target: str) -> None:
    main("acquire", "--lock", target, "--owner", "wf:sk:holder")
    run = main("acquire", "--lock", target, "--owner", "wf:sk:me", "--wait", "0.3")
    assert run.code == 3 and run.json["message"].startswith("gave up after waiting ")


@pytest.mark.parametrize("owner", ["nocolon", "wf::r", "wf:sk:a b"])
def test_a_bad_owner_changes_nothing(main, target: str, owner: str) -> None:
    assert main("acquire", "--lock", target, "--owner", owner).code == 1
    assert main("status", "--lock", target).json["state"] == "free"


def test_release_needs_the_run_id(main, target: str) -> None:
    run = main("release", "--lock", target, "--owner", "wf:sk")
    assert run.code == 1 and "run id" in run.error


@pytest.mark.skipif(sys.platform == "win32", reason="runs the advice in a POSIX shell")
def test_the_clearing_command_works_as_printed(main, target: str) -> None:
    main("acquire", "--lock", target, "--owner", "wf:sk:gone")
    message = main("acquire", "--lock", target, "--owner", "wf:sk:me").json["message"]
    command = message.split("clear it with: ", 1)[1]
    assert shlex.split(command)[0] == "python3"
    done = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and '"released": true' in done.stdout
    assert main("acquire", "--lock", target, "--owner", "wf:sk:me").code == 0
