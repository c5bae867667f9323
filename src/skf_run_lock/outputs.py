"""The outputs: each shape built once, with its message, status's report (which a listing
gives for each lock too) among them. Every message names the lock and says what to do,
in words safe to follow literally."""

from __future__ import annotations

import json
import os
import sys

from .contract import LockLost
from .decisions import _deciding_timeout, _first_to_go, _holders, _is_stale, _live_holders
from .inputs import _releasable
from .quoting import _quoted
from .records import _Record
from .times import _duration_text, _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .contract import AcquireResult, ReleaseResult, StatusResult
    from .records import _Place, _Record


def _this_command() -> str:
    """The command that runs this very copy of the tool, to be followed literally: the
    installed package by the interpreter that has it, else the file itself."""
    if __name__ == "skf_run_lock.outputs":
        return f"{_quoted(sys.executable)} -m skf_run_lock"
    return f"python3 {_quoted(os.path.abspath(__file__))}"


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _in_line_text(line: list[_Place]) -> str:
    """``; 2 runs wait in line, wf:sk:r first`` (empty if nobody waits)."""
    count = len(line)
    verb = "runs wait" if count > 1 else "run waits"
    return f"; {count} {verb} in line, {line[0].owner} first" if line else ""


def _minutes_for_output(stale_after: float) -> int | float:
    minutes = round(stale_after / 60, 4)
    return int(minutes) if minutes.is_integer() else minutes


