"""run: hold the lock for as long as a command runs, renewed, on both stores.

Every test starts real processes: `run` itself, the command it runs, and contenders
that try to take the lock many times a second. Timeouts are the smallest that can
be renewed safely (3 s, `--stale-after 0.05`), so a command of 8 s outlives
several of them.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, linux_only, posix_only
from loader import SCRIPT
from lockfiles import beside, taken_over, write_record
from servers import Etcd, etcd_post, start_etcd
from signals import INTERRUPTING

SHORT = "0.05"  # minutes: 3 s, renewed every second
PY = sys.executable


def start_run(
    lock: str, *command: str, owner: str = "wf:run", extra: tuple[str, ...] = (), **popen: object
) -> subprocess.Popen[bytes]:
    argv = [PY, str(SCRIPT), "run", "--lock", lock, "--owner", owner, *extra, "--", *command]
    kwargs: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    kwargs.update(popen)
    return subprocess.Popen(argv, **kwargs)


def finished(proc: subprocess.Popen[bytes], timeout: float = 60) -> Run:
    out, err = proc.communicate(timeout=timeout)
    return Run(proc.returncode, out.decode(), err.decode())


def wait_for_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


CONTENDER = textwrap.dedent(
    """
    import importlib.util, json, sys, time
    spec = importlib.util.spec_from_file_location("skf", sys.argv[1])
    skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)
    lock, until = sys.argv[2], float(sys.argv[3])
    took = 0
    tries, holders = [], set()
    while time.time() < until:
        tries.append(time.time())
        result = skf.acquire(lock, "contender:c:1", 60.0)
        if result["acquired"]:
            took += 1
            skf.release(lock, "contender:c:1")
        else:
            holders.add(result["held_by"])
        holders.add(skf.status(lock, 60.0)["held_by"])
        time.sleep(0.05)
    print(json.dumps({"tries": tries, "took": took, "holders": sorted(map(str, holders))}))
    """
)


def contend(lock: str, until: float, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A process that tries to take ``lock`` as often as it can until ``until`` (by
    time.time(), so that a contender slow to start never tries past it); it prints
    when it tried (time.time()), how often it took the lock, and who held it."""
    return subprocess.Popen(
        [PY, "-c", CONTENDER, str(SCRIPT), lock, str(until)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


# --- Holding the lock while the command runs ----------------------------------------------


@pytest.mark.timeout(90)
@posix_only("starts an etcd of its own (2 s tokens)")
def test_a_command_outliving_several_timeouts_keeps_the_lock_from_contenders(
    tmp_path: Path, etcd_lock: str, short_token_etcd: Etcd, redis_lock: str
) -> None:
    """On every store at once (a file; etcd; etcd whose auth tokens live 2 s, so that
    renewals must authenticate anew; Redis), a run of 8 s with a 3 s timeout while two
    processes per lock try to take it for the next 6.5 s, as often as they can: they
    try past its first timeout and never take it. Where etcd's password checks make a
    renewal slow (a loaded machine), its run holds for 6 s, 16 s long, each renewal
    with the time it needs before the run must stop its command (design.md)."""
    token_env = {**os.environ, "ETCDCTL_USER": "root:root-pw"}
    stores = {
        "file": (str(tmp_path / "locks" / "run.lock"), None, SHORT, 8),
        "etcd": (etcd_lock, None, SHORT, 8),
        "etcd, 2 s tokens": (short_token_etcd.url("locks/token"), token_env, "0.1", 16),
        "redis": (redis_lock, None, SHORT, 8),
    }
    runs: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    for name, (lock, env, timeout, lasts) in stores.items():
        ready = tmp_path / f"ready-{len(runs)}"
        command = f"open({str(ready)!r}, 'w').write('x'); import time; time.sleep({lasts})"
        runs[name] = (
            start_run(lock, PY, "-c", command, extra=("--stale-after", timeout), env=env),
            ready,
        )
    for _, ready in runs.values():
        wait_for_file(ready)
    started = time.time()  # the runs' commands started before this: they end after it
    rivals = {
        name: [contend(lock, started + lasts - 1.5, env) for _ in range(2)]
        for name, (lock, env, _, lasts) in stores.items()
    }
    for name, (proc, _) in runs.items():
        outcomes = [json.loads(rival.communicate(timeout=60)[0]) for rival in rivals[name]]
        run = finished(proc)
        assert run.code == 0 and run.out == "" and run.err == "", (name, run)
        first_timeout = 60 * float(stores[name][2]) + 0.5
        late = [at for o in outcomes for at in o["tries"] if at > started + first_timeout]
        assert late, (name, "no try came after the first timeout would have passed")
        for outcome in outcomes:
            assert outcome["took"] == 0, (name, outcome)
            assert len(outcome["holders"]) == 1 and outcome["holders"][0].startswith("wf:run:")
        lock, env, _, _ = stores[name]
        status = subprocess.run(
            [PY, str(SCRIPT), "status", "--lock", lock],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert json.loads(status.stdout)["state"] == "free", name  # released at the end


@posix_only("a POSIX shell script")
def test_status_during_a_run_names_the_runs_owner(any_lock: str, tmp_path: Path) -> None:
    out = tmp_path / "seen"
    script = f'"$1" "$2" status --lock "$SKF_RUN_LOCK" > {out}; echo "$SKF_RUN_LOCK_OWNER" >> {out}'
    run = finished(start_run(any_lock, "sh", "-c", script, "sh", PY, str(SCRIPT)))
    assert run.code == 0, run
    status_line, owner = out.read_text().splitlines()
    status = json.loads(status_line)
    assert status["state"] == "held" and status["held_by"] == owner and owner.startswith("wf:run:")
    assert status["lock"] == (any_lock if "://" in any_lock else str(Path(any_lock)))


# --- A hold the owner had before run started ---------------------------------------------


def answer(*argv: str) -> Any:
    """The JSON a call of the script in a fresh process prints."""
    done = subprocess.run([PY, str(SCRIPT), *argv], capture_output=True, timeout=60, check=False)
    return json.loads(done.stdout)


def hold_of(lock: str, owner: str, slots: int = 1) -> str | None:
    """When ``owner``'s live hold of ``lock`` goes stale, by status in a fresh process
    (None: it holds nothing live)."""
    seen = answer("status", "--lock", lock, "--slots", str(slots))
    holds = seen["holders"] if seen["holders"] else [seen] if seen["state"] == "held" else []
    return next((h["stale_at"] for h in holds if h.get("owner", h.get("held_by")) == owner), None)


def workflow_hold(lock: str, minutes: str, slots: int = 1) -> tuple[str, str]:
    """A workflow's own hold, taken by acquire in a fresh process: its owner and when it
    goes stale."""
    taken = answer(
        "acquire",
        "--lock",
        lock,
        "--owner",
        "wf:flow",
        "--stale-after",
        minutes,
        "--slots",
        str(slots),
    )
    assert taken["acquired"], taken
    return taken["owner"], taken["stale_at"]


@pytest.mark.parametrize("slots", [1, 3])
def test_a_run_step_leaves_its_workflows_hold_held_and_no_shorter(
    any_lock: str, slots: int
) -> None:
    """The workflow holds the lock (or a slot of it) for an hour; a step runs under the
    same owner with a 3 s timeout and fails: the hold stays, going stale no sooner."""
    owner, stale_at = workflow_hold(any_lock, "60", slots)
    extra = ("--stale-after", SHORT, "--slots", str(slots))
    run = finished(start_run(any_lock, PY, "-c", "raise SystemExit(7)", owner=owner, extra=extra))
    assert run.code == 7 and run.err == "", run
    after = hold_of(any_lock, owner, slots)
    assert after is not None and after >= stale_at, (after, stale_at)


@pytest.mark.timeout(60)
def test_a_run_step_renews_its_workflows_hold_past_its_timeout(any_lock: str) -> None:
    """The workflow's hold has a 3 s timeout; a step of 4.5 s under the same owner keeps
    it live, and leaves it held (no release) when the step ends. Under Wine, where a
    renewal can take a second, 8 s and 9.5 s: a renewal must end well within the hold."""
    timeout, step = ("0.1333", "9.5") if sys.platform == "win32" else (SHORT, "4.5")
    owner, stale_at = workflow_hold(any_lock, timeout)
    extra = ("--stale-after", timeout)
    sleep = f"import time; time.sleep({step})"
    run = finished(start_run(any_lock, PY, "-c", sleep, owner=owner, extra=extra))
    assert run.code == 0 and run.err == "", run
    after = hold_of(any_lock, owner)
    assert after is not None and after > stale_at, (after, stale_at)
    # Held, so left to its owner. Releasing is only tidying: on a loaded machine (a
    # Windows process under Wine starts in half a second) the 3 s hold may be past.
    answer("release", "--lock", any_lock, "--owner", owner)


def test_a_run_step_that_cannot_start_leaves_its_workflows_hold(tmp_path: Path) -> None:
    lock = str(tmp_path / "run.lock")
    owner, stale_at = workflow_hold(lock, "60")
    run = finished(start_run(lock, str(tmp_path / "no-such-command"), owner=owner))
    assert run.code == 127 and "could not start" in run.error
    after = hold_of(lock, owner)  # renewed by run's take: a second later, or the same
    assert after is not None and after >= stale_at, (after, stale_at)


# --- What the command sees and gives back ---------------------------------------------


KILLED_BY_A_SIGNAL = [("kill -TERM $$", 143), ("kill -KILL $$", 137)]


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("raise SystemExit(0)", 0),
        ("raise SystemExit(7)", 7),
        *(pytest.param(*case, marks=posix_only("signals")) for case in KILLED_BY_A_SIGNAL),
    ],
)
def test_the_commands_exit_code_passes_through(tmp_path: Path, command: str, code: int) -> None:
    lock = tmp_path / "run.lock"
    shell = command.startswith("kill")
    argv = ["sh", "-c", command] if shell else [PY, "-c", command]
    run = finished(start_run(str(lock), *argv))
    assert run.code == code and run.out == "" and run.err == "", run
    assert beside(lock) == []  # released, whatever the command did


def test_stdout_and_stdin_pass_through_byte_for_byte(tmp_path: Path) -> None:
    data = bytes(range(256)) * 64 + b"\nno newline at the end"
    copy = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"
    proc = start_run(str(tmp_path / "run.lock"), PY, "-c", copy, stdin=subprocess.PIPE)
    out, err = proc.communicate(data, timeout=60)
    assert (proc.returncode, out, err) == (0, data, b"")


def test_the_environment_names_the_lock_and_owner(tmp_path: Path) -> None:
    lock = str(tmp_path / "run.lock")
    show = (
        "import os; names = ['SKF_RUN_LOCK', 'SKF_RUN_LOCK_OWNER'];"
        " print(*(os.environ[name] for name in names), sep='|', end='')"
    )
    proc = start_run(lock, PY, "-c", show, owner="wf:sk:given-id")
    run = finished(proc)
    assert run.out == f"{lock}|wf:sk:given-id", run


@posix_only("POSIX signals sent to a real process")
@pytest.mark.parametrize("sig", INTERRUPTING)
def test_a_signal_to_run_reaches_the_command_and_the_lock_goes_after(
    tmp_path: Path, sig: signal.Signals
) -> None:
    lock, got = tmp_path / "run.lock", tmp_path / "got"
    command = textwrap.dedent(f"""
        import signal, sys, time
        def note(signum, frame):
            open({str(got)!r}, "w").write(signal.Signals(signum).name)
            sys.exit(0)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, note)
        open({str(got)!r} + ".ready", "w").write("x")
        time.sleep(60)
    """)
    proc = start_run(str(lock), PY, "-c", command)
    wait_for_file(Path(str(got) + ".ready"))
    assert json.loads(lock.read_text())["owner"].startswith("wf:run:")  # held meanwhile
    proc.send_signal(sig)
    run = finished(proc)
    assert run.code == 0 and run.err == "", run  # the command's own exit code
    assert got.read_text() == sig.name
    assert beside(lock) == ["got", "got.ready"]  # the lock is released, nothing left


def test_a_command_that_cannot_start_is_127_and_the_lock_is_released(tmp_path: Path) -> None:
    lock = tmp_path / "run.lock"
    run = finished(start_run(str(lock), str(tmp_path / "no-such-command")))
    assert run.code == 127 and "could not start" in run.error
    assert beside(lock) == []


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        ("rm {lock} && mkdir {lock}", "the lock path {lock} is a folder; give the path of a file"),
        ("rm -r {folder} && ln -s {folder} {folder}", "{loop}: {lock}.skf-guard"),
    ],
    ids=["a folder at the lock path", "a folder that links to itself"],
)
@posix_only("a POSIX shell's rm and ln, and a folder that links to itself")
def test_a_release_that_fails_after_the_command_is_reported_and_the_code_stands(
    tmp_path: Path, breakage: str, reason: str
) -> None:
    """The command broke the lock's path: the release that follows fails. run says
    so in one JSON line on stderr, and still exits with the command's own code;
    what the command left is left alone."""
    lock = tmp_path / "locks" / "run.lock"
    names = {"lock": lock, "folder": lock.parent, "loop": os.strerror(errno.ELOOP)}
    lock.parent.mkdir()
    command = breakage.format(**names) + " && exit 5"
    run = finished(start_run(str(lock), "sh", "-c", command))
    assert run.code == 5 and run.out == "", run
    assert run.err.count("\n") == 1
    assert json.loads(run.err) == {
        "status": "error",
        "message": "the lock could not be released: " + reason.format(**names),
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locks"]
    assert lock.is_dir() or os.readlink(lock.parent) == str(lock.parent)


# --- A lost lock stops the command ------------------------------------------------------


LONG_COMMAND = textwrap.dedent("""
    import signal, sys, time
    marker = sys.argv[1]
    def note(signum, frame):
        open(marker, "w").write(signal.Signals(signum).name)
        sys.exit(1)
    signal.signal(signal.SIGTERM, note)
    open(marker + ".ready", "w").write("x")
    time.sleep(60)
""")


def revoke_lease(etcd: Etcd, lock: str) -> None:
    """Take the lock away from outside: revoke the lease its record lives on."""
    key = lock.split("/", 3)[3].encode()
    answer = etcd_post(etcd.client, "/v3/kv/range", {"key": base64.b64encode(key).decode()})
    etcd_post(etcd.client, "/v3/lease/revoke", {"ID": answer["kvs"][0]["lease"]})


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["taken over", "deleted", "lease revoked"])
def test_a_lost_lock_stops_the_command_and_run_exits_3(
    skf: ModuleType, tmp_path: Path, request: pytest.FixtureRequest, how: str
) -> None:
    marker = tmp_path / "marker"
    if how == "lease revoked":
        etcd: Etcd = request.getfixturevalue("etcd")
        lock = etcd.url(f"skf-tests/lost/{os.urandom(4).hex()}")
    else:
        lock = str(tmp_path / "run.lock")
    proc = start_run(lock, PY, "-c", LONG_COMMAND, str(marker), extra=("--stale-after", SHORT))
    wait_for_file(Path(str(marker) + ".ready"))
    if how == "taken over":
        taken_over(skf, Path(lock), "wf:intruder:1")
    elif how == "deleted":
        os.unlink(lock)
    else:
        revoke_lease(request.getfixturevalue("etcd"), lock)
    run = finished(proc)  # well before the command's 60 s: it was stopped
    assert run.code == 3, run
    if sys.platform == "win32":
        assert not marker.exists()  # Windows ends a command at once (TerminateProcess)
    else:
        assert marker.read_text() == "SIGTERM"  # stopped, with the chance to clean up
    assert f"lost the lock {lock}" in run.error and "was stopped" in run.error
    if how == "taken over":
        assert "wf:intruder:1 holds it" in run.error
        assert json.loads(Path(lock).read_text())["owner"] == "wf:intruder:1"  # left to it
    else:
        assert "no run holds it now" in run.error


