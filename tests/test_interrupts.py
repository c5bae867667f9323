"""Interrupts: SIGINT, SIGTERM and SIGHUP end a CLI call cleanly, whenever they arrive.

A call interrupted before it changed anything prints one JSON error naming the
signal and exits 128 + n; a call that already changed the lock finishes normally.
Nothing of the call (guard, temp file) is ever left behind, and no traceback is
printed. Library calls install no handlers, and a KeyboardInterrupt inside one
leaves nothing behind either.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import types
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import WORKER, Run, Started, pipe, posix_only
from loader import SCRIPT
from lockfiles import ago, beside, read_json, write_record
from servers import redis_keys
from signals import INTERRUPTING, SIGHUP, assert_signal_outcome, deliver
from test_acquire import ACQUIRE_KEYS
from test_release import RELEASE_KEYS
from wire import after_each_send, before_each_receive, first_command, http_request
from wrapped import WrappedStore, wrap_stores

pytestmark = posix_only("POSIX signals (SIGTERM, SIGHUP) sent to real processes")
SIGNALS = list(INTERRUPTING)


def test_signal_while_the_guard_is_held_lets_a_take_finish(
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    armed: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_fsync = os.fsync

    def fsync_then_signal(fd: int) -> None:
        real_fsync(fd)
        deliver(armed, signal.SIGTERM)

    monkeypatch.setattr(os, "fsync", fsync_then_signal)
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 0 and run.json["acquired"] is True
    assert read_json(lock)["owner"] == "wf:sk:r"
    assert beside(lock) == ["run.lock"]


def test_signal_while_the_guard_is_held_ends_a_refusal_at_the_drop(
    skf: ModuleType, main: Callable[..., Run], lock: Path, armed: Any
) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=5))
    before = lock.read_bytes()
    dropped: list[bool] = []

    class SignalledAfterRead(WrappedStore):
        def read(self, line: bool = True) -> object:
            look = self.real.read(line)
            deliver(armed, SIGHUP)
            dropped.append(os.path.exists(f"{lock}.skf-guard"))  # still held: deferred
            return look

    with pytest.MonkeyPatch.context() as patched:
        wrap_stores(skf, patched, SignalledAfterRead)
        run = main("acquire", "--lock", lock, "--owner", "wf:sk:me")
    assert dropped == [True]
    assert run.code == 129 and "SIGHUP" in run.error and "before it changed anything" in run.error
    assert lock.read_bytes() == before and beside(lock) == ["run.lock"]


def test_signal_during_a_release_that_deleted_the_lock_finishes_it(
    skf: ModuleType, main: Callable[..., Run], lock: Path, armed: Any
) -> None:
    write_record(lock, "wf:sk:r", ago(seconds=5))
    real_unlink = os.unlink

    def unlink_then_signal(path: str, *args: Any, **kwargs: Any) -> None:
        real_unlink(path, *args, **kwargs)
        if path == str(lock):
            deliver(armed, signal.SIGINT)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(os, "unlink", unlink_then_signal)
        run = main("release", "--lock", lock, "--owner", "wf:sk:r")
    assert run.code == 0 and run.json["released"] is True and list(run.json) == RELEASE_KEYS
    assert beside(lock) == []


def test_signal_while_waiting_for_the_guard_ends_the_call_at_once(
    skf: ModuleType,
    main: Callable[..., Run],
    lock: Path,
    armed: Any,
    worker: Callable[..., Started],
) -> None:
    holder = worker("hold-guard", lock)
    assert pipe(holder.stdout).readline() == "held\n"
    real_sleep = time.sleep
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        deliver(armed, signal.SIGTERM)  # shielded while taking the guard: remembered
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(time, "sleep", sleep)
        run = main("acquire", "--lock", lock, "--owner", "wf:sk:r")
    assert len(sleeps) == 1  # acted on at the next try, not after GUARD_WAIT_SEC
    assert run.code == 143 and "SIGTERM" in run.error
    assert beside(lock) == ["run.lock.skf-guard"]  # the live holder's, not this call's
    pipe(holder.stdin).close()
    assert holder.wait(timeout=30) == 0
    assert beside(lock) == []


def test_signal_while_waiting_with_wait_ends_the_call_at_once(
    skf: ModuleType, main: Callable[..., Run], lock: Path, armed: Any
) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=5))

    def sleep(seconds: float) -> None:
        deliver(armed, signal.SIGINT)  # nothing is held while --wait sleeps: raised now
        raise AssertionError("the signal should have ended the wait")

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(time, "sleep", sleep)
        run = main("acquire", "--lock", lock, "--owner", "wf:sk:me", "--wait", "3600")
    assert run.code == 130 and "SIGINT" in run.error
    assert beside(lock) == ["run.lock"] and read_json(lock)["owner"] == "wf:sk:holder"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_raise_python_swallowed_still_ends_the_call(
    skf: ModuleType, main: Callable[..., Run], lock: Path, armed: Any
) -> None:
    """Python drops an exception raised by a handler that runs inside a weakref callback
    (the import system has some); the signal must stay pending and end the call."""
    write_record(lock, "wf:sk:holder", ago(seconds=5))

    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing, lambda _: deliver(armed, signal.SIGTERM))
    del thing  # the callback runs, and its exception is printed and dropped
    assert ref() is None and armed.pending == signal.SIGTERM
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:me", "--wait", "2")
    assert run.code == 143 and "SIGTERM" in run.error
    assert read_json(lock)["owner"] == "wf:sk:holder" and beside(lock) == ["run.lock"]


def test_library_calls_install_no_signal_handlers(skf: ModuleType, lock: Path) -> None:
    before = [signal.getsignal(s) for s in SIGNALS]
    skf.acquire_within(lock, "wf:sk:r", 60.0, 1.0)
    skf.status(lock, 60.0)
    skf.release(lock, "wf:sk:r")
    assert [signal.getsignal(s) for s in SIGNALS] == before


# --- Real signals at random moments -----------------------------------------------


def _handlers_installed(pid: int) -> bool:
    """True once the process catches SIGTERM (its CLI handlers are in place)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except FileNotFoundError:
        pass
    return False


