"""Helper processes for the tests: each mode is one real process doing one thing.

counter LOCK COUNTER LOG ROUNDS OWNER   exclusive read-increment-write loop
race READY GO -- ARGS...                 wait for GO, then run main(ARGS)
hold-guard LOCK                          take the guard, say "held", wait for stdin
flock PATH                               flock PATH itself, say "held", wait for stdin
churn-forks LOCK OWNER...                say "ready"; on "go", fork one child per OWNER that
                                         acquires/releases until killed and say their pids;
                                         on "reap", wait for them and say how each ended
guard-stress LOCK MARKER ROUNDS         under the guard, create MARKER exclusively and remove
                                         it again, ROUNDS times (exit 3 if it already existed)
contend LOCK OWNER MARKER STOP OUT      until STOP exists: acquire_within, create MARKER with
                                         O_EXCL (exit 3 if it exists: a double hold), remove it,
                                         release; append "<call> <outcome> <seconds>" to OUT
lib-loop LOCK OWNER                      loop acquire/release; on KeyboardInterrupt say
                                         "interrupted", wait for a line, release, go on
held-append LOCK OWNER LOG NAME          wait in line with held(); append NAME to LOG inside
within-append LOCK OWNER LOG NAME        acquire_within, append NAME to LOG, release
cli-append LOCK OWNER LOG NAME           the CLI's acquire --wait, append NAME, the CLI's release
share-slots LOCK OWNER SLOTS FOLDER OUT  until FOLDER/stop exists: wait in line (10 s) for one of
                                         SLOTS, put OWNER in FOLDER/inside and count it (exit 3
                                         if more than SLOTS are in it), hold 40-120 ms, leave,
                                         release, work 0-40 ms; append "took W START END INSIDE"
                                         (W the wait; INSIDE: the marks inside midway) or
                                         "gave-up W" to OUT
hold-slot LOCK OWNER SLOTS SECONDS       take one of SLOTS for SECONDS, say "held", wait for stdin
slot-append LOCK OWNER SLOTS LOG NAME    wait in line for one of SLOTS, append NAME and the
                                         take's fence to LOG, release
read-or-write LOCK OWNER KIND FOLDER OUT until FOLDER/stop exists: wait in line (5 s) for a
                                         shared hold (KIND r) or the lock alone (KIND w), put
                                         OWNER's mark in FOLDER/inside and look who else is
                                         there (exit 3 if a writer is beside anyone), hold
                                         40-120 ms, leave, release, work 0-40 ms; append as
                                         share-slots does
hold-shared LOCK OWNER SECONDS           take a shared hold for SECONDS, say "held", wait for stdin
hold-in-line LOCK OWNER KIND             wait in line for a shared hold (KIND r) or the lock
                                         alone (KIND w), say "in", wait for stdin, release
hold-in-line LOCK OWNER KIND PART...     the same, for those parts of the lock
fork-kept LOCK OWNER                     acquire (its connection kept), fork: the child
                                         releases, the parent acquires once it ended; each
                                         says (a JSON line) what it got and how many
                                         connections to the lock's port it made
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

from loader import load_script as load

TYPE_CHECKING = False
if TYPE_CHECKING:  # the annotations only: a helper process imports no more than it runs
    from collections.abc import Callable
    from typing import Any


def say(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def counter(lock: str, counter_path: str, log: str, rounds: str, owner: str) -> int:
    skf = load()
    for n in range(int(rounds)):
        result = skf.acquire_within(lock, f"{owner}:{n}", 60.0, 120.0)
        assert result["acquired"]
        with open(log, "a") as f:
            f.write(f"enter {owner}\n")
        value = int(Path(counter_path).read_text())
        time.sleep(0.001)  # widen the window a second holder would race in
        Path(counter_path).write_text(str(value + 1))
        with open(log, "a") as f:
            f.write(f"exit {owner}\n")
        released = skf.release(lock, f"{owner}:{n}")
        assert released["released"], released
    return 0


def race(ready: str, go: str, *argv: str) -> int:
    skf = load()
    Path(ready).touch()
    while not os.path.exists(go):
        time.sleep(0.0005)
    return int(skf.main(list(argv)))


def hold_guard(lock: str) -> int:
    skf = load()
    with skf._Guard(Path(lock)):
        say("held")
        sys.stdin.read()
    return 0


def hold_flock(path: str) -> int:
    import fcntl  # POSIX only, like this mode

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    say("held")
    sys.stdin.read()
    os.close(fd)
    return 0


def churn_forks(lock: str, *owners: str) -> int:
    """Calls that acquire and release in a loop, in children forked from one process
    that loaded the file once: a test kills hundreds of calls without paying hundreds
    of interpreter start-ups."""
    skf = load()
    say("ready")
    children: list[int] = []
    for command in sys.stdin:
        if command == "go\n":
            children = [_forked_churn(skf, lock, owner) for owner in owners]
            say(" ".join(map(str, children)))
        elif command == "reap\n":
            ends = [os.waitpid(child, 0)[1] for child in children]
            say(" ".join(_end_of(status) for status in ends))
    return 0


def _forked_churn(skf: ModuleType, lock: str, owner: str) -> int:
    parent = os.getpid()
    child = os.fork()
    if child:
        return child
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # a full pipe would block
    os.dup2(devnull, 2)
    n = 0
    while os.getppid() == parent:  # an orphan (its test failed) stops at once
        n += 1
        run_owner = f"{owner}:{n}"
        skf.main(["acquire", "--lock", lock, "--owner", run_owner, "--stale-after", "0.01"])
        skf.main(["release", "--lock", lock, "--owner", run_owner])
    os._exit(0)


def _end_of(status: int) -> str:
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit-{os.waitstatus_to_exitcode(status)}"


def guard_stress(lock: str, marker: str, rounds: str) -> int:
    skf = load()
    say("ready")
    sys.stdin.readline()  # start together
    for _ in range(int(rounds)):
        with skf._Guard(lock):
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return 3  # another process is inside the guard too
            os.close(fd)
            os.unlink(marker)
    return 0


def contend(lock: str, owner: str, marker: str, stop: str, out: str) -> int:
    skf = load()
    say("ready")
    n = 0
    with open(out, "a") as log:

        def timed(call: str, action: object) -> object:
            started = time.monotonic()
            try:
                result = action()  # type: ignore[operator]
                outcome = "0"
            except skf.LockBusy:
                result, outcome = None, "3"
            except OSError:
                result, outcome = None, "2"
            log.write(f"{call} {outcome} {time.monotonic() - started:.3f}\n")
            log.flush()
            return result

        while not os.path.exists(stop):
            n += 1
            run_owner = f"{owner}:{n}"
            taken = timed("acquire", lambda o=run_owner: skf.acquire_within(lock, o, 3.0, 2.0))
            if taken is None:
                continue
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return 3  # two holders at once
            os.close(fd)
            time.sleep(0.002)
            os.unlink(marker)
            timed("release", lambda o=run_owner: skf.release(lock, o))
    return 0


def lib_loop(lock: str, owner: str) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own default
    skf = load()
    n = 0
    while True:
        try:
            say("ready")
            while True:
                n += 1
                skf.acquire(lock, f"{owner}:{n}", 60.0)
                skf.release(lock, f"{owner}:{n}")
        except KeyboardInterrupt:
            say("interrupted")
            if not sys.stdin.readline():
                return 0
            skf.release(lock, f"{owner}:{n}")


def die_mid_write(lock: str) -> int:
    skf = load()
    real_fsync = os.fsync

    def fsync_then_die(fd: Any) -> None:  # what os.fsync takes: a descriptor or a file
        real_fsync(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    os.fsync = fsync_then_die
    skf.acquire(lock, "wf:sk:dies", 60.0)
    return 0


def append(log: str, name: str) -> None:
    with open(log, "a") as f:
        f.write(name + "\n")


def held_append(lock: str, owner: str, log: str, name: str) -> int:
    skf = load()
    with skf.held(lock, owner, 60.0, wait=120.0):
        append(log, name)
    return 0


def within_append(lock: str, owner: str, log: str, name: str) -> int:
    skf = load()
    taken = skf.acquire_within(lock, owner, 60.0, 120.0)
    append(log, name)
    assert skf.release(lock, taken["owner"])["released"]
    return 0


def cli_append(lock: str, owner: str, log: str, name: str) -> int:
    import subprocess

    from loader import SCRIPT

    def cli(*argv: str) -> None:
        subprocess.run(
            [sys.executable, str(SCRIPT), *argv, "--lock", lock, "--owner", owner],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    cli("acquire", "--wait", "120")
    append(log, name)
    cli("release")
    return 0


def share_slots(lock: str, owner: str, slots: str, folder: str, out: str) -> int:
    count = int(slots)

    def take(skf: ModuleType, run_owner: str) -> None:
        skf.acquire_within(lock, run_owner, 30.0, 10.0, slots=count)

    return take_turns(lock, owner, owner, folder, out, take, lambda inside: len(inside) > count)


def take_turns(  # noqa: PLR0917
    lock: str,
    owner: str,
    mark: str,
    folder: str,
    out: str,
    take: Callable[[ModuleType, str], None],
    crowded: Callable[[list[str]], bool],
) -> int:
    """share-slots' and read-or-write's loop: ``take`` waits in line for a hold, then
    ``mark`` is put in FOLDER/inside; exit 3 if ``crowded`` finds too many there."""
    import random

    skf = load()
    inside = Path(folder) / "inside"
    stop = Path(folder) / "stop"
    mine = inside / mark
    n = 0
    with open(out, "a") as log:
        while not os.path.exists(stop):
            n += 1
            run_owner = f"{owner}:{n}"
            asked = time.time()
            try:
                take(skf, run_owner)
            except skf.LockBusy:
                log.write(f"gave-up {time.time() - asked:.3f}\n")
                log.flush()
                continue
            start = time.time()
            mine.touch(exist_ok=False)
            if crowded(os.listdir(inside)):
                return 3
            time.sleep(random.uniform(0.04, 0.12))
            beside = len(os.listdir(inside))  # this one's mark among them
            mine.unlink()
            end = time.time()
            assert skf.release(lock, run_owner)["released"]
            log.write(f"took {start - asked:.3f} {start:.3f} {end:.3f} {beside}\n")
            log.flush()
            time.sleep(random.uniform(0, 0.04))
    return 0


def hold_slot(lock: str, owner: str, slots: str, seconds: str) -> int:
    skf = load()
    skf.acquire(lock, owner, float(seconds), slots=int(slots))
    say("held")
    sys.stdin.readline()
    return 0


def slot_append(lock: str, owner: str, slots: str, log: str, name: str) -> int:
    skf = load()
    # Its place lives 30 s past its last beat, not 3: on a machine so loaded that a
    # waiter misses its beats for seconds, its place would lapse and its turn pass to a
    # later one, by design; the tests of order prove the order, not the lapse.
    skf._SEAMS.place_ttl_sec = 30.0
    taken = skf.acquire_within(lock, owner, 60.0, 120.0, slots=int(slots))
    append(log, f"{name} {skf.fence_of(taken)}")
    assert skf.release(lock, taken["owner"])["released"]
    return 0


def read_or_write(lock: str, owner: str, kind: str, folder: str, out: str) -> int:
    def take(skf: ModuleType, run_owner: str) -> None:
        skf.acquire_within(lock, run_owner, 30.0, 5.0, shared=kind == "r")

    def crowded(inside: list[str]) -> bool:
        """A writer beside anyone: a writer's mark ("w-...") and any other."""
        return len(inside) > 1 and any(name.startswith("w-") for name in inside)

    return take_turns(lock, owner, f"{kind}-{owner}", folder, out, take, crowded)