@pytest.mark.timeout(60)
@posix_only("SIGTERM, which a command may ignore (Windows ends a command at once)")
def test_a_command_ignoring_sigterm_is_killed_after_the_grace_period(
    skf: ModuleType, tmp_path: Path
) -> None:
    lock, ready = tmp_path / "run.lock", tmp_path / "ready"
    command = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" open({str(ready)!r}, 'w').write('x'); time.sleep(60)"
    )
    proc = start_run(str(lock), PY, "-c", command, extra=("--stale-after", SHORT))
    wait_for_file(ready)
    taken_over(skf, lock, "wf:intruder:1")
    started = time.monotonic()
    run = finished(proc)
    assert run.code == 3 and "was stopped" in run.error
    assert time.monotonic() - started >= 4  # SIGTERM, the grace period, then SIGKILL


def time_now() -> datetime:  # a datetime of now, for write_record
    return datetime.now(UTC)


# --- etcd with short-lived auth tokens -------------------------------------------------


@pytest.fixture(scope="module")
def short_token_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    """etcd with authentication whose tokens live 2 s (etcd's --auth-token-ttl)."""
    server = start_etcd(tmp_path_factory.mktemp("token-etcd"), flags=["--auth-token-ttl", "2"])
    etcd_post(server.client, "/v3/auth/user/add", {"name": "root", "password": "root-pw"})
    etcd_post(server.client, "/v3/auth/user/grant", {"user": "root", "role": "root"})
    etcd_post(server.client, "/v3/auth/enable", {})
    yield server
    server.stop()


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped yet has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@linux_only("a parent-death signal (prctl), which macOS and Windows lack")
@pytest.mark.timeout(60)
def test_a_command_ends_within_a_second_when_run_is_killed_with_sigkill(tmp_path: Path) -> None:
    """run cannot stop its command once killed: the command asked, before it started,
    for SIGTERM when run dies, so it never goes on without the lock unnoticed."""
    told = tmp_path / "pid"
    command = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    run = start_run(str(tmp_path / "run.lock"), PY, "-c", command, str(told))
    deadline = time.monotonic() + 30
    while not (told.exists() and told.read_text()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    pid = int(told.read_text())
    assert not gone(pid)
    run.kill()
    run.wait()
    ended = time.monotonic() + 1
    while not gone(pid):
        assert time.monotonic() < ended, "the command outlived run by a second"
        time.sleep(0.02)


# --- Arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--owner", "wf:sk", "--", "true"], "run needs --lock"),
        (["--lock", "L", "--owner", "wf:sk"], "run needs -- and the command"),
        (["--lock", "L", "--owner", "wf:sk", "--"], "run needs a command after --"),
        (
            ["--lock", "L", "--owner", "wf:sk", "--stale-after", "0.04", "--", "true"],
            "too short to renew",
        ),
        (["--lock", "L", "--owner", "wf:bad owner", "--", "true"], "whitespace"),
    ],
)
def test_bad_run_arguments_are_exit_1_and_start_nothing(
    cli: Callable[..., Run], tmp_path: Path, argv: list[str], words: str
) -> None:
    argv = [str(tmp_path / "locks" / "x.lock") if a == "L" else a for a in argv]
    run = cli("run", *argv)
    assert run.code == 1 and words in run.error, run
    assert not (tmp_path / "locks").exists()


