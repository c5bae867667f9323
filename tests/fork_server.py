"""Processes forked from one Python process that has imported what they import
already, on Linux: serve's (the MCP SDK, about a second of a core each, ~50 sessions
a run) and the CLI calls' and workers' (the standard library: a ``status`` call costs
28 ms of CPU forked and 40 ms started anew, ~1,300 processes a run), on every Python
in CI.

A child is a real process of its own, with its own pipes, pid and exit status, that
runs ``python SCRIPT ARGS`` as the interpreter would (the script as ``__main__``, its
folder first on ``sys.path``, the environment and folder the test gave, the
interpreter's own exit: threads joined, ``atexit`` run, an uncaught exception printed
and exit 1, a signal's default action). Only the interpreter's start and the
imports are shared. So a test's ``serve`` or call differs from one it started itself
in how its imports were paid for, never in what it does. A process of another
interpreter, or one whose environment differs in what an interpreter reads as it
starts (``PYTHON*``, ``LD_*``, the locale, the time zone), is started anew
(``ForkServer.can_fork``).

Run as a script it is the server: it listens on the Unix socket it is given until its
stdin ends (its test process ended), forks a child for each request, and tells the
requester the child's pid, then its exit status (``os.waitstatus_to_exitcode``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

__all__ = ["ForkServer", "ForkedProcess", "forks_importing", "popen_text"]

# A request: one message, {"argv", "env", "cwd"}, with the child's stdin, stdout and
# stderr as descriptors. Answers: {"pid"}, then {"code"} once the child has ended. A
# larger request than REQUEST_MAX (a test's very long argument) is started anew: one
# message must fit the socket's buffer.
MESSAGE_MAX = 1 << 20
REQUEST_MAX = 1 << 16
ANSWERED_WITHIN = 60.0  # a fork's pid, told under CI's load

# What the interpreter reads as it starts, which a forked child could not honour: its
# own settings, the loader's, the locale (the encoding of its stdio), the time zone.
READ_AT_START = ("PYTHON", "LD_", "LC_", "LANG", "TZ")


def _read_at_start(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith(READ_AT_START)}


def _request(argv: list[str], env: dict[str, str], cwd: str) -> bytes:
    return json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()


def _place(cwd: Any) -> str:
    """The folder a child starts in: ``cwd`` as Popen takes it, else this one's."""
    return os.fspath(cwd) if cwd is not None else os.getcwd()