def _signal_once_running(proc: subprocess.Popen[str], signum: int, delay: float) -> None:
    """Send ``signum`` ``delay`` seconds after the CLI's handlers are in place."""
    deadline = time.monotonic() + 30
    while not _handlers_installed(proc.pid):
        if proc.poll() is not None:
            return  # done already (a zombie has no handlers)
        assert time.monotonic() < deadline, "the CLI never installed its signal handlers"
        time.sleep(0.0002)
    time.sleep(delay)
    try:
        proc.send_signal(signum)
    except ProcessLookupError:
        pass


# scenario -> (lock holder before, argv after --lock, exit code when it finishes)
SCENARIOS: dict[str, tuple[str | None, list[str], int | None]] = {
    "take": (None, ["acquire", "--owner", "sig:me:1"], 0),
    "renew": ("sig:me:1", ["acquire", "--owner", "sig:me:1"], 0),
    "refuse": ("sig:other:1", ["acquire", "--owner", "sig:me:1"], 3),
    "wait": ("sig:other:1", ["acquire", "--owner", "sig:me:1", "--wait", "3600"], None),
    "release": ("sig:me:1", ["release", "--owner", "sig:me:1"], 0),
}


def _expected_lock_owner(scenario: str, finished: bool, before: str | None) -> str | None:
    if not finished or scenario in ("refuse", "wait"):
        return before
    return None if scenario == "release" else "sig:me:1"


