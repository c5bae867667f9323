"""The outputs: each shape built once, with its message, status's report (which a listing
gives for each lock too) among them. Every message names the lock and says what to do,
in words safe to follow literally."""

from __future__ import annotations

import json
import os
import sys

from .decisions import _BY_ITS_NAME, _deciding_timeout, _first_to_go, _holders
from .inputs import _releasable
from .public_surface import LockLost, _fenced
from .quoting import _quoted
from .records import _FORM_DOCUMENT, _RECORD_MAX_BYTES, _Record
from .seams import _SEAMS
from .times import _duration_text, _format_time, _stale_at

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .decisions import _Standing, _Take
    from .hold import _Hold
    from .inputs import _Request
    from .public_surface import (
        AcquireResult,
        CheckResult,
        ReleaseResult,
        Reservation,
        StatusResult,
    )
    from .records import _Look, _Place, _Record


def _this_command() -> str:
    """The command that runs this very copy of the tool, to be followed literally: the
    installed command where the call came from it, else the installed package by the
    interpreter that has it, else the file itself: by ``uv run`` where the call ran
    under it (that machine's python3 may be older than 3.11, or missing), else by
    python3 (on Windows, which has no python3, by the interpreter)."""
    if __name__ == "skf_run_lock.outputs":
        return _installed_command() or f"{_SEAMS.platform.interpreter()} -m skf_run_lock"
    script = _quoted(os.path.abspath(__file__))
    if os.environ.get("UV") and _on_path("uv") is not None:
        return f"uv run {script}"
    return f"{_SEAMS.platform.script_runner()} {script}"


def _installed_command() -> str | None:
    """``skf-run-lock`` where this call came from that command and PATH finds the same
    one by that name, else its path; None for a call that did not come from it."""
    started = sys.argv[0] if sys.argv else ""
    if os.path.splitext(os.path.basename(started))[0] != "skf-run-lock":
        return None
    found = _on_path("skf-run-lock")
    try:
        if found is not None and os.path.samefile(found, started):
            return "skf-run-lock"
    except OSError:
        pass  # Windows may start it by a name that is not a file: its path then
    return _SEAMS.platform.runnable_path(os.path.abspath(started))


def _on_path(name: str) -> str | None:
    from shutil import which

    return which(name)


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _in_line_text(line: list[_Place]) -> str:
    """``; 2 runs wait in line, wf:sk:r first`` (empty if nobody waits)."""
    count = len(line)
    verb = "runs wait" if count > 1 else "run waits"
    return f"; {count} {verb} in line, {line[0].owner} first" if line else ""


def _minutes_for_output(holder_timeout: float) -> int | float:
    minutes = round(holder_timeout / 60, 4)
    return int(minutes) if minutes.is_integer() else minutes