class ForkedProcess:
    """A child of the fork server, as much of ``subprocess.Popen`` (text mode, utf-8,
    all three pipes) as the tests use: pid, pipes, returncode, poll, wait, kill,
    terminate, send_signal, communicate."""

    def __init__(self, server: ForkServer, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.args = argv
        self.returncode: int | None = None
        ends = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read, write)
        theirs = [ends[0][0], ends[1][1], ends[2][1]]
        ours = [ends[0][1], ends[1][0], ends[2][0]]
        self._answers = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._answers.settimeout(ANSWERED_WITHIN)
            self._answers.connect(server.address)
            socket.send_fds(self._answers, [_request(argv, env, cwd)], theirs)
            self.pid: int = json.loads(self._answers.recv(MESSAGE_MAX))["pid"]
        except BaseException:
            for fd in ours:
                os.close(fd)
            self._answers.close()
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        # What communicate() has read of each pipe, and has yet to write.
        self._read: dict[int, list[bytes]] | None = None
        self._ended_pipes: set[int] = set()
        self._unwritten = memoryview(b"")
        self.stdin = open(ours[0], "w", encoding="utf-8")  # noqa: SIM115
        self.stdout = open(ours[1], encoding="utf-8")  # noqa: SIM115
        self.stderr = open(ours[2], encoding="utf-8")  # noqa: SIM115

    def _ended(self, timeout: float | None) -> bool:
        """Whether the child has ended, told within ``timeout`` seconds (None: wait)."""
        if self.returncode is None:
            self._answers.settimeout(timeout)
            try:
                answer = self._answers.recv(MESSAGE_MAX)
            except (TimeoutError, BlockingIOError):
                return False
            if not answer:
                # Nobody can tell its end any more: it is ended here, so that no test
                # leaves it running (reaped() reports the error).
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                raise RuntimeError(f"the fork server ended before its child {self.pid}")
            self.returncode = int(json.loads(answer)["code"])
            self._answers.close()
        return True

    def poll(self) -> int | None:
        return self.returncode if self._ended(0.0) else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def send_signal(self, signum: int) -> None:
        """``signum`` to the child, unless it has ended (as Popen does)."""
        if self.poll() is None:
            os.kill(self.pid, signum)

    def communicate(
        self, input: str | None = None, timeout: float | None = None
    ) -> tuple[str, str]:
        """As ``Popen.communicate`` in text mode: ``input`` written to stdin, which is
        then closed; stdout and stderr read to their ends; the exit waited for. Past
        ``timeout``, ``subprocess.TimeoutExpired``, the child left running and what
        it wrote kept for the next call."""
        return self.exchange((input or "").encode("utf-8"), timeout)

    def exchange(self, input: bytes, timeout: float | None = None) -> tuple[str, str]:
        """``communicate``, its input given as bytes (which may be no text at all)."""
        assert self.stdin is not None and self.stdout is not None and self.stderr is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._read is None:  # the first call: what it reads, and what it writes
            self._read = {self.stdout.fileno(): [], self.stderr.fileno(): []}
            self._unwritten = memoryview(input)
            if not self._unwritten and not self.stdin.closed:
                self.stdin.close()
        with selectors.DefaultSelector() as open_ends:
            for fd in self._read:
                if fd not in self._ended_pipes:
                    open_ends.register(fd, selectors.EVENT_READ)
            if not self.stdin.closed:
                self.stdin.flush()
                open_ends.register(self.stdin.fileno(), selectors.EVENT_WRITE)
            while open_ends.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                ready = open_ends.select(left) if left is None or left > 0 else []
                if not ready:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                for key, _ in ready:
                    if key.fd not in self._read:  # stdin: the next part of the input
                        if not self._write_some(key.fd):
                            open_ends.unregister(key.fd)
                            self.stdin.close()
                        continue
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        self._read[key.fd].append(data)
                    else:
                        open_ends.unregister(key.fd)
                        self._ended_pipes.add(key.fd)
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        out, err = (b"".join(self._read[f.fileno()]) for f in (self.stdout, self.stderr))
        self.stdout.close()
        self.stderr.close()
        return popen_text(out), popen_text(err)

    def _write_some(self, fd: int) -> bool:
        """The next part of the input written to stdin: whether some is left to write
        (none once the child has closed its end)."""
        try:
            written = os.write(fd, self._unwritten[: select.PIPE_BUF])
        except BrokenPipeError:
            written = len(self._unwritten)
        self._unwritten = self._unwritten[written:]
        return bool(self._unwritten)


