"""The outputs a lock call seldom needs, carried as text (an acquire or a release never
compiles them): status's report, which a listing gives for each lock too, and the
refusal of a count of slots other than the one in force. Kept apart from outputs.py for
that: compiling it would cost every acquire and release 0.6 ms (``compile()`` of this
module, best of 50, CPython 3.11 on 2 cores; a call takes about 60 ms)."""

from __future__ import annotations

from .decisions import _deciding_timeout, _first_to_go, _holders, _is_stale, _live_holders
from .outputs import _holder_text, _in_line_text, _minutes_for_output, _names_text, _stale_at
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .contract import StatusResult
    from .records import _Place, _Record


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