def _lapses_at(place: _Place, now: float) -> str:
    """When ``place`` lapses unless its waiter beats again: _SEAMS.place_ttl_sec after its
    last beat (a server's expiry keeps it: at the latest that long from ``now``)."""
    beat = now if place.beat is None else place.beat
    return _stale_at(int(-(-beat // 1)), _SEAMS.place_ttl_sec)


def _maybe_the_callers_own(owner: str, holder: str | None) -> str:
    """What a refusal says first when ``holder``'s workflow and skill are ``owner``'s:
    it may be the caller's own run (an agent in a fresh shell that forgot its run id),
    which no advice to clear it must reach first."""
    if holder is None or holder.split(":")[:2] != owner.split(":")[:2]:
        return ""
    workflow_and_skill = ":".join(owner.split(":")[:2])
    return (
        f"This may be this run's own hold: if this run took it earlier, pass its full owner"
        f" (--owner {_quoted(holder)}) to keep it; if another run of {workflow_and_skill}"
        " is running, wait for it (--wait). "
    )


def _clear_advice(lock: str, holder: str | None, by_hand: str, empty: bool = False) -> str:
    """How to clear a lock whose run is gone, safe to follow literally (``empty``: the
    lock is an empty file, which flock(1) leaves)."""
    if holder is not None and _releasable(holder):
        command = f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(holder)}"
        return f"If that run is no longer active, clear it with: {command}"
    advice = (
        "No release can name this holder: wait until it goes stale, or, if no run is"
        f" active, {by_hand}"
    )
    if empty:
        advice += (
            "; an empty lock file is what flock(1) leaves: where no flock user shares"
            " this lock, --empty-is-stale (empty_is_stale=True) takes it at once"
        )
    return advice


def _whole_owner_needed(lock: str, owner: str) -> ValueError:
    """Why a release that names an owner without its run id does nothing, and where
    the whole owner is found."""
    status = f"{_this_command()} status --lock {_quoted(lock)}"
    return ValueError(
        f"release needs the whole owner with its run id (workflow:skill:run_id, as"
        f" acquire printed it), not {owner!r}: {status} --get held_by prints the holder's;"
        f" of a lock of several slots or shared holds, {status} lists every holder"
    )


def _whole_owner_to_check(owner: str) -> ValueError:
    """Why check refuses an owner without its run id: the parts it leaves out are one
    run's."""
    return ValueError(
        "check needs the whole owner with its run id (workflow:skill:run_id, as acquire"
        f" printed it), not {owner!r}: it leaves out that run's own parts; without an"
        " owner it names every run's"
    )


def _clear_all_advice(lock: str, holders: list[_Record], by_hand: str) -> str:
    """How to clear a lock held shared whose runs are all gone: a release of each
    holder (a few, then where the rest are listed), safe to follow literally."""
    names = [holder.owner for holder in holders]
    if not all(name is not None and _releasable(name) for name in names):
        return f"If none of these runs is active, {by_hand}"
    releases = [
        f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(name)}"
        for name in names[:3]
        if name is not None
    ]
    more = len(names) - len(releases)
    if more:
        status = f"{_this_command()} status --lock {_quoted(lock)}"
        releases.append(f"then the other {more} holders that {status} lists")
    return (
        f"It is free only once all {len(names)} are gone. If none of these runs is"
        f" active, clear each with: {'; '.join(releases)}. Never clear a run that is"
        " still active: it would go on as if it held the lock"
    )


def _holder_text(holder: str | None) -> str:
    return "a lock file that names no owner" if holder is None else holder


def _names_text(holders: list[_Record]) -> str:
    """``a:b:1, c:d:2 and 3 more``: a few holders by name, then a count."""
    names = [_holder_text(holder.owner) for holder in holders[:3]]
    more = len(holders) - len(names)
    if more:
        return f"{', '.join(names)} and {more} more"
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]


def _holds_text(record: _Record) -> str:
    """``; 2 of its 3 slots are held`` for a lock of several slots, ``; 2 runs hold it
    shared`` for one held shared, ``; 2 runs hold parts of it`` for one held in parts,
    else nothing."""
    held = len(_holders(record))
    if record.shared:
        return f"; {_runs_text(held)} {'holds' if held == 1 else 'hold'} it shared"
    if record.parted:
        return f"; {_runs_text(held)} {'holds' if held == 1 else 'hold'} parts of it"
    if record.slots == 1:
        return ""
    return f"; {held} of its {record.slots} slots {'is' if held == 1 else 'are'} held"


def _runs_text(count: int) -> str:
    return f"{count} run{'' if count == 1 else 's'}"


def _acquired_result(hold: _Hold) -> AcquireResult:
    """The acquire output of ``hold``, carrying its fence beside the output's keys."""
    lock, owner, replaced, after = hold.lock, hold.owner, hold.replaced, hold.after
    kind = hold.kind
    what = {"shared": f"a shared hold on {lock}", "slots": f"a slot of {lock}"}.get(kind, lock)
    if hold.parts is not None:
        shared = "a shared hold on " if kind == "shared" else ""
        what = f"{shared}the parts {_parts_text(hold.parts)} of {lock}"
    done = f"renewed {what} for {owner}" if hold.renewed else f"acquired {what} for {owner}"
    if replaced is not None:
        holder = f"of {replaced.owner}" if replaced.owner else "file that named no owner"
        stale = {"shared": "stale shared hold", "slots": "stale slot"}.get(kind, "stale lock")
        done += f", {'dropping' if hold.renewed else 'replacing'} the {stale} {holder}"
    done += _holds_text(after)
    stale_at = _stale_at(hold.since, hold.holder_timeout)
    result: AcquireResult = {
        "acquired": True,
        "refreshed": hold.renewed,
        "lock": lock,
        "owner": owner,
        "run_id": hold.run_id,
        "held_by": owner,
        "held_since": _format_time(hold.since),
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(hold.holder_timeout),
        "stale_replaced": {"held_by": replaced.owner, "held_since": _format_time(replaced.since)}
        if replaced is not None
        else None,
        "message": f"{done}; it goes stale at {stale_at} unless renewed{_unfenced(hold.fence)}",
    }
    return _fenced(result, hold.fence)


