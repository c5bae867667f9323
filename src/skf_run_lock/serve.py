"""The agent session's server (``serve``): an MCP server over stdio whose tools take,
renew and release locks as the CLI does, and whose holds end with the session. A lock
taken through it is a session hold: its timeout is the server's lease, it is renewed
by the renewer run uses while the server lives, and released when the session ends
(stdin closed, SIGTERM, SIGINT, SIGHUP, its parent gone); killed outright, its holds
lapse within the lease. The MCP Python SDK is imported here alone, when serve starts;
compiled only for serve."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from .hold import _Hold
from .inputs import (
    _checked_slots,
    _checked_wait,
    _duration_seconds,
    _owner_with_run_id,
    _Request,
    _wait_within,
)
from .listing import list_locks
from .lock_calls import _take_waiting, release, status
from .outputs import (
    _describe_os_error,
    _fail,
    _ordinal,
)
from .public_surface import (
    _MAX_WAIT_SEC,
    DEFAULT_STALE_AFTER_MIN,
    LockLost,
    __version__,
    _UsageError,
)
from .quoting import _quoted
from .registry import _ADDRESS
from .renewer import _Renewer
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


_SDK = "mcp>=2.3,<3"

# A waiting acquire answers within this: clients end a tool call that runs longer than
# their own limit (Codex: 60 s), whatever progress it reports.
_LONGEST_CALL_WAIT_SEC = 50.0
# At the session's end its holds are released at once, each on its own thread, and the
# server exits after this at most, released or not: a hold not released lapses.
_RELEASES_WITHIN_SEC = 1.5
# How often the server looks whether its parent is gone (a client that killed uv alone).
_PARENT_LOOK_SEC = 0.2


def _sdk_missing() -> str:
    """What serve says without the MCP SDK: the commands that bring it, to run as shown."""
    script = sys.argv[0] if sys.argv else "skf-run-lock.py"
    if not script.endswith(".py"):  # the installed command
        return (
            f"serve needs the MCP Python SDK ({_SDK}), which this Python lacks: install"
            " the command with it, uv tool install 'skf-run-lock[mcp]' (or pip install"
            " 'skf-run-lock[mcp]')"
        )
    return (
        f"serve needs the MCP Python SDK ({_SDK}), which this Python lacks: run it as"
        f" uv run --with '{_SDK}' {_quoted(script)} serve"
    )


class _Cancelled(BaseException):
    """The client cancelled a waiting acquire: it leaves the line (no except stops it)."""


class _Progress:
    """What a tool call tells its client as it waits, and whether the call still stands:
    once the client cancels it, or the session ends, it does not."""

    def __init__(self, session: _Session, report: Callable[[float, float, str], None]) -> None:
        self.session = session
        self.report = report
        self.cancelled = threading.Event()

    def stands(self) -> bool:
        return not self.cancelled.is_set() and not self.session.ending.is_set()

    def __call__(self, done: float, total: float, message: str) -> None:
        """Tell the client; _Cancelled once the call no longer stands."""
        if not self.stands():
            raise _Cancelled
        self.report(done, total, message)


# --- What a session holds


# What the holds tool says of a hold still held: one the session took, or one it kept.
_HELD_WORDS = {
    False: "held by this session: renewed while it lives, released when it ends",
    True: "held by its owner before this session took it: renewed while the session lives,"
    " left held when it ends",
}


class _SessionHold:
    """A hold this session took, or kept (its owner's before the session took it: renewed,
    never released by the session), its renewer, and what became of it: ``state`` is
    "held", then "released" or "lost", ``why`` says how."""

    def __init__(self, request: _Request, hold: _Hold) -> None:
        self.renewer = _Renewer(request, hold)
        self.kept = hold.renewed and not hold.session
        self.state = "held"
        self.why = ""
        self.renewed_at = time.time()

    def view(self) -> dict[str, object]:
        """The hold as the holds tool shows it."""
        hold = self.renewer.hold
        return {
            "lock": hold.lock,
            "owner": hold.owner,
            "fence": hold.fence,
            "kind": hold.kind,
            "state": self.state,
            "kept": self.kept,
            "last_renewal": _format_time(self.renewed_at),
            "message": self.why or _HELD_WORDS[self.kept],
        }


class _Session:
    """The holds of one agent session: kept by one renewal thread, released when the
    session ends. ``ending`` is set once it ends, however it ends."""

    def __init__(self, lease: float, parent: int) -> None:
        self.lease = lease
        self.parent = parent  # the process that started the server, as it started
        self.holds: dict[tuple[str, str], _SessionHold] = {}
        self.guard = threading.Lock()  # the holds, their states, what is yet untold
        self.added = threading.Event()  # a hold was added: the renewal thread looks again
        self.ending = threading.Event()
        self.untold: list[_SessionHold] = []  # ended, by no call of this session's
        self.calls: set[threading.Thread] = set()  # the tool calls under way, a thread each

    def keep(self, request: _Request, hold: _Hold) -> None:
        """Keep ``hold``, which ``request`` took, renewing it from now on."""
        with self.guard:
            self.holds[(hold.lock, hold.owner)] = _SessionHold(request, hold)
        self.added.set()
        if self.ending.is_set():  # taken as the session ended: not left to lapse
            self.release_all()

    def told(self) -> list[dict[str, object]]:
        """The holds that ended since the last call, by no call of this session's."""
        with self.guard:
            ended, self.untold = self.untold, []
        return [held.view() for held in ended]

    def ended_by_release(self, lock: str, owner: str) -> None:
        """This session's release call released ``owner``'s hold on ``lock``."""
        with self.guard:
            held = self.holds.get((lock, owner))
            if held is not None and held.state == "held":
                held.state = "released"
                held.why = "released by this session's release call"

    def keep_renewing(self) -> None:
        """The renewal thread: each hold renewed when due, until the session ends."""
        while not self.ending.is_set():
            with self.guard:
                held = [h for h in self.holds.values() if h.state == "held"]
            due = min((h.renewer.due_in() for h in held), default=60.0)
            if self.added.wait(due):
                self.added.clear()
                continue
            for one in held:
                if one.renewer.due_in() <= 0 and not self.ending.is_set():
                    self.renewed(one, one.renewer.renew())

    def renewed(self, one: _SessionHold, lost: LockLost | None) -> None:
        """What a renewal of ``one`` found: held still, or released or lost (told at the
        next call, and never taken again by the session on its own)."""
        with self.guard:
            hold = one.renewer.hold
            if self.holds.get((hold.lock, hold.owner)) is not one or one.state != "held":
                return  # released by a call, or taken anew, meanwhile
            if lost is None:
                one.renewed_at = time.time()
                return
            free = lost.held_by is None and not one.renewer.ran_out
            one.state = "released" if free else "lost"
            one.why = str(lost)
            self.untold.append(one)

    def release_all(self, until: float | None = None) -> None:
        """Release every hold the session took (not those it kept), each at once on a
        thread of its own, waiting for them until ``until`` (monotonic clock) at the
        latest, by default _RELEASES_WITHIN_SEC from now."""
        with self.guard:
            mine = [h for h in self.holds.values() if h.state == "held" and not h.kept]
            for one in mine:
                one.state = "released"
        threads = [
            threading.Thread(target=_release_quietly, args=(one.renewer.hold,), daemon=True)
            for one in mine
        ]
        for thread in threads:
            thread.start()
        if until is None:
            until = time.monotonic() + _RELEASES_WITHIN_SEC
        for thread in threads:
            thread.join(max(0.0, until - time.monotonic()))