@pytest.mark.parametrize(
    ("text", "least"),
    [("1s", "3 seconds"), ("0.01", "0.05 minutes"), ("0.0005h", "0.000833333 hours")],
)
def test_runs_shortest_timeout_is_stated_in_the_unit_it_was_given_in(
    cli: Callable[..., Run], tmp_path: Path, text: str, least: str
) -> None:
    lock = tmp_path / "x.lock"
    run = cli("run", "--lock", lock, "--owner", "wf:sk", "--stale-after", text, "--", PY, "-c", "")
    assert run.code == 1, run
    assert run.error == (
        f"--stale-after of {text!r} is too short to renew the lock safely while work runs;"
        f" give at least {least}"
    )
    assert not lock.exists()


def test_the_shortest_timeout_run_names_is_taken(cli: Callable[..., Run], tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    run = cli("run", "--lock", lock, "--owner", "wf:sk", "--stale-after", "3s", "--", PY, "-c", "")
    assert run.code == 0, run
    assert not lock.exists()


def test_a_help_flag_after_the_separator_belongs_to_the_command(tmp_path: Path) -> None:
    show = "import sys; print(*sys.argv[1:], sep='|', end='|')"
    run = finished(start_run(str(tmp_path / "run.lock"), PY, "-c", show, "-h", "--help"))
    assert run.code == 0 and run.out == "-h|--help|", run


def test_a_refused_run_starts_nothing_and_prints_the_refusal_on_stderr(tmp_path: Path) -> None:
    lock, ran = tmp_path / "run.lock", tmp_path / "ran"
    write_record(lock, "wf:other:1", time_now())
    touch = "import sys; open(sys.argv[1], 'w').close()"
    run = finished(start_run(str(lock), PY, "-c", touch, str(ran), extra=("--wait", "0.3")))
    assert run.code == 3 and run.out == "" and not ran.exists()
    refusal = json.loads(run.err)
    assert refusal["acquired"] is False and refusal["held_by"] == "wf:other:1"
    assert refusal["message"].startswith("gave up after waiting")


# --- A person waiting can see why ------------------------------------------------------


def read_terminal(master: int) -> bytes:
    """All a pseudo-terminal's other end wrote, until it closed."""
    data = b""
    while True:
        try:
            piece = os.read(master, 4096)
        except OSError:  # EIO: the other end is closed
            return data
        if not piece:
            return data
        data += piece


@posix_only("a pseudo-terminal")
@pytest.mark.parametrize("command", ["acquire", "run"])
def test_waiting_on_a_terminal_shows_one_line_and_clears_it(tmp_path: Path, command: str) -> None:
    import pty

    lock = tmp_path / "run.lock"
    write_record(lock, "wf:other:1", time_now())
    master, slave = pty.openpty()
    argv = [PY, str(SCRIPT), command, "--lock", str(lock), "--owner", "wf:me", "--wait", "1.5"]
    proc = subprocess.Popen(
        [*argv, *(["--", "true"] if command == "run" else [])], stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    shown = read_terminal(master).decode()
    out = proc.communicate(timeout=60)[0].decode()
    os.close(master)
    assert proc.returncode == 3
    *lines, cleared, after = shown.split("\x1b[K")  # each rewrite: \r, the line, clear the rest
    assert len(lines) >= 2 and cleared == "\r", shown  # rewritten, then cleared
    for line in lines:
        assert line.startswith("\rwaiting, 1st in line: held by wf:other:1 since 20"), line
        assert ", giving up in 1 s (" in line or ", giving up in 2 s (" in line
        assert line.endswith(f" ({lock})") and "\n" not in line
    if command == "acquire":  # the answer is on stdout, after the line was cleared
        assert after == "" and json.loads(out)["held_by"] == "wf:other:1"
    else:  # the refusal follows the cleared line
        assert json.loads(after)["held_by"] == "wf:other:1" and out == ""


def test_waiting_with_stderr_not_a_terminal_writes_nothing_extra(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    lock = tmp_path / "run.lock"
    write_record(lock, "wf:other:1", time_now())
    run = cli("acquire", "--lock", lock, "--owner", "wf:me", "--wait", "0.5")
    assert run.code == 3 and run.err == "" and run.json["held_by"] == "wf:other:1"
