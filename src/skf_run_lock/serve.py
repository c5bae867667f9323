"""The agent session's server (``serve``): an MCP server over stdio whose tools take,
renew and release locks as the CLI does, and whose holds end with the session. A lock
taken through it is a session hold: its timeout is the server's lease, it is renewed
by the renewer run uses while the server lives (each hold apart), and released when
the session ends (stdin or stdout closed, SIGTERM, SIGINT, SIGHUP, its parent gone);
killed outright, its holds lapse within the lease. A cancelled acquire keeps nothing,
and a wait cut at the call limit keeps its place for the next call. The MCP Python
SDK is imported here alone, when serve starts; compiled only for serve."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque

from .hold import _Hold
from .inputs import (
    _checked_parts_of,
    _checked_slots,
    _checked_wait,
    _duration_seconds,
    _owner_with_run_id,
    _Request,
    _wait_within,
)
from .listing import list_locks
from .lock_calls import _leave_line, _new_place, _take_waiting, check, release, status
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
from .registry import _ADDRESS, _lock_identity, _store_for
from .renewer import _Renewer
from .seams import _SEAMS
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .records import _Place


_SDK = "mcp>=2.3,<3"

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


# A waiting acquire cut at the call limit keeps its place in line this long for the
# agent's next call; a cancel of an acquire answered this recently still undoes it (a
# client ignores the answer to a request it cancelled: the MCP specification).
_KEPT_SEC = 10.0


class _Call:
    """One tool call, under way or answered within _KEPT_SEC: how it tells its client as
    it waits, whether it still stands (not once the client cancels it, or the session
    ends), and what an acquire took that a cancel undoes: a hold the session did not
    have before (``took``; released if its owner had none), a place kept in line
    (``kept``)."""

    def __init__(self, session: _Session, report: Callable[[float, float, str], None]) -> None:
        self.session = session
        self.report = report
        self.cancelled = threading.Event()  # set under the session's guard
        self.took: _SessionHold | None = None  # a hold the session had not, now its
        self.took_new = False  # ``took`` was its owner's by no earlier take: released
        self.kept: _KeptPlace | None = None

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
    "held", then "released" or "lost", ``why`` says how. ``key``: its lock (however
    spelled) and owner."""

    def __init__(self, request: _Request, hold: _Hold, identity: tuple[object, ...]) -> None:
        self.key = (identity, hold.owner)
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
            "parts": None if hold.parts is None else list(hold.parts),
            "state": self.state,
            "kept": self.kept,
            "last_renewal": _format_time(self.renewed_at),
            "message": self.why or _HELD_WORDS[self.kept],
        }


class _KeptPlace:
    """The place in line of a waiting acquire cut at the call limit, kept for the agent's
    next call: beaten by the server (which takes nothing meanwhile) until a call resumes
    it, or it is dropped (``dropped``: by a release, a cancel or the session's end; the
    beating thread then leaves the line), or _KEPT_SEC pass."""

    def __init__(
        self, identity: tuple[object, ...], given: str, request: _Request, place: _Place
    ) -> None:
        self.key = (identity, request.owner)
        self.given = given  # the owner as the agent gave it, with or without a run id
        self.request = request
        self.place = place
        self.until = _SEAMS.clock() + _KEPT_SEC
        self.over = threading.Event()  # resumed or dropped: its beats stop
        self.dropped = False

    def resumed_by(self, given: str, request: _Request) -> bool:
        """Whether an acquire of its lock under ``given`` asks what it waited for: the
        same kind, count and parts (as a set, each part by its key)."""
        ours = given in (self.given, self.request.owner)
        asked = self.request
        same = (request.shared, request.slots) == (asked.shared, asked.slots)
        return ours and same and _part_keys(request.parts) == _part_keys(asked.parts)


def _part_keys(parts: tuple[str, ...] | None) -> frozenset[str] | None:
    """What a set of parts is compared by (None: the lock whole)."""
    if parts is None:
        return None
    from .parts import _part_key

    return frozenset(_part_key(part) for part in parts)


