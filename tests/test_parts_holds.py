"""Parts of a lock: holds that name parts (git glob patterns) of it, on every store,
through the CLI, the library, ``run`` and ``held()``. Two holds conflict when some path
lies in a part of each (a whole hold conflicts with every part) unless both are shared;
the line waits by conflict; an owner changes its parts in one step or not at all; one
record keeps every holder's parts, which older versions see as held. Real processes
for every waiter."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, Started, let_go, pipe
from loader import SCRIPT
from older import older
from stores import StoreUnderTest, status_now
from test_acquire import ACQUIRE_KEYS
from test_slots import wait_until

# A function that starts tests/worker.py in a real process (conftest's ``worker``).
Worker = Callable[..., Started]


def take(
    cli: Callable[..., Run], lock: str, owner: str, *parts: str, extra: tuple[str, ...] = ()
) -> Run:
    """acquire of ``parts`` (none: the whole lock), by the CLI in a fresh process."""
    flags = [arg for part in parts for arg in ("--part", part)]
    return cli("acquire", "--lock", lock, "--owner", owner, *flags, *extra)


def holders(skf: ModuleType, store: StoreUnderTest) -> dict[str, list[str] | None]:
    """Each live holder's parts, as status tells them."""
    return {h["owner"]: h["parts"] for h in status_now(skf, store)["holders"]}


def in_line(skf: ModuleType, store: StoreUnderTest) -> list[str]:
    return [waiter["owner"] for waiter in status_now(skf, store)["waiting"]]