def _release_quietly(hold: _Hold) -> None:
    """Release ``hold`` as the session ends: a failure leaves it to lapse."""
    try:
        release(hold.lock, hold.owner)
    except (OSError, ValueError):
        pass


# --- The tools: what each takes, checked as the CLI checks it, and what it answers


def _text(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value:
        raise _UsageError(f"{name} is required: a string")
    return value


def _place(arguments: dict[str, Any], name: str) -> str:
    """A lock or a place to list: a server's address, or an absolute path (``~`` is the
    server's user's home). The server's working folder is not the agent shell's."""
    text = _text(arguments, name)
    if _ADDRESS.match(text) or os.path.isabs(os.path.expanduser(text)):
        return text
    raise _UsageError(
        f"{name} {_quoted(text)} is a relative path, which the server would resolve in its"
        f" own working folder, not your shell's: give it as an absolute path"
    )


def _wait(arguments: dict[str, Any]) -> float:
    """A wait as the CLI takes it (``60s``, ``2m``) or seconds as a number, cut to
    _LONGEST_CALL_WAIT_SEC."""
    value = arguments.get("wait", 0)
    if isinstance(value, str):
        seconds, unit = _duration_seconds(value, "wait", "seconds")
        wait = _wait_within(seconds, "wait", _MAX_WAIT_SEC, unit, repr(value))
    else:
        wait = _checked_wait(value, "wait", _MAX_WAIT_SEC)
    return min(wait, _LONGEST_CALL_WAIT_SEC)


def _session_request(arguments: dict[str, Any], lease: float) -> _Request:
    """What the acquire tool asks, each part checked once, in the CLI's order."""
    lock = _place(arguments, "lock")
    owner_text = _text(arguments, "owner")
    wait = _wait(arguments)
    shared = arguments.get("shared", False)
    if not isinstance(shared, bool):
        raise _UsageError(f"shared must be true or false, not {shared!r}")
    if shared and "slots" in arguments:
        raise _UsageError(
            "shared and slots cannot be given together: a shared hold is one of any"
            " number, never a slot; give one or the other"
        )
    slots = _checked_slots(arguments.get("slots", 1), "slots")
    owner, run_id = _owner_with_run_id(owner_text)
    return _Request(
        lock,
        owner,
        run_id,
        lease,
        wait=wait,
        slots=slots,
        shared=shared,
        keep_longer=True,
        session=True,
    )


def _acquire(session: _Session, arguments: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    """The acquire tool: the CLI's acquire output and the hold's fence."""
    request = _session_request(arguments, session.lease)
    started = time.monotonic()

    def refused(result: Any, left: float, place: int) -> None:
        waited = time.monotonic() - started
        progress(waited, request.wait, f"{_ordinal(place)} in line: {result['message']}")

    hold, result = _take_waiting(request, refused)
    if hold is not None and not hold.renewed and not progress.stands():
        # Taken as the client cancelled the call: nobody would know of the hold.
        _release_quietly(hold)
        raise _Cancelled
    if hold is not None:
        session.keep(request, hold)
    return {**result, "fence": None if hold is None else hold.fence}


def _release(session: _Session, arguments: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    lock = _place(arguments, "lock")
    owner = _text(arguments, "owner")
    result = release(lock, owner)
    if result["released"]:
        session.ended_by_release(result["lock"], owner)
    return dict(result)


def _status(session: _Session, arguments: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    return dict(status(_place(arguments, "lock"), DEFAULT_STALE_AFTER_MIN * 60))


def _list(session: _Session, arguments: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    return dict(list_locks(_place(arguments, "under")))


def _holds(session: _Session, arguments: dict[str, Any], progress: _Progress) -> dict[str, Any]:
    with session.guard:
        views = [one.view() for one in session.holds.values()]
    return {"holds": views}


_LOCK = {
    "type": "string",
    "description": "the lock: an absolute file path, or an etcd:// or redis:// address",
}
_OWNER = {
    "type": "string",
    "description": "workflow:skill or workflow:skill:run_id (acquire adds a run id if it"
    " has none; release needs the whole owner acquire answered)",
}

# Each tool: what it does, in words an agent can act on, its input schema, and its call.
_TOOLS: dict[str, tuple[str, dict[str, Any], Callable[..., dict[str, Any]]]] = {
    "acquire": (
        "Take a run lock for this session (or renew it: call again with the same owner)."
        " The hold lasts as long as this session: it is renewed while the server runs and"
        " released when the session ends; call release on every halt path all the same."
        " Answers the CLI's acquire JSON and the hold's fence; acquired false with a"
        " message saying who holds it and what to do when it is held. wait (e.g. '60s',"
        " '2m', or seconds) stands in line first come first served, at most 50 s a call"
        " (call again to keep trying).",
        {
            "type": "object",
            "properties": {
                "lock": _LOCK,
                "owner": _OWNER,
                "wait": {
                    "type": ["string", "number"],
                    "description": "how long to wait in line: '60s', '2m', or seconds"
                    " (at most 50 s a call); 0 (default) answers at once",
                },
                "slots": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "take one of this many slots (default 1)",
                },
                "shared": {
                    "type": "boolean",
                    "description": "a shared hold (readers: any number at once)",
                },
            },
            "required": ["lock", "owner"],
            "additionalProperties": False,
        },
        _acquire,
    ),
    "release": (
        "Release a run lock: the CLI's release JSON (released false with a reason when"
        " it is not the owner's). Give the whole owner that acquire answered.",
        {
            "type": "object",
            "properties": {"lock": _LOCK, "owner": _OWNER},
            "required": ["lock", "owner"],
            "additionalProperties": False,
        },
        _release,
    ),
    "status": (
        "Who holds a lock, changing nothing: the CLI's status JSON (state free, held or"
        " stale, the holders, the line of waiters, the fence).",
        {
            "type": "object",
            "properties": {"lock": _LOCK},
            "required": ["lock"],
            "additionalProperties": False,
        },
        _status,
    ),
    "list": (
        "Every lock under a folder (absolute path) or an etcd:// or redis:// key prefix,"
        " changing nothing: the CLI's list JSON.",
        {
            "type": "object",
            "properties": {
                "under": {
                    "type": "string",
                    "description": "an absolute folder, or an etcd:// or redis:// address"
                    " whose key is a prefix",
                }
            },
            "required": ["under"],
            "additionalProperties": False,
        },
        _list,
    ),
    "holds": (
        "This session's holds: each with its lock, owner, fence, kind, state (held,"
        " released or lost) and last renewal.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        _holds,
    ),
}


def _call(
    session: _Session, name: str, arguments: dict[str, Any], progress: _Progress
) -> tuple[dict[str, Any] | None, str]:
    """A tool's answer (None and the message for bad input or a failure, as the CLI says
    it), with the holds this session lost since its last call after its own keys."""
    tool = _TOOLS.get(name)
    if tool is None:
        return None, f"unknown tool {name!r}; the tools are {', '.join(_TOOLS)}"
    properties = tool[1]["properties"]
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        takes = ", ".join(properties) or "nothing"
        return None, f"usage error: {name} takes {takes}, not {unknown[0]!r}"
    try:
        answer = tool[2](session, arguments, progress)
    except _UsageError as exc:
        return None, f"usage error: {exc}"
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"the lock could not be read or written: {_describe_os_error(exc)}"
    answer["lost_holds"] = session.told()
    return answer, ""


# --- The session's end, however it comes


async def _answered(
    session: _Session, ctx: Any, name: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The answer of a tool call (as _call gives it), worked out on a thread of its own
    while the SDK's asyncio loop serves other calls, however many acquires wait in line:
    a pool's N threads (asyncio.to_thread's) left every other call unanswered while N
    waited, 6 on 2 cores. A cancelled call stops waiting for its thread, which leaves
    the line at its next beat, as it does once the session ends."""
    import asyncio

    loop = asyncio.get_running_loop()
    answered: asyncio.Future[tuple[dict[str, Any] | None, str]] = loop.create_future()

    def report(done: float, total: float, message: str) -> None:
        sent = asyncio.run_coroutine_threadsafe(
            ctx.session.report_progress(done, total, message), loop
        )
        try:
            sent.result()
        except Exception:  # the call ended meanwhile (cancelled, or the session)
            raise _Cancelled from None

    progress = _Progress(session, report)

    def work() -> None:
        outcome: tuple[dict[str, Any] | None, str] | None = None
        failure: BaseException | None = None
        try:
            outcome = _call(session, name, arguments, progress)
        except _Cancelled:
            outcome = None, "the call was cancelled, or the session ended, as it waited"
        except BaseException as exc:  # the SDK tells the client of an internal error
            failure = exc
        finally:
            with session.guard:
                session.calls.discard(threading.current_thread())
        try:
            loop.call_soon_threadsafe(_settle, answered, outcome, failure)
        except RuntimeError:  # the loop is closed: the session has ended
            pass

    thread = threading.Thread(target=work, daemon=True)
    with session.guard:
        session.calls.add(thread)
    thread.start()
    try:
        return await answered
    except asyncio.CancelledError:
        progress.cancelled.set()  # the waiting thread leaves the line at its next beat
        raise


def _settle(future: Any, outcome: Any, failure: BaseException | None) -> None:
    """Give the call awaiting ``future`` its thread's outcome, unless it stopped waiting."""
    if future.done():
        return
    if failure is not None:
        future.set_exception(failure)
    else:
        future.set_result(outcome)


def _end_when_told(session: _Session) -> None:
    """Once the session ends: release its holds, and exit 0. A call still waiting in
    line leaves it at its next beat, given what is left of the releases' time (its
    place lapses if it cannot)."""
    session.ending.wait()
    until = time.monotonic() + _RELEASES_WITHIN_SEC
    session.release_all(until)
    with session.guard:
        calls = list(session.calls)
    for call in calls:
        call.join(max(0.0, until - time.monotonic()))
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(0)


def _watch_parent(session: _Session) -> None:
    """End the session once the process that started the server is gone (a client that
    killed ``uv run`` alone leaves the server to another parent)."""
    while os.getppid() == session.parent:
        if session.ending.wait(_PARENT_LOOK_SEC):
            return
    session.ending.set()


def _serve(lease: float) -> int:
    """Serve the tools over stdio until the session ends (this process then exits 0)."""
    parent = os.getppid()  # before the SDK loads, which takes seconds: a parent gone meanwhile
    try:
        from mcp import types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise ValueError(_sdk_missing()) from None
    import asyncio

    from .interrupts import _Interrupts

    session = _Session(lease, parent)
    _Interrupts.disarm()
    _Interrupts.handle(lambda signum, frame: session.ending.set())
    for work in (_end_when_told, _watch_parent, _Session.keep_renewing):
        threading.Thread(target=work, args=(session,), daemon=True).start()

    tools = [
        types.Tool(name=name, description=words, input_schema=schema)
        for name, (words, schema, _) in _TOOLS.items()
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        answer, error = await _answered(session, ctx, params.name, arguments)
        if answer is None:
            text = types.TextContent(type="text", text=error)
            return types.CallToolResult(content=[text], is_error=True)
        text = types.TextContent(type="text", text=json.dumps(answer))
        return types.CallToolResult(content=[text], structured_content=answer)

    server: Any = Server(
        "skf-run-lock",
        version=__version__,
        instructions="Run locks whose holds end with this session: take a lock with the"
        " acquire tool at the start of a run and release it on every halt path.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    async def run() -> None:
        async with stdio_server() as (read, write):
            sys.stdout = sys.stderr  # nothing but the protocol on stdout
            await server.run(read, write, server.create_initialization_options())
            session.ending.set()  # stdin closed: released now, not after asyncio's teardown

    try:
        asyncio.run(run())  # once stdin closes, the session is ending
    except Exception as exc:  # the client's end of the pipes gone, most likely
        _fail(f"the session ended: {exc}")
    finally:
        session.ending.set()
    while True:  # the ending thread exits the process
        time.sleep(60)
