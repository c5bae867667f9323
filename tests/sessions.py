"""Agent sessions as their clients drive ``skf-run-lock.py serve``, an MCP server over
stdio: line by line, one JSON-RPC message a line (``Served``), or with the MCP SDK's own
client (``sdk_session``). Run as a script it is a client process a test can kill
(``client``), or a reaper that outlives the processes a test kills and sees how the
ones they started end (``reap``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any, TextIO

from calls import Run
from fork_server import ForkedProcess, ForkServer
from loader import SCRIPT
from wrapped import WrappedStore

SERVE = [sys.executable, str(SCRIPT), "serve"]
SESSIONS = os.path.abspath(__file__)  # this file, run as a client process or a reaper
SDK = "mcp>=2.3,<3"
PROTOCOL = "2025-06-18"  # the protocol version the line-by-line client asks for
TOOLS = ["acquire", "release", "status", "check", "list", "holds"]
# What serve imports of the SDK: a fork server imports it once for every serve it forks.
SDK_MODULES = ["mcp.types", "mcp.server.lowlevel", "mcp.server.stdio"]

# What serve promises: a session that ends by any way but SIGKILL frees its holds within
# this (releases get 1.5 s at most); a hard deadline, not a timing measured.
FREED_WITHIN = 2.0
# A server answers initialize within this: the SDK's start-up takes 1 to 5 s under load.
STARTED_WITHIN = 60.0


class Served:
    """A process speaking MCP over its stdio (``serve``, or a process that starts it
    with these pipes), driven as a client drives it: one JSON object a line. Every
    message it writes is kept in order; what it writes on stderr too (a reaper's
    reports are JSON lines there). ``read_ahead`` False: its stdout is read only as a
    test asks for a line, so that closing it (``close_output``) closes the pipe at once.
    Forked from ``forks`` where it can be (fork_server.py), else started anew."""

    def __init__(
        self,
        argv: list[str],
        *,
        read_ahead: bool = True,
        forks: ForkServer | None = None,
        **popen: Any,
    ) -> None:
        env = popen.pop("env", None)
        self.proc: subprocess.Popen[str] | ForkedProcess
        if forks is not None and forks.can_fork(argv, env, popen):
            self.proc = forks.start(argv, env, popen.get("cwd"))
        else:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                env=env,
                **popen,
            )
        self.pid = self.proc.pid
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self.replies: dict[int, dict[str, Any]] = {}
        self.stderr: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []  # stderr, as read so far
        self.ids = itertools.count(1)
        self.read_ahead = read_ahead
        self.unread = b""  # read from stdout, not yet a whole line (read_ahead False)
        if read_ahead:
            threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = {"not a JSON line": line}
            self.messages.put(message)
        self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.put(line)
        self.stderr.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; its id."""
        number = next(self.ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return number

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def _read_line_now(self, until: float) -> None:
        """Read its stdout until a whole line is there, before ``until``, and queue it."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.unread:
            left = until - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                self.messages.put(None)
                return
            self.unread += chunk
        line, _, self.unread = self.unread.partition(b"\n")
        try:
            self.messages.put(json.loads(line))
        except ValueError:
            self.messages.put({"not a JSON line": line.decode("utf-8", "replace")})

    def close_output(self) -> float:
        """Close the pipe of its stdout, as a client that stops listening does; when
        (monotonic). Only where nothing reads it ahead (``read_ahead`` False)."""
        assert not self.read_ahead and self.proc.stdout is not None
        self.proc.stdout.close()
        return time.monotonic()

    def line(self, until: float) -> dict[str, Any]:
        """The next JSON line on its stdout, before ``until`` (time.monotonic())."""
        if not self.read_ahead and self.messages.empty():
            self._read_line_now(until)
        try:
            message = self.messages.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line from the server in time; stderr: {self.err()}") from None
        if message is None:
            self.messages.put(None)  # still ended for the next look
            raise AssertionError(f"the server ended its output; stderr: {self.err()}")
        assert "not a JSON line" not in message, message
        return message

    def pump(self, until: float) -> None:
        """Read the next message, before ``until``: a reply is kept by its id in
        ``replies``, a notification in ``notifications``."""
        message = self.line(until)
        assert message.get("jsonrpc") == "2.0", message
        if "id" in message:
            assert message["id"] not in self.replies, message
            self.replies[message["id"]] = message
        else:
            self.notifications.append(message)

    def reply(self, number: int, within: float = STARTED_WITHIN) -> dict[str, Any]:
        """The reply to request ``number``, within ``within`` seconds."""
        until = time.monotonic() + within
        while number not in self.replies:
            self.pump(until)
        return self.replies.pop(number)

    def await_progress(self, token: str, count: int, within: float = 30.0) -> list[dict[str, Any]]:
        """The progress notifications for ``token``, once there are ``count``."""
        until = time.monotonic() + within
        while len(self.progress(token)) < count:
            self.pump(until)
        return self.progress(token)

    def initialize(self) -> dict[str, Any]:
        """The handshake a client makes: initialize, then notifications/initialized."""
        number = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "skf-run-lock-tests", "version": "1"},
            },
        )
        answer = self.reply(number)["result"]
        assert answer["protocolVersion"] == PROTOCOL
        assert answer["serverInfo"]["name"] == "skf-run-lock"
        self.notify("notifications/initialized")
        return dict(answer)

    def call(self, name: str, arguments: dict[str, Any], token: str | None = None) -> int:
        """Send a tools/call (asking for progress with ``token``); its id."""
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        return self.request("tools/call", params)

    def result(self, number: int, within: float = STARTED_WITHIN) -> dict[str, Any]:
        """The tools/call result of request ``number``."""
        message = self.reply(number, within)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """A tool's answer, which must be no error: its structured content, which its
        text says too."""
        return answer_of(self.result(self.call(name, arguments)))

    def tool_error(self, name: str, arguments: dict[str, Any]) -> str:
        """The message of a tool error (isError true: the call was refused)."""
        result = self.result(self.call(name, arguments))
        assert result.get("isError") is True, result
        assert "structuredContent" not in result, result
        [content] = result["content"]
        assert content["type"] == "text" and content["text"]
        text: str = content["text"]
        return text

    def progress(self, token: str) -> list[dict[str, Any]]:
        """The progress notifications for ``token`` read so far."""
        return [
            n["params"]
            for n in self.notifications
            if n["method"] == "notifications/progress" and n["params"]["progressToken"] == token
        ]

    def end_input(self) -> float:
        """Close its stdin, as a client ending the session does; when (monotonic)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return time.monotonic()

    def signal(self, signum: int) -> float:
        """Send it ``signum``; when (monotonic)."""
        os.kill(self.pid, signum)
        return time.monotonic()

    def exit_code(self, within: float = 30.0) -> int:
        return self.proc.wait(within)

    def err(self) -> str:
        """What it wrote on stderr so far (all of it once it has ended)."""
        while True:
            try:
                line = self.stderr.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self.stderr.put(None)
                break
            self.said.append(line)
        return "".join(self.said)

    def report(self, key: str, within: float = 30.0) -> dict[str, Any]:
        """The next JSON line on its stderr that has ``key`` (a reaper's reports)."""
        until = time.monotonic() + within
        while True:
            try:
                line = self.stderr.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                said = "".join(self.said)
                raise AssertionError(f"no report {key!r} in time: {said}") from None
            if line is None:
                raise AssertionError(f"stderr ended with no report {key!r}: {''.join(self.said)}")
            self.said.append(line)
            with contextlib.suppress(ValueError):
                report = json.loads(line)
                if isinstance(report, dict) and key in report:
                    return report


def answer_of(result: dict[str, Any]) -> dict[str, Any]:
    """A tools/call result that is no error: its structured content, which its one text
    content says as JSON too."""
    assert result.get("isError") is not True, result
    structured: dict[str, Any] = result["structuredContent"]
    [content] = result["content"]
    assert content["type"] == "text" and json.loads(content["text"]) == structured
    assert list(structured)[-1] == "lost_holds", structured
    return structured


def freed(skf: ModuleType, cli: Callable[..., Run], lock: str, since: float) -> dict[str, Any]:
    """``lock``, whose holder's session ended at ``since`` (time.monotonic()), is free
    for another run before FREED_WITHIN has passed: seen free (or stale) by status
    calls made in this process until then, then taken by another run, a CLI acquire in
    a fresh process. Its answer."""
    return taken_by_another(skf, cli, lock, since + FREED_WITHIN)


def taken_by_another(
    skf: ModuleType, cli: Callable[..., Run], lock: str, deadline: float
) -> dict[str, Any]:
    """``lock`` seen free or stale before ``deadline`` (time.monotonic()), then taken by
    another run (wf:another:1, a CLI acquire in a fresh process): its answer."""
    while True:
        state = skf.status(lock, 60.0)["state"]
        if state != "held":
            break
        assert time.monotonic() < deadline, f"{lock} still held at the deadline"
        time.sleep(0.02)
    taken = cli("acquire", "--lock", lock, "--owner", "wf:another:1", "--stale-after", "60s")
    assert taken.json["acquired"] is True, taken.out
    return taken.json


def held_throughout(skf: ModuleType, lock: str, owner: str, fence: int, until: float) -> None:
    """``lock`` is held by ``owner`` with ``fence`` at every look until ``until``: where
    a look finds it stale, a take by another owner is refused."""
    while time.monotonic() < until:
        status = skf.status(lock, 60.0)
        if status["state"] == "stale":
            # status reads a file without its guard, so it may look while a renewal,
            # under the guard, waits on the disk to keep what it wrote (ci31: 3 s, a
            # whole lease, on a loaded machine). A take waits for that guard, and sees
            # whether anyone else could hold the lock.
            taken = skf.acquire(lock, "wf:prober:1", 60.0)
            assert taken["acquired"] is False, taken
            status = skf.status(lock, 60.0)
        assert status["state"] == "held", status
        assert [h["owner"] for h in status["holders"]] == [owner], status
        assert status["fence"] == fence, status
        time.sleep(0.2)


# --- The MCP SDK's own client -------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk_session(*serve_args: str, errlog: TextIO) -> AsyncIterator[Any]:
    """A ClientSession of the MCP SDK over a ``serve`` it starts (``serve_args`` after
    serve), initialized; the server's stderr goes to ``errlog``. The SDK passes a
    server only a few variables of the environment unless told: it is given all."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable,
        args=[str(SCRIPT), "serve", *serve_args],
        env=dict(os.environ),
    )
    async with (
        stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def sdk_answer(result: Any) -> dict[str, Any]:
    """An SDK CallToolResult that is no error, as a tools/call result on the wire."""
    wire: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answer_of(wire)


# --- As a script: a client process, and a reaper ------------------------------------


async def _client(lock: str, owner: str, lease: str) -> None:
    """A client process: it starts serve with the SDK, takes ``lock`` through it, says
    its answer on stdout, and waits to be killed."""
    import anyio

    async with sdk_session("--lease", lease, errlog=sys.stderr) as session:
        result = await session.call_tool("acquire", {"lock": lock, "owner": owner})
        print(json.dumps(sdk_answer(result)), flush=True)
        await anyio.sleep_forever()


def _report(**fields: object) -> None:
    sys.stderr.write(json.dumps(fields) + "\n")
    sys.stderr.flush()


def _reap(log: str, argv: list[str]) -> None:
    """Start ``argv`` on this process's stdin and stdout (its stderr to the file
    ``log``) as a subreaper (Linux): a process it starts that outlives its parent
    becomes this one's child. Each start and exit is reported on stderr as a JSON line,
    until no child is left."""
    import ctypes

    pr_set_child_subreaper = 36
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    with open(log, "a", encoding="utf-8") as errors:
        child = subprocess.Popen(argv, stderr=errors)
    _report(started=child.pid)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        _report(exited=pid, code=os.waitstatus_to_exitcode(status))
    child.returncode = 0  # reaped above: nothing left for Popen to wait for
    _report(done=True)


def serve_with(
    *serve_args: str,
    longest_call_wait_sec: float | None = None,
    stalled: str | None = None,
    stuck: str | None = None,
) -> list[str]:
    """The argv of a ``serve`` (``serve_args`` after serve) that this file runs as a
    script, from the built file loaded by path, with ``longest_call_wait_sec`` set on
    its seams, with ``stalled`` ("NAME=FILE") a name that stands for 127.0.0.1, each
    lookup of which waits while FILE exists (and is never kept), and with ``stuck``
    (FILE) each renewal's read of its store held up while FILE exists (a store that
    answers nothing, which no network deadline cuts)."""
    spec = {"longest_call_wait_sec": longest_call_wait_sec, "stalled": stalled, "stuck": stuck}
    return [sys.executable, SESSIONS, "serve-with", json.dumps(spec), *serve_args]


def _serve_with(spec: dict[str, Any], serve_args: list[str]) -> None:
    """Run ``serve`` in this process as the built file runs it, after setting what
    ``spec`` asks: a seam, and a name whose lookups stall (``stalled``: "NAME=FILE",
    NAME standing for 127.0.0.1, each lookup of it held up while FILE exists, as a
    name server that stops answering holds it up)."""
    from loader import load_script

    skf = load_script()
    if spec["longest_call_wait_sec"] is not None:
        skf._SEAMS.longest_call_wait_sec = spec["longest_call_wait_sec"]
    if spec["stalled"] is not None:
        name, _, marker = spec["stalled"].partition("=")
        looked_up = socket.getaddrinfo

        def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host == name:
                while os.path.exists(marker):
                    time.sleep(0.05)
                host = "127.0.0.1"
            return looked_up(host, *args, **kwargs)

        socket.getaddrinfo = lookup
        skf._SEAMS.name_kept_sec = 0.0  # each renewal looks the name up anew
        skf._SEAMS.kept_idle_sec = 0.0  # on a connection of its own
    if spec["stuck"] is not None:
        marker = spec["stuck"]

        class StuckRenewal(WrappedStore):
            def read(self, *args: object, **kwargs: object) -> object:
                while "_renew_apart" in threading.current_thread().name and os.path.exists(marker):
                    time.sleep(0.05)
                return self.real.read(*args, **kwargs)

        skf._SEAMS.opened = StuckRenewal
    sys.argv = [str(SCRIPT), "serve", *serve_args]
    skf._entry()


if __name__ == "__main__":
    if sys.argv[1] == "serve-with":
        _serve_with(json.loads(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1] == "client":
        import anyio

        anyio.run(_client, sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "reap":
        _reap(sys.argv[2], sys.argv[3:])
