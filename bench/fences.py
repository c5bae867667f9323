"""Fences under a nemesis: a Jepsen-style check that a lock's fences are never wrong.

    uv run python bench/fences.py --store file --seconds 120
    uv run --group bench python bench/fences.py --store etcd --seconds 20
    uv run --group bench python bench/fences.py --store redis --slots 3
    uv run python bench/fences.py --store file --lock-file OTHER/skf-run-lock.py

A fence is only worth something if it is never wrong: a resource that checks it
trusts it over everything else. Six real processes take turns on one lock of one
store (``--store``: file, etcd or Redis) for ``--seconds``:

  held       the library's ``with held(...)`` (the built file loaded by path), waiting
             in line up to 5 s; its hold at least 3 s, renewed by its thread
  within     the library's ``acquire_within(...)``, waiting in line up to 5 s
  wait       the CLI's ``acquire --wait 5s --get fence``, a process a take, as a
             shell step runs it
  once       the CLI's one-try ``acquire --get fence``, tried again a moment after a
             refusal

Of the six workers, one takes each library way and two each CLI way (``--roles``
names others, such as ``once,once,once,once,once,once``, one-try calls alone). Each
holder, while it believes it holds the lock (its hold's timeout has not passed since
its take returned, by its own clock; a ``held()`` block: its lease not found lost),
works 10-120 ms and writes, 2-5 times, to a checking resource, design.md's
``write_fenced``: a file changed under ``fcntl.flock`` that keeps the largest fence it
saw and refuses a write with a smaller one; then it releases. Each take (fence,
owner, when its call was made and returned, the hold's timeout and the end the store
stated: its output's ``stale_at``, or for a CLI take the one ``status`` shows right
after it) and each write (fence, accepted or refused, the fence it met, the time read
under the resource's flock) is appended to a log.

A nemesis stops random workers (their process group: a CLI call under way too) with
SIGSTOP for 20-200 ms, and one freeze in twenty (``--long-share``) for 2.5 s
(``--long-freeze``), past a hold of ``--stale-after`` (2 s), then resumes them with
SIGCONT; a freeze begins every 50-400 ms, and several may be frozen at once.

At the end it checks the log:

  1. duplicate fences    no two takes share a fence
  2. out-of-order takes  a take whose call began after another's returned has the
                         larger fence (takes whose calls overlap are concurrent and
                         may land in either order; with ``--slots`` too)
  3. refused in a lease  no write is refused while its writer's hold stood: from the
                         take's return until the earliest its hold can have ended
                         (the ``stale_at`` the store stated, or if later the hold's
                         timeout from the whole second its call began: a record keeps
                         its time in whole seconds), unless a freeze of the writer ran
                         past that end; with ``--slots`` several hold at once and
                         their writes meet each other's fences, so this is counted,
                         not checked

It prints counts and the first few violations of each kind, and exits 1 if any.
Everything runs on 127.0.0.1; the etcd or Redis server is started here and stopped
by its process id, as is every worker (and its process group) left at the end.
"""

from __future__ import annotations

import argparse
import bisect
import calendar
import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proc import SCRIPT, load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

ROLES = ("held", "within", "wait", "once")
WAIT_SEC = 5.0  # a waiting take's budget
CLI_TIMEOUT_SEC = 30.0  # a CLI call longer than this is killed (and counted)
SHORT_FREEZE_SEC = (0.02, 0.2)
LONG_FREEZE_SEC = 2.5  # --long-freeze
LONG_FREEZE_SHARE = 0.05  # --long-share
FREEZE_EVERY_SEC = (0.05, 0.4)
SHOWN = 5  # violations printed of each kind


# --- The checking resource: design.md's write_fenced, keeping who wrote last too.


