"""A Redis Cluster through the address of any node: MOVED followed, ASK followed with
ASKING, TRYAGAIN tried again, a slot resharded while a waiter waits, redirects
bounded; proven on a real cluster of three primaries the tests start."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType

import pytest
from calls import Run, needs_system_tool
from redis.crc import key_slot
from servers import RedisCluster, redis_keys
from stores import planted_record, shown_time
from waiters import held_with_a_waiter
from wrapped import WrappedStore, wrap_stores


def key_on(cluster: RedisCluster, node: int, name: str) -> str:
    """A fresh key named after ``name`` whose slot ``node`` serves."""
    while True:
        key = f"skf-cluster/{name}/{os.urandom(4).hex()}"
        if cluster.node_of(key) == node:
            return key


def held_on_nodes(cluster: RedisCluster, key: str) -> list[int]:
    """The nodes that hold ``key`` itself, as each node's own keys of its slot say (a
    node that does not serve the slot answers a plain EXISTS with MOVED)."""
    slot = key_slot(key.encode())
    return [
        i
        for i, node in enumerate(cluster.nodes)
        if key.encode() in node.client().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    ]


def run_printing_inside(cli: Callable[..., Run], lock: str, *options: str) -> Run:
    """``run`` as wf:sk:runner, with ``options``, of a command that prints "inside"."""
    command = [sys.executable, "-c", "print('inside')"]
    return cli("run", "--lock", lock, "--owner", "wf:sk:runner", *options, "--", *command)


def test_every_command_works_through_one_node_for_keys_on_every_node(
    cli: Callable[..., Run], redis_cluster: RedisCluster
) -> None:
    for node in range(3):
        key = key_on(redis_cluster, node, "every")
        for through in range(3):
            lock = redis_cluster.url(key, node=through)
            owner = f"wf:sk:{through}"
            taken = cli("acquire", "--lock", lock, "--owner", owner)
            assert taken.code == 0 and taken.json["acquired"], taken.err
            assert held_on_nodes(redis_cluster, key) == [node]
            assert cli("acquire", "--lock", lock, "--owner", owner).json["refreshed"]
            refused = cli("acquire", "--lock", lock, "--owner", "wf:sk:other")
            assert refused.code == 3 and refused.json["held_by"] == owner
            status = cli("status", "--lock", lock)
            assert (status.code, status.json["held_by"]) == (3, owner)
            ran = run_printing_inside(cli, lock, "--wait", "0")
            assert ran.code == 3  # held by owner
            assert cli("release", "--lock", lock, "--owner", owner).json["released"]
            assert redis_keys(lock) == []
            ran = run_printing_inside(cli, lock)
            assert (ran.code, ran.out) == (0, "inside\n"), ran.err
            assert redis_keys(lock) == []


def test_the_clearing_command_follows_the_cluster_as_printed(
    cli: Callable[..., Run], redis_cluster: RedisCluster
) -> None:
    redis_cli = needs_system_tool("redis-cli", "Debian: apt-get install redis-tools")
    key = key_on(redis_cluster, 2, "clearing")
    lock = redis_cluster.url(key, node=0)
    redis_cluster.nodes[2].client().set(key, b"written by some other tool")
    refused = cli("acquire", "--lock", lock, "--owner", "wf:sk:me")
    assert refused.code == 3
    command = refused.json["message"].split("(redis-cli", 1)[1].rsplit(")", 1)[0]
    done = subprocess.run(
        [redis_cli, *shlex.split(command)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "1", done
    assert held_on_nodes(redis_cluster, key) == []


def test_a_waiter_is_served_when_its_lock_moves_to_another_node_mid_wait(
    cli: Callable[..., Run], own_cluster: RedisCluster
) -> None:
    """The holder and a waiter (blocked on its bell) on node 1; the slot is resharded
    to node 2, half-moved for a while; the holder releases through node 0's address:
    the waiter takes the lock on node 2, and nothing is left anywhere after, but for a
    moment: a waiter that looked while its place's key was between nodes took a new
    place, and the old one, moved after, lapses as a dead waiter's does (3 s)."""
    key = key_on(own_cluster, 1, "moving")
    lock = own_cluster.url(key, node=0)
    waiter = held_with_a_waiter(cli, lock)
    try:
        own_cluster.move_slot(key_slot(key.encode()), 2, between=lambda: time.sleep(0.5))
        assert held_on_nodes(own_cluster, key) == [2]
        # In line on node 2: at once, or once a waiter that looked while its place was
        # between nodes has taken a new place there.
        deadline = time.monotonic() + 50  # CI's loaded lanes took over 30 s once
        while [w["owner"] for w in cli("status", "--lock", lock).json["waiting"]] != [
            "wf:waiter:1"
        ]:
            assert time.monotonic() < deadline, "the waiter never stood in line on node 2"
            time.sleep(0.1)
        assert cli("release", "--lock", lock, "--owner", "wf:holder:1").json["released"]
        out, err = waiter.communicate(timeout=60)
    finally:
        waiter.kill()
        waiter.communicate()
    answer = Run(waiter.returncode, out, err)
    assert answer.code == 0, err
    assert (answer.json["acquired"], answer.json["held_by"]) == (True, answer.json["owner"])
    assert held_on_nodes(own_cluster, key) == [2]
    owner = answer.json["owner"]
    assert cli("release", "--lock", lock, "--owner", owner).json["released"]
    deadline = time.monotonic() + 5
    while redis_keys(lock) != []:
        assert time.monotonic() < deadline, redis_keys(lock)
        time.sleep(0.1)