class _Session:
    """The holds of one agent session, each renewed on a thread of its own (a store out of
    reach holds up no other's) and released when the session ends; the places in line it
    keeps between calls, and its calls. ``ending`` is set once it ends, however it ends."""

    def __init__(self, lease: float, parent: int) -> None:
        self.lease = lease
        self.parent = parent  # the process that started the server, as it started
        self.guard = threading.Lock()  # all that follows, and each hold's state
        self.holds: dict[tuple[object, str], _SessionHold] = {}
        self.places: dict[tuple[object, str], _KeptPlace] = {}
        self.calls: dict[object, _Call] = {}  # by request id
        # The answered ones, oldest first, each with when (_SEAMS.clock): let go from the
        # front in time that does not grow with how many a busy client made lately.
        self.answered_calls: deque[tuple[float, object, _Call]] = deque()
        self.taking: dict[str, set[_Call]] = {}  # takes under way, by whole owner
        self.takes: dict[str, int] = {}  # takes begun so far, by whole owner
        self.owners: dict[str, threading.Lock] = {}  # held by each owner's take
        self.threads: set[threading.Thread] = set()  # what the end waits for
        self.ending = threading.Event()
        self.untold: list[_SessionHold] = []  # ended, by no call of this session's

    def aside(self, work: Callable[..., None], *args: object) -> threading.Thread:
        """``work(*args)`` on a thread of its own, which the session's end waits for."""

        def run() -> None:
            try:
                work(*args)
            finally:
                with self.guard:
                    self.threads.discard(threading.current_thread())

        thread = threading.Thread(target=run, daemon=True)
        with self.guard:
            self.threads.add(thread)
        thread.start()
        return thread

    def start(self, key: object, report: Callable[[float, float, str], None]) -> _Call:
        """A new call, request id ``key``; calls answered over _KEPT_SEC ago are let go."""
        call = _Call(self, report)
        gone = _SEAMS.clock() - _KEPT_SEC
        with self.guard:
            answered = self.answered_calls
            while answered and answered[0][0] < gone:
                _, old, was = answered.popleft()
                if self.calls.get(old) is was:  # not an id the client has used again
                    del self.calls[old]
            self.calls[key] = call
        return call

    def answered(self, call: _Call, key: object) -> None:
        with self.guard:
            self.answered_calls.append((_SEAMS.clock(), key, call))

    def cancel(self, key: object) -> None:
        """The client cancelled call ``key`` (under way, or answered within _KEPT_SEC):
        it no longer stands, and what it took is let go at once, a hold its owner did
        not have before released, a place kept left; but not while another take of the
        same owner is under way, which renews that hold for a call the client awaits.
        Decided under the guard, as keeping is: a call is kept or cancelled, never both."""
        with self.guard:
            call = self.calls.get(key)
            if call is None:
                return
            call.cancelled.set()
            took, call.took = call.took, None
            kept, call.kept = call.kept, None
            if kept is not None:
                self.drop_place(kept)
            free = took is not None and self.holds.get(took.key) is took
            if took is None or not free or took.state != "held":
                return
            if self.taking.get(took.renewer.hold.owner, set()) - {call}:
                return  # that take keeps it: not this one's to free
            del self.holds[took.key]  # not the session's: nobody knows of it
            took.state = "released"
            begun = self.takes.get(took.renewer.hold.owner, 0)
        if call.took_new:
            self.aside(self.release_cancelled, took.renewer.hold, begun)

    def release_cancelled(self, hold: _Hold, begun: int) -> None:
        """Release ``hold``, which a cancelled call took, unless its owner's take that
        began since has it now (the owner's takes and this release go one at a time)."""
        with self.owner_lock(hold.owner):
            with self.guard:
                if self.takes.get(hold.owner, 0) != begun:
                    return  # taken again since: that take's, which its client awaits
            _release_quietly(hold)

    def owner_lock(self, owner: str) -> threading.Lock:
        """What ``owner``'s takes and the releases of its cancelled ones hold."""
        with self.guard:
            return self.owners.setdefault(owner, threading.Lock())

    def taking_as(self, owner: str, call: _Call, under_way: bool) -> None:
        """``call``'s take for ``owner`` is under way, or (``under_way`` False) done."""
        with self.guard:
            calls = self.taking.setdefault(owner, set())
            if under_way:
                calls.add(call)
                self.takes[owner] = self.takes.get(owner, 0) + 1
            else:
                calls.discard(call)
                if not calls:
                    del self.taking[owner]

    def keep(
        self, call: _Call, request: _Request, hold: _Hold, identity: tuple[object, ...]
    ) -> bool:
        """Keep ``hold``, which ``call``'s ``request`` took, renewing it from now on;
        False, keeping nothing, once the call no longer stands (the caller releases a
        hold its owner did not have before)."""
        one = _SessionHold(request, hold, identity)
        with self.guard:
            if call.cancelled.is_set() or self.ending.is_set():
                return False
            before = self.holds.get(one.key)
            self.holds[one.key] = one
            if not hold.renewed or before is None or before.state != "held":
                call.took, call.took_new = one, not hold.renewed
        threading.Thread(target=_renew_apart, args=(self, one), daemon=True).start()
        return True

    def holding(self, one: _SessionHold) -> bool:
        with self.guard:
            return self.holds.get(one.key) is one and one.state == "held"

    def judge(self) -> None:
        """Each hold by the renewer's clock (under the guard), as held() judges its own:
        one past the moment its work had to stop is lost, whatever its renewal is doing."""
        for one in self.holds.values():
            if one.state == "held" and (lost := one.renewer.lost_by_now()) is not None:
                self.ended(one, lost)

    def ended(self, one: _SessionHold, lost: LockLost) -> None:
        """``one`` ended by no call of this session's (under the guard): told at the next
        call, and never taken again by the session on its own."""
        free = lost.held_by is None and not one.renewer.ran_out
        one.state = "released" if free else "lost"
        one.why = str(lost)
        self.untold.append(one)

    def views(self) -> list[dict[str, object]]:
        """The holds as the holds tool shows them, each judged by the clock."""
        with self.guard:
            self.judge()
            return [one.view() for one in self.holds.values()]

    def told(self) -> list[dict[str, object]]:
        """The holds that ended since the last call, by no call of this session's."""
        with self.guard:
            self.judge()
            ended, self.untold = self.untold, []
        return [held.view() for held in ended]

    def released(self, identity: tuple[object, ...], owner: str, freed: bool) -> None:
        """This session's release call for ``owner`` on the lock ``identity`` names: its
        place kept in line is dropped, and its hold, if ``freed``, is released."""
        with self.guard:
            kept = self.places.get((identity, owner))
            if kept is not None:
                self.drop_place(kept)
            held = self.holds.get((identity, owner))
            if freed and held is not None and held.state == "held":
                held.state = "released"
                held.why = "released by this session's release call"

    def renewed(self, one: _SessionHold, lost: LockLost | None) -> None:
        """What a renewal of ``one`` found: held still, or released or lost."""
        with self.guard:
            if self.holds.get(one.key) is not one or one.state != "held":
                return  # released by a call, taken anew, or lost by the clock meanwhile
            if lost is not None:
                self.ended(one, lost)
            elif one.renewer.failure is None:  # renewed, not tried again soon
                one.renewed_at = time.time()

    def resume(self, identity: tuple[object, ...], given: str, request: _Request) -> _Place | None:
        """The place kept for an acquire of the lock ``identity`` names under ``given``,
        as ``request`` asks it (its owner and run id then the place's); None: none, or
        one of another kind or count, dropped (the acquire joins at the end)."""
        with self.guard:
            for kept in self.places.values():
                if kept.key[0] == identity and given in (kept.given, kept.request.owner):
                    break
            else:
                return None
            del self.places[kept.key]
            kept.over.set()
            if not kept.resumed_by(given, request):
                kept.dropped = True
                return None
        request.owner, request.run_id = kept.request.owner, kept.request.run_id
        return kept.place

    def keep_place(self, call: _Call, kept: _KeptPlace) -> bool:
        """Keep ``kept`` in line, beating it, for the agent's next call; False once the
        call no longer stands (the caller leaves the line)."""
        with self.guard:
            if call.cancelled.is_set() or self.ending.is_set():
                return False
            old = self.places.pop(kept.key, None)
            if old is not None:
                self.drop_place(old)
            self.places[kept.key] = kept
            call.kept = kept
        self.aside(_beat_kept, self, kept)
        return True

    def drop_place(self, kept: _KeptPlace) -> None:
        """(Under the guard.) ``kept`` leaves the line: its beating thread takes it out."""
        if self.places.get(kept.key) is kept:
            del self.places[kept.key]
        kept.dropped = True
        kept.over.set()

    def lapsed(self, kept: _KeptPlace) -> bool:
        """Whether ``kept``'s beating thread, done, takes it out of the line: dropped, or
        no call resumed it in time (then no call can now)."""
        with self.guard:
            if self.places.get(kept.key) is kept:
                del self.places[kept.key]
                return True
            return kept.dropped

    def release_all(self, until: float) -> None:
        """Release every hold the session took (not those it kept), each at once on a
        thread of its own, and leave its places in line, waiting for all of it until
        ``until`` (on ``_SEAMS.clock``) at the latest."""
        with self.guard:
            mine = [h for h in self.holds.values() if h.state == "held" and not h.kept]
            for one in mine:
                one.state = "released"
            for kept in list(self.places.values()):
                self.drop_place(kept)
        for one in mine:
            self.aside(_release_quietly, one.renewer.hold)
        with self.guard:
            threads = list(self.threads)
        for thread in threads:
            thread.join(max(0.0, until - _SEAMS.clock()))