def write_fenced(path: str, fence: int, data: str) -> tuple[bool, int, str, float]:
    """Write ``data`` to ``path`` unless a write with a larger fence came first:
    (accepted, the fence it met, the data beside it, the time read under the flock).
    Nothing changes the resource while its flock is held, so that time is when the
    check was made, however long the writer was stopped around it."""
    with open(path + ".guard", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one writer at a time
        at = time.time()
        try:
            with open(path) as kept:
                stored = json.load(kept)
            seen, before = int(stored["fence"]), str(stored["data"])
        except FileNotFoundError:
            seen, before = 0, ""
        if fence < seen:
            return False, seen, before, at
        with open(path + ".new", "w") as new:
            json.dump({"fence": fence, "data": data}, new)
        os.replace(path + ".new", path)
        return True, seen, before, at


# --- A worker: one process taking turns on the lock.


class Log:
    """An append-only log of JSON lines, one ``os.write`` each (O_APPEND)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def put(self, **event: Any) -> None:
        os.write(self.fd, (json.dumps(event) + "\n").encode())


def _epoch(stamp: object) -> float | None:
    """Seconds since the epoch of an output's ``stale_at`` (``...T...Z``, UTC)."""
    if not isinstance(stamp, str):
        return None
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


@dataclass
class Take:
    fence: int
    owner: str
    returned: float  # when the call returned
    stale_at: float | None = None  # the end the store stated
    lease: Any = None  # a held() block's lease


@dataclass
class Worker:
    """``index role lock script resource log until stale_after slots``."""

    index: int
    role: str
    lock: str
    script: str
    resource: str
    log: Log
    until: float
    stale_after: float
    slots: int
    skf: Any = None
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def timeout(self) -> float:
        # held() renews from a thread, at least every third of 3 s.
        return max(3.0, self.stale_after) if self.role == "held" else self.stale_after

    def cli(self, *args: str) -> tuple[int, str]:
        """A CLI call of the build under test, as a shell step makes it."""
        command = [sys.executable, self.script, *args]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=CLI_TIMEOUT_SEC, check=False
            )
        except subprocess.TimeoutExpired:
            self.count("cli-timeout")
            return -1, ""
        if done.returncode not in (0, 3):
            self.log.put(
                kind="error",
                w=self.index,
                call=args[0],
                rc=done.returncode,
                err=done.stderr.strip()[-300:],
            )
        return done.returncode, done.stdout.strip()

    def slots_args(self) -> list[str]:
        return ["--slots", str(self.slots)] if self.slots > 1 else []

    def take(self, owner: str, stack: contextlib.ExitStack) -> Take | None:
        """Take the lock for ``owner`` the role's way; None when refused or given up."""
        skf = self.skf
        if self.role == "held":
            try:
                lease = stack.enter_context(
                    skf.held(self.lock, owner, self.timeout(), WAIT_SEC, slots=self.slots)
                )
            except skf.LockBusy:
                return None
            stated = _epoch(lease.result["stale_at"])
            return Take(int(lease.fence), owner, time.time(), stated, lease)
        if self.role == "within":
            try:
                result = skf.acquire_within(
                    self.lock, owner, self.stale_after, WAIT_SEC, slots=self.slots
                )
            except skf.LockBusy:
                return None
            return Take(int(skf.fence_of(result)), owner, time.time(), _epoch(result["stale_at"]))
        wait = ["--wait", f"{WAIT_SEC:g}s"] if self.role == "wait" else []
        rc, out = self.cli(
            "acquire",
            "--lock",
            self.lock,
            "--owner",
            owner,
            "--stale-after",
            f"{self.stale_after:g}s",
            *wait,
            *self.slots_args(),
            "--get",
            "fence",
        )
        if rc != 0:
            return None
        return Take(int(out), owner, time.time(), self.stated_end(owner, int(out)))

    def stated_end(self, owner: str, fence: int) -> float | None:
        """When the store says the hold ``owner`` took with ``fence`` ends, read by
        ``status`` (in this process, off the record) right after a CLI take: the
        output of ``--get fence`` is the fence alone. None once it is not there."""
        try:
            holders = self.skf.status(self.lock, self.stale_after, slots=self.slots)["holders"]
        except OSError:
            return None
        mine = [h for h in holders if h["owner"] == owner and h.get("fence") == fence]
        return _epoch(mine[0]["stale_at"]) if mine else None

    def release(self, take: Take) -> None:
        if self.role == "held":
            return  # the block's end releases it
        if self.role == "within":
            try:
                self.skf.release(self.lock, take.owner)
            except OSError as exc:
                self.log.put(kind="error", w=self.index, call="release", err=str(exc))
            return
        self.cli("release", "--lock", self.lock, "--owner", take.owner)

    def believes(self, take: Take, ends: float) -> bool:
        """Whether the holder believes it still holds the lock."""
        if take.lease is not None:
            return not take.lease.lost
        return time.time() < ends

    def turn(self, n: int) -> None:
        owner = f"fences:w{self.index}-{n}:{self.skf.new_run_id()}"
        with contextlib.ExitStack() as stack:
            asked = time.time()
            try:
                take = self.take(owner, stack)
            except (OSError, ValueError) as exc:
                self.log.put(kind="error", w=self.index, call="take", err=str(exc)[-300:])
                time.sleep(0.05)
                return
            if take is None:
                self.count("refused")
                time.sleep(random.uniform(0.02, 0.1))
                return
            self.log.put(
                kind="take",
                w=self.index,
                role=self.role,
                fence=take.fence,
                owner=owner,
                asked=asked,
                returned=take.returned,
                timeout=self.timeout(),
                stale_at=take.stale_at,
            )
            # The holder's own view of its lease: from its call's return.
            ends = take.returned + self.timeout()
            for i in range(random.randint(2, 5)):
                if not self.believes(take, ends):
                    self.count("stopped writing")
                    break
                time.sleep(random.uniform(0.01, 0.12))  # the work the write carries
                ok, seen, before, at = write_fenced(self.resource, take.fence, f"{owner} {i}")
                self.log.put(
                    kind="write",
                    w=self.index,
                    fence=take.fence,
                    owner=owner,
                    ok=ok,
                    seen=seen,
                    by=before,
                    at=at,
                )
            if take.lease is not None:
                # Leave the block here, where a lost hold can be logged.
                try:
                    stack.close()
                except self.skf.LockLost:
                    self.count("lost")
                except OSError as exc:
                    self.log.put(kind="error", w=self.index, call="release", err=str(exc))
            else:
                self.release(take)
        time.sleep(random.uniform(0.0, 0.05))

    def run(self) -> int:
        self.skf = load_script("skf_run_lock_fences", Path(self.script))
        n = 0
        while time.time() < self.until:
            n += 1
            self.turn(n)
        self.log.put(kind="done", w=self.index, counts=self.counts)
        return 0