def test_a_lock_whose_keys_were_moved_but_not_its_slot_is_served_by_ask(
    cli: Callable[..., Run], own_cluster: RedisCluster
) -> None:
    """Mid-migration, the keys already on the importing node: each command follows
    the ASK there (with ASKING) and works. A new take there writes keys that node
    does not hold yet, which Redis answers TRYAGAIN until the slot is its own: it
    goes through once the move ends."""
    key = key_on(own_cluster, 0, "asked")
    lock = own_cluster.url(key, node=0)
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:first").code == 0
    slot = key_slot(key.encode())
    source, target, _ = own_cluster.start_moving(slot, 1)
    own_cluster.move_keys(slot, source, target)
    assert held_on_nodes(own_cluster, key) == [1]
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:first").json["refreshed"]
    assert cli("status", "--lock", lock).json["held_by"] == "wf:sk:first"
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:other").code == 3
    assert cli("release", "--lock", lock, "--owner", "wf:sk:first").json["released"]
    assert held_on_nodes(own_cluster, key) == []
    finisher = threading.Timer(0.5, own_cluster.move_slot, (slot, 1))
    finisher.start()
    try:
        taken = cli("acquire", "--lock", lock, "--owner", "wf:sk:second")
    finally:
        finisher.join(timeout=30)
    assert taken.code == 0, taken.err
    assert held_on_nodes(own_cluster, key) == [1]
    assert cli("release", "--lock", lock, "--owner", taken.json["owner"]).json["released"]
    assert redis_keys(lock) == []


def test_a_change_over_keys_split_mid_migration_is_tried_again_until_it_can_run(
    skf: ModuleType, own_cluster: RedisCluster
) -> None:
    """The record moved, the last holder's key not yet: the transaction over both is
    TRYAGAIN on the importing node, never run without its WATCH; once the move
    finishes the renewal goes through."""
    key = key_on(own_cluster, 0, "split")
    lock = own_cluster.url(key, node=0)
    assert skf.acquire(lock, "wf:sk:r1", 600.0)["acquired"]
    slot = key_slot(key.encode())
    source, target, _ = own_cluster.start_moving(slot, 1)
    source.client().execute_command("MIGRATE", "127.0.0.1", target.port, key, 0, 5000)
    assert held_on_nodes(own_cluster, key) == [1]

    def finish() -> None:
        time.sleep(0.3)
        own_cluster.move_slot(slot, 1)

    finisher = threading.Thread(target=finish)
    finisher.start()
    try:
        renewed = skf.acquire(lock, "wf:sk:r1", 600.0)
    finally:
        finisher.join(timeout=30)
    assert (renewed["acquired"], renewed["refreshed"]) == (True, True)
    assert held_on_nodes(own_cluster, key) == [1]
    assert held_on_nodes(own_cluster, "{" + key + "}\0last") == [1]


def test_redirects_without_end_are_cut_short_with_exit_2(
    cli: Callable[..., Run], own_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot marked migrating on its node but not importing on the other: they send
    the call back and forth; it gives up after a few redirects, well within its
    deadline, saying why."""
    key = key_on(own_cluster, 0, "looping")
    slot = key_slot(key.encode())
    target_id = own_cluster.nodes[1].client().execute_command("CLUSTER", "MYID")
    own_cluster.nodes[0].client().execute_command(
        "CLUSTER", "SETSLOT", slot, "MIGRATING", target_id
    )
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "30")
    started = time.monotonic()
    outcome = cli("acquire", "--lock", own_cluster.url(key), "--owner", "wf:sk:r")
    assert time.monotonic() - started < 15
    assert outcome.code == 2
    assert "more than 5 times" in outcome.error
    assert held_on_nodes(own_cluster, key) == []


def test_list_by_any_node_shows_the_locks_of_every_node(
    cli: Callable[..., Run], redis_cluster: RedisCluster
) -> None:
    root = f"skf-cluster/list/{os.urandom(4).hex()}/"
    keys = []
    for node in range(3):
        while redis_cluster.node_of(key := root + os.urandom(3).hex()) != node:
            pass
        keys.append(key)
        assert cli("acquire", "--lock", redis_cluster.url(key), "--owner", "wf:sk:r").code == 0
    for through in range(3):
        run = cli("list", "--under", redis_cluster.url(root, node=through))
        assert run.code == 0, run.err
        shown = [entry["lock"] for entry in run.json["locks"]]
        assert shown == sorted(redis_cluster.url(k, node=through) for k in keys)


def test_a_change_redirected_after_its_read_is_never_sent_on_without_its_watch(
    skf: ModuleType, own_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a take reads a stale lock, its slot moves to another node and a
    contender takes the lock there: the take's transaction, redirected, must not run
    on the new node (its WATCH stayed on the old one); it reads again and is refused."""
    key = key_on(own_cluster, 0, "watched")
    lock = own_cluster.url(key)
    stale = planted_record("wf:sk:old", shown_time(7200), stale_after_seconds=60)
    own_cluster.nodes[0].client().set(key, stale)
    moved: list[bool] = []
    contender: dict[str, object] = {}

    class MovedAfterRead(WrappedStore):
        def read(self, line: bool = True) -> object:
            look = self.real.read(line)
            if not moved:
                moved.append(True)  # once: the contender's own read comes here too
                own_cluster.move_slot(key_slot(key.encode()), 2)
                contender.update(skf.acquire(own_cluster.url(key, node=2), "wf:sk:other", 3600.0))
            return look

    wrap_stores(skf, monkeypatch, MovedAfterRead)
    mine = skf.acquire(lock, "wf:sk:me", 3600.0)
    assert contender["acquired"]
    assert (mine["acquired"], mine["held_by"]) == (False, "wf:sk:other")
    assert held_on_nodes(own_cluster, key) == [2]