@pytest.mark.timeout(240)
def test_real_signals_at_random_moments_leave_a_clean_call(lock: Path) -> None:
    """At least 100 real SIGINT/SIGTERM/SIGHUPs to real CLI processes; each is checked."""
    rng = random.Random(8)
    outcomes = {"interrupted": 0, "finished": 0}
    lock.parent.mkdir()
    for trial in range(125):
        scenario = list(SCENARIOS)[trial % len(SCENARIOS)]
        holder, argv, finish_code = SCENARIOS[scenario]
        lock.unlink(missing_ok=True)
        if holder is not None:
            write_record(lock, holder, ago(seconds=3), stale_after_seconds=3600, tool="x")
        before = lock.read_bytes() if holder is not None else None
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), argv[0], "--lock", str(lock), *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        signum = rng.choice(SIGNALS)
        _signal_once_running(proc, signum, rng.uniform(0, 0.004))
        out, err = proc.communicate(timeout=60)
        run = Run(proc.returncode, out, err)
        where = f"trial {trial} ({scenario}, {signal.Signals(signum).name}): {run}"
        assert "Traceback" not in err, where
        assert beside(lock) in ([], ["run.lock"]), where
        interrupted = run.code == 128 + signum
        if interrupted:
            assert signal.Signals(signum).name in run.error, where
            assert (lock.read_bytes() if lock.exists() else None) == before, where
        else:
            assert finish_code is not None, f"{where}: --wait 3600 was not interrupted"
            assert run.code == finish_code and run.json, where
            keys = RELEASE_KEYS if argv[0] == "release" else ACQUIRE_KEYS
            assert list(run.json) == keys, where
        owner = json.loads(lock.read_bytes())["owner"] if lock.exists() else None
        assert owner == _expected_lock_owner(scenario, not interrupted, holder), where
        outcomes["interrupted" if interrupted else "finished"] += 1
    print(f"outcomes over 125 signals: {outcomes}")


@pytest.mark.timeout(240)
def test_keyboard_interrupt_in_library_calls_leaves_nothing_behind(lock: Path) -> None:
    """At least 100 real SIGINTs to a process looping over library acquire/release."""
    rng = random.Random(9)
    lock.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "lib-loop", str(lock), "lib:loop"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for n in range(120):
            assert pipe(proc.stdout).readline() == "ready\n", pipe(proc.stderr).read()
            time.sleep(rng.uniform(0, 0.01))
            proc.send_signal(signal.SIGINT)
            assert pipe(proc.stdout).readline() == "interrupted\n", pipe(proc.stderr).read()
            left = beside(lock)
            assert left in ([], ["run.lock"]), f"interrupt {n} left {left}"
            if left:
                record = read_json(lock)
                assert record["owner"].startswith("lib:loop:"), record
            if n < 119:
                pipe(proc.stdin).write("\n")  # go on looping
                pipe(proc.stdin).flush()
    finally:
        pipe(proc.stdin).close()  # the worker, waiting for a line, ends
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_the_cli_reports_the_signal_by_name(cli: Callable[..., Run], lock: Path) -> None:
    """A real SIGTERM during `acquire --wait`: exit 143, one JSON line on stderr."""
    write_record(lock, "wf:sk:holder", ago(seconds=5))
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "acquire", "--lock", lock, "--owner", "wf:sk:me", "--wait", "9"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _signal_once_running(proc, signal.SIGTERM, 0.2)
    out, err = proc.communicate(timeout=30)
    run = Run(proc.returncode, out, err)
    assert run.code == 143
    assert run.error == "interrupted by SIGTERM before it changed anything"
    assert beside(lock) == ["run.lock"]


