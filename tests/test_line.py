"""Waiting in line: first come, first served on every store, proven with real processes.

Every test runs on a file, on a real etcd and on a real Redis (``any_lock``). Waiters are real
processes: the CLI (``acquire --wait``, ``run --wait``), and library callers
(``acquire_within``, ``held(wait=...)``) in tests/worker.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import WORKER, Run, Started, posix_only, reaped, root_only
from loader import ROOT, SCRIPT
from signals import INTERRUPTING, freeze_outside_the_guard
from stores import left_behind
from test_acquire import ACQUIRE_KEYS
from waiters import joined, waiter_thread
from wrapped import WrappedStore, wrap_stores

APPEND = "import sys; open(sys.argv[1], 'a').write(sys.argv[2] + chr(10))"


@pytest.fixture
def procs() -> Iterator[Callable[..., Started]]:
    """Start a process (the CLI with ``cli``, else the worker); all are killed at the end."""
    with reaped() as started:

        def start(
            *argv: str | os.PathLike[str], cli: bool = True, env: dict[str, str] | None = None
        ) -> subprocess.Popen[str]:
            program = SCRIPT if cli else WORKER
            proc = subprocess.Popen(
                [sys.executable, str(program), *map(str, argv)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            started.append(proc)
            return proc

        yield start


def wait_for(what: str, check: Callable[[], bool], seconds: float = 30.0) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def in_line(skf: ModuleType, lock: str) -> list[str]:
    return [waiter["owner"] for waiter in skf.status(lock, 60.0)["waiting"]]


def standing(skf: ModuleType, lock: str, count: int) -> Callable[[], bool]:
    """A check that ``count`` waiters stand in ``lock``'s line."""
    return lambda: len(in_line(skf, lock)) == count