def _renew_apart(session: _Session, one: _SessionHold) -> None:
    """``one``'s renewals, each when due, on a thread of its own: a renewal stuck on a
    store out of reach holds up no other hold's (one thread for all let a healthy file
    hold go stale behind a frozen Redis)."""
    while not session.ending.wait(one.renewer.next_look()):
        if not session.holding(one):
            return
        if one.renewer.due_in() <= 0:  # else a second passed on the system's clock
            session.renewed(one, one.renewer.renew())


def _beat_kept(session: _Session, kept: _KeptPlace) -> None:
    """Keep ``kept``'s place alive in line until a call resumes it; take it out once it
    is dropped or its time is up."""
    store = _store_for(kept.request.lock)
    try:
        while not kept.over.wait(max(0.0, min(_SEAMS.beat_sec, kept.until - _SEAMS.clock()))):
            if _SEAMS.clock() >= kept.until:
                break
            try:
                if not store.beat(kept.place):
                    break  # lapsed: out of the line already
            except (OSError, ValueError):
                pass  # beaten again at the next beat, or lapsed
        if session.lapsed(kept):
            _leave_line(store, kept.place)
    finally:
        store.close()


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
    """A wait as the CLI takes it (``60s``, ``2m``) or seconds as a number."""
    value = arguments.get("wait", 0)
    if isinstance(value, str):
        seconds, unit = _duration_seconds(value, "wait", "seconds")
        return _wait_within(seconds, "wait", _MAX_WAIT_SEC, unit, repr(value))
    return _checked_wait(value, "wait", _MAX_WAIT_SEC)