def test_disjoint_parts_are_held_at_once_and_an_overlap_is_refused_naming_both_parts(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    first = take(main, lock, "wf:a:1", "src/**")
    assert first.code == 0 and list(first.json) == ACQUIRE_KEYS, first
    assert take(main, lock, "wf:b:1", "docs/*.md", "README.md").code == 0
    assert holders(skf, store) == {"wf:a:1": ["src/**"], "wf:b:1": ["docs/*.md", "README.md"]}
    # src/*.py and src/a* share src/a.py: exactly one path is enough.
    refused = take(main, lock, "wf:c:1", "src/api/*.py")
    assert refused.code == 3 and refused.json["acquired"] is False, refused
    assert refused.json["held_by"] == "wf:a:1"
    assert "its part 'src/**'" in refused.json["message"]
    assert "your part 'src/api/*.py'" in refused.json["message"]
    whole = take(main, lock, "wf:d:1")
    assert whole.code == 3 and whole.json["held_by"] in ("wf:a:1", "wf:b:1"), whole
    assert "the whole lock you asked for" in whole.json["message"]
    # docs/*.txt lies in no part held: taken beside the others.
    assert take(main, lock, "wf:e:1", "docs/*.txt").code == 0
    status = main("status", "--lock", lock)
    assert status.code == 3 and status.json["state"] == "held"
    assert status.json["mode"] == "exclusive"
    assert all(list(h)[-1] == "parts" for h in status.json["holders"])
    for owner in ("wf:a:1", "wf:b:1", "wf:e:1"):
        assert main("release", "--lock", lock, "--owner", owner).json["released"]
    assert store.value() is None and store.left_behind() == []


def test_shared_parts_never_conflict_but_an_exclusive_part_does_with_them(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    shared = ("--shared",)
    assert take(main, lock, "wf:r1:1", "src/**", extra=shared).code == 0
    assert take(main, lock, "wf:r2:1", "src/api", extra=shared).code == 0
    assert take(main, lock, "wf:r3:1", extra=shared).code == 0  # shared, whole
    refused = take(main, lock, "wf:w:1", "src/api/x.py")
    assert refused.code == 3 and refused.json["held_by"] in ("wf:r1:1", "wf:r2:1", "wf:r3:1")
    assert status_now(skf, store)["mode"] == "shared"
    assert take(main, lock, "wf:w:2", "docs").code == 3  # the whole shared hold covers it
    assert main("release", "--lock", lock, "--owner", "wf:r3:1").json["released"]
    assert take(main, lock, "wf:w:2", "docs").code == 0  # now beside the shared parts
    assert status_now(skf, store)["mode"] == "exclusive"


def test_an_owner_changes_its_parts_when_what_it_adds_is_free_and_else_at_once_nothing(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    first = take(main, lock, "wf:a:1", "src/a", "src/b", extra=("--get", "fence"))
    fence = int(first.out)
    assert take(main, lock, "wf:b:1", "docs/**").code == 0
    # The same parts, spelt another way and in another order: renewed, fence kept.
    same = take(
        main, lock, "wf:a:1", "./src/b/", "SRC/A", extra=("--get", "refreshed", "--get", "fence")
    )
    assert same.out.split() == ["true", str(fence)], same
    # No parts named: renewed as it stands.
    assert take(main, lock, "wf:a:1").code == 0
    assert holders(skf, store)["wf:a:1"] == ["src/a", "src/b"]
    # A part that conflicts with another's: refused at once though it may wait, naming
    # the holder and both parts; nothing changed.
    before = store.value()
    grown = take(main, lock, "wf:a:1", "src/a", "docs/x.md", extra=("--wait", "600"))
    assert grown.code == 3 and grown.json["held_by"] == "wf:b:1", grown
    assert "your part docs/x.md conflicts with its part 'docs/**'" in grown.json["message"]
    assert "nothing changed" in grown.json["message"]
    assert store.value() == before
    # A free part added, one dropped: changed in one step, with a new fence.
    changed = take(
        main, lock, "wf:a:1", "src/a", "tests", extra=("--get", "refreshed", "--get", "fence")
    )
    refreshed, new_fence = changed.out.split()
    assert refreshed == "true" and int(new_fence) > fence
    assert holders(skf, store)["wf:a:1"] == ["src/a", "tests"]
    # src/b is free again.
    assert take(main, lock, "wf:c:1", "src/b/x.py").code == 0


@pytest.mark.timeout(120)
def test_a_part_refused_to_grow_into_a_waiters_part_names_it_as_waiting(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, worker: Worker
) -> None:
    """A holder of docs asks to add lib/x, free of holders but asked by a waiter in
    line (held up by src/a's holder): refused at once, naming the waiter as one that
    waits in line for lib, with the time its place lapses, never as a holder of lib
    until its hold's timeout (no one holds lib: a run that waits for that holder
    to let go of lib waits on no one)."""
    lock = store.lock
    assert take(cli, lock, "wf:h:1", "src/a").code == 0
    assert take(cli, lock, "wf:d:1", "docs").code == 0
    waiter = worker("hold-in-line", lock, "wf:w:1", "w", "src/**", "lib")
    wait_until(lambda: in_line(skf, store) == ["wf:w:1"], what="the waiter in line")
    grown = take(cli, lock, "wf:d:1", "docs", "lib/x")
    assert grown.code == 3 and grown.json["held_by"] == "wf:w:1", grown
    message = grown.json["message"]
    assert "your part lib/x conflicts with its part lib, which wf:w:1 waits in line for;" in (
        message
    ), message
    lapses = skf._parse_time(grown.json["stale_at"]) - time.time()
    assert lapses < 600, grown.json  # its place's lapse, not its hold's timeout to come
    assert skf.release(lock, "wf:h:1")["released"]
    assert pipe(waiter.stdout).readline() == "in\n"
    assert let_go(waiter) == 0


def test_a_whole_hold_narrows_to_parts_and_frees_the_rest(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    assert take(main, lock, "wf:a:1").code == 0
    assert take(main, lock, "wf:b:1", "docs").code == 3
    assert take(main, lock, "wf:a:1", "src/**").json["refreshed"] is True
    assert take(main, lock, "wf:b:1", "docs").code == 0
    assert holders(skf, store) == {"wf:a:1": ["src/**"], "wf:b:1": ["docs"]}


def test_run_and_held_keep_an_owners_parts_and_refuse_a_part_it_does_not_hold(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    assert take(cli, lock, "wf:a:1", "src/**", "docs").code == 0
    kept = cli(
        "run",
        "--lock",
        lock,
        "--owner",
        "wf:a:1",
        "--part",
        "docs",
        "--",
        sys.executable,
        "-c",
        "pass",
    )
    assert kept.code == 0, kept
    assert holders(skf, store) == {"wf:a:1": ["docs", "src/**"]}  # kept as it was, held
    other = cli(
        "run",
        "--lock",
        lock,
        "--owner",
        "wf:a:1",
        "--part",
        "tests",
        "--",
        sys.executable,
        "-c",
        "pass",
    )
    assert other.code == 1 and "'tests'" not in other.err and "tests is not among them" in other.err
    with (
        pytest.raises(ValueError, match="is not among them"),
        skf.held(lock, "wf:a:1", 60.0, parts=["lib"]),
    ):
        pass
    with skf.held(lock, "wf:a:1", 60.0, parts=["src/**"]) as lease:
        assert lease.result["refreshed"] is True
    assert holders(skf, store) == {"wf:a:1": ["docs", "src/**"]}
    # A run of its own parts holds them while its command runs, then releases them.
    ran = cli(
        "run",
        "--lock",
        lock,
        "--owner",
        "wf:b:1",
        "--part",
        "lib",
        "--",
        sys.executable,
        "-c",
        "pass",
    )
    assert ran.code == 0 and "wf:b:1" not in holders(skf, store)


@pytest.mark.timeout(60)
def test_a_run_whose_parts_its_owner_changed_stops_at_its_next_renewal(
    cli: Callable[..., Run], store: StoreUnderTest, tmp_path: Path
) -> None:
    """A run holds src and docs; a call of its owner changes its hold to src alone: the
    run's next renewal finds its hold gone (not a passing failure, tried again until it
    runs out), stops its command and exits 3 saying its parts changed."""
    lock = store.lock
    started = tmp_path / "started"
    command = [
        sys.executable,
        "-c",
        f"open({str(started)!r}, 'w').close()\nimport time\ntime.sleep(60)",
    ]
    argv = ["run", "--lock", lock, "--owner", "wf:a:1", "--stale-after", "6s"]
    argv += ["--part", "src", "--part", "docs", "--", *command]
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(started.exists, what="the run's command")
        changed = take(cli, lock, "wf:a:1", "src")
        assert changed.code == 0 and changed.json["refreshed"] is True, changed
        _, err = run.communicate(timeout=30)  # its next renewal is 2 s away
    finally:
        run.kill()
        run.communicate()
    assert run.returncode == 3, err
    assert "its parts were released or changed by another call of its owner" in err, err
    assert "renewals failed" not in err
    # The hold its owner changed is its owner's, left as it is.
    assert take(cli, lock, "wf:b:1", "src/x").json["held_by"] == "wf:a:1"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--part", "a", "--slots", "2"), "parts have no count of slots"),
        (("--part", "/abs"), "is an absolute path"),
        (("--part", "a/../b"), "'..' segment"),
        (("--part", "a//b"), "empty segment"),
        (("--part", "a\\b"), "backslash"),
        (("--part", "a[b]"), "holds '['"),
        (("--part", "a{b}"), "holds '{'"),
        (("--part", "a\x01b"), "control character"),
        (("--part", "x" * 256), "at most 255"),
        (("--part", "."), "names the whole tree"),
        (("--part", ""), "needs a value"),
        (tuple(arg for n in range(101) for arg in ("--part", f"p{n}")), "at most 100"),
    ],
    ids=[
        "slots",
        "absolute",
        "dotdot",
        "empty-segment",
        "backslash",
        "bracket",
        "brace",
        "control",
        "long",
        "dot",
        "empty",
        "too-many",
    ],
)
def test_bad_parts_are_refused_and_change_nothing(
    main: Callable[..., Run], tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    lock = tmp_path / "run.lock"
    refused = main("acquire", "--lock", lock, "--owner", "wf:a:1", *args)
    assert refused.code == 1 and refused.out == "", refused
    assert words in json.loads(refused.err)["message"]
    assert not lock.exists() and list(tmp_path.iterdir()) == []


def test_the_library_refuses_parts_given_as_no_list(skf: ModuleType, tmp_path: Path) -> None:
    lock = tmp_path / "run.lock"
    for parts, words in (
        ([], "leave parts out"),
        ("src", "not a string"),
        ([3], "must be a string"),
    ):
        with pytest.raises(ValueError, match=words):
            skf.acquire(lock, "wf:a:1", 60.0, parts=parts)
    assert not lock.exists()


def test_a_lock_held_in_parts_refuses_slots_and_a_slot_lock_refuses_parts(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    assert take(main, store.lock, "wf:a:1", "src").code == 0
    slots = take(main, store.lock, "wf:b:1", extra=("--slots", "3"))
    assert slots.code == 1 and "held in parts" not in slots.out, slots
    assert main("release", "--lock", store.lock, "--owner", "wf:a:1").json["released"]
    assert take(main, store.lock, "wf:c:1", extra=("--slots", "3")).code == 0
    parts = take(main, store.lock, "wf:d:1", "src")
    assert parts.code == 1 and "3 slots" in json.loads(parts.err)["message"], parts


def test_a_stale_part_taken_by_another_is_not_taken_back_by_its_old_owners_renewal(
    skf: ModuleType, main: Callable[..., Run], store: StoreUnderTest
) -> None:
    """An owner's part went stale, and another took it: the old owner's acquire of it
    is a take like any other, refused while the new holder has it (never two holders
    of one path)."""
    lock = store.lock
    assert take(main, lock, "wf:a:1", "src", extra=("--stale-after", "2s")).code == 0
    assert take(main, lock, "wf:b:1", "docs").code == 0
    # Taken as soon as the store ends wf:a:1's hold (a server, by its own clock).
    wait_until(lambda: take(main, lock, "wf:c:1", "src/x").code == 0, what="src/x taken")
    again = take(main, lock, "wf:a:1", "src")
    assert again.code == 3 and again.json["held_by"] == "wf:c:1", again
    held = {h["owner"]: h["parts"] for h in status_now(skf, store)["holders"]}
    assert held["wf:c:1"] == ["src/x"] and held["wf:b:1"] == ["docs"]


# --- The line, by conflict ------------------------------------------------------------


def test_a_waiter_waits_only_behind_those_it_conflicts_with(
    skf: ModuleType, cli: Callable[..., Run], store: StoreUnderTest, worker: Worker
) -> None:
    """A holder of src/a/**; a waiter for src/** behind it. A waiter for docs/** that
    comes later goes in at once; a call for src/b, free of holders but in the first
    waiter's way, yields to it; one for lib takes at once. Once the holder is out, the
    src waiter goes in, then a src/a waiter that came after it."""
    lock = store.lock
    assert skf.acquire(lock, "wf:h:1", 60.0, parts=["src/a/**"])["acquired"]
    src = worker("hold-in-line", lock, "wf:src:1", "w", "src/**")
    wait_until(lambda: in_line(skf, store) == ["wf:src:1"], what="the src waiter in line")
    docs = worker("hold-in-line", lock, "wf:docs:1", "w", "docs/**")
    assert pipe(docs.stdout).readline() == "in\n"  # not held up by the src waiter
    jumper = take(cli, lock, "wf:jump:1", "src/b")
    assert jumper.code == 3 and jumper.json["held_by"] == "wf:src:1", jumper
    assert "waits in line ahead for its part 'src/**'" in jumper.json["message"]
    assert take(cli, lock, "wf:lib:1", "lib").code == 0
    late = worker("hold-in-line", lock, "wf:late:1", "w", "src/a/x.py")
    wait_until(lambda: in_line(skf, store) == ["wf:src:1", "wf:late:1"], what="both in line")
    assert skf.release(lock, "wf:h:1")["released"]
    assert pipe(src.stdout).readline() == "in\n"
    assert in_line(skf, store) == ["wf:late:1"]  # never passed by the later one
    assert let_go(src) == 0
    assert pipe(late.stdout).readline() == "in\n"
    for one in (docs, late):
        assert let_go(one) == 0
    assert skf.release(lock, "wf:lib:1")["released"]
    assert store.value() is None and store.left_behind() == []


@pytest.mark.timeout(180)
def test_a_waiter_of_many_long_parts_behind_others_is_never_passed_on_a_file(
    skf: ModuleType, cli: Callable[..., Run], lock: Path, worker: Worker
) -> None:
    """Four waiters, each of 100 parts of 200 characters or so, behind a holder of a:
    their places fill more than the 64 KiB a reader reads of a lock's line file. Each
    is in line all the same: status shows all four, and a call for a part that only the
    last one asks yields to it (else it takes a part a waiter ahead of it asked for,
    and the line's next rewrite drops that waiter's place)."""
    assert skf.acquire(lock, "wf:h:1", 60.0, parts=["a"])["acquired"]
    line = Path(f"{lock}.skf-line")

    def places(count: int) -> Callable[[], bool]:
        return lambda: line.exists() and line.read_bytes().count(b"\n") == count

    waiters = []
    for w in range(4):
        # a/0 each: the waiters conflict, so they take in turn, one at a time, in the
        # record's bound (four at once would pass it, and the last to try is refused).
        parts = ["a/0", *(f"f{w}/{i}/{'x' * 200}" for i in range(99))]
        waiters.append(worker("hold-in-line", str(lock), f"wf:w{w}:1", "w", *parts))
        wait_until(places(w + 1), what=f"waiter {w} in line")
    assert len(line.read_bytes()) > skf._RECORD_MAX_BYTES
    assert [p["owner"] for p in skf.status(lock, 60.0)["waiting"]] == [
        f"wf:w{w}:1" for w in range(4)
    ]
    jumper = cli("acquire", "--lock", str(lock), "--owner", "wf:jump:1", "--part", "f3/0")
    assert jumper.code == 3 and jumper.json["held_by"] == "wf:w3:1", jumper
    assert skf.release(lock, "wf:h:1")["released"]
    said = pipe(waiters[0].stdout).readline()
    assert said == "in\n", pipe(waiters[0].stderr).read()  # the others: reaped
    assert let_go(waiters[0]) == 0


@pytest.mark.timeout(120)
def test_a_place_that_would_pass_the_line_files_bound_never_joins(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line file of 16 MiB of live places (about 600 waiters of 100 long parts): a
    waiter that would pass it is refused (OSError, exit 2 from the CLI, saying why) and
    the line is left as it was, since a place past what a reader reads would stand out
    of line."""
    monkeypatch.setattr(skf._SEAMS, "place_ttl_sec", 600.0)  # the planted places live
    assert skf.acquire(lock, "wf:h:1", 60.0, parts=["a"])["acquired"]
    line = Path(f"{lock}.skf-line")
    parts = [f"a/{i}/{'x' * 240}" for i in range(100)]
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    text = bytearray()
    while len(text) < 16 * 1024 * 1024 - 20_000:
        place: dict[str, object] = {"ticket": f"t{len(text)}", "owner": f"wf:w{len(text)}:1"}
        place |= {"since": since, "stale_after_seconds": 60, "beat": time.time(), "parts": parts}
        text += (json.dumps(place) + "\n").encode()
    line.write_bytes(bytes(text))
    assert len(skf.status(lock, 60.0)["waiting"]) == text.count(b"\n")
    with pytest.raises(OSError, match="would pass 16 MiB: no place was taken"):
        skf.acquire_within(lock, "wf:late:1", 60.0, 5.0, parts=parts)
    assert line.read_bytes() == bytes(text)


# --- One record, and older versions beside it -------------------------------------------


def test_older_versions_see_a_lock_with_a_live_part_held_and_never_clear_it(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """1.11.0, 1.4.0 and (on a file and etcd) 1.2.0 read one record whose holder they can
    never be: each refuses the lock, calls it held, and cannot release it whatever
    owner it names, the part's holder's included."""
    assert take(cli, store.lock, "wf:a:1", "src").code == 0
    value = store.value()
    versions = ["1.11.0", "1.4.0"] + ([] if store.kind in ("redis", "cluster") else ["1.2.0"])
    for version in versions:
        refused = older(version, "acquire", "--lock", store.lock, "--owner", "wf:old:1")
        assert refused.returncode == 3, (version, refused.stderr)
        assert json.loads(refused.stdout)["held_by"] == "held in parts"
        for owner in ("wf:a:1", "wf:old:1"):
            mine = older(version, "release", "--lock", store.lock, "--owner", owner)
            assert json.loads(mine.stdout)["reason"] == "not-owner", (version, mine.stdout)
        status = older(version, "status", "--lock", store.lock)
        assert status.returncode == 3 and json.loads(status.stdout)["state"] == "held"
        assert store.value() == value


@pytest.mark.timeout(120)
def test_an_older_versions_live_shared_hold_stays_its_own_beside_a_shared_part(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """1.11.0 holds the lock shared; a shared part taken beside it (or refused) must
    leave that hold its owner's: 1.11.0 renews it and releases it as before. A shared
    part turns the record into one "held in parts", which 1.11.0 reads as held
    exclusively by an owner it can never be: its holder's renewal is refused (its run
    stops its command, its hold lost to a reader that never conflicted with it) and its
    release leaves its hold in the record for the rest of its timeout."""
    owner = "wf:old:20261207T000000Z-00000001"
    renew = ("acquire", "--lock", store.lock, "--owner", owner, "--shared")
    assert older("1.11.0", *renew).returncode == 0
    take(cli, store.lock, "wf:new:1", "src", extra=("--shared",))
    renewed = older("1.11.0", *renew)
    assert renewed.returncode == 0, renewed.stdout
    assert json.loads(renewed.stdout)["refreshed"] is True
    released = older("1.11.0", "release", "--lock", store.lock, "--owner", owner)
    assert json.loads(released.stdout)["released"] is True, released.stdout


@pytest.mark.timeout(60)
def test_a_run_on_a_shared_part_keeps_its_hold_when_an_older_version_rewrites_it_whole(
    lock: Path,
) -> None:
    """1.11.0 renews its shared hold beside a run's shared part: its rewrite drops the
    part (it knows none), so the run's hold is the lock whole from then on, the safe
    side. The run renews that hold as it stands, ends with its command's code, and
    releases it; 1.11.0's own hold stays."""
    old = "wf:old:20261207T000000Z-00000001"
    share = ("acquire", "--lock", str(lock), "--owner", old, "--shared")
    assert older("1.11.0", *share).returncode == 0
    holding = ["--lock", str(lock), "--owner", "wf:run:1", "--shared", "--part", "lib"]
    command = [sys.executable, "-c", "import time; time.sleep(5)"]
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), "run", *holding, "--stale-after", "3s", "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: lock.exists() and b"wf:run:1" in lock.read_bytes())
    assert older("1.11.0", *share).returncode == 0  # rewrites the record, parts dropped
    record = json.loads(lock.read_bytes())
    assert [h.get("parts") for h in record["holders"]] == [None, None], record
    _, err = run.communicate(timeout=30)
    assert run.returncode == 0, err  # renewed as it stands, never told lost
    record = json.loads(lock.read_bytes())
    assert [h["owner"] for h in record["holders"]] == [old], record


def test_a_record_is_never_grown_past_what_a_reader_reads(
    skf: ModuleType, cli: Callable[..., Run], tmp_path: Path
) -> None:
    """Holders of 100 long parts each, until the next would pass the record's bound:
    refused (exit 3, "too many parts"), the record as it was, still read whole."""
    lock = tmp_path / "run.lock"
    long = "x" * 200
    n = 0
    while True:
        parts = [f"p{n}/{k}/{long}" for k in range(100)]
        result = skf.acquire(lock, f"wf:h{n}:1", 600.0, parts=parts)
        if not result["acquired"]:
            break
        n += 1
        assert n < 10, "the record was never full"
    assert "holds too many parts" in result["message"]
    assert len(lock.read_bytes()) <= skf._RECORD_MAX_BYTES
    assert len(skf.status(lock, 60.0)["holders"]) == n
    refused = take(cli, str(lock), "wf:cli:1", *[f"q/{k}/{long}" for k in range(100)])
    assert refused.code == 3 and "too many parts" in refused.json["message"]


def test_the_record_of_parts_is_one_line_that_names_each_holders_parts(
    skf: ModuleType, tmp_path: Path
) -> None:
    lock = tmp_path / "run.lock"
    skf.acquire(lock, "wf:a:1", 60.0, parts=["src/**"])
    skf.acquire(lock, "wf:b:1", 60.0, parts=["docs"], shared=True)
    record: dict[str, Any] = json.loads(lock.read_bytes())
    assert list(record)[:6] == [
        "owner",
        "acquired_at",
        "stale_after_seconds",
        "tool",
        "mode",
        "holders",
    ]
    assert (record["owner"], record["mode"]) == ("held in parts", "parts")
    entries = {h["owner"]: h for h in record["holders"]}
    assert entries["wf:a:1"]["parts"] == ["src/**"] and "shared" not in entries["wf:a:1"]
    assert entries["wf:b:1"]["parts"] == ["docs"] and entries["wf:b:1"]["shared"] is True
    assert lock.read_bytes().count(b"\n") == 1


def test_a_part_written_by_hand_that_is_no_part_holds_the_lock_whole(
    skf: ModuleType, cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A record whose holder's parts are not parts (written by hand, on a file: a
    server ends a hold by its own lease) is read as a whole hold: it conflicts with
    every part, the safe reading."""
    lock = tmp_path / "run.lock"
    since = skf._format_time(time.time())
    entry = {
        "owner": "wf:a:1",
        "acquired_at": since,
        "stale_after_seconds": 3600,
        "parts": ["../x"],
    }
    record = {
        "owner": "held in parts",
        "acquired_at": since,
        "stale_after_seconds": 3600,
        "tool": "skf-run-lock",
        "mode": "parts",
        "holders": [entry],
    }
    lock.write_text(json.dumps(record) + "\n")
    refused = take(cli, str(lock), "wf:b:1", "docs")
    assert refused.code == 3 and refused.json["held_by"] == "wf:a:1", refused
    assert cli("status", "--lock", lock).json["holders"][0]["parts"] is None


def _long_globs(end: str) -> list[str]:
    """The most parts a take may name, each a glob of one segment as long as a part may
    be, half stars: every segment the first list matches ends in ``end``, so two lists
    of two ends share no path, and each pair must be decided in full."""
    return [
        "".join("*" + "cd"[(at >> bit) & 1] for bit in range(126)) + "*" + end for at in range(100)
    ]


@pytest.mark.timeout(120)
def test_a_take_of_the_most_parts_beside_a_holder_of_the_most_is_decided_within_seconds(
    cli: Callable[..., Run], lock: Path
) -> None:
    """Every part is within the limits (100 a take, 255 characters each), yet a take
    weighing each of its parts against each of a live holder's decides while it holds
    the file's guard: every other call on the lock, a renewal of a run on parts far
    away too, waits that long. 20 s is a generous bound for the largest legal take."""
    first = take(cli, str(lock), "wf:a:1", *_long_globs("a"))
    assert first.code == 0, first
    flags = [arg for part in _long_globs("b") for arg in ("--part", part)]
    started = time.monotonic()
    try:
        second = cli("acquire", "--lock", lock, "--owner", "wf:b:1", *flags, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the take was still deciding after {time.monotonic() - started:.0f} s")
    assert second.code == 0 and second.json["acquired"] is True, second


def _fill_to_the_last_byte(skf: ModuleType, lock: Path, holders_before: int) -> None:
    """Holds of 9 s (a one-digit timeout) that fill the record of ``lock`` to the most
    bytes a record may hold, the 48 kept for each holder's mark counted."""
    owners: list[str] = []

    def slack() -> int:
        return 64 * 1024 - (lock.stat().st_size + 48 * (holders_before + len(owners)))

    def put(at: int, owner: str, parts: list[str]) -> None:
        taken = skf.acquire(lock, owner, 9, parts=parts)
        assert taken["acquired"], taken
        if at == len(owners):
            owners.append(taken["owner"])

    for at in range(2):  # first segments apart, so that each pair is decided at once
        put(at, f"fill:{at}", [f"{at}/{i:02d}" + "q" * 240 for i in range(100)])
    last = ["2"]
    put(2, "fill:2", last)
    for _ in range(4):
        left = slack()
        while left > 0:  # each part adds its JSON string and ", "
            if len(last[-1]) < 255:
                more = min(255 - len(last[-1]), left)
                last[-1] += "q" * more
                left -= more
            else:
                last.append(f"2/{len(last)}")
                left -= len(json.dumps(last[-1])) + 2
        while left < 0:
            cut = min(-left, len(last[-1]) - 3)
            last[-1] = last[-1][: len(last[-1]) - cut]
            left += cut
        put(2, owners[2], last)
    assert slack() == 0


@pytest.mark.timeout(60)
def test_a_run_whose_renewal_would_pass_the_records_limit_stops_before_its_hold_goes_stale(
    skf: ModuleType, lock: Path, tmp_path: Path
) -> None:
    """A renewal refused because the record would grow past 64 KiB writes nothing: the
    run's hold goes stale as if its renewals failed, so the run must stop its command
    before then (as it does when a renewal fails), not work on while another takes its
    part. The run renews a hold of 10 s; holds of 9 s taken two seconds after one of
    its renewals fill the record to its last byte, and leave the record's top-level
    timeout (the last to go stale) "9": the run's next renewal makes it "10" again,
    one byte more."""
    lines = tmp_path / "ran"
    lines.touch()
    command = ["sh", "-c", f"while :; do date +%s.%N >> '{lines}'; sleep 0.05; done"]
    holding = ["--lock", str(lock), "--owner", "y:work", "--stale-after", "10s", "--part", "y"]
    run = subprocess.Popen(
        [sys.executable, str(SCRIPT), "run", *holding, "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def since() -> str | None:
        try:
            record = json.loads(lock.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return next(
            (h["acquired_at"] for h in record.get("holders", [record]) if "y:work" in h["owner"]),
            None,
        )

    wait_until(lambda: since() is not None)
    first = since()
    wait_until(lambda: since() != first)  # a renewal: its hold is dated this second
    renewed = time.time()
    while time.time() < int(renewed) + 2.02:
        time.sleep(0.005)
    _fill_to_the_last_byte(skf, lock, holders_before=1)
    dated = since()
    assert dated is not None
    stale_at = time.mktime(time.strptime(dated, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone + 10
    out, err = run.communicate(timeout=30)
    assert since() in (dated, None), "a renewal went in: the record was not full"
    last = float(lines.read_text().split()[-1])
    assert run.returncode == 3, (out, err)
    assert last < stale_at - 1, (
        f"its command ran until {last - stale_at:+.2f} s from when its hold went stale"
    )


def test_a_take_refused_as_too_large_never_names_its_caller_as_the_holder(
    cli: Callable[..., Run], lock: Path
) -> None:
    """100 parts of 245 emoji each: one holder's record would pass 64 KiB (each is 12
    bytes as JSON writes it). Refused on a free lock, nothing written: its output must
    not say the caller holds it, since when, or until when."""
    emoji = "\U0001f600" * 245
    refused = take(cli, str(lock), "wf:big:1", *[f"d{k:03d}/{emoji}" for k in range(100)])
    assert refused.code == 3 and "too many parts" in refused.json["message"], refused
    assert not lock.exists()
    said = refused.json
    assert said["held_by"] != said["owner"], said
    assert said["held_since"] is None and said["stale_at"] is None, said
