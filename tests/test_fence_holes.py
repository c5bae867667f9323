"""Fences that hold: a take paused between its read and its commit still gets a fence
above every take committed before its own; a retake beside others' larger fences gets
one above them; a wild fence in a record counts as none; a Redis user without TIME
still takes a plain lock (with no fence); a coarse clock never gives two takes one
fence. Real processes and real servers throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from calls import Run, posix_only
from loader import SCRIPT
from servers import Redis, start_redis_with_agent
from stores import StoreUnderTest, planted_record, shown_time

PY = sys.executable
TESTS = str(Path(__file__).resolve().parent)  # the tests' helpers: wrapped.py
MAX_FENCE = 2**52

# A taker that stops itself (SIGSTOP) between its read of the lock and its commit, then
# says whether it took the lock and its fence. It wraps its store (the store seam), whose
# apply a change calls once it has read the lock and decided.
PAUSED_TAKER = """
import importlib.util, json, os, signal, sys
sys.path.insert(0, sys.argv[3])
from wrapped import WrappedStore
spec = importlib.util.spec_from_file_location("skf_paused_taker", sys.argv[1])
skf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(skf)
paused = []

class Paused(WrappedStore):
    def apply(self, *args, **kwargs):
        if not paused:  # once
            paused.append(True)
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.real.apply(*args, **kwargs)

