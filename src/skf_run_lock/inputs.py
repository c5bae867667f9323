"""What a caller gives, checked in one place each: owners and run ids, times, the timeout
and the wait, each refused in the caller's own unit."""

from __future__ import annotations

import os
import re
import time

from .public_surface import (
    _MAX_SLOTS,
    _MAX_STALE_AFTER_SEC,
    _MIN_STALE_AFTER_SEC,
    _UNIT_SECONDS,
    OWNER_MAX_LEN,
    _UsageError,
)
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime

    from .hold import _Hold

__all__ = ["new_run_id"]

_PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _split_owner(owner: str) -> tuple[str, str, str | None]:
    """Workflow, skill and run id (None: no second colon); ValueError for a bad owner."""
    if not isinstance(owner, str):
        raise ValueError(f"owner must be a string, not {type(owner).__name__}")
    parts = owner.split(":", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(
            f"owner {owner!r} must be workflow:skill[:run_id] with a non-empty workflow and skill"
        )
    # Every whitespace character but " " is non-printable.
    if " " in owner or not owner.isprintable():
        raise ValueError(f"owner {owner!r} must not contain whitespace or non-printable characters")
    if len(owner) > OWNER_MAX_LEN:
        raise ValueError(f"owner is {len(owner)} characters long; at most {OWNER_MAX_LEN} allowed")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def _owner_with_run_id(owner: str, now: float | None = None) -> tuple[str, str]:
    """``(owner, run_id)``, a fresh run id added when the owner has none."""
    workflow, skill, run_id = _split_owner(owner)
    if run_id:
        return owner, run_id
    run_id = _run_id_at(time.time() if now is None else now)
    full = f"{workflow}:{skill}:{run_id}"
    if len(full) > OWNER_MAX_LEN:
        raise ValueError(
            f"owner {full!r} with its new run id is {len(full)} characters long;"
            f" at most {OWNER_MAX_LEN} allowed"
        )
    return full, run_id


def _checked_slots(slots: object, name: str = "slots", given: object = None) -> int:
    """``slots``, a plain integer from 1 to MAX_SLOTS; ValueError for anything else.
    ``given``: what the caller wrote, if not ``slots`` itself (a flag's text), which
    the message quotes as written."""
    if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= _MAX_SLOTS:
        shown = slots if given is None else given
        raise ValueError(
            f"{name} must be a whole number of slots from 1 to {_MAX_SLOTS}, not {shown!r}"
        )
    return slots


def _checked_shared(shared: object, slots: int) -> bool:
    """``shared``, True or False, and never with several slots: shared holds are any
    number at once, so a count of slots means nothing to them."""
    if not isinstance(shared, bool):
        raise ValueError(f"shared must be True or False, not {shared!r}")
    if shared and slots != 1:
        raise ValueError(
            f"a shared hold has no count of slots: give --shared or --slots {slots}, not"
            " both (shared=True or slots=N)"
        )
    return shared


def _checked_parts_of(parts: object, slots: int) -> tuple[str, ...] | None:
    """``parts`` checked as a set (parts.py; None: the lock whole), and never with
    several slots: a hold of parts conflicts by its paths, a slot by its count."""
    if parts is None:
        return None
    if slots != 1:
        raise ValueError(
            f"parts have no count of slots: give --part or --slots {slots}, not both"
            " (parts=[...] or slots=N)"
        )
    from .parts import _checked_parts

    return _checked_parts(parts)


def _has_run_id(owner: str) -> bool:
    """Whether ``owner`` is whole, as a release must name it; ValueError if malformed."""
    return bool(_split_owner(owner)[2])


def _releasable(holder: str) -> bool:
    try:
        return bool(_split_owner(holder)[2])
    except ValueError:
        return False


def _seconds_of(now: datetime | None) -> float:
    if now is None:
        return time.time()
    if now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    return now.timestamp()


def _run_id_at(seconds: float) -> str:
    compact = _format_time(seconds).replace("-", "").replace(":", "")
    return f"{compact}-{os.urandom(4).hex()}"


def new_run_id(now: datetime | None = None) -> str:
    """A new run id, ``YYYYMMDDTHHMMSSZ-xxxxxxxx`` (``now``: an aware datetime, or the
    clock): UTC time and 8 random hex digits."""
    return _run_id_at(_seconds_of(now))


# --- Inputs: each checked in one place, reported in the caller's unit


def _checked_stale_after(value: object, name: str = "stale_after", unit: str = "seconds") -> float:
    """The timeout ``value`` (in ``unit``) in seconds; ValueError in the caller's unit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of {unit}, not {value!r}")
    return _stale_after_within(value * _UNIT_SECONDS[unit], name, unit, repr(value))


def _stale_after_within(seconds: float, name: str, unit: str, shown: str) -> float:
    """``seconds`` if a timeout may be that long; ValueError in ``unit``, quoting what
    the caller gave as ``shown``."""
    scale = _UNIT_SECONDS[unit]
    if not 0 < seconds <= _MAX_STALE_AFTER_SEC:  # also false for NaN
        raise ValueError(
            f"{name} must be a finite number of {unit} > 0 and"
            f" <= {_MAX_STALE_AFTER_SEC // scale}, not {shown}"
        )
    if seconds < _MIN_STALE_AFTER_SEC:
        # It would print as 0 minutes, and be stale at once.
        raise ValueError(
            f"{name} of {shown} is too small: at least {_MIN_STALE_AFTER_SEC / scale:g} {unit}"
        )
    return float(seconds)


def _checked_wait(value: object, name: str = "wait", limit: float = float("inf")) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    return _wait_within(value, name, limit, "seconds", repr(value))


def _wait_within(seconds: float, name: str, limit: float, unit: str, shown: str) -> float:
    """``seconds`` if a call may wait that long; ValueError in ``unit``, quoting ``shown``."""
    if not 0 <= seconds <= limit or seconds == float("inf"):  # also false for NaN
        most = "" if limit == float("inf") else f" and <= {limit / _UNIT_SECONDS[unit]:g}"
        raise ValueError(f"{name} must be a finite number of {unit} >= 0{most}, not {shown}")
    return float(seconds)


# --- Durations on the command line: a number and a unit, several units largest first
# (1h30m), or a bare number in the option's own unit (minutes for --stale-after,
# seconds for --wait). A bound is stated in the unit the caller wrote.

# Compiled by re only when a duration with a unit is given (1.2 ms: a call given bare
# numbers, or none, never pays it).
_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_CLI_DURATION = "".join(f"(?:{_NUMBER}{suffix})?" for suffix in "dhms")
_SUFFIX_UNITS = ("days", "hours", "minutes", "seconds")
_DURATION_FORMS = "90s, 10m, 2h, 1.5h, 1d or 1h30m"


def _duration_seconds(text: str, name: str, unit: str) -> tuple[float, str]:
    """The seconds of a duration given on the command line, and the unit to state its
    bounds in (the smallest it names, or ``unit`` for a bare decimal number of it):
    ``90s``, ``10m``, ``2h``, ``1.5h``, ``1d``, ``1h30m``; _UsageError for anything else."""
    if _PLAIN_DECIMAL.fullmatch(text):
        return float(text) * _UNIT_SECONDS[unit], unit
    with_units = re.fullmatch(_CLI_DURATION, text) if text else None
    if with_units is not None:
        seconds = 0.0
        smallest = unit
        for number, named in zip(with_units.groups(), _SUFFIX_UNITS, strict=True):
            if number is not None:
                seconds += float(number) * _UNIT_SECONDS[named]
                smallest = named
        return seconds, smallest
    raise _UsageError(
        f"{name} must be a number of {unit} or a duration such as {_DURATION_FORMS}, not {text!r}"
    )


# --- What a call asks, gathered into one value where it is checked


class _Query:
    """What a call that judges a lock asks (status, each lock of a listing, and every
    take): the lock (a path or an address, checked by its store), ``stale_after``, the
    caller's timeout in seconds, which judges a record without one of its own, a fixed
    time (``fixed_now``, a test's; None: the clock), whether an empty record is stale,
    and the count of ``slots`` it names. Each part is checked where it is given."""

    __slots__ = ("empty_is_stale", "fixed_now", "lock", "slots", "stale_after")

    def __init__(
        self,
        lock: str | os.PathLike[str],
        stale_after: float,
        *,
        fixed_now: float | None = None,
        empty_is_stale: bool = False,
        slots: int = 1,
    ) -> None:
        self.lock = lock
        self.stale_after = stale_after
        self.fixed_now = fixed_now
        self.empty_is_stale = empty_is_stale
        self.slots = slots


class _Release:
    """What a release asks: the lock (a path or an address, checked by its store) and
    the whole ``owner`` whose hold it ends (checked once the store has named the lock,
    which the refusal of an owner without its run id shows). A value of its own, not a
    ``_Request``: a release has no timeout, wait, count of slots or kind of hold.
    ``deadline``: the moment (``_SEAMS.clock``) past which it waits on nothing (held()'s:
    its hold's stop point)."""

    __slots__ = ("deadline", "lock", "owner")

    def __init__(
        self, lock: str | os.PathLike[str], owner: str, deadline: float = float("inf")
    ) -> None:
        self.lock = lock
        self.owner = owner
        self.deadline = deadline


class _Request(_Query):
    """What a call that takes a lock asks, each part checked: a query's parts, the
    whole owner and its run id, how long it may wait in line, whether it asks for a
    ``shared`` hold, the ``parts`` it holds (None: the lock whole), and for run and
    held() ``keep_longer`` (a renewal never shortens a
    hold the owner has), ``renew_only`` (a renewal that must find the hold still the
    owner's) and ``session`` (an agent session's take: its hold is marked as the
    session's and lasts its lease; see decisions._take_timeout). A new capability is a
    part here, and every layer that takes a request has it.

    Two parts are the renewer's: ``deadline``, the moment (``_SEAMS.clock``) past which
    no try waits on the network (a renewal's: its holder must stop by then), and
    ``try_began``, set by each try as it begins, before it sends anything: a hold the
    try took or renewed started no sooner, so the renewer counts the hold from it."""

    __slots__ = (
        "deadline",
        "keep_longer",
        "owner",
        "parts",
        "renew_only",
        "run_id",
        "session",
        "shared",
        "try_began",
        "wait",
    )

    def __init__(
        self,
        lock: str | os.PathLike[str],
        owner: str,
        run_id: str,
        stale_after: float,
        *,
        wait: float = 0.0,
        fixed_now: float | None = None,
        empty_is_stale: bool = False,
        slots: int = 1,
        shared: bool = False,
        parts: tuple[str, ...] | None = None,
        keep_longer: bool = False,
        renew_only: bool = False,
        session: bool = False,
    ) -> None:
        super().__init__(
            lock, stale_after, fixed_now=fixed_now, empty_is_stale=empty_is_stale, slots=slots
        )
        self.owner = owner
        self.run_id = run_id
        self.wait = wait
        self.shared = shared
        self.parts = parts
        self.keep_longer = keep_longer
        self.renew_only = renew_only
        self.session = session
        self.deadline = float("inf")  # the store's own timeout alone
        self.try_began = float("-inf")  # each try sets it as it begins

    def renewal(self, hold: _Hold) -> _Request:
        """The request that renews ``hold``, which this one took (its lock as its store
        named it, its whole owner and run id): at once, never shortening the hold, and
        only while it is still the owner's."""
        return _Request(
            hold.lock,
            hold.owner,
            hold.run_id,
            self.stale_after,
            empty_is_stale=self.empty_is_stale,
            slots=self.slots,
            shared=self.shared,
            parts=hold.parts,
            keep_longer=True,
            renew_only=True,
            session=self.session,
        )


# A library call's request is made as the caller gave it (the owner's run id yet to
# add), then checked here, each part once, in the order the call tells mistakes.


def _check_wait(request: _Request) -> None:
    request.wait = _checked_wait(request.wait)


def _check_owner_and_timeout(request: _Request) -> None:
    """The owner (a run id added if it has none), then the timeout."""
    request.owner, request.run_id = _owner_with_run_id(request.owner, request.fixed_now)
    request.stale_after = _checked_stale_after(request.stale_after)


def _check_how(request: _Request) -> None:
    """The count of slots, then a shared hold, then the parts."""
    request.slots = _checked_slots(request.slots)
    request.shared = _checked_shared(request.shared, request.slots)
    request.parts = _checked_parts_of(request.parts, request.slots)


def _checked(request: _Request) -> _Request:
    """acquire's and acquire_within's ``request``, each part checked in the order a
    caller's mistakes are told: the wait, the owner (a run id added if it has none), the
    timeout, the count of slots, a shared hold, the parts; ValueError for the first that
    is wrong."""
    _check_wait(request)
    _check_owner_and_timeout(request)
    _check_how(request)
    return request
