"""Fencing: every take of a lock gets a number larger than that of every earlier take,
on every store; a renewal keeps its own; the CLI, run, held() and the library give it;
and a resource that keeps the largest it has seen refuses a frozen holder's late write
(docs/design.md's own code). Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import pytest
from calls import Run, posix_only
from loader import ROOT, SCRIPT
from older import older, older_versions
from stores import StoreUnderTest
from test_acquire import ACQUIRE_KEYS

PY = sys.executable
T = TypeVar("T")
SHORT = "0.1333" if sys.platform == "win32" else "0.05"  # minutes: 8 s or 3 s


def fence_taken(cli: Callable[..., Run], lock: str, owner: str, *more: str) -> int:
    """The fence of the hold ``acquire --get fence`` took or renewed (it must take)."""
    run = cli("acquire", "--lock", lock, "--owner", owner, "--get", "fence", *more)
    assert run.code == 0, run
    return int(run.out)


def until(read: Callable[[], T], done: Callable[[T], bool], seconds: float = 15.0) -> T:
    """What ``read`` gives once ``done`` says so: a short hold ends on its timeout, on
    a server maybe a moment later (an etcd lease on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while not done(seen := read()):
        assert time.monotonic() < deadline, f"still {seen!r} after {seconds} s"
        time.sleep(0.1)
    return seen


def status_of(cli: Callable[..., Run], lock: str, *more: str) -> dict[str, object]:
    run = cli("status", "--lock", lock, *more)
    assert run.code in (0, 3), run
    answer: dict[str, object] = run.json
    return answer


def test_a_fence_only_grows_across_takes_releases_and_stale_holds(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    first = fence_taken(main, lock, "wf:a:1")
    assert fence_taken(main, lock, "wf:a:1") == first  # a renewal keeps its fence
    status = status_of(main, lock)
    assert list(status)[-3:] == ["mode", "fence", "message"]
    assert status["fence"] == first
    assert status["holders"] == [status["holders"][0] | {"fence": first}]  # type: ignore[index]
    assert main("release", "--lock", lock, "--owner", "wf:a:1").json["released"] is True
    assert status_of(main, lock)["fence"] is None  # nobody holds it
    second = fence_taken(main, lock, "wf:b:1")  # after a release deleted the record
    assert second > first
    assert main("release", "--lock", lock, "--owner", "wf:b:1").json["released"] is True
    short = skf.acquire(lock, "wf:c:1", 2.0)
    third = skf.fence_of(short)
    assert third > second
    assert list(short) == ACQUIRE_KEYS  # the output's keys are acquire's, unchanged
    time.sleep(2.5)  # its hold goes stale (a server ends it, maybe a moment late)
    stale = until(lambda: skf.status(lock, 60.0), lambda status: status["state"] != "held")
    assert stale["fence"] is None  # stale: nobody holds it
    replaced = skf.acquire_within(lock, "wf:d:1", 60.0, 10.0)
    assert replaced["acquired"] and skf.fence_of(replaced) > third
    refused = skf.acquire(lock, "wf:e:1", 60.0)
    assert refused["acquired"] is False and skf.fence_of(refused) is None
    by_cli = main("acquire", "--lock", lock, "--owner", "wf:e:1", "--get", "fence")
    assert (by_cli.code, by_cli.out) == (3, "\n")


@pytest.mark.parametrize("kind", [("--slots", "3"), ("--shared",)])
def test_each_slot_and_each_shared_hold_has_a_fence_of_its_own(
    main: Callable[..., Run], store: StoreUnderTest, kind: tuple[str, ...]
) -> None:
    lock = store.lock
    fences = [fence_taken(main, lock, f"wf:h{n}:1", *kind) for n in range(3)]
    assert fences == sorted(set(fences))  # each larger than the one before
    assert fence_taken(main, lock, "wf:h2:1", *kind) == fences[2]  # the newest renewed: kept
    # Renewed beside a larger fence, a hold gets one above all the lock shows.
    renewed = fence_taken(main, lock, "wf:h0:1", *kind)
    assert renewed > fences[2]
    fences[0] = renewed
    status = status_of(main, lock, *kind[:2]) if kind[0] == "--slots" else status_of(main, lock)
    holders = status["holders"]
    assert isinstance(holders, list)
    assert {h["owner"]: h["fence"] for h in holders} == {
        f"wf:h{n}:1": fence for n, fence in enumerate(fences)
    }
    assert (status["state"], status["fence"]) == ("held", max(fences))  # the newest take's


@pytest.mark.parametrize("kind", [("--slots", "3"), ("--shared",)])
def test_status_shows_the_newest_live_holds_fence_and_null_once_nobody_holds(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest, kind: tuple[str, ...]
) -> None:
    """Three slots held by three owners, or two shared readers and a third: ``status``'s
    fence is the largest of the live holders' (the newest take's), whichever of them
    status shows as the first to go stale, while some slots are still free too; a
    stale hold's counts no more; null once nobody holds the lock."""
    lock = store.lock
    asked = kind[:2] if kind[0] == "--slots" else ()

    def fence_shown() -> object:
        return status_of(main, lock, *asked)["fence"]

    assert fence_shown() is None  # free
    fences: list[int] = []
    for n in range(3):
        fences.append(fence_taken(main, lock, f"wf:h{n}:1", *kind))
        assert fence_shown() == max(fences) == fences[-1]  # partly held, then full
    assert fence_taken(main, lock, "wf:h2:1", *kind) == fences[2]  # the newest renewed: kept
    assert fence_shown() == fences[-1]
    assert main("release", "--lock", lock, "--owner", "wf:h2:1").json["released"] is True
    assert fence_shown() == fences[1]  # the newest take of those that hold it
    short = fence_taken(main, lock, "wf:h3:1", *kind, "--stale-after", SHORT)
    assert fence_shown() == short > fences[1]
    slots = {"slots": 3} if asked else {}
    until(lambda: skf.status(lock, 60.0, **slots)["fence"], lambda fence: fence == fences[1])
    assert fence_shown() == fences[1]  # once stale, its fence is not the holders' (the CLI)
    for n in (0, 1):
        assert main("release", "--lock", lock, "--owner", f"wf:h{n}:1").json["released"] is True
    assert fence_shown() is None  # nobody holds it (a stale hold may still stand)


def test_run_held_and_the_library_give_the_fence_status_shows(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    lock = store.lock
    seen = tmp_path / "seen"
    tell = (
        "import os, subprocess, sys\n"
        "shown = subprocess.run([sys.executable, sys.argv[1], 'status', '--lock', sys.argv[2],"
        " '--get', 'fence'], capture_output=True, text=True).stdout.strip()\n"
        "open(sys.argv[3], 'w').write(os.environ['SKF_RUN_LOCK_FENCE'] + ' ' + shown)\n"
    )
    run = cli("run", "--lock", lock, "--owner", "wf:run", "--", PY, "-c", tell, SCRIPT, lock, seen)
    assert run.code == 0, run
    given, shown = seen.read_text().split()
    assert given == shown and int(given) > 0
    with skf.held(lock, "wf:held", 60.0) as lease:
        assert lease.fence == skf.status(lock, 60.0)["fence"] == skf.fence_of(lease.result)
        assert lease.fence > int(given)
    taken = skf.acquire_within(lock, "wf:lib:1", 60.0, 5.0)
    assert skf.fence_of(taken) == skf.status(lock, 60.0)["fence"] > lease.fence


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [{"slots": 2}, {"shared": True}])
def test_a_leases_fence_is_its_current_holds_after_a_renewal_beside_a_newer_holder(
    skf: ModuleType, store: StoreUnderTest, kind: dict[str, object]
) -> None:
    """A renewal keeps its fence only while no other holder shows a larger one: beside a
    newer holder of another slot (or shared hold), it gets a new fence, and the lease's
    fence is the hold's as renewed, not the first take's."""
    with skf.held(store.lock, "wf:held", 3.0, **kind) as lease:
        first = lease.fence
        newer = skf.fence_of(skf.acquire(store.lock, "wf:newer:1", 60.0, **kind))
        assert first is not None and newer is not None and newer > first
        renewed = until(lambda: lease.fence, lambda fence: fence != first)  # every second
        assert renewed is not None and renewed > newer
        holders = skf.status(store.lock, 60.0)["holders"]
        assert renewed in [holder["fence"] for holder in holders]
        assert skf.fence_of(lease.result) == first  # the take's output, as it was


def resource_code() -> str:
    """docs/design.md's resource that checks fences: the Python it shows."""
    section = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").split("## Fencing", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


# A holder that takes the lock with a 3 s timeout, says its fence, and writes to the
# resource once told to go (by then it may have been frozen past its timeout).
LATE_WRITER = """
import importlib.util, os, sys, time
sys.path.insert(0, sys.argv[1])
from resource import write_fenced
spec = importlib.util.spec_from_file_location("skf", sys.argv[2])
skf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(skf)
lock, data, go = sys.argv[3], sys.argv[4], sys.argv[5]
taken = skf.acquire(lock, "wf:a:1", 3.0)
print(skf.fence_of(taken), flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
print("wrote" if write_fenced(data, skf.fence_of(taken), "A's late write") else "refused")
"""


@posix_only("SIGSTOP, and the resource's fcntl.flock")
@pytest.mark.timeout(120)
def test_a_frozen_holders_late_write_is_refused_by_a_resource_that_checks(
    cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    """A holds with a 3 s timeout and is frozen past it; B takes the lock (a larger
    fence) and writes; A resumes, still believing it holds the lock, and writes with
    its fence: the resource refuses it and keeps B's data."""
    (tmp_path / "resource.py").write_text(resource_code(), encoding="utf-8")
    data = tmp_path / "data.json"
    go = tmp_path / "go"
    a = subprocess.Popen(
        [PY, "-c", LATE_WRITER, tmp_path, SCRIPT, store.lock, data, go],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert a.stdout is not None
        fence_a = int(a.stdout.readline())
        os.kill(a.pid, signal.SIGSTOP)
        time.sleep(3.5)  # past A's timeout: the next take, or its server, ends it
        fence_b = fence_taken(cli, store.lock, "wf:b:1", "--wait", "10")  # a lease ends late
        assert fence_b > fence_a
        write_b = "from resource import write_fenced; import sys; sys.exit(not write_fenced("
        write_b += f"{str(data)!r}, {fence_b}, 'B')) "
        assert subprocess.run([PY, "-c", write_b], cwd=tmp_path, check=False).returncode == 0
        go.touch()
        os.kill(a.pid, signal.SIGCONT)
        out, _ = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
            a.wait()
    assert out == "refused\n"
    assert json.loads(data.read_text()) == {"fence": fence_b, "data": "B"}
    assert status_of(cli, store.lock)["held_by"] == "wf:b:1"


def test_older_versions_read_a_record_with_a_fence_as_their_own(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """1.2.0 and 1.4.0 take the fence for an extra key: they see the holder, refuse
    others, and release it by its owner; the next take here gets a larger fence."""
    last = 0
    for version in older_versions(store):
        fence = fence_taken(cli, store.lock, "wf:me:1")
        assert fence > last
        refused = older(version, "acquire", "--lock", store.lock, "--owner", "wf:old:1")
        assert refused.returncode == 3, (version, refused.stderr)
        assert json.loads(refused.stdout)["held_by"] == "wf:me:1"
        status = older(version, "status", "--lock", store.lock)
        assert json.loads(status.stdout)["held_by"] == "wf:me:1", version
        released = older(version, "release", "--lock", store.lock, "--owner", "wf:me:1")
        assert json.loads(released.stdout)["released"] is True, (version, released.stderr)
        assert status_of(cli, store.lock)["state"] == "free"
        last = fence
    assert fence_taken(cli, store.lock, "wf:me:2") > last