skf._SEAMS.opened = Paused
taken = skf.acquire(sys.argv[2], "wf:paused:1", 60.0)
print(json.dumps([taken["acquired"], skf.fence_of(taken)]), flush=True)
"""


@posix_only("SIGSTOP")
@pytest.mark.timeout(90)
def test_a_take_paused_between_its_read_and_its_commit_gets_a_fence_above_one_taken_meanwhile(
    cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """The paused take read the lock free; meanwhile another run takes it and releases
    it (where the store lets it: a file's guard makes it wait). Whatever each store
    lets happen, the fences of the takes, in the order they committed, only grow."""
    paused = subprocess.Popen(
        [PY, "-c", PAUSED_TAKER, SCRIPT, store.lock, TESTS],
        stdout=subprocess.PIPE,
        text=True,
    )
    other = None
    try:
        _, state = os.waitpid(paused.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(state)  # it read the lock and decided; it has not applied
        command: list[str] = [
            PY,
            str(SCRIPT),
            "acquire",
            "--lock",
            store.lock,
            "--owner",
            "wf:other:1",
        ]
        other = subprocess.Popen([*command, "--get", "fence"], stdout=subprocess.PIPE, text=True)
        committed = []
        try:
            other_out, _ = other.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            other_out = None  # it waits for the paused one's guard (a file)
        if other_out is not None:
            assert other.returncode == 0, other_out
            committed.append(int(other_out))
            release = cli("release", "--lock", store.lock, "--owner", "wf:other:1")
            assert release.json["released"] is True
        os.kill(paused.pid, signal.SIGCONT)
        paused_out, _ = paused.communicate(timeout=30)
        acquired, fence = json.loads(paused_out)
        assert acquired is True
        committed.append(fence)
        if other_out is None:
            other_out, _ = other.communicate(timeout=30)
            assert other.returncode == 3  # the paused one holds it now
    finally:
        for process in (paused, other):
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
                process.wait()
    assert committed == sorted(set(committed)), committed
    assert cli("status", "--lock", store.lock).json["held_by"] == "wf:paused:1"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [("--slots", "3"), ("--shared",)])
def test_a_retake_beside_stale_holders_with_larger_fences_gets_a_fence_above_them(
    main: Callable[..., Run], store: StoreUnderTest, kind: tuple[str, ...]
) -> None:
    """a, b and c hold and go stale (a server ends every lease: its last holders stay
    shown); a takes again: still its own (refreshed), with a fence above b's and c's,
    whose frozen runs may yet write; a server's record it starts anew drops b's and
    c's holds, and says so."""
    lock = store.lock
    fences = {}
    for name in "abc":
        run = main(
            "acquire", "--lock", lock, "--owner", f"wf:{name}:1", "--stale-after", "6s", *kind
        )
        assert run.code == 0, run
        fences[name] = fence_of_status_holder(main, lock, kind, f"wf:{name}:1")
    assert fences["a"] < fences["b"] < fences["c"]
    status = main("status", "--lock", lock, *kind[:2] if kind[0] == "--slots" else ()).json
    assert [h["owner"] for h in status["holders"]] == ["wf:a:1", "wf:b:1", "wf:c:1"]
    time.sleep(7)  # all three stale (a file's, dated in whole seconds, too)
    if store.kind != "file":  # a server drops the record (a lease may end a moment late)
        deadline = time.monotonic() + 15
        while store.value() is not None:
            assert time.monotonic() < deadline, "the server kept the record"
            time.sleep(0.1)
    dropped = store.kind != "file"  # a server's holds are shown as its last holders
    retake = main("acquire", "--lock", lock, "--owner", "wf:a:1", "--stale-after", "6s", *kind).json
    assert retake["acquired"] is True and retake["refreshed"] is True
    fence = fence_of_status_holder(main, lock, kind, "wf:a:1")
    assert fence > fences["c"]
    replaced = retake["stale_replaced"]
    if dropped:
        assert replaced is not None and replaced["held_by"] == "wf:b:1", retake
        assert "dropping the stale" in retake["message"]
    else:
        assert replaced is None, retake


def fence_of_status_holder(
    cli: Callable[..., Run], lock: str, kind: tuple[str, ...], owner: str
) -> int:
    """The fence ``status`` shows for ``owner``'s hold."""
    status = cli("status", "--lock", lock, *kind[:2] if kind[0] == "--slots" else ()).json
    holders = {holder["owner"]: holder["fence"] for holder in status["holders"]}
    fence: int = holders[owner]
    return fence


# Fences a record may hold that are none: out of range, or not whole numbers.
WILD_FENCES = [
    "-1",
    "0",
    "1.5",
    '"7"',
    "true",
    "null",
    str(MAX_FENCE + 1),
    str(2**64),
    "9" * 4300,  # as many digits as Python reads
    "1" + "0" * 4300,  # more than it reads
    "1e400",
]


def planted_with_fence(owner: str, seconds_ago: float, fence_text: str) -> bytes:
    """A record of ``owner`` taken ``seconds_ago`` (an hour's timeout), whose fence is
    ``fence_text`` as it stands in the JSON."""
    record = planted_record(owner, shown_time(seconds_ago), stale_after_seconds=3600)
    text = record.decode().rstrip("\n").rstrip("}")
    return f'{text}, "fence": {fence_text}}}\n'.encode()


@pytest.mark.timeout(120)
def test_a_wild_fence_in_a_record_counts_as_none_and_never_wedges_the_lock(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    lock = store.lock
    for fence_text in WILD_FENCES:
        # A live record of its own: renewed, with a fence of this tool's making.
        store.plant(planted_with_fence("wf:old:1", 10, fence_text))
        assert main("status", "--lock", lock).json["held_by"] == "wf:old:1", fence_text
        renewed = main("acquire", "--lock", lock, "--owner", "wf:old:1", "--get", "fence")
        assert renewed.code == 0, (fence_text, renewed)
        assert 0 < int(renewed.out) <= MAX_FENCE, fence_text
        assert main("release", "--lock", lock, "--owner", "wf:old:1").json["released"] is True
        # A stale one: replaced.
        store.plant(planted_with_fence("wf:old:1", 7200, fence_text))
        replaced = main("acquire", "--lock", lock, "--owner", "wf:new:1", "--get", "fence")
        assert replaced.code == 0, (fence_text, replaced)
        assert 0 < int(replaced.out) <= MAX_FENCE, fence_text
        assert main("release", "--lock", lock, "--owner", "wf:new:1").json["released"] is True


def test_a_record_at_the_largest_fence_leaves_the_next_take_without_one(
    main: Callable[..., Run], store: StoreUnderTest
) -> None:
    """No fence this tool gives passes 2**52: every JSON reader reads it exactly."""
    store.plant(planted_with_fence("wf:old:1", 7200, str(MAX_FENCE)))
    taken = main("acquire", "--lock", store.lock, "--owner", "wf:new:1")
    assert taken.code == 0, taken
    assert taken.json["stale_replaced"]["held_by"] == "wf:old:1"
    assert "it has no fence" in taken.json["message"]
    # Renewed, it gets one: the record at the largest fence is gone.
    fence = main("acquire", "--lock", store.lock, "--owner", "wf:new:1", "--get", "fence")
    assert fence.code == 0 and 0 < int(fence.out) <= MAX_FENCE


# The commands docs/redis.md named for a lock without slots before fences: no TIME.
COMMANDS_WITHOUT_TIME = (
    "get mget pttl lrange set del rpush lrem pexpire blpop watch unwatch multi exec"
)


@pytest.fixture(scope="module")
def timeless_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    """Redis whose user "agent" (password "agent-pw") has every command a lock of one
    slot needs, but not TIME."""
    folder = tmp_path_factory.mktemp("timeless-redis")
    server = start_redis_with_agent(folder, COMMANDS_WITHOUT_TIME)
    yield server
    server.stop()


def test_a_redis_user_without_time_takes_renews_and_releases_a_lock_with_no_fence(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, timeless_redis: Redis
) -> None:
    monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
    lock = timeless_redis.url("locks/plain", user="agent")
    taken = cli("acquire", "--lock", lock, "--owner", "wf:a")
    assert taken.code == 0, taken
    assert "it has no fence" in taken.json["message"]
    owner = taken.json["owner"]
    renewed = cli("acquire", "--lock", lock, "--owner", owner, "--get", "fence")
    assert (renewed.code, renewed.out) == (0, "\n")
    refused = cli("acquire", "--lock", lock, "--owner", "wf:b")
    assert refused.code == 3 and refused.json["held_by"] == owner
    assert cli("status", "--lock", lock).json["held_by"] == owner
    assert cli("release", "--lock", lock, "--owner", owner).json["released"] is True
    assert timeless_redis.client(password="root-pw").keys("*") == []
    # A lock with slots ends them on the server's clock: refused, naming the command.
    slots = cli("acquire", "--lock", lock, "--owner", "wf:c", "--slots", "2")
    assert slots.code == 2, slots
    assert "Redis denied user 'agent' the command TIME" in slots.error
    assert "+time" in slots.error and "agent-pw" not in slots.out + slots.err


# Takes and releases, one after the other, under a clock that ticks as Windows' did
# before Python 3.13 (every 15.625 ms); prints their fences.
UNDER_A_COARSE_CLOCK = """
import importlib.util, json, sys, time
fine = time.time_ns
tick = 15_625_000
time.time_ns = lambda: fine() // tick * tick
time.time = lambda: time.time_ns() / 1e9
spec = importlib.util.spec_from_file_location("skf_coarse", sys.argv[1])
skf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(skf)
fences = []
for turn in range(int(sys.argv[3])):
    taken = skf.acquire(sys.argv[2], f"wf:turn:{turn}", 60.0)
    fences.append(skf.fence_of(taken))
    skf.release(sys.argv[2], taken["owner"])
print(json.dumps(fences))
"""


@pytest.mark.timeout(60)
def test_takes_one_after_another_never_share_a_fence_under_a_coarse_clock(
    tmp_path: Path,
) -> None:
    lock = str(tmp_path / "coarse.lock")
    run = subprocess.run(
        [PY, "-c", UNDER_A_COARSE_CLOCK, SCRIPT, lock, "100"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    fences = json.loads(run.stdout)
    assert len(fences) == 100 and fences == sorted(set(fences))
