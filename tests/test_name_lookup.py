"""Every wait on the network is cut to the call's deadline, the name lookup included.

A holder (``run``, ``held()``, ``serve``: a real process, tests/stalled_names.py) holds
a lock at NAME:PORT of a real server (etcd, Redis, a Redis Cluster's node) for 12 s;
then its resolver goes silent for 30 s (its ``socket.getaddrinfo`` stalls for NAME),
while another caller, connected directly, tries to take the lock until it does. The
work must be stopped (run's command gone, held()'s ``with`` statement ended, serve's
hold told lost) before that take, the message must say how long it waited for the
name, the one lookup under way must serve every later try, and the other caller's hold
must be left as it took it: nothing the holder sent later changed it.

In the test process itself: one lookup serves every call that needs the name at once,
its answer is used again for a while and forgotten once its address fails, and a
call waits for a lookup no longer than its deadline.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Started, posix_only, reaped
from conftest import key_of_its_own
from sessions import Served
from stalled_names import STALL_SEC
from takers import COMMAND, Taker, each_holds, side_by_side

NAME = "stalled-resolver.invalid"
CHILD = Path(__file__).with_name("stalled_names.py")
SERVERS = ["etcd", "redis", "cluster"]
# How a message says it waited for the name, and how long.
WAITED = re.compile(rf"no answer to the name lookup of {re.escape(NAME)} in \d+\.\d s")


def lock_on(server: str, request: pytest.FixtureRequest) -> tuple[str, str]:
    """A lock of its own on the session's ``server``: its address, and the same at
    NAME. A Cluster's lock is at its first node, its keys served by another (the
    holder is redirected from NAME to a node's own address)."""
    if server == "etcd":
        direct = request.getfixturevalue("etcd").url(key_of_its_own(request))
    elif server == "redis":
        direct = request.getfixturevalue("redis").url(key_of_its_own(request))
    else:
        cluster = request.getfixturevalue("redis_cluster")
        key = key_of_its_own(request)
        while cluster.node_of("{" + key + "}") == 0:
            key = key_of_its_own(request)
        direct = cluster.url(key)
    return direct, direct.replace("127.0.0.1", NAME)


@dataclass
class Ended:
    """What a holder whose resolver went silent left: how it ended (an exit code and
    its stderr, or held()'s report), when its work last ran and was told or stopped,
    the lookups of NAME it made, the taker, and the lock as left at the end."""

    said: str  # its message of the loss (run's stderr)
    last_work: float  # run's command's last marker, held()'s block's last step
    stopped: float | None  # run's command's SIGTERM (None: none came), held()'s exit
    lookups: list[dict[str, Any]]
    taker: Taker
    left: dict[str, Any]  # status of the lock once the holder ended
    code: int | None = None  # run's exit code