def hold_shared(lock: str, owner: str, seconds: str) -> int:
    skf = load()
    skf.acquire(lock, owner, float(seconds), shared=True)
    say("held")
    sys.stdin.readline()
    return 0


def hold_in_line(lock: str, owner: str, kind: str, *parts: str) -> int:
    skf = load()
    some = list(parts) or None
    taken = skf.acquire_within(lock, owner, 60.0, 120.0, shared=kind == "r", parts=some)
    say("in")
    sys.stdin.readline()
    assert skf.release(lock, taken["owner"])["released"]
    return 0


def fork_kept(lock: str, owner: str) -> int:
    import json
    import socket

    port = int(lock.split("://")[1].split("/", maxsplit=1)[0].rpartition(":")[2])
    made = [0]
    real = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[1] == port:
            made[0] += 1
        real(sock, address)

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    skf = load()
    took = skf.acquire(lock, owner, 60.0)
    said = {"acquired": took["acquired"], "refreshed": took["refreshed"]}
    say(json.dumps({"who": "parent", **said, "made": made[0]}))
    child = os.fork()
    if child == 0:
        made[0] = 0
        gone = skf.release(lock, owner)
        say(json.dumps({"who": "child", "released": gone["released"], "made": made[0]}))
        os._exit(0)
    os.waitpid(child, 0)
    made[0] = 0
    again = skf.acquire(lock, owner, 60.0)
    said = {"acquired": again["acquired"], "refreshed": again["refreshed"]}
    say(json.dumps({"who": "parent", **said, "made": made[0]}))
    assert skf.release(lock, owner)["released"]
    return 0


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "race":
        sys.exit(race(rest[0], rest[1], *rest[3:]))
    modes: dict[str, Callable[..., int]] = {
        "counter": counter,
        "hold-guard": hold_guard,
        "flock": hold_flock,
        "churn-forks": churn_forks,
        "die-mid-write": die_mid_write,
        "lib-loop": lib_loop,
        "guard-stress": guard_stress,
        "contend": contend,
        "held-append": held_append,
        "within-append": within_append,
        "cli-append": cli_append,
        "share-slots": share_slots,
        "hold-slot": hold_slot,
        "slot-append": slot_append,
        "read-or-write": read_or_write,
        "hold-shared": hold_shared,
        "hold-in-line": hold_in_line,
        "fork-kept": fork_kept,
    }
    sys.exit(modes[mode](*rest))