def test_the_cli_keeps_a_dropped_interrupt_out_of_stderr(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python reports a dropped exception through sys.unraisablehook; the CLI's hook keeps
    quiet about its own _Interrupted (still pending) and passes anything else on."""
    passed_on: list[object] = []
    monkeypatch.setattr(sys, "__unraisablehook__", passed_on.append)
    ours = types.SimpleNamespace(exc_value=skf._Interrupted(signal.SIGINT))
    other = types.SimpleNamespace(exc_value=ValueError("x"))
    skf._Interrupts._unraisable(ours)
    skf._Interrupts._unraisable(other)
    assert passed_on == [other]
    assert capsys.readouterr() == ("", "")


# --- Ending: a finished call's exit code stands, and a wrapper's teardown runs ---------


def _sigterm_until_it_ends(proc: subprocess.Popen[bytes]) -> int:
    """Send SIGTERM to ``proc`` without pause until it has ended; how many were sent."""
    sent = 0
    while proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            break
        sent += 1
    return sent


def test_signals_right_after_the_answer_never_change_the_exit_code(lock: Path) -> None:
    """SIGTERM sent without pause from the moment the answer is read, through the
    interpreter's teardown: the call still exits with its own code."""
    for round_ in range(15):
        proc = subprocess.Popen(
            [sys.executable, SCRIPT, "acquire", "--lock", lock, "--owner", f"wf:sk:r{round_}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        answer = proc.stdout.readline()
        sent = _sigterm_until_it_ends(proc)
        proc.wait(timeout=30)
        err = proc.stderr.read() if proc.stderr else b""
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
        assert proc.returncode == (0 if round_ == 0 else 3), (round_, sent, err)
        assert json.loads(answer)["acquired"] is (round_ == 0)
        assert err == b""


IGNORING_UNDER_FIRE = """
import importlib.util, signal, sys, time
spec = importlib.util.spec_from_file_location("skf", sys.argv[1])
skf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(skf)
skf._Interrupts.handle(lambda signum, frame: None)
print("ready", flush=True)
rounds, end = 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    skf._Interrupts.handle(lambda signum, frame: None)
    skf._Interrupts.ignore()
    rounds += 1
print(rounds, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN, flush=True)
"""


@pytest.mark.timeout(60)
def test_a_signal_caught_while_switching_to_ignore_is_never_reported(tmp_path: Path) -> None:
    """The step that ignores the CLI's signals, repeated for 2 s under a storm of
    SIGTERM from another process: a signal caught in the middle of the switch is
    dropped quietly, never printed as 'Signal 15 ignored due to race condition'."""
    stderr = tmp_path / "stderr"  # a file: a full pipe would stop the child mid-storm
    with stderr.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", IGNORING_UNDER_FIRE, SCRIPT, "2"],
            stdout=subprocess.PIPE,
            stderr=sink,
        )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    sent = _sigterm_until_it_ends(proc)
    out, _ = proc.communicate(timeout=30)
    assert (proc.returncode, stderr.read_text(errors="replace")) == (0, "")
    rounds, ignored = out.split()
    assert int(rounds) > 0 and ignored == b"True" and sent > 0


def test_a_wrapper_running_the_script_keeps_its_finally_and_atexit(lock: Path) -> None:
    """runpy (as coverage tools and harnesses run a script): SystemExit carries the exit
    code out, and the wrapper's own finally and atexit work still run."""
    wrapper = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        f"sys.argv = [{str(SCRIPT)!r}, 'acquire', '--lock', {str(lock)!r}, '--owner', 'wf:sk:r']\n"
        "try:\n"
        f"    runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "except SystemExit as stop:\n"
        "    print('exit', stop.code)\n"
        "finally:\n"
        "    print('finally ran')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=60, check=False
    )
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0])["owner"] == "wf:sk:r"
    assert lines[1:] == ["exit 0", "finally ran", "atexit ran"], proc.stdout + proc.stderr
    assert proc.returncode == 0 and proc.stderr == ""


# --- On a server: a change once sent is finished and answered; a read is not -------------

# Per server: the request that carries an acquire's change and one that only reads,
# as each is named on the wire (etcd: its HTTP path; Redis: the first command of its
# batch).
SERVER_REQUESTS: dict[str, tuple[str, str, Callable[[bytes], object]]] = {
    "etcd": ("/v3/kv/txn", "/v3/kv/range", lambda data: (http_request(data) or ("",))[0]),
    "redis": ("MULTI", "WATCH", first_command),
}