def lookups_in(log: Path) -> list[dict[str, Any]]:
    """The lookups of NAME a holder logged: one entry each, ``stalls`` and, once it
    answered, ``answered``."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    began = {e["began"]: e for e in entries if "stalls" in e}
    for entry in entries:
        if "answered" in entry:
            began[entry["began"]]["answered"] = entry["answered"]
    return list(began.values())


def started_child(
    folder: Path, mode: list[str], started: list[Started]
) -> tuple[subprocess.Popen[str], Path, Path]:
    """tests/stalled_names.py in ``folder`` as ``mode`` (run's or held's arguments),
    once its work runs (``folder/marker``): the process, its trigger and its log."""
    trigger, log = folder / "silent", folder / "lookups"
    log.touch()
    child = subprocess.Popen(
        [sys.executable, str(CHILD), NAME, str(trigger), str(log), *mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(child)
    while not (folder / "marker").exists():
        assert child.poll() is None, child.communicate()
        time.sleep(0.01)
    return child, trigger, log


def run_unresolved(skf: ModuleType, lock: tuple[str, str], folder: Path) -> Ended:
    """``run`` holding ``lock`` at NAME, its resolver silent once its command runs."""
    direct, through = lock
    folder.mkdir()
    argv = ["run", "--lock", through, "--owner", "wf:run", "--stale-after", "12s", "--"]
    with reaped() as started:
        child, trigger, log = started_child(
            folder, [*argv, sys.executable, "-c", COMMAND, str(folder)], started
        )
        trigger.touch()
        taker = Taker(skf, direct, watched=int((folder / "pid").read_text()))
        taker.join()
        _, err = child.communicate(timeout=60)
    exited = folder / "exited"  # written on SIGTERM
    return Ended(
        err,
        float((folder / "marker").read_text()),
        float(exited.read_text()) if exited.exists() else None,
        lookups_in(log),
        taker,
        skf.status(direct, 60.0),
        child.returncode,
    )


def held_unresolved(skf: ModuleType, lock: tuple[str, str], folder: Path) -> Ended:
    """``held()`` holding ``lock`` at NAME, its resolver silent once its block runs."""
    direct, through = lock
    folder.mkdir()
    with reaped() as started:
        child, trigger, log = started_child(folder, ["held", through, str(folder)], started)
        trigger.touch()
        taker = Taker(skf, direct)
        taker.join()
        _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    ended = json.loads((folder / "ended.json").read_text())
    assert ended["told"] <= ended["left"], ended
    return Ended(
        ended["lost"],
        float((folder / "marker").read_text()),
        ended["left"],
        lookups_in(log),
        taker,
        skf.status(direct, 60.0),
    )


def left_to_the_taker(skf: ModuleType, ended: Ended) -> None:
    """The lock is the taker's hold as it took it: the holder sent nothing that
    changed it afterwards."""
    taken = ended.taker.taken
    assert taken is not None
    assert [h["owner"] for h in ended.left["holders"]] == [taken["owner"]], ended.left
    assert ended.left["fence"] == skf.fence_of(taken), ended.left


def one_lookup_waited_for(lookups: list[dict[str, Any]]) -> None:
    """The resolver was asked once while it was silent: every later try waited for
    that lookup, none started another."""
    stalled = [lookup for lookup in lookups if lookup["stalls"]]
    assert len(stalled) == 1, lookups


@pytest.mark.timeout(120)
@posix_only("SIGTERM handled by the command, which records when it ended")
@pytest.mark.parametrize("server", SERVERS)
def test_run_and_held_stop_their_work_when_the_name_lookup_stalls(
    skf: ModuleType, request: pytest.FixtureRequest, tmp_path: Path, server: str
) -> None:
    """run's command is stopped, and held()'s with statement has ended, before another
    caller takes the lock (side by side); each says it waited for the name and how
    long; each asked the silent resolver once; the other caller's hold is left as it
    took it."""
    cases: dict[str, Callable[[], Ended]] = {
        "run": functools.partial(run_unresolved, skf, lock_on(server, request), tmp_path / "run"),
        "held()": functools.partial(
            held_unresolved, skf, lock_on(server, request), tmp_path / "held"
        ),
    }
    ended = side_by_side(cases)

    def check(name: str, outcome: Ended) -> None:
        taker = outcome.taker
        assert taker.began is not None, "the lock was never taken directly"
        # run's command gets SIGTERM, then SIGKILL at the end of the hold's grace (2 s
        # of a 12 s hold, less what the renewal overran): on a loaded machine its
        # handler may not run in time. Either way it stopped before the take (that
        # SIGTERM comes first is test_run.py's to prove).
        assert outcome.stopped is not None or name == "run", "held() never ended"
        stopped = outcome.stopped if outcome.stopped is not None else outcome.last_work
        assert outcome.last_work <= stopped < taker.began, "worked on after the take"
        if name == "run":
            assert taker.command_alive is False, "the command's process outlived the hold"
            assert outcome.code == 3, outcome.said  # the lock was lost: the command stopped
        assert "renewals failed" in outcome.said and WAITED.search(outcome.said), outcome.said
        one_lookup_waited_for(outcome.lookups)
        left_to_the_taker(skf, outcome)

    each_holds(ended, check)


@pytest.mark.timeout(120)
@posix_only("sessions ended by POSIX signals; the Windows lane installs no MCP SDK")
@pytest.mark.parametrize("server", SERVERS)
def test_serve_tells_a_hold_lost_in_time_when_the_name_lookup_stalls(
    skf: ModuleType,
    serving: Callable[..., Served],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    server: str,
) -> None:
    """A session's hold at NAME whose resolver goes silent is told lost (by the holds
    tool) before another caller takes the lock, saying it waited for the name and how
    long; the silent resolver was asked once; the other caller's hold is left as it
    took it, through the end of the session."""
    direct, through = lock_on(server, request)
    trigger, log = tmp_path / "silent", tmp_path / "lookups"
    log.touch()
    served = serving(
        argv=[sys.executable, str(CHILD), NAME, str(trigger), str(log), "serve", "--lease", "12s"]
    )
    served.initialize()
    assert served.tool("acquire", lock=through, owner="wf:session")["acquired"] is True
    trigger.touch()
    taker = Taker(skf, direct)
    until = time.monotonic() + STALL_SEC + 30
    while True:
        [view] = served.tool("holds")["holds"]
        if view["state"] != "held":
            seen_lost = time.time()
            break
        assert time.monotonic() < until, "the loss was never told"
        time.sleep(0.1)
    taker.join()
    assert taker.began is not None, "the lock was never taken directly"
    assert view["state"] == "lost" and seen_lost < taker.began, view
    assert WAITED.search(view["message"]), view
    served.end_input()
    assert served.exit_code() == 0, served.err()
    one_lookup_waited_for(lookups_in(log))
    taken = taker.taken
    assert taken is not None
    status = skf.status(direct, 60.0)
    assert [h["owner"] for h in status["holders"]] == [taken["owner"]], status
    assert status["fence"] == skf.fence_of(taken), status


# --- In this process: the lookups themselves


class Resolver:
    """``socket.getaddrinfo`` for one name (any other as the system answers it): each
    lookup counted, answered with ``address`` once ``answering`` is set (at once
    unless a test clears it), or failing with ``failure``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.name = f"lookup-{os.urandom(4).hex()}.invalid"
        self.address = "127.0.0.1"
        self.failure: OSError | None = None
        self.answering = threading.Event()
        self.answering.set()
        self.count = 0
        real = socket.getaddrinfo

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if host != self.name:
                return real(host, port, *args, **kwargs)
            self.count += 1
            self.answering.wait(30)
            if self.failure is not None:
                raise self.failure
            return real(self.address, port, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resolver]:
    fake = Resolver(monkeypatch)
    yield fake
    fake.answering.set()  # no lookup left waiting