def worker(args: list[str]) -> int:
    index, role, lock, script, resource, log, until, stale_after, slots = args
    return Worker(
        int(index),
        role,
        lock,
        script,
        resource,
        Log(log),
        float(until),
        float(stale_after),
        int(slots),
    ).run()


# --- The nemesis: freezes of random workers.


@dataclass
class Freeze:
    w: int
    start: float
    end: float


def nemesis(
    procs: list[subprocess.Popen[bytes]], until: float, long_freeze: float, long_share: float
) -> list[Freeze]:
    """Stop random workers' process groups with SIGSTOP, resume them with SIGCONT,
    until ``until``; every group stopped is resumed before this returns."""
    frozen: dict[int, tuple[float, float]] = {}  # worker: (stopped at, resume at)
    freezes: list[Freeze] = []
    next_freeze = time.time() + random.uniform(*FREEZE_EVERY_SEC)

    def resume(w: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(procs[w].pid, signal.SIGCONT)
        freezes.append(Freeze(w, frozen.pop(w)[0], time.time()))

    try:
        while (now := time.time()) < until:
            for w, (_, at) in list(frozen.items()):
                if now >= at:
                    resume(w)
            if now >= next_freeze:
                free = [w for w in range(len(procs)) if w not in frozen and procs[w].poll() is None]
                if free:
                    w = random.choice(free)
                    long = random.random() < long_share
                    length = long_freeze if long else random.uniform(*SHORT_FREEZE_SEC)
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(procs[w].pid, signal.SIGSTOP)
                        frozen[w] = (time.time(), time.time() + length)
                next_freeze = now + random.uniform(*FREEZE_EVERY_SEC)
            time.sleep(0.002)
    finally:
        for w in list(frozen):
            resume(w)
    return freezes


# --- The checks.


@dataclass
class Checked:
    takes: int = 0
    writes: int = 0
    accepted: int = 0
    refused: int = 0
    refused_in_lease: list[dict[str, Any]] = field(default_factory=list)
    refused_in_lease_frozen: int = 0
    duplicates: list[tuple[int, list[dict[str, Any]]]] = field(default_factory=list)
    out_of_order: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)


def lease_end(take: dict[str, Any]) -> float:
    """The earliest the hold of ``take`` can have ended: the end the store stated, or
    if later its timeout from the whole second its call began (a record keeps its time
    in whole seconds, written after the call began)."""
    floor = float(int(take["asked"])) + float(take["timeout"])
    stated = take.get("stale_at")
    return max(floor, float(stated)) if stated is not None else floor