def _acquire_output(taken: _Hold | AcquireResult) -> AcquireResult:
    """The acquire output of a take: its hold's, or the refusal's own."""
    return taken if isinstance(taken, dict) else _acquired_result(taken)


def _waited(result: AcquireResult, waited: float, wait: float) -> AcquireResult:
    """``result`` of a take that waited in line, its message saying how long it waited."""
    outcome = "after waiting" if result["acquired"] else "gave up after waiting"
    result["message"] = f"{outcome} {waited:.1f} s (of up to {wait:g} s): {result['message']}"
    return result


def _unfenced(fence: int | None) -> str:
    """What a take's message says of a hold it could give no fence."""
    if fence is not None:
        return ""
    return (
        "; it has no fence: the store's clock could not be read (a Redis user without"
        " TIME), or the lock shows the largest fence there is"
    )


def _refusal(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """What ``take``, which refused ``request`` at ``now``, tells: the acquire output
    (held, or its turn is another's: _refused_result); else its error, raised: LockLost
    for a renewal that found the hold lost, ValueError for another program's file, or a
    count or a kind that clash with the ones in force."""
    record = take.record
    if take.outcome == "lost":
        raise _lost(lock, take)
    if take.outcome == "theirs":
        raise ValueError(_another_programs_refusal(lock, take.look, take.theirs))
    if take.outcome in ("count", "kind"):
        assert record is not None
        if take.outcome == "kind":
            raise ValueError(_kind_refusal(lock, request.owner, take.shared))
        raise ValueError(_count_refusal(lock, take, request.slots))
    if take.outcome == "parts":
        raise ValueError(_parts_kept_refusal(lock, request, take))
    if take.outcome in ("grow", "full") or take.clash not in (None, (None, None)):
        return _parts_refused_result(lock, request, take, by_hand=by_hand, now=now)
    return _refused_result(lock, request, take, by_hand=by_hand, now=now)


def _part_text(part: str | None, whose: str) -> str:
    """A part as a refusal names it: ``whose`` part ("your", "its"), or the lock whole."""
    if part is not None:
        return f"{whose} part {_quoted(part)}"
    return "the whole lock you asked for" if whose == "your" else "the whole lock"


def _parts_text(parts: tuple[str, ...] | None) -> str:
    return "the whole lock" if parts is None else ", ".join(_quoted(p) for p in parts)


def _parts_refused_result(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """The acquire output when ``take`` refuses ``request`` by its parts: a live hold
    of another or a waiter ahead has a part that conflicts with one it asks ("held",
    "line"); a part its owner adds to its hold conflicts with another's ("grow",
    refused at once); or the record would grow too large ("full"). It names who is in
    the way and both parts."""
    owner, record = request.owner, take.record
    holder = take.blocker
    if holder is None and take.live:  # too many parts: the first live hold to go stale
        holder = take.live[0]
    ours, theirs = take.clash or (None, None)
    asked = _part_text(ours, "your")
    their = _part_text(theirs, "its")
    # Too many parts on a free lock names no holder: nothing was written.
    by = None if holder is None else _holder_text(holder.owner)
    held_since = None if holder is None else _format_time(holder.since)
    stale_at = None if holder is None else _stale_at(holder.since, take.holder_timeout)
    if take.outcome == "full":
        message = (
            f"lock {lock} holds too many parts: its record would pass"
            f" {_RECORD_MAX_BYTES // 1024} KiB, the most a lock's record may hold; nothing"
            " changed. Name fewer or wider parts (a folder for the files in it), or keep"
            " another part of the tree under another lock"
        )
    elif take.outcome == "grow":
        waiting = take.waiter is not None and take.blocker is None
        where = "waits in line for" if waiting else "holds"
        if waiting and take.waiter is not None:
            by, held_since = take.waiter.owner, _format_time(take.waiter.since)
            stale_at = _lapses_at(take.waiter, now)
        held = "the whole lock" if record is None else _parts_text(_held_parts(record, owner))
        message = (
            f"{owner} holds {held} of {lock} and asked for {_parts_text(request.parts)}: "
            f"{asked} conflicts with {their}, which {by} {where}; nothing changed. A hold"
            " takes more parts only while no other hold or waiter is in their way, and"
            " never waits for them (two that waited to grow would wait on each other):"
            f" ask again once {by} has let go (status --lock shows who holds what), or"
            " release your hold and wait in line for every part you need"
        )
    elif take.outcome == "held":
        assert holder is not None
        age = now - holder.since
        age_text = f"{_duration_text(age)} ago" if age >= 0 else "dated in the future by this clock"
        clear = _clear_advice(lock, holder.owner, by_hand, holder.empty)
        clear = _maybe_the_callers_own(owner, holder.owner) + clear
        message = (
            f"lock {lock} is held in a part that conflicts with yours: {by} holds {their}"
            f" (since {held_since}, {age_text}), and some path lies in it and in {asked};"
            f" it goes stale at {stale_at}{_in_line_text(take.others)}. {clear}"
        )
    else:
        waiter = take.waiter
        assert waiter is not None
        by, held_since = waiter.owner, _format_time(waiter.since)
        stale_at = _lapses_at(waiter, now)
        message = (
            f"lock {lock} has no live hold in your way, but {by} waits in line ahead for"
            f" {their}, which conflicts with {asked} (waiting since {held_since})"
            f"{_in_line_text(take.others)}. Wait in line for your turn (acquire --wait); a"
            " place in line lapses within seconds of its waiter's end"
        )
    return {
        "acquired": False,
        "refreshed": False,
        "lock": lock,
        "owner": owner,
        "run_id": request.run_id,
        "held_by": by,
        "held_since": held_since,
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(take.holder_timeout),
        "stale_replaced": None,
        "message": message,
    }


def _held_parts(record: _Record, owner: str) -> tuple[str, ...] | None:
    """The parts ``owner`` holds of ``record`` (None: the lock whole)."""
    return next((h.parts for h in _holders(record) if h.owner == owner), None)


def _parts_kept_refusal(lock: str, request: _Request, take: _Take) -> str:
    """Why run, held() or a session, which keep the hold their owner has as it is, may
    not name a part it does not hold."""
    record = take.record
    held = None if record is None else _held_parts(record, request.owner)
    part, _ = take.clash or (None, None)
    return (
        f"{request.owner} holds {_parts_text(held)} of {lock}, and the part {_quoted(part or '')}"
        " is not among them: run, held() and a session keep the hold an owner has as it"
        " is, and never change its parts; name parts it holds, or none, or change its"
        " parts first with acquire --part"
    )


def _refused_result(
    lock: str, request: _Request, take: _Take, *, by_hand: str, now: float
) -> AcquireResult:
    """The acquire output when ``take`` refuses ``request`` (held, or its turn is
    another's): of several slots or shared holds, the holder whose hold goes stale
    first is named; a shared call waits behind the first exclusive waiter, any other
    behind the first waiter."""
    owner, run_id, record, shared = request.owner, request.run_id, take.record, take.shared
    held = take.outcome == "held"
    several = record is not None and record.holders is not None
    live, waiter, holder, line = take.live, take.waiter, take.blocker, take.others
    assert holder is not None
    holder_timeout = take.holder_timeout
    held_since = _format_time(holder.since)
    stale_at = _stale_at(holder.since, holder_timeout)
    if waiter is not None and not held:
        stale_at = _lapses_at(waiter, now)
    if held:
        age = now - holder.since
        age_text = f"{_duration_text(age)} ago" if age >= 0 else "dated in the future by this clock"
        clear = _clear_advice(lock, holder.owner, by_hand, holder.empty)
        clear = _maybe_the_callers_own(owner, holder.owner) + clear
        if several:
            assert record is not None
            if record.shared:  # a slot frees with one release; a shared lock with all
                clear = _clear_all_advice(lock, live, by_hand)
            how = (
                f"held shared by {_runs_text(len(live))},"
                if record.shared
                else f"held in all {record.slots} of its slots, by"
            )
            message = (
                f"lock {lock} is {how} {_names_text(live)}; the first to go stale is"
                f" {_holder_text(holder.owner)}'s (since {held_since}, {age_text}), at"
                f" {stale_at}{_in_line_text(line)}. {clear}"
            )
        else:
            how = "held exclusively by" if shared else "held by"
            message = (
                f"lock {lock} is {how} {_holder_text(holder.owner)} since {held_since}"
                f" ({age_text}); it goes stale at {stale_at}{_in_line_text(line)}. {clear}"
            )
    elif shared:
        state = f"held shared by {_runs_text(len(live))}" if live else "free"
        message = (
            f"lock {lock} is {state}, but {holder.owner} waits in line ahead for an"
            f" exclusive hold (waiting since {held_since}), and shared holds come after"
            f" it{_in_line_text(line)}. Wait in line for your turn (acquire --shared"
            " --wait); a place in line lapses within seconds of its waiter's end"
        )
    else:
        state = "free" if record is None else "stale"
        if several:
            state = "free or stale"
            what = f"lock {lock} has a slot that is {state}"
        else:
            what = f"lock {lock} is {state}"
        message = (
            f"{what}, but it goes to the"
            f" first run waiting in line{_in_line_text(line)} (waiting since {held_since})."
            " Wait in line for your turn (acquire --wait); a place in line lapses within"
            " seconds of its waiter's end"
        )
    return {
        "acquired": False,
        "refreshed": False,
        "lock": lock,
        "owner": owner,
        "run_id": run_id,
        "held_by": holder.owner,
        "held_since": held_since,
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(holder_timeout),
        "stale_replaced": None,
        "message": message,
    }


def _lost(lock: str, take: _Take) -> LockLost:
    """Why a renewal finds its hold lost, as ``take`` found it."""
    record = take.record
    held_by = held_since = None
    if record is not None and record.holders is not None:
        # Of several slots or shared holds: this owner's is gone (cleared, or stale).
        hold = "shared hold" if record.shared else "slot"
        why = f"its {hold} was released or replaced, or went stale"
        if record.parted:
            why = "its parts were released or changed by another call of its owner, or went stale"
    elif record is None:
        why = "it was cleared, and no run holds it now"
    else:
        held_by, named = record.owner, _holder_text(record.owner)
        held_since = _format_time(record.since)
        why = f"{named} holds it since {held_since}"
        if take.stale:
            stale_at = _stale_at(record.since, take.holder_timeout)
            why = f"it went stale at {stale_at} before it was renewed"
    return LockLost(lock, held_by, held_since, why)


def _release_result(
    lock: str, owner: str, record: _Record | None, *, freed: bool = False, left: str = ""
) -> ReleaseResult:
    """``record``: the lock's (``freed``: the slot the release freed); ``left``: what is
    left of a lock of several slots."""
    other: _Record | None = None
    if record is None:
        reason: Literal["absent", "not-owner"] | None = "absent"
        message = f"no lock at {lock}; nothing to release"
    elif freed or (record.owner == owner and record.holders is None):
        reason = None
        message = f"released {lock} held by {owner}{left}"
    else:
        reason = "not-owner"
        holders = _holders(record)
        other = _first_to_go(holders, 0.0) if holders else record
        message = f"left {lock} in place: it is held by {_holder_text(other.owner)}, not {owner}"
        if record.holders is not None:
            holds = "shared holds" if record.shared else f"{record.slots} slots"
            message = f"left {lock} in place: {owner} holds none of its {holds}"
            if holders:
                message += f" (held by {_names_text(sorted(holders, key=lambda h: h.since))})"
    return {
        "released": reason is None,
        "reason": reason,
        "lock": lock,
        "owner": owner,
        "held_by": None if other is None else other.owner,
        "held_since": None if other is None else _format_time(other.since),
        "message": message,
    }


# --- Errors


def _describe_os_error(exc: OSError) -> str:
    """An OS error in words, with the file it names."""
    text = exc.strerror or str(exc)
    if exc.filename:
        text += f": {exc.filename}"
    return text


def _fail(message: str) -> None:
    """Write the one JSON error line on stderr."""
    line = json.dumps({"status": "error", "message": " ".join(message.split())})
    sys.stderr.write(line + "\n")


# --- status's report, which a listing gives for each lock too


def _status_result(lock: str, standing: _Standing, line: list[_Place], now: float) -> StatusResult:
    """status's report of ``standing``, the lock's at ``now``, with its live ``line``."""
    slots, live, shown = standing.slots, standing.live, standing.shown
    holder_timeout = standing.holder_timeout
    case = standing.case
    message = f"no lock at {lock}; it is free"
    if case == "all held":
        assert shown is not None
        how = (
            f"held shared by {_runs_text(len(live))},"
            if standing.mode == "shared"
            else f"held in all {slots} of its slots, by"
        )
        if standing.parted:
            how = f"held in parts by {_runs_text(len(live))},"
        message = (
            f"{lock} is {how} {_names_text(live)}; the first"
            f" to go stale is {_holder_text(shown.owner)}'s, at"
            f" {_stale_at(shown.since, holder_timeout)}"
        )
    elif case == "all shared stale":
        assert shown is not None
        message = (
            f"{lock} was held {'in parts' if standing.parted else 'shared'}, but every"
            " hold went stale, the last"
            f" {_holder_text(shown.owner)}'s at {_stale_at(shown.since, holder_timeout)}, so the"
            " next acquire takes it"
        )
    elif case == "one":
        assert shown is not None
        stale_at = _stale_at(shown.since, holder_timeout)
        then = (
            f"went stale at {stale_at}, so the next acquire takes it"
            if standing.state == "stale"
            else f"goes stale at {stale_at}"
        )
        since = _format_time(shown.since)
        message = f"{lock} is held by {_holder_text(shown.owner)} since {since}; it {then}"
    elif case == "slot stale":
        gone = standing.gone
        assert gone is not None
        message = (
            f"{lock} has no free slot of its {slots}, but {_holder_text(gone.owner)}'s went"
            f" stale at {_stale_at(gone.since, standing.timeout_of(gone))},"
            " so the next acquire takes it"
        )
    elif case == "some held":
        message = (
            f"{lock} has {slots - len(live)} of its {slots} slots free; held by {_names_text(live)}"
        )
    elif case == "no slot held":
        message = f"no slot of {lock} is held; it is free (slots: {slots})"
    return {
        "state": standing.state,
        "lock": lock,
        "held_by": None if shown is None else shown.owner,
        "held_since": None if shown is None else _format_time(shown.since),
        "stale_at": None if shown is None else _stale_at(shown.since, holder_timeout),
        "age_seconds": None if shown is None else int((now - shown.since) // 1),
        "stale_after_minutes": _minutes_for_output(holder_timeout),
        "waiting": [{"owner": p.owner, "since": _format_time(p.since)} for p in line],
        "slots": slots,
        "holders": [
            {
                "owner": holder.owner,
                "since": _format_time(holder.since),
                "stale_at": _stale_at(holder.since, standing.timeout_of(holder)),
                "fence": holder.fence,
                "parts": None if holder.parts is None else list(holder.parts),
            }
            for holder in standing.holders
        ],
        "mode": standing.mode,
        "fence": standing.fence,
        "message": message + _in_line_text(line),
    }


def _check_result(
    lock: str,
    reserved: list[tuple[str, _Record, str | None]],
    paths: tuple[str, ...],
    owner: str | None,
    stale_after: float,
) -> CheckResult:
    """check's answer: which of ``paths`` lie in a part of ``lock`` held by another
    than ``owner`` (None: by anyone), as ``reserved`` gives them (path, holder, part;
    ``stale_after`` judges a holder without a timeout of its own), the first few named
    in its message."""
    whom = "any run" if owner is None else f"a run other than {owner}"
    entries: list[Reservation] = [
        {
            "path": path,
            "held_by": holder.owner,
            "part": part,
            "kind": "shared" if holder.shared else "exclusive",
            "stale_at": _stale_at(holder.since, _deciding_timeout(holder, stale_after)),
        }
        for path, holder, part in reserved
    ]
    if not paths:
        message = f"no path was given, so none lies in a part of {lock} held by {whom}"
    elif not entries and len(paths) == 1:
        message = f"the path {_quoted(paths[0])} lies in no part of {lock} held by {whom}"
    elif not entries:
        message = f"none of the {len(paths)} paths lies in a part of {lock} held by {whom}"
    else:
        count = len(dict.fromkeys(entry["path"] for entry in entries))
        named = [_reservation_text(entry) for entry in entries[:3]]
        if len(entries) > 3:
            named.append(f"and {len(entries) - 3} more, which reserved lists")
        status = f"{_this_command()} status --lock {_quoted(lock)}"
        message = (
            f"{count} of the {len(paths)} paths {'lies' if count == 1 else 'lie'} in parts of"
            f" {lock} held by {whom}: {'; '.join(named)}. Leave them unwritten until those"
            f" holds end (released, or stale at their stale_at); {status} shows who holds"
            " what"
        )
    return {"free": not entries, "reserved": entries, "message": message}


def _reservation_text(entry: Reservation) -> str:
    """``'src/a.py' in wf:a:1's part 'src/**'``: a path, and the hold it lies in."""
    by, part, path = _holder_text(entry["held_by"]), entry["part"], _quoted(entry["path"])
    shared = ", shared" if entry["kind"] == "shared" else ""
    if part is None:
        return f"{path} in the whole lock, held by {by}{shared}"
    return f"{path} in {by}'s part {_quoted(part)}{shared}"


def _count_refusal(lock: str, take: _Take, slots: int) -> str:
    """Why a call naming ``slots`` (or a shared hold: ``take.shared``) is refused while
    the count of slots of the lock ``take`` found, or its shared holds, are in force."""
    record, shared = take.record, take.shared
    assert record is not None
    names = _names_text(take.live)
    if record.shared:
        return (
            f"lock {lock} is held shared (by {names}), and shared holds have no slots: ask"
            " for a shared hold with --shared (shared=True), or for the lock alone with no"
            " --slots; slots can be asked for once no shared hold is live"
        )
    in_force = record.slots
    if shared:
        return (
            f"lock {lock} has {in_force} slots while any is held (by {names}), and a slot"
            f" is never shared: ask for one with --slots {in_force} (slots={in_force});"
            " shared holds can be asked for once no slot is held"
        )
    ask = "no --slots (or --slots 1; slots=1)" if in_force == 1 else f"--slots {in_force}"
    if in_force > 1:
        ask += f" (slots={in_force})"
    return (
        f"lock {lock} has {in_force} slot{'s' if in_force > 1 else ''} while any is held"
        f" (by {names}), not {slots}: ask for it with {ask}; the count changes only once no"
        " slot is held"
    )


def _another_programs_text(look: _Look, why: str) -> str:
    """What the lock path is, another program's file by ``why`` (as the decision gave
    it), in words: by its name (there or not), or by its size and form."""
    if why == _BY_ITS_NAME:
        return f"names another program's file ({look.file_name}: a package manager's lockfile)"
    size = 0 if look.record is None else look.record.size
    form = ", a JSON or TOML document" if why == _FORM_DOCUMENT else ""
    return f"is a file of another program's ({size} bytes{form}, no lock record)"


def _another_programs_refusal(lock: str, look: _Look, why: str) -> str:
    """Why a file of another program's is no lock (acquire and status say it alike)."""
    return (
        f"the lock path {lock} {_another_programs_text(look, why)}: a lock needs a file"
        " of its own; give --lock a path no other program uses"
    )


def _another_programs_left(lock: str, owner: str, look: _Look, why: str) -> ReleaseResult:
    """A release's output for a file of another program's, which it leaves as it is."""
    return {
        "released": False,
        "reason": "not-owner",
        "lock": lock,
        "owner": owner,
        "held_by": None,
        "held_since": None,
        "message": f"left {lock} in place: the path {_another_programs_text(look, why)};"
        " a release never deletes another program's file",
    }


def _kind_refusal(lock: str, owner: str, shared: bool) -> str:
    """Why ``owner``, which holds the lock one way, may not hold it the other way:
    a hold never changes kind (two shared holders that both waited to turn exclusive
    would wait for each other forever)."""
    has = "the lock" if shared else "a shared hold on"
    asks = "a shared hold" if shared else "the lock exclusively"
    release = f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(owner)}"
    keep = ""
    if not shared:
        # run and held() never renew a shared hold as exclusive: their step would run
        # beside readers.
        keep = "; to keep it shared, add --shared (held(): shared=True)"
    return (
        f"{owner} holds {has} {lock} and asked for {asks}: a hold never changes kind{keep};"
        f" to change it, release it first ({release}), then ask again"
    )