def _stale_at(since: int, stale_after: float) -> str:
    return _format_time(-(-(since + stale_after) // 1))  # _format_time caps it


def _clear_advice(lock: str, holder: str | None, by_hand: str) -> str:
    """How to clear a lock whose run is gone, safe to follow literally."""
    if holder is not None and _releasable(holder):
        command = f"{_this_command()} release --lock {_quoted(lock)} --owner {_quoted(holder)}"
        return f"If that run is no longer active, clear it with: {command}"
    return (
        "No release can name this holder: wait until it goes stale, or, if no run is"
        f" active, {by_hand}"
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


def _slots_text(record: _Record) -> str:
    """``; 2 of its 3 slots are held`` for a lock of several slots, else nothing."""
    if record.slots == 1:
        return ""
    held = len(_holders(record))
    return f"; {held} of its {record.slots} slots {'is' if held == 1 else 'are'} held"


def _acquired_result(
    lock: str,
    owner: str,
    run_id: str,
    *,
    stale_after: float,
    since: int,
    before: _Record | None,
    after: _Record | None = None,
) -> AcquireResult:
    """``after``: the record the take left, for a lock of several slots."""
    renewed = before is not None and before.owner == owner
    replaced = before is not None and not renewed
    stale_at = _stale_at(since, stale_after)
    what = lock if after is None or after.slots == 1 else f"a slot of {lock}"
    if before is None:
        done = f"acquired {what} for {owner}"
    elif renewed:
        done = f"renewed {what} for {owner}"
    else:
        holder = f"of {before.owner}" if before.owner else "file that named no owner"
        stale = "stale lock" if what == lock else "stale slot"
        done = f"acquired {what} for {owner}, replacing the {stale} {holder}"
    if after is not None:
        done += _slots_text(after)
    return {
        "acquired": True,
        "refreshed": renewed,
        "lock": lock,
        "owner": owner,
        "run_id": run_id,
        "held_by": owner,
        "held_since": _format_time(since),
        "stale_at": stale_at,
        "stale_after_minutes": _minutes_for_output(stale_after),
        "stale_replaced": {"held_by": before.owner, "held_since": _format_time(before.since)}
        if before is not None and replaced
        else None,
        "message": f"{done}; it goes stale at {stale_at} unless renewed",
    }


def _refused_result(
    lock: str,
    owner: str,
    run_id: str,
    *,
    caller_timeout: float,
    record: _Record | None,
    now: float,
    by_hand: str,
    line: list[_Place],
    held: bool,
) -> AcquireResult:
    """The acquire output when ``record`` (or the first in ``line``) stands in the way:
    of several slots held, the holder whose slot goes stale first is named."""
    several = record is not None and record.slots > 1
    if held and several:
        live = _live_holders(record, caller_timeout, now, False)
        holder: _Record | None = _first_to_go(live, caller_timeout)
    elif held:
        holder = record
    else:
        holder = _Record(line[0].owner, line[0].since, line[0].stale_after)
    assert holder is not None
    timeout = _deciding_timeout(holder, caller_timeout)
    held_since = _format_time(holder.since)
    stale_at = _stale_at(holder.since, timeout)
    if held:
        age = now - holder.since
        age_text = f"{_duration_text(age)} ago" if age >= 0 else "dated in the future by this clock"
        if several:
            assert record is not None
            by_whom = sorted(_holders(record), key=lambda h: h.since)
            message = (
                f"lock {lock} is held in all {record.slots} of its slots, by"
                f" {_names_text(by_whom)}; the first to go stale is"
                f" {_holder_text(holder.owner)}'s (since {held_since}, {age_text}), at"
                f" {stale_at}{_in_line_text(line)}. {_clear_advice(lock, holder.owner, by_hand)}"
            )
        else:
            message = (
                f"lock {lock} is held by {_holder_text(holder.owner)} since {held_since}"
                f" ({age_text}); it goes stale at {stale_at}{_in_line_text(line)}."
                f" {_clear_advice(lock, holder.owner, by_hand)}"
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
        "stale_after_minutes": _minutes_for_output(timeout),
        "stale_replaced": None,
        "message": message,
    }


def _lost(
    lock: str, record: _Record | None, caller_timeout: float, now: float, empty_is_stale: bool
) -> LockLost:
    if record is not None and record.holders is not None:
        # Of several slots: the one this owner held is gone (cleared, or stale).
        return LockLost(lock, None, None, "its slot was released or replaced, or went stale")
    if record is None:
        return LockLost(lock, None, None, "it was cleared, and no run holds it now")
    since = _format_time(record.since)
    if _is_stale(record, caller_timeout, now, empty_is_stale):
        stale_at = _stale_at(record.since, _deciding_timeout(record, caller_timeout))
        why = f"it went stale at {stale_at} before it was renewed"
    else:
        why = f"{_holder_text(record.owner)} holds it since {since}"
    return LockLost(lock, record.owner, since, why)


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
            message = (
                f"left {lock} in place: {owner} holds none of its {record.slots} slots"
                f" (held by {_names_text(sorted(holders, key=lambda h: h.since))})"
                if holders
                else f"left {lock} in place: {owner} holds none of its {record.slots} slots"
            )
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


def _status_result(
    lock: str,
    record: _Record | None,
    caller_timeout: float,
    now: float,
    empty_is_stale: bool,
    *,
    line: list[_Place],
    slots: int = 1,
) -> StatusResult:
    """Who holds the lock, by the count in force (else ``slots``, the caller's)."""
    live = _live_holders(record, caller_timeout, now, empty_is_stale)
    if record is not None and live:
        slots = record.slots
    several = slots > 1 or (record is not None and record.slots > 1)
    holders = _holders(record)
    state: Literal["free", "held", "stale"] = "free"
    timeout = caller_timeout
    shown: _Record | None = None
    message = f"no lock at {lock}; it is free"
    if not several and record is not None:
        shown = record
        timeout = _deciding_timeout(record, caller_timeout)
        stale_at = _stale_at(record.since, timeout)
        stale = _is_stale(record, caller_timeout, now, empty_is_stale)
        state = "stale" if stale else "held"
        then = (
            f"went stale at {stale_at}, so the next acquire takes it"
            if stale
            else f"goes stale at {stale_at}"
        )
        since = _format_time(record.since)
        message = f"{lock} is held by {_holder_text(record.owner)} since {since}; it {then}"
    elif len(live) >= slots:
        state = "held"
        shown = _first_to_go(live, caller_timeout)
        timeout = _deciding_timeout(shown, caller_timeout)
        message = (
            f"{lock} is held in all {slots} of its slots, by"
            f" {_names_text(sorted(live, key=lambda h: h.since))}; the first to go stale is"
            f" {_holder_text(shown.owner)}'s, at {_stale_at(shown.since, timeout)}"
        )
    elif record is not None and record.slots == slots and len(holders) >= slots:
        state = "stale"
        gone = _first_to_go([h for h in holders if h not in live], caller_timeout)
        message = (
            f"{lock} has no free slot of its {slots}, but {_holder_text(gone.owner)}'s went"
            f" stale at {_stale_at(gone.since, _deciding_timeout(gone, caller_timeout))},"
            " so the next acquire takes it"
        )
    elif live:
        message = (
            f"{lock} has {slots - len(live)} of its {slots} slots free; held by"
            f" {_names_text(sorted(live, key=lambda h: h.since))}"
        )
    elif several:
        message = f"no slot of {lock} is held; it is free (slots: {slots})"
    return {
        "state": state,
        "lock": lock,
        "held_by": None if shown is None else shown.owner,
        "held_since": None if shown is None else _format_time(shown.since),
        "stale_at": None if shown is None else _stale_at(shown.since, timeout),
        "age_seconds": None if shown is None else int((now - shown.since) // 1),
        "stale_after_minutes": _minutes_for_output(timeout),
        "waiting": [{"owner": p.owner, "since": _format_time(p.since)} for p in line],
        "slots": slots,
        "holders": [
            {
                "owner": holder.owner,
                "since": _format_time(holder.since),
                "stale_at": _stale_at(holder.since, _deciding_timeout(holder, caller_timeout)),
            }
            for holder in sorted(holders, key=lambda h: h.since)
        ],
        "message": message + _in_line_text(line),
    }


def _count_refusal(lock: str, record: _Record, slots: int, caller_timeout: float) -> str:
    """Why a call naming ``slots`` is refused while ``record``'s count is in force."""
    in_force = record.slots
    names = _names_text(sorted(_holders(record), key=lambda h: h.since))
    ask = "no --slots (or --slots 1; slots=1)" if in_force == 1 else f"--slots {in_force}"
    if in_force > 1:
        ask += f" (slots={in_force})"
    return (
        f"lock {lock} has {in_force} slot{'s' if in_force > 1 else ''} while any is held"
        f" (by {names}), not {slots}: ask for it with {ask}; the count changes only once no"
        " slot is held"
    )
