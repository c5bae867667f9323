"""Contenders in real processes: many runs sharing one lock, and a race for a stale one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from calls import WORKER, Started


def assert_exclusive_counter(
    lock: str | Path,
    folder: Path,
    worker: Callable[..., Started],
    processes: int,
    rounds: int,
) -> None:
    """``processes`` real processes each do ``rounds`` of acquire_within -> read, increment,
    write a counter -> release: the count is exact and no two holds overlap."""
    counter = folder / "counter"
    counter.write_text("0")
    log = folder / "log"
    procs = [worker("counter", lock, counter, log, rounds, f"mx:w{i}") for i in range(processes)]
    for proc in procs:
        _, err = proc.communicate(timeout=280)
        assert proc.returncode == 0, err
    assert counter.read_text() == str(processes * rounds)
    lines = log.read_text().splitlines()
    assert len(lines) == 2 * processes * rounds
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("enter ") and leave == "exit " + enter[len("enter ") :]


def assert_one_winner_of_a_race(
    lock: str | Path, folder: Path, stale_holder: str
) -> dict[str, Any]:
    """12 real processes released at once to acquire a stale lock of ``stale_holder``:
    exactly one wins and reports it replaced; 11 are refused naming the winner."""
    go = folder / "go"
    procs = []
    for i in range(12):
        argv = ["acquire", "--lock", str(lock), "--owner", f"race:r{i}:x", "--stale-after", "60"]
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "race",
                    str(folder / f"ready{i}"),
                    str(go),
                    "--",
                    *argv,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + 120
    while not all((folder / f"ready{i}").exists() for i in range(12)):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    results: list[tuple[int, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append((proc.returncode, json.loads(out) if out else err))
    winners = [r for code, r in results if code == 0]
    assert len(winners) == 1, results
    assert winners[0]["stale_replaced"]["held_by"] == stale_holder
    losers = [r for code, r in results if code == 3]
    assert len(losers) == 11
    winner: dict[str, Any] = winners[0]
    assert all(r["held_by"] == winner["owner"] and not r["acquired"] for r in losers)
    return winner


def turns_taken(
    worker: Callable[..., Started],
    folder: Path,
    workers: Sequence[tuple[str, ...]],
    seconds: float,
) -> list[list[str]]:
    """Run take-turns workers (worker.py's share-slots or read-or-write, each given as
    its mode and arguments up to FOLDER OUT) for ``seconds``, then stop them: each
    one's log lines ("took ...", "gave-up ..."). Each must end 0 (3: it found too many
    inside), and no wait may have run out."""
    (folder / "inside").mkdir()
    logs = [folder / f"out{n}" for n in range(len(workers))]
    procs = [worker(*args, folder, log) for args, log in zip(workers, logs, strict=True)]
    time.sleep(seconds)
    (folder / "stop").touch()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err  # 3: too many inside at once
    entries = [log.read_text().split("\n")[:-1] for log in logs]
    assert [line for lines in entries for line in lines if line.startswith("gave-up")] == []
    return entries
