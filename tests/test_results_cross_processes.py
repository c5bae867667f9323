"""What acquire, acquire_within and release give (and LockBusy's result, and held()'s
lease.result) crosses process boundaries as 1.8's plain dicts did: a pickle is a plain
dict that a process which never loaded the file unpickles; copies keep the fence; and
fence_of of a copy that lost the fence says so instead of answering None."""

from __future__ import annotations

import copy
import json
import multiprocessing
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import crossing
import pytest
from loader import load_script
from test_acquire import ACQUIRE_KEYS

# A process that never loaded the file (isolated: no tests/ on its path): unpickles
# each pickle on stdin and says what it got, and whether anything of the lock's code
# was loaded to do it.
UNPICKLE = """
import json, pickle, sys
got = [pickle.loads(bytes.fromhex(line)) for line in sys.stdin.read().split()]
print(json.dumps({
    "types": [type(value).__name__ for value in got],
    "values": got,
    "loaded": sorted(name for name in sys.modules if "skf" in name or "lock" in name),
}))
"""


@pytest.fixture(scope="module")
def sibling() -> ModuleType:
    """The built file as a sibling script loads it: by path, under a name of its own."""
    return crossing.sibling()


def unpickled_elsewhere(*values: object) -> dict[str, Any]:
    """What a fresh ``python3 -I -c`` that never loaded the file makes of ``values``'
    pickles."""
    pickles = "\n".join(pickle.dumps(value).hex() for value in values)
    run = subprocess.run(
        [sys.executable, "-I", "-c", UNPICKLE],
        input=pickles,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    return answer


def test_every_result_unpickles_as_a_plain_dict_in_a_process_that_never_loaded_the_file(
    sibling: ModuleType, tmp_path: Path
) -> None:
    lock = str(tmp_path / "run.lock")
    taken = sibling.acquire(lock, "wf:a:1", 60.0)
    renewed = sibling.acquire_within(lock, "wf:a:1", 60.0, 5.0)
    with pytest.raises(sibling.LockBusy) as busy:
        sibling.acquire_within(lock, "wf:b:1", 60.0, 0.1)
    released = sibling.release(lock, "wf:a:1")
    with sibling.held(lock, "wf:c:1", 60.0) as lease:
        leased = lease.result
    results = [taken, renewed, busy.value.result, released, leased]
    assert [taken["acquired"], renewed["refreshed"], released["released"]] == [True] * 3
    assert busy.value.result["acquired"] is False
    seen = unpickled_elsewhere(*results)
    assert seen["types"] == ["dict"] * len(results)
    assert seen["values"] == results  # equal, key for key
    assert [list(value) for value in seen["values"]][:2] == [ACQUIRE_KEYS] * 2
    assert seen["loaded"] == []  # nothing of the lock's code was needed
    assert all(type(pickle.loads(pickle.dumps(value))) is dict for value in results)


def test_results_cross_a_spawned_process_pool_both_ways(
    sibling: ModuleType, tmp_path: Path
) -> None:
    lock = str(tmp_path / "run.lock")
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        taken = pool.submit(crossing.call, "acquire", lock, "wf:pool:1", 60.0).result(60)
        within = pool.submit(crossing.call, "acquire_within", lock, "wf:pool:1", 60.0, 5.0)
        renewed = within.result(60)
        released = pool.submit(crossing.call, "release", lock, "wf:pool:1").result(60)
        here = sibling.acquire(lock, "wf:here:1", 60.0)  # this process's, to a worker
        kind, there = pool.submit(crossing.echo, here).result(60)
    assert (taken["acquired"], taken["owner"], renewed["refreshed"]) == (True, "wf:pool:1", True)
    assert list(taken) == list(renewed) == ACQUIRE_KEYS
    assert released["released"] is True
    assert (kind, there) == ("dict", here)


def test_a_copy_keeps_the_fence(sibling: ModuleType, tmp_path: Path) -> None:
    lock = str(tmp_path / "run.lock")
    taken = sibling.acquire(lock, "wf:a:1", 60.0)
    fence = sibling.fence_of(taken)
    assert isinstance(fence, int) and fence > 0
    for twin in (taken.copy(), copy.copy(taken), copy.deepcopy(taken)):
        assert twin == taken and list(twin) == ACQUIRE_KEYS
        assert sibling.fence_of(twin) == fence
    deep = copy.deepcopy(sibling.acquire(lock, "wf:a:1", 60.0))
    assert sibling.fence_of(deep) == fence  # a renewal's, copied deep


def test_fence_of_a_copy_that_lost_the_fence_says_why_instead_of_none(
    sibling: ModuleType, tmp_path: Path
) -> None:
    lock = str(tmp_path / "run.lock")
    taken = sibling.acquire(lock, "wf:a:1", 60.0)
    for lose in (dict, lambda result: pickle.loads(pickle.dumps(result))):
        lost = lose(taken)
        with pytest.raises(ValueError, match=r"does not carry its fence") as why:
            sibling.fence_of(lost)
        message = str(why.value)
        assert "\n" not in message
        assert "dict() copy" in message and "another process" in message
        assert "pass the fence itself" in message and "--get fence" in message
    refused = sibling.acquire(lock, "wf:b:1", 60.0)
    assert refused["acquired"] is False
    assert sibling.fence_of(refused) is None
    assert sibling.fence_of(dict(refused)) is None  # a refusal has no fence to lose
    assert sibling.fence_of(pickle.loads(pickle.dumps(refused))) is None
    assert sibling.fence_of({}) is None
    assert sibling.fence_of(sibling.release(lock, "wf:a:1")) is None


def test_lock_busy_and_lock_lost_unpickle_where_the_module_is_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the module is importable by name (the installed package), LockBusy and
    LockLost unpickle (a pool's worker raises them to its caller) as they were raised."""
    module = load_script("skf_importable")
    monkeypatch.setitem(sys.modules, "skf_importable", module)
    lock = str(tmp_path / "run.lock")
    module.acquire(lock, "wf:a:1", 60.0)
    with pytest.raises(module.LockBusy) as busy:
        module.acquire_within(lock, "wf:b:1", 60.0, 0.1)
    again = pickle.loads(pickle.dumps(busy.value))
    assert type(again) is module.LockBusy
    assert (str(again), again.result) == (str(busy.value), busy.value.result)
    lost = module.LockLost(lock, "wf:c:1", "2026-12-06T10:15:00Z", "taken over: by wf:c:1")
    back = pickle.loads(pickle.dumps(lost))
    assert type(back) is module.LockLost and str(back) == str(lost)
    assert (back.lock, back.held_by, back.held_since) == (lock, "wf:c:1", "2026-12-06T10:15:00Z")