def popen_text(data: bytes) -> str:
    """A pipe's bytes as ``Popen`` gives them in text mode: utf-8, newlines translated."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


_SERVERS: dict[tuple[str, ...], ForkServer] = {}
_STARTING = threading.Lock()


def forks_importing(imports: list[str]) -> ForkServer | None:
    """This process's fork server that has imported ``imports``, started at its first
    use and closed at exit; None off Linux (where every process starts anew)."""
    if sys.platform != "linux":
        return None
    with _STARTING:
        server = _SERVERS.get(tuple(imports))
        if server is None:
            server = _SERVERS[tuple(imports)] = ForkServer(imports)
            atexit.register(server.close)
    return server


class ForkServer:
    """The server, started at once and ended with ``close`` (or when this process ends:
    its stdin is a pipe from here)."""

    def __init__(self, imports: list[str]) -> None:
        self.read_at_start = _read_at_start(os.environ)
        self._folder = tempfile.TemporaryDirectory(prefix="skf-forks-")
        self.address = os.path.join(self._folder.name, "forks")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.address, *imports],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()  # once the imports are done and it listens
        if ready != b"listening\n":
            self.proc.kill()
            raise RuntimeError(f"the fork server did not start: {ready!r}")

    def can_fork(self, argv: list[str], env: dict[str, str] | None, popen: dict[str, Any]) -> bool:
        """Whether ``argv``, with ``env`` (None: this process's) and the Popen keywords
        ``popen`` (besides ``env``), can be forked here: this interpreter running a
        script, with no keyword but ``cwd``, a request that fits one message, and the
        environment the server started with as far as an interpreter's start reads it."""
        if set(popen) - {"cwd"}:
            return False
        if len(argv) < 2 or argv[0] != sys.executable or not argv[1].endswith(".py"):
            return False
        environment = dict(os.environ if env is None else env)
        if len(_request(argv, environment, _place(popen.get("cwd")))) > REQUEST_MAX:
            return False
        return _read_at_start(environment) == self.read_at_start

    def start(self, argv: list[str], env: dict[str, str] | None, cwd: Any) -> ForkedProcess:
        return ForkedProcess(self, argv, dict(os.environ if env is None else env), _place(cwd))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()
        self._folder.cleanup()


# --- As a script: the server ------------------------------------------------------


class _Server:
    """The fork server's state: where requests come, and the children not yet ended,
    each with the connection that asked for it."""

    def __init__(self, address: str) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(address)
        self.listener.listen(64)
        self.woken, self.wake = socket.socketpair()
        self.woken.setblocking(False)
        self.wake.setblocking(False)
        signal.set_wakeup_fd(self.wake.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a child's end wakes the selector
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.woken, selectors.EVENT_READ)
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
        self.children: dict[int, socket.socket] = {}

    def serve(self) -> tuple[dict[str, Any], list[int]] | None:
        """Fork a child for each request until stdin ends (None); in a child, its
        request and its stdio descriptors."""
        print("listening", flush=True)
        while True:
            for key, _ in self.selector.select():
                if key.fileobj == sys.stdin.fileno():
                    if not os.read(sys.stdin.fileno(), 4096):
                        return None
                elif key.fileobj is self.woken:
                    with contextlib.suppress(BlockingIOError):
                        while self.woken.recv(4096):
                            pass
                else:
                    child = self.fork()
                    if child is not None:
                        return child
            self.tell_ended()

    def fork(self) -> tuple[dict[str, Any], list[int]] | None:
        """Fork for the next request: None here, its request and descriptors in the
        child. A request that never came whole is dropped, and a child whose requester
        has gone before it heard the pid is killed: the server serves on."""
        conn, _ = self.listener.accept()
        fds: list[int] = []
        try:
            message, fds, _, _ = socket.recv_fds(conn, MESSAGE_MAX, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            conn.close()
            return None
        pid = os.fork()
        if pid == 0:
            # The child: nothing of the server's is left open or armed.
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.selector.close()
            for own in (self.listener, self.woken, self.wake, conn, *self.children.values()):
                own.close()
            return request, fds
        for fd in fds:
            os.close(fd)
        self.children[pid] = conn
        try:
            conn.sendall(json.dumps({"pid": pid}).encode())
        except OSError:
            os.kill(pid, signal.SIGKILL)
        return None

    def tell_ended(self) -> None:
        """Tell each child's requester its exit status, once it has ended."""
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            conn = self.children.pop(pid)
            with contextlib.suppress(OSError):  # its requester may have gone
                conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())
            conn.close()


def _run(request: dict[str, Any], fds: list[int]) -> None:
    """Become ``python SCRIPT ARGS`` with the request's stdio, environment and folder."""
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script, *_ = sys.argv = request["argv"][1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import runpy

    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    import importlib

    for name in sys.argv[2:]:
        importlib.import_module(name)
    # What is imported stays put: a child's collections never walk it, so never
    # copy its pages (an empty script cost twice as much forked without this).
    gc.freeze()
    child = _Server(sys.argv[1]).serve()
    if child is not None:
        _run(*child)