@pytest.mark.parametrize("server", list(SERVER_REQUESTS))
@pytest.mark.parametrize(
    ("sent", "signum", "code"),
    [("change", signal.SIGTERM, 0), ("read", SIGHUP, 128 + SIGHUP)],
)
def test_a_signal_lets_a_sent_change_finish_and_ends_a_call_before_one(  # noqa: PLR0917
    skf: ModuleType,
    main: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    armed: Any,
    request: pytest.FixtureRequest,
    server: str,
    sent: str,
    signum: int,
    code: int,
) -> None:
    """A signal delivered right after a request is sent, as a real one landing there
    would: after the change, the call finishes and answers (exit 0, the lock taken);
    after a mere read, it ends (128 + n) with nothing changed."""
    lock = request.getfixturevalue(f"{server}_lock")
    change, read, name_of = SERVER_REQUESTS[server]

    def signal_after(sock: object, data: bytes) -> None:
        if name_of(data) == (change if sent == "change" else read):
            deliver(armed, signum)

    after_each_send(monkeypatch, signal_after)
    assert_signal_outcome(main("acquire", "--lock", lock, "--owner", "wf:sk:r"), code)
    monkeypatch.undo()
    assert skf.status(lock, 60.0)["held_by"] == ("wf:sk:r" if code == 0 else None)
    if server == "redis":
        assert redis_keys(lock) == (["", "\0last"] if code == 0 else [])


# --- A server call cut short: its connection is never read out of step -------------------


def test_an_etcd_request_cut_short_never_leaves_its_answer_for_the_next(
    skf: ModuleType, etcd_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt between a request and its answer once left the answer waiting on the
    connection, to be read as the answer to the next request (a waiter leaving the line
    then 'revoked' its place with a range's answer, and the place stayed)."""
    store = skf._store_for(etcd_lock)
    try:
        store.look()  # the call's connection is open
        with monkeypatch.context() as patch:
            before_each_receive(patch, interrupted, {})
            with pytest.raises(KeyboardInterrupt):
                store.look()
        granted = store.gateway.post("/v3/lease/grant", {"TTL": "5"})
        assert "ID" in granted and "kvs" not in granted, granted
        store.revoke(granted["ID"])
    finally:
        store.close()


def test_a_redis_call_cut_short_never_leaves_its_answers_for_the_next(
    skf: ModuleType, redis_lock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = skf._store_for(redis_lock)
    try:
        store.look()
        with monkeypatch.context() as patch:
            before_each_receive(patch, interrupted, {})
            with pytest.raises(KeyboardInterrupt):
                store.look()
        assert store.gateway.call(("ECHO", "the next answer")) == [b"the next answer"]
    finally:
        store.close()


def interrupted(*args: object) -> None:
    raise KeyboardInterrupt


# --- A signal as the CLI's main() begins ---------------------------------------------------

SIGNAL_AS_MAIN_BEGINS = """
import os, runpy, signal, sys
script, lock = sys.argv[1], sys.argv[2]
def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "main" and frame.f_code.co_filename == script:
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGHUP)  # handled as main() begins (RESUME, 3.12+)
sys.argv = [script, "acquire", "--lock", lock, "--owner", "wf:sk:1"]
sys.setprofile(profile)
runpy.run_path(script, run_name="__main__")
"""


def test_a_signal_as_main_begins_is_a_clean_interrupt(lock: Path) -> None:
    """A handler that runs on main()'s first line, before main's own try (CI saw it
    on 3.13 once in 125 random signals), once printed a traceback of _Interrupted."""
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_AS_MAIN_BEGINS, str(SCRIPT), str(lock)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    run = Run(proc.returncode, proc.stdout, proc.stderr)
    assert run.code == 128 + SIGHUP and run.out == "", run
    assert run.error == "interrupted by SIGHUP before it changed anything", run
    assert beside(lock) == []