def _session_request(arguments: dict[str, Any], lease: float) -> tuple[_Request, bool]:
    """What the acquire tool asks, each part checked once, in the CLI's order, its wait
    cut to the call limit; and whether it was cut."""
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
    parts = _checked_parts_of(arguments.get("parts"), 1)
    if parts is not None and slots != 1:
        raise _UsageError(f"parts have no count of slots: give parts or slots {slots}, not both")
    owner, run_id = _owner_with_run_id(owner_text)
    longest = _SEAMS.longest_call_wait_sec
    request = _Request(
        lock,
        owner,
        run_id,
        lease,
        wait=min(wait, longest),
        slots=slots,
        shared=shared,
        parts=parts,
        keep_longer=True,
        session=True,
    )
    return request, wait > longest


def _acquire(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    """The acquire tool: the CLI's acquire output and the hold's fence. A wait cut at the
    call limit keeps its place in line for the next call, which resumes it."""
    request, cut = _session_request(arguments, session.lease)
    given = arguments["owner"]
    place = session.resume(_lock_identity(request.lock), given, request)
    if place is None and request.wait:
        place = _new_place(request)
    started = _SEAMS.clock()

    def refused(result: Any, left: float, place: int) -> None:
        waited = _SEAMS.clock() - started
        call(waited, request.wait, f"{_ordinal(place)} in line: {result['message']}")

    with session.owner_lock(request.owner):
        session.taking_as(request.owner, call, True)
        try:
            hold, result = _take_waiting(request, refused, place, keep_place=cut)
            identity = _lock_identity(request.lock)  # again: the take may have made its folder
            kept = hold is not None and session.keep(call, request, hold, identity)
        finally:
            session.taking_as(request.owner, call, False)
    if hold is not None and not kept:
        if not hold.renewed:  # nobody would know of it
            _release_quietly(hold)
        raise _Cancelled
    if hold is None and cut and place is not None and place.joined:
        if not session.keep_place(call, _KeptPlace(identity, given, request, place)):
            _leave_quietly(request.lock, place)
            raise _Cancelled
        result["message"] += (
            f"; your place in line is kept {_KEPT_SEC:g} s: call acquire again within them,"
            " with this lock and owner and the same slots, shared and parts, to wait on from it"
        )
    return {**result, "fence": None if hold is None else hold.fence}


def _leave_quietly(lock: str | os.PathLike[str], place: _Place) -> None:
    """Take ``place`` out of the line of ``lock``: a failure leaves it to lapse."""
    try:
        store = _store_for(lock)
    except (OSError, ValueError):
        return
    try:
        _leave_line(store, place)
    finally:
        store.close()


def _release(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    lock = _place(arguments, "lock")
    owner = _text(arguments, "owner")
    result = release(lock, owner)
    session.released(_lock_identity(lock), owner, result["released"])
    return dict(result)


def _status(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return dict(status(_place(arguments, "lock"), DEFAULT_STALE_AFTER_MIN * 60))


# The most paths one check call takes (the CLI takes any number).
_CHECK_PATHS_MAX = 10_000


def _check(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    """The check tool: the CLI's check output for ``paths``, at most _CHECK_PATHS_MAX."""
    lock = _place(arguments, "lock")
    if "paths" not in arguments:
        raise _UsageError("paths is required: a list of paths, as git prints them")
    paths = arguments["paths"]
    if isinstance(paths, list) and len(paths) > _CHECK_PATHS_MAX:
        raise _UsageError(
            f"paths holds {len(paths)} paths; a call takes at most {_CHECK_PATHS_MAX}:"
            " check the rest in another call"
        )
    return dict(check(lock, paths, arguments.get("owner")))


def _list(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return dict(list_locks(_place(arguments, "under")))


def _holds(session: _Session, arguments: dict[str, Any], call: _Call) -> dict[str, Any]:
    return {"holds": session.views()}


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
        " '2m', or seconds) stands in line first come first served, at most 50 s a call;"
        " a longer wait cut there keeps its place 10 s: call again within them to wait on.",
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
                "parts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "hold only these parts of the lock (1 to 100 paths or"
                    " globs from the top of the tree, as git reads them: 'src/api',"
                    " 'docs/**/*.md'); holds conflict only where some path lies in a part"
                    " of each. Default: the whole lock. A call again keeps the hold as"
                    " it is: the parts it names must be among those held (to change them,"
                    " release, then acquire the new set)",
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
    "check": (
        "Which of these paths lie in a part of a lock that another run holds (any run,"
        " without owner), changing nothing: the CLI's check JSON. free is true when none"
        " does; else reserved names each path with the holder, its part (null: it holds"
        " the whole lock), kind and stale_at. Check the paths a commit writes before"
        " making it; a shared part reserves them too.",
        {
            "type": "object",
            "properties": {
                "lock": _LOCK,
                "paths": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": _CHECK_PATHS_MAX,
                    "description": "paths from the top of the tree, as git prints them"
                    " ('src/api/routes.py'), at most 10000",
                },
                "owner": {
                    "type": "string",
                    "description": "the whole owner (workflow:skill:run_id) whose own parts"
                    " are left out; default: every run's parts count",
                },
            },
            "required": ["lock", "paths"],
            "additionalProperties": False,
        },
        _check,
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
        "This session's holds: each with its lock, owner, fence, kind, parts (null: the"
        " whole lock), state (held, released or lost) and last renewal.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        _holds,
    ),
}


def _call(
    session: _Session, name: str, arguments: dict[str, Any], call: _Call
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
        answer = tool[2](session, arguments, call)
    except _UsageError as exc:
        return None, f"usage error: {exc}"
    except ValueError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"the lock could not be read or written: {_describe_os_error(exc)}"
    answer["lost_holds"] = session.told()
    return answer, ""


# --- The session's end, however it comes


def _call_key(request_id: object) -> object:
    """A request's id as a cancel names it: 7 and "7" are one id, as the SDK holds."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            pass
    return request_id


async def _answered(
    session: _Session, ctx: Any, name: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The answer of a tool call (as _call gives it), worked out on a thread of its own
    while the SDK's asyncio loop serves other calls, however many acquires wait in line:
    a pool's N threads (asyncio.to_thread's) left every other call unanswered while N
    waited, 6 on 2 cores. A cancelled call stops waiting for its thread, which leaves
    the line at its next beat, as it does once the session ends, and keeps nothing."""
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

    key = _call_key(ctx.request_id)
    call = session.start(key, report)

    def work() -> None:
        outcome: tuple[dict[str, Any] | None, str] | None = None
        failure: BaseException | None = None
        try:
            outcome = _call(session, name, arguments, call)
        except _Cancelled:
            outcome = None, "the call was cancelled, or the session ended, as it waited"
        except BaseException as exc:  # the SDK tells the client of an internal error
            failure = exc
        session.answered(call, key)
        try:
            loop.call_soon_threadsafe(_settle, answered, outcome, failure)
        except RuntimeError:  # the loop is closed: the session has ended
            pass

    session.aside(work)
    try:
        return await answered
    except asyncio.CancelledError:
        session.cancel(key)  # the waiting thread leaves the line at its next beat
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
    """Once the session ends: release its holds, leave its places in line, and exit 0. A
    call still waiting in line leaves it at its next beat, given what is left of the
    releases' time (its place lapses if it cannot)."""
    session.ending.wait()
    session.release_all(_SEAMS.clock() + _RELEASES_WITHIN_SEC)
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


def _watch_output(session: _Session, output: int) -> None:
    """End the session once the client closed the server's stdout (``output``, a copy of
    it), idle or not: poll sees the pipe's reader gone (an error) or a hang-up, where a
    write would see it only at the next answer. Nobody can hear the server then."""
    import select

    poller = select.poll()
    poller.register(output, 0)  # errors and hang-ups alone
    while not session.ending.is_set():
        for _, event in poller.poll():
            if event & (select.POLLERR | select.POLLHUP):
                session.ending.set()
                return
            if event & select.POLLNVAL:
                return
        time.sleep(_PARENT_LOOK_SEC)


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
    import select

    from .interrupts import _Interrupts

    session = _Session(lease, parent)
    _Interrupts.disarm()
    _Interrupts.handle(lambda signum, frame: session.ending.set())
    for work in (_end_when_told, _watch_parent):
        threading.Thread(target=work, args=(session,), daemon=True).start()
    if hasattr(select, "poll"):  # POSIX; on Windows a closed stdout is seen at a write
        try:
            output = os.dup(1)  # before the SDK points stdout elsewhere
        except OSError:  # no stdout at all: the SDK's first write says so
            pass
        else:
            threading.Thread(target=_watch_output, args=(session, output), daemon=True).start()

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

    async def cancelled(ctx: Any, params: types.CancelledNotificationParams) -> None:
        # Also for a call already answered: the client ignores that answer.
        session.cancel(_call_key(params.request_id))

    server: Any = Server(
        "skf-run-lock",
        version=__version__,
        instructions="Run locks whose holds end with this session: take a lock with the"
        " acquire tool at the start of a run and release it on every halt path.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.add_notification_handler(
        "notifications/cancelled", types.CancelledNotificationParams, cancelled
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