def finished(proc: Started, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.wait(), out, err


def took_it_last(skf: ModuleType, waiter: Started, lock: str, owner: str) -> None:
    """The waiter ``owner`` ends holding ``lock``; its release leaves nothing behind but,
    for a moment, a bell rung for a place the waiter had left (it lapses in 3 s, as a
    place does: a loaded CI's Cluster lane saw one)."""
    code, out, _ = finished(waiter)
    assert code == 0 and json.loads(out)["owner"] == owner
    assert skf.release(lock, owner)["released"]
    deadline = time.monotonic() + 5
    while (left := left_behind(lock)) != []:
        assert time.monotonic() < deadline and all("\0wake\0" in key for key in left), left
        time.sleep(0.1)


def run_appending(lock: str, owner: str, log: Path, name: str) -> list[str]:
    """The CLI's run --wait, holding the lock while it appends ``name`` to ``log``."""
    return [
        "run",
        "--lock",
        lock,
        "--owner",
        owner,
        "--wait",
        "120",
        "--stale-after",
        "1",
        "--",
        sys.executable,
        "-c",
        APPEND,
        str(log),
        name,
    ]


# --- Who goes first --------------------------------------------------------------------


def test_five_waiters_of_every_kind_are_served_in_the_order_they_came(
    skf: ModuleType, any_lock: str, tmp_path: Path, procs: Callable[..., Started]
) -> None:
    """run --wait, held(wait=...), acquire_within and acquire --wait, each arriving once
    the one before is in line: status lists them in that order, and they hold the
    lock in that order. Renewing the lock is never held up by the line."""
    log = tmp_path / "order"
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    arrivals: list[tuple[str, Sequence[str | Path], bool]] = [
        ("run", run_appending(any_lock, "wf:run:1", log, "run"), True),
        ("held", ["held-append", any_lock, "wf:held:1", log, "held"], False),
        ("within", ["within-append", any_lock, "wf:within:1", log, "within"], False),
        ("cli", ["cli-append", any_lock, "wf:cli:1", log, "cli"], False),
        ("run2", run_appending(any_lock, "wf:run2:1", log, "run2"), True),
    ]
    started = []
    for count, (name, argv, cli) in enumerate(arrivals, 1):
        started.append(procs(*argv, cli=cli))
        wait_for(f"{name} in line", standing(skf, any_lock, count))
    waiting = skf.status(any_lock, 60.0)["waiting"]
    assert [w["owner"] for w in waiting] == [
        "wf:run:1",
        "wf:held:1",
        "wf:within:1",
        "wf:cli:1",
        "wf:run2:1",
    ]
    assert [w["since"] for w in waiting] == sorted(w["since"] for w in waiting)
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["refreshed"] is True
    assert skf.release(any_lock, "wf:holder:1")["released"]
    for proc in started:
        code, _, err = finished(proc)
        assert code == 0, err
    assert log.read_text().split() == ["run", "held", "within", "cli", "run2"]
    assert left_behind(any_lock) == []


def test_a_stale_lock_goes_to_the_first_in_line(
    skf: ModuleType, any_lock: str, procs: Callable[..., Started]
) -> None:
    # Never released; it must outlast two waiters' start (half a second each under Wine).
    crashed_timeout = 6.0 if sys.platform == "win32" else 2.0
    assert skf.acquire(any_lock, "wf:crashed:1", crashed_timeout)["acquired"]
    first = procs("acquire", "--lock", any_lock, "--owner", "wf:first:1", "--wait", "120")
    wait_for("first in line", lambda: in_line(skf, any_lock) == ["wf:first:1"])
    second = procs("acquire", "--lock", any_lock, "--owner", "wf:second:1", "--wait", "120")
    wait_for("second in line", lambda: len(in_line(skf, any_lock)) == 2)
    code, out, _ = finished(first)
    taken = json.loads(out)
    assert code == 0 and taken["stale_replaced"]["held_by"] == "wf:crashed:1"
    assert second.poll() is None and in_line(skf, any_lock) == ["wf:second:1"]
    assert skf.release(any_lock, "wf:first:1")["released"]
    took_it_last(skf, second, any_lock, "wf:second:1")


def test_a_waiter_keeps_its_place_through_a_long_wait(
    skf: ModuleType, any_lock: str, procs: Callable[..., Started]
) -> None:
    """Past several lapse times, the first waiter is still first with its first place
    (it shows it is alive as it waits)."""
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    first = procs("acquire", "--lock", any_lock, "--owner", "wf:first:1", "--wait", "120")
    wait_for("first in line", lambda: in_line(skf, any_lock) == ["wf:first:1"])
    (place,) = skf.status(any_lock, 60.0)["waiting"]
    time.sleep(skf._SEAMS.place_ttl_sec * 2.5)
    procs("acquire", "--lock", any_lock, "--owner", "wf:second:1", "--wait", "120")
    wait_for("second in line", lambda: len(in_line(skf, any_lock)) == 2)
    assert skf.status(any_lock, 60.0)["waiting"][0] == place
    assert skf.release(any_lock, "wf:holder:1")["released"]
    code, out, _ = finished(first)
    assert code == 0 and json.loads(out)["owner"] == "wf:first:1"


@posix_only("a pseudo-terminal")
def test_a_waiter_on_a_terminal_says_its_place_in_line(
    skf: ModuleType, any_lock: str, procs: Callable[..., Started]
) -> None:
    import pty

    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    procs("acquire", "--lock", any_lock, "--owner", "wf:first:1", "--wait", "120")
    wait_for("first in line", lambda: in_line(skf, any_lock) == ["wf:first:1"])
    master, slave = pty.openpty()
    argv = [
        sys.executable,
        str(SCRIPT),
        "acquire",
        "--lock",
        any_lock,
        "--owner",
        "wf:me",
        "--wait",
        "1.5",
    ]
    second = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            piece = os.read(master, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not piece:
            break
        shown += piece
    second.communicate(timeout=60)
    os.close(master)
    lines = [line for line in shown.decode().split("\x1b[K") if line.strip("\r")]
    assert lines and all(
        line.startswith("\rwaiting, 2nd in line: held by wf:holder:1 since ") for line in lines
    ), lines


# --- No jumping the line -----------------------------------------------------------------


def test_a_beat_costs_a_waiter_no_look_of_its_own(
    skf: ModuleType, any_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter keeps its place alive every second; a beat changes nothing its look
    saw, so a long wait costs one look a beat (64 waiters each looking twice a second
    kept etcd busy), not a look before the beat and another after it."""
    looks: list[int] = []
    beats: list[int] = []

    class Counted(WrappedStore):
        def look(self, upto: str | None = None) -> object:
            looks.append(1)
            return self.real.look(upto)

        def beat(self, place: object) -> bool:
            beats.append(1)
            return bool(self.real.beat(place))

    wrap_stores(skf, monkeypatch, Counted)
    skf.acquire(any_lock, "wf:holder:1", 600.0)
    with pytest.raises(skf.LockBusy):
        skf.acquire_within(any_lock, "wf:waiter:1", 600.0, 4.5)
    assert len(beats) >= 2
    assert len(looks) <= len(beats) + 1


def test_a_refusal_counts_the_runs_in_line_and_keeps_its_keys(
    skf: ModuleType,
    any_lock: str,
    procs: Callable[..., Started],
    cli: Callable[..., Run],
) -> None:
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    for n in (1, 2):
        procs("acquire", "--lock", any_lock, "--owner", f"wf:w{n}:1", "--wait", "120")
        wait_for(f"waiter {n} in line", standing(skf, any_lock, n))
    refused = cli("acquire", "--lock", any_lock, "--owner", "wf:late:1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert refused.json["held_by"] == "wf:holder:1"
    message = refused.json["message"]
    assert "; 2 runs wait in line, wf:w1:1 first. " in message and "stale" in message
    assert message.endswith("--owner wf:holder:1")  # the clear-it advice still ends it
    status = cli("status", "--lock", any_lock)
    assert status.code == 3 and "2 runs wait in line, wf:w1:1 first" in status.json["message"]


@posix_only("SIGSTOP")
def test_a_frozen_waiter_keeps_its_place_until_it_lapses(
    skf: ModuleType,
    any_lock: str,
    procs: Callable[..., Started],
    cli: Callable[..., Run],
) -> None:
    """A call that does not wait is refused, naming the first in line, while that
    waiter is frozen; within 5 s its place lapses and the call is granted. Woken, the
    frozen waiter takes a new place at the end of the line."""
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    frozen = procs("acquire", "--lock", any_lock, "--owner", "wf:frozen:1", "--wait", "120")
    wait_for("the waiter in line", lambda: in_line(skf, any_lock) == ["wf:frozen:1"])
    freeze_outside_the_guard(frozen.pid, any_lock)
    stopped = time.monotonic()
    assert skf.release(any_lock, "wf:holder:1")["released"]
    refused = cli("acquire", "--lock", any_lock, "--owner", "wf:barger:1")
    assert refused.code == 3 and list(refused.json) == ACQUIRE_KEYS
    assert (refused.json["acquired"], refused.json["held_by"]) == (False, "wf:frozen:1")
    assert "wf:frozen:1" in refused.json["message"] and "free" in refused.json["message"]
    status = skf.status(any_lock, 60.0)
    assert status["state"] == "free" and in_line(skf, any_lock) == ["wf:frozen:1"]
    while not (taken := skf.acquire(any_lock, "wf:barger:1", 600.0))["acquired"]:
        assert time.monotonic() - stopped < 5.0, "the frozen waiter kept its place past 5 s"
        time.sleep(0.05)
    assert taken["held_by"] == "wf:barger:1" and in_line(skf, any_lock) == []
    os.kill(frozen.pid, signal.SIGCONT)
    wait_for("the woken waiter back in line", lambda: in_line(skf, any_lock) == ["wf:frozen:1"])
    assert skf.release(any_lock, "wf:barger:1")["released"]
    took_it_last(skf, frozen, any_lock, "wf:frozen:1")


def test_killed_waiters_are_skipped_and_leave_nothing_behind(
    skf: ModuleType, any_lock: str, tmp_path: Path, procs: Callable[..., Started]
) -> None:
    log = tmp_path / "order"
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    waiters = []
    for n, name in enumerate(["a", "b", "c", "d"], 1):
        waiters.append(procs(*run_appending(any_lock, f"wf:{name}:1", log, name)))
        wait_for(f"{name} in line", standing(skf, any_lock, n))
    for killed in (waiters[0], waiters[2]):
        killed.kill()
        killed.wait()
    assert skf.release(any_lock, "wf:holder:1")["released"]
    for alive in (waiters[1], waiters[3]):
        code, _, err = finished(alive)
        assert code == 0, err
    assert log.read_text().split() == ["b", "d"]
    wait_for("the killed waiters' places gone", lambda: left_behind(any_lock) == [], 10)


def test_a_killed_waiters_place_is_removed_by_the_next_refused_acquire(
    skf: ModuleType,
    any_lock: str,
    cli: Callable[..., Run],
    procs: Callable[..., Started],
) -> None:
    """``acquire --wait`` killed with SIGKILL leaves its place (a file lock's line file,
    LOCK.skf-line); once it has lapsed, a refused acquire removes it, so that only the
    lock is left, as after any call."""
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    held_alone = left_behind(any_lock)
    waiter = procs("acquire", "--lock", any_lock, "--owner", "wf:w:1", "--wait", "120")
    wait_for("the waiter in line", lambda: in_line(skf, any_lock) == ["wf:w:1"])
    if "://" not in any_lock:
        assert os.path.exists(any_lock + ".skf-line")
    waiter.kill()
    waiter.wait()
    wait_for("its place lapsed", lambda: in_line(skf, any_lock) == [], 15)
    if "://" not in any_lock:  # a server ends the place's key itself, in time
        # (and the waiter, killed in a beat, may have left its guard file too)
        assert os.path.basename(any_lock) + ".skf-line" in left_behind(any_lock)
    # A server may end the place's own key a moment late (an etcd lease): a file must
    # need one call, a server a few at most.
    deadline = time.monotonic() + (0 if "://" not in any_lock else 10)
    while True:
        refused = cli("acquire", "--lock", any_lock, "--owner", "wf:other:1")
        assert (refused.code, refused.json["held_by"]) == (3, "wf:holder:1"), refused
        if left_behind(any_lock) == held_alone or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    assert left_behind(any_lock) == held_alone


# --- Leaving the line --------------------------------------------------------------------


@posix_only("SIGTERM and SIGHUP")
@pytest.mark.parametrize("signum", INTERRUPTING)
def test_a_signal_to_a_waiting_call_takes_it_out_of_the_line(
    skf: ModuleType, any_lock: str, procs: Callable[..., Started], signum: int
) -> None:
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    before = left_behind(any_lock)
    waiter = procs("acquire", "--lock", any_lock, "--owner", "wf:w:1", "--wait", "120")
    wait_for("the waiter in line", lambda: in_line(skf, any_lock) == ["wf:w:1"])
    waiter.send_signal(signum)
    code, out, err = finished(waiter)
    assert code == 128 + signum and out == ""
    assert "interrupted" in json.loads(err)["message"]
    assert in_line(skf, any_lock) == [] and left_behind(any_lock) == before


def test_a_wait_that_runs_out_leaves_the_line_at_once(
    skf: ModuleType, any_lock: str, cli: Callable[..., Run]
) -> None:
    assert skf.acquire(any_lock, "wf:holder:1", 600.0)["acquired"]
    before = left_behind(any_lock)
    run = cli("acquire", "--lock", any_lock, "--owner", "wf:w:1", "--wait", "1.5")
    assert run.code == 3 and run.json["held_by"] == "wf:holder:1"
    assert in_line(skf, any_lock) == [] and left_behind(any_lock) == before


# --- A file's line: a join appends its place, a torn line is written anew ---------------


def place_in_line(skf: ModuleType, lock: str, owner: str) -> Any:
    """A place for ``owner`` put in the lock's line through its store, as a waiter of
    another process would, on any store: nobody beats for it, so it stays (on a file,
    with ``no_beats``) until left or until it lapses as a dead waiter's does."""
    opened = skf._store_for(lock)
    place = skf._Place(os.urandom(4).hex(), owner, 0, 60.0, None)
    try:
        with opened.change(create=False) as change:
            change.join(change.read(), place, time.time())
    finally:
        opened.close()
    return place


def leave_file_line(skf: ModuleType, lock: str, place: object) -> None:
    opened = skf._store_for(lock)
    try:
        opened.leave(place)
    finally:
        opened.close()


def place_lines(line: Path) -> list[dict[str, Any]]:
    """The line file's text lines, each as the JSON object it holds (fails on any other)."""
    data = line.read_bytes()
    assert data.endswith(b"\n"), data
    return [json.loads(text) for text in data.decode().splitlines()]


@pytest.mark.usefixtures("no_beats")
def test_a_file_waiter_joins_by_appending_its_place_to_the_line(
    skf: ModuleType, tmp_path: Path
) -> None:
    """The line file is appended to in place (the same file, its old bytes kept), not
    written anew to a temp file and renamed: that held the guard 2-3 times as long."""
    lock = str(tmp_path / "run.lock")
    line = Path(lock + ".skf-line")
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    first = place_in_line(skf, lock, "wf:other:1")
    before, inode = line.read_bytes(), line.stat().st_ino
    thread, outcome = waiter_thread(skf, lock, "wf:waiter:1")
    wait_for("the waiter in line", lambda: len(in_line(skf, lock)) == 2)
    assert line.stat().st_ino == inode
    assert line.read_bytes().startswith(before)
    assert [entry["owner"] for entry in place_lines(line)] == ["wf:other:1", "wf:waiter:1"]
    assert skf.release(lock, "wf:holder:1")["released"]
    leave_file_line(skf, lock, first)
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    assert not line.exists()


# The CLI run with the real user nobody, the effective one still root (as a setuid
# program, or a service that changed only one of them, runs).
AS_REAL_USER_NOBODY = (
    "import os, runpy, sys; os.setreuid(65534, 0); sys.argv = sys.argv[1:];"
    " runpy.run_path(sys.argv[0], run_name='__main__')"
)


@root_only("a process whose real user is another than its effective one")
def test_a_caller_whose_real_user_cannot_search_the_folder_keeps_the_line(
    skf: ModuleType, tmp_path: Path, procs: Callable[..., subprocess.Popen[str]]
) -> None:
    """A caller whose effective user may read a lock's folder but whose real user may
    not sees the line file as any caller does: its status names the waiter, and it joins
    behind that waiter, whom the lock goes to first (asked as the real user, it saw no
    line and wrote one of its own place alone, ahead of everyone)."""
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    lock = str(folder / "run.lock")
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    first = procs("acquire", "--lock", lock, "--owner", "wf:first:1", "--wait", "60")
    wait_for("the first waiter in line", standing(skf, lock, 1))
    odd_cli = [sys.executable, "-c", AS_REAL_USER_NOBODY, str(SCRIPT)]
    seen = subprocess.run(
        [*odd_cli, "status", "--lock", lock],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert seen.returncode == 3, seen.stderr  # held
    assert [w["owner"] for w in json.loads(seen.stdout)["waiting"]] == ["wf:first:1"]
    odd = subprocess.Popen(
        [*odd_cli, "acquire", "--lock", lock, "--owner", "wf:odd:1", "--wait", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for("the odd caller in line", standing(skf, lock, 2))
        assert in_line(skf, lock) == ["wf:first:1", "wf:odd:1"]
        assert skf.release(lock, "wf:holder:1")["released"]
        out, err = first.communicate(timeout=30)
        assert first.returncode == 0, err
        assert json.loads(out)["owner"] == "wf:first:1"
        assert in_line(skf, lock) == ["wf:odd:1"]
        assert skf.release(lock, "wf:first:1")["released"]
        out, err = odd.communicate(timeout=30)
        assert odd.returncode == 0, err
        assert skf.release(lock, "wf:odd:1")["released"]
    finally:
        if odd.poll() is None:
            odd.kill()
            odd.wait(timeout=30)
    assert sorted(os.listdir(folder)) == []


@pytest.mark.usefixtures("no_beats")
@pytest.mark.parametrize(
    "junk",
    [b'{"ticket": "0123abcd", "owner": "wf:cras', b"not a place\n"],
    ids=["half-a-place", "a-line-that-is-no-place"],
)
def test_a_file_line_holding_more_than_places_is_written_anew_at_the_next_join(
    skf: ModuleType, tmp_path: Path, junk: bytes
) -> None:
    """A crash can cut an append short and leave the line ending in half a place, and a
    line file can hold text that is no place. The next join writes the whole line anew,
    without it: appended after half a place, its place would have been glued to it and
    read as no place at all, and appended after a foreign line, that line would stay."""
    lock = str(tmp_path / "run.lock")
    line = Path(lock + ".skf-line")
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    first = place_in_line(skf, lock, "wf:other:1")
    with line.open("ab") as written:
        written.write(junk)
    assert in_line(skf, lock) == ["wf:other:1"]  # the junk is no place
    thread, outcome = waiter_thread(skf, lock, "wf:waiter:1")
    wait_for("the waiter in line", lambda: len(in_line(skf, lock)) == 2)
    assert [entry["owner"] for entry in place_lines(line)] == ["wf:other:1", "wf:waiter:1"]
    assert skf.release(lock, "wf:holder:1")["released"]
    leave_file_line(skf, lock, first)
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"


@posix_only("FIFOs")
def test_a_fifo_in_the_line_files_stead_is_written_over_without_blocking(
    tmp_path: Path, cli: Callable[..., Run]
) -> None:
    """In a real process with a short limit: opening a FIFO to append to it would block
    until someone read it, and fail this test in 20 s. The join writes the line anew,
    which puts a line file in the FIFO's place."""
    lock = tmp_path / "run.lock"
    line = Path(f"{lock}.skf-line")
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    os.mkfifo(line)
    run = cli("acquire", "--lock", lock, "--owner", "wf:waiter:1", "--wait", "1", timeout=20)
    assert run.code == 3 and run.json["acquired"] is False
    assert not line.exists()  # its place written over the FIFO, then left


@pytest.mark.usefixtures("no_beats")
def test_a_place_appended_is_left_however_the_join_is_cut_short(
    skf: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal can land once the append has landed, before the join returns: the call
    still leaves the line on its way out, and the line is as it was before it."""
    lock = str(tmp_path / "run.lock")
    line = Path(lock + ".skf-line")
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    place_in_line(skf, lock, "wf:other:1")
    before = line.read_bytes()
    appended = []

    class CutShort(WrappedStore):
        def join(self, *args: object) -> None:
            self.real.join(*args)
            appended.append(line.read_bytes().startswith(before) and line.read_bytes() != before)
            raise skf._Interrupted(2)  # as SIGINT would, once the place is in the file

    wrap_stores(skf, monkeypatch, CutShort)
    with pytest.raises(skf._Interrupted):
        skf.acquire_within(lock, "wf:waiter:1", 600.0, 30.0)
    monkeypatch.undo()
    assert appended == [True]  # appended to the line as it stood
    assert in_line(skf, lock) == ["wf:other:1"]
    assert line.read_bytes() == before


# --- Older versions ----------------------------------------------------------------------

# 1.2.0, the last version without the line, as released (commit 26531d6): a copy, as a
# clone may have no history to take it from.
OLD_SCRIPT = ROOT / "tests" / "fixtures" / "skf-run-lock-1.2.0.py"


@pytest.mark.slow
@pytest.mark.parametrize("store", ["file", "etcd"], indirect=True)  # 1.2.0 knows no Redis
def test_older_versions_barging_in_never_make_two_holders(
    any_lock: str, tmp_path: Path, procs: Callable[..., Started]
) -> None:
    """Three waiters of this version and two of 1.2.0 (which knows no line and takes a
    free lock ahead of it) contend for 6 s (12 s where a process starts in half a
    second, under Wine); a double hold would make a worker exit 3."""
    marker, stop, out = tmp_path / "marker", tmp_path / "stop", tmp_path / "calls"
    old_env = {**os.environ, "SKF_RUN_LOCK_UNDER_TEST": str(OLD_SCRIPT)}
    workers = []
    for n in range(5):
        old = n > 2
        owner = f"wf:{'old' if old else 'new'}{n}"
        env = old_env if old else None
        workers.append(procs("contend", any_lock, owner, marker, stop, out, cli=False, env=env))
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    time.sleep(12 if sys.platform == "win32" else 6)
    stop.touch()
    for worker in workers:
        code, _, err = finished(worker)
        assert code == 0, f"a double hold, or a failure: {err}"
    calls = out.read_text().split("\n")
    assert sum(line.startswith("acquire 0") for line in calls) >= 10  # they took turns


def test_a_refusal_naming_the_first_waiter_says_when_its_place_lapses(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """Not when a hold of that waiter's timeout would go stale (an hour away): a place
    lapses _SEAMS.place_ttl_sec (3 s) after its waiter's last beat, a killed waiter's too."""
    lock = tmp_path / "lapse.lock"
    beat = time.time()
    place: dict[str, object] = {"ticket": "7", "owner": "wf:sk:dead"}
    place |= {"since": "2026-12-06T10:15:00Z"}
    place |= {"stale_after_seconds": 3600, "beat": beat}
    Path(f"{lock}.skf-line").write_text(json.dumps(place) + "\n", encoding="utf-8")
    refused = cli("acquire", "--lock", lock, "--owner", "wf:sk:next")
    assert refused.code == 3 and refused.json["held_by"] == "wf:sk:dead", refused
    lapses = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(-(-beat // 1) + 3))
    assert refused.json["stale_at"] == lapses