def check(events: list[dict[str, Any]], freezes: list[Freeze], slots: int) -> Checked:
    takes = [e for e in events if e["kind"] == "take"]
    writes = [e for e in events if e["kind"] == "write"]
    out = Checked(takes=len(takes), writes=len(writes))
    out.accepted = sum(1 for e in writes if e["ok"])
    out.refused = out.writes - out.accepted

    # 1. No two takes share a fence.
    by_fence: dict[int, list[dict[str, Any]]] = {}
    for take in takes:
        by_fence.setdefault(int(take["fence"]), []).append(take)
    out.duplicates = sorted((f, ts) for f, ts in by_fence.items() if len(ts) > 1)

    # 2. A take whose call began after another's returned has the larger fence.
    ended = sorted(takes, key=lambda t: float(t["returned"]))
    ends = [float(t["returned"]) for t in ended]
    best: list[dict[str, Any]] = []  # the take of the largest fence among ended[: i + 1]
    for take in ended:
        if not best or int(take["fence"]) > int(best[-1]["fence"]):
            best.append(take)
        else:
            best.append(best[-1])
    for take in takes:
        before = bisect.bisect_left(ends, float(take["asked"]))
        if before and int(best[before - 1]["fence"]) > int(take["fence"]):
            out.out_of_order.append((take, best[before - 1]))
    out.out_of_order.sort(key=lambda pair: float(pair[0]["returned"]))

    # 3. No write refused while its writer's hold stood.
    take_of = {t["owner"]: t for t in takes}
    frozen_of: dict[int, list[Freeze]] = {}
    for freeze in freezes:
        frozen_of.setdefault(freeze.w, []).append(freeze)
    for write in writes:
        if write["ok"]:
            continue
        take = take_of[write["owner"]]
        start, end, at = float(take["returned"]), lease_end(take), float(write["at"])
        if not start <= at < end:
            continue
        if any(f.start < end < f.end and f.start < at for f in frozen_of.get(take["w"], [])):
            out.refused_in_lease_frozen += 1
            continue
        out.refused_in_lease.append(write)
    return out


def show_take(take: dict[str, Any], zero: float) -> str:
    return (
        f"fence {take['fence']} w{take['w']} {take['role']} asked {take['asked'] - zero:.3f}"
        f" returned {take['returned'] - zero:.3f} ({take['owner']})"
    )


def report(
    checked: Checked,
    *,
    events: list[dict[str, Any]],
    freezes: list[Freeze],
    zero: float,
    seconds: float,
    slots: int,
    long_freeze: float,
) -> bool:
    """Print the figures and the first violations; True if none."""
    takes = [e for e in events if e["kind"] == "take"]
    errors = [e for e in events if e["kind"] == "error"]
    counts: dict[str, int] = {}
    for done in (e for e in events if e["kind"] == "done"):
        for what, n in done["counts"].items():
            counts[what] = counts.get(what, 0) + n
    per_role = {r: sum(1 for t in takes if t["role"] == r) for r in ROLES}
    long = sum(1 for f in freezes if f.end - f.start >= long_freeze)
    frozen = sum(f.end - f.start for f in freezes)
    print(
        f"takes               {checked.takes} ({checked.takes / seconds:.1f}/s; "
        + ", ".join(f"{r} {n}" for r, n in per_role.items())
        + ")"
    )
    stopped = counts.get("stopped writing", 0)
    print(
        f"refused or gave up  {counts.get('refused', 0)}; lost held() blocks"
        f" {counts.get('lost', 0)}; stopped writing (lease over) {stopped}"
    )
    print(
        f"writes              {checked.writes}: accepted {checked.accepted},"
        f" refused {checked.refused} ({checked.refused / max(1, checked.writes):.1%})"
    )
    print(
        f"freezes             {len(freezes)} ({long} of {long_freeze:g} s),"
        f" {frozen / seconds:.2f} worker-seconds frozen per second"
    )
    print(f"errors              {len(errors)}; CLI calls killed {counts.get('cli-timeout', 0)}")
    for error in errors[:SHOWN]:
        print(f"  w{error['w']} {error['call']}: {error.get('rc', '')} {error['err']}")
    print()
    print(f"1. duplicate fences    {len(checked.duplicates)}")
    for fence, same in checked.duplicates[:SHOWN]:
        print(f"   fence {fence}, {len(same)} takes:")
        for take in same:
            print(f"     {show_take(take, zero)}")
    print(f"2. out-of-order takes  {len(checked.out_of_order)}")
    for take, earlier in checked.out_of_order[:SHOWN]:
        print(f"   {show_take(take, zero)}\n     after {show_take(earlier, zero)}")
    label = "counted, not checked: slots" if slots > 1 else ""
    print(
        f"3. refused in a lease  {len(checked.refused_in_lease)} {label}".rstrip()
        + f" (and {checked.refused_in_lease_frozen} whose writer was frozen past its lease)"
    )
    if slots == 1:
        by_fence = {int(t["fence"]): t for t in takes}
        for write in checked.refused_in_lease[:SHOWN]:
            mine = next(t for t in takes if t["owner"] == write["owner"])
            print(
                f"   write at {write['at'] - zero:.3f} of {show_take(mine, zero)},"
                f" lease to {lease_end(mine) - zero:.3f}"
            )
            met = by_fence.get(int(write["seen"]))
            print(
                f"     refused by {show_take(met, zero) if met else write['seen']}"
                f" (wrote {write['by']!r})"
            )
    violations = len(checked.duplicates) + len(checked.out_of_order)
    if slots == 1:
        violations += len(checked.refused_in_lease)
    print()
    print(f"violations: {violations}")
    return violations == 0