@pytest.mark.timeout(60)
def test_one_lookup_serves_every_call_at_once_and_its_answer_is_kept_until_it_fails(
    skf: ModuleType,
    redis: Any,
    request: pytest.FixtureRequest,
    resolver: Resolver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight calls at once that need a name wait for one lookup; its answer serves the
    calls after it without asking again, for as long as it is kept (a minute; here
    shortened); an answer whose address fails is forgotten, and the name looked up
    anew at once. (Each call connects anew: none is kept.)"""
    monkeypatch.setattr(skf._SEAMS, "kept_idle_sec", 0.0)
    lock = redis.url(key_of_its_own(request)).replace("127.0.0.1", resolver.name)
    resolver.answering.clear()
    states: list[str] = []
    calls = [
        threading.Thread(target=lambda: states.append(skf.status(lock, 60.0)["state"]))
        for _ in range(8)
    ]
    for call in calls:
        call.start()
    time.sleep(1)  # each call is waiting for the name by now (one late finds it known)
    resolver.answering.set()
    for call in calls:
        call.join(timeout=30)
    assert states == ["free"] * 8 and resolver.count == 1
    for _ in range(3):
        assert skf.status(lock, 60.0)["state"] == "free"
    assert resolver.count == 1  # the answer kept

    monkeypatch.setattr(skf._SEAMS, "name_kept_sec", 0.0)
    assert skf.status(lock, 60.0)["state"] == "free"
    assert resolver.count == 2  # no longer kept: looked up anew

    # The name moves: its answer kept (127.0.0.2, where nothing listens) fails at once,
    # and the next try, 50 ms later, looks it up anew and finds the server.
    resolver.address = "127.0.0.2"
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "0.5")
    with pytest.raises(OSError, match="Connection refused"):
        skf.status(lock, 60.0)
    monkeypatch.setattr(skf._SEAMS, "name_kept_sec", 60.0)
    resolver.address = "127.0.0.1"
    count = resolver.count
    assert skf.status(lock, 60.0)["state"] == "free"
    assert resolver.count == count + 1


@pytest.mark.timeout(60)
def test_a_call_waits_for_a_lookup_no_longer_than_its_deadline(
    skf: ModuleType,
    redis: Any,
    request: pytest.FixtureRequest,
    resolver: Resolver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lookup that does not answer ends each call that waits for it at the call's
    deadline, saying so and how long it waited; it goes on, and once it answers the
    next call uses its answer without asking again. A name that is not found says so.
    (Each call connects anew: none is kept.)"""
    monkeypatch.setattr(skf._SEAMS, "kept_idle_sec", 0.0)
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "0.5")
    lock = redis.url(key_of_its_own(request)).replace("127.0.0.1", resolver.name)
    resolver.answering.clear()
    waited = f"no answer to the name lookup of {resolver.name} in 0.5 s"
    for _ in range(2):
        with pytest.raises(OSError) as unreachable:
            skf.status(lock, 60.0)
        message = str(unreachable.value)
        assert "Redis could not be reached within 0.5 s (SKF_REDIS_TIMEOUT)" in message
        assert waited in message, message
    assert resolver.count == 1  # the second call waited for the first call's lookup
    resolver.answering.set()
    deadline = time.monotonic() + 10
    while skf.status(lock, 60.0)["state"] != "free":
        assert time.monotonic() < deadline
    assert resolver.count == 1

    monkeypatch.setattr(skf._SEAMS, "name_kept_sec", 0.0)
    resolver.failure = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    with pytest.raises(OSError, match=f"the name {resolver.name} was not found: Name or"):
        skf.status(lock, 60.0)