# --- A run.


def start_store(store: str, folder: Path) -> tuple[str, Any]:
    """The lock's address on ``store``, and its server (None for a file)."""
    name = f"fences-{random.getrandbits(32):08x}"
    if store == "file":
        (folder / "locks").mkdir()
        return str(folder / "locks" / name), None
    from servers import start_etcd, start_redis

    server = start_etcd(folder / "etcd") if store == "etcd" else start_redis(folder)
    return server.url(name), server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("file", "etcd", "redis"), default="file")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument(
        "--lock-file",
        type=Path,
        default=SCRIPT,
        help="the build of skf-run-lock.py under test (default: the repo's)",
    )
    parser.add_argument("--stale-after", type=float, default=2.0, help="seconds (held(): >= 3)")
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument(
        "--long-freeze", type=float, default=LONG_FREEZE_SEC, help="seconds a long freeze lasts"
    )
    parser.add_argument(
        "--long-share", type=float, default=LONG_FREEZE_SHARE, help="the share of long freezes"
    )
    parser.add_argument(
        "--roles",
        default="held,within,wait,wait,once,once",
        help="a worker each, of " + ",".join(ROLES),
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--log", type=Path, default=None, help="keep the log (JSON lines) here")
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else random.getrandbits(32)
    random.seed(seed)
    script = str(options.lock_file.resolve())
    skf = load_script("skf_run_lock_fences", Path(script))
    folder = Path(tempfile.mkdtemp(prefix="skf-fences-"))
    log = str(folder / "log.jsonl")
    resource = str(folder / "resource.json")
    procs: list[subprocess.Popen[bytes]] = []
    server = None
    try:
        lock, server = start_store(options.store, folder)
        roles = options.roles.split(",")
        if not set(roles) <= set(ROLES):
            parser.error(f"--roles: each one of {', '.join(ROLES)}")
        print(
            f"# skf-run-lock {skf.__version__} ({script}); Python {sys.version.split()[0]},"
            f" {os.cpu_count()} cores; seed {seed}"
        )
        print(
            f"# {options.store}, {len(roles)} workers ({', '.join(roles)}),"
            f" slots {options.slots}, stale-after {options.stale_after:g}s (held(): "
            f"{max(3.0, options.stale_after):g}s), {options.seconds:g} s"
        )
        zero = time.time() + 1.0  # every worker started first
        until = zero + options.seconds
        for i, role in enumerate(roles):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        str(i),
                        role,
                        lock,
                        script,
                        resource,
                        log,
                        str(until),
                        str(options.stale_after),
                        str(options.slots),
                    ],
                    start_new_session=True,  # its own group: a freeze stops its CLI calls too
                )
            )
        time.sleep(max(0.0, zero - time.time()))
        freezes = nemesis(procs, until, options.long_freeze, options.long_share)
        deadline = until + WAIT_SEC + CLI_TIMEOUT_SEC + 10
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.time()))
        late = [proc for proc in procs if proc.poll() is None]
        if late:
            print(f"# {len(late)} worker(s) still running at the deadline: killed")
    finally:
        for proc in procs:
            if proc.poll() is None:  # not reaped yet: its group's id is still its own
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # a CLI call under way too
                proc.wait()
        if server is not None:
            server.stop()
    with open(log) as lines:
        events = [json.loads(line) for line in lines]
    if options.log is not None:
        shutil.copyfile(log, options.log)
    shutil.rmtree(folder, ignore_errors=True)
    checked = check(events, freezes, options.slots)
    ok = report(
        checked,
        events=events,
        freezes=freezes,
        zero=zero,
        seconds=options.seconds,
        slots=options.slots,
        long_freeze=options.long_freeze,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker(sys.argv[2:]))
    sys.exit(main())
