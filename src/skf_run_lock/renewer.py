"""The renewer: it keeps a hold taken for work that runs (``held()``'s block, ``run``'s
command, a session's holds) by renewing it every third of its timeout (sooner on
failure), and finds it lost once too little is left of it to stop the work before it
can end on the store's side."""

from __future__ import annotations

from .hold import _Hold
from .inputs import _Release
from .lock_calls import _release_of, _take
from .public_surface import _UNIT_SECONDS, LockLost
from .seams import _SEAMS, _blind_wait
from .times import _duration_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .inputs import _Request


_MIN_RENEWABLE_SEC = 3.0  # renewed every third of it: a second between


def _checked_renewable(stale_after: float, name: str, unit: str, shown: str) -> float:
    """``stale_after`` if a holder can renew so short a hold in time; ValueError in
    ``unit``, quoting what the caller gave as ``shown``."""
    if stale_after < _MIN_RENEWABLE_SEC:
        least = _MIN_RENEWABLE_SEC / _UNIT_SECONDS[unit]
        raise ValueError(
            f"{name} of {shown} is too short to renew the lock safely while work runs;"
            f" give at least {least:g} {unit}"
        )
    return stale_after


_RUN_GRACE_SEC = 5.0  # between SIGTERM and SIGKILL, for a lock found lost
# How long the release of a hold that a renewal wrote too late may wait on its store.
_LATE_RELEASE_SEC = 5.0

# A hold that cannot be renewed must end on this side before it can on the server's.
# The renewer counts it from the moment the try that took or last renewed it began (a
# lease, a record's expiry start later), and the work is stopped when what is left falls
# to a grace (run's SIGTERM to SIGKILL: 5 s, a sixth of a shorter hold) plus a margin:
# half a second for the killed command to be gone, and 1% of the hold for a server
# clock that runs faster than ours.
_GRACE_SHARE = 1 / 6
_MARGIN_SEC = 0.5
_CLOCK_RATE_MARGIN = 0.01


class _Renewer:
    """Renews the hold for held() and run every third of its timeout (sooner on failure),
    and finds it lost once too little is left of the hold to stop the work before it
    ends: each renewal waits on the network no longer than that. ``hold`` is the hold
    as last taken or renewed (a renewal beside a newer holder may get a new fence)."""

    def __init__(self, request: _Request, hold: _Hold) -> None:
        self.hold = hold
        self.lock = hold.lock
        self.renewal = request.renewal(hold)
        # As long as the request asked, which a hold kept longer outlasts; a session's
        # hold, which keeps its lease whoever renews it, may be shorter.
        self.lasts = min(request.stale_after, hold.holder_timeout)
        self.every = self.lasts / 3
        self.margin = _MARGIN_SEC + self.lasts * _CLOCK_RATE_MARGIN
        self.grace = min(_RUN_GRACE_SEC, self.lasts * _GRACE_SHARE)
        self.renewed = request.try_began  # the hold began no sooner
        self.next = self.renewed + self.every
        self.failure: Exception | None = None  # the last renewal's, since one succeeded
        self.ran_out = False  # lost by the clock, not found lost
        self.lost: LockLost | None = None
        # The owner held the lock before this work took it: never released here.
        self.kept = hold.renewed

    def stop_at(self) -> float:
        """When the work must stop (``_SEAMS.clock``): the grace and the margin before
        the soonest the hold may end."""
        return self.renewed + self.lasts - self.grace - self.margin

    def due_in(self) -> float:
        return max(0.0, min(self.next, self.stop_at()) - _SEAMS.clock())

    def next_look(self) -> float:
        """How long the work's thread may wait before it looks again (renew_if_due): at
        most a second on the system's clock, which may stop while the machine sleeps."""
        return _blind_wait(self.due_in())

    def renew_if_due(self) -> LockLost | None:
        """Renew the lock once due, else find it lost by the clock: None while held."""
        if self.due_in() > 0:
            return self.lost_by_now()
        return self.renew()

    def stop_in(self) -> float:
        """Seconds until the work must stop (0 once it must)."""
        return max(0.0, self.stop_at() - _SEAMS.clock())

    def renew(self) -> LockLost | None:
        """Renew the lock now: None while held, its LockLost once not."""
        if self.lost is not None:
            return self.lost
        started = _SEAMS.clock()
        if started < self.stop_at():
            self.renewal.deadline = self.stop_at()
            try:
                renewed = _take(self.renewal)
            except LockLost as lost:
                self.lost = lost
                return lost
            except (OSError, ValueError) as exc:
                self.failure = exc
                self.next = started + min(1.0, self.every / 3)
            else:
                if self.lost is not None:
                    # Told lost by the clock while this renewal was under way (held()'s
                    # check, a session's holds): the work stopped, and what the renewal
                    # wrote late is let go, not left held for a whole timeout.
                    self.let_go(renewed)
                    return self.lost
                if not isinstance(renewed, _Hold):
                    # Refused (the record would pass its limit): nothing was written,
                    # so it counts as a renewal that failed, and the hold runs down.
                    self.failure = ValueError(str(renewed.get("message")))
                    self.next = started + min(1.0, self.every / 3)
                    return self.lost_if_no_try_left()
                self.hold = renewed
                self.renewed = self.renewal.try_began
                self.next = self.renewed + self.every
                self.failure = None
                return None
        return self.lost_if_no_try_left()

    def lost_if_no_try_left(self) -> LockLost | None:
        """Its LockLost once no try of a renewal is left in time, else None."""
        if max(self.next, _SEAMS.clock()) >= self.stop_at():
            self.ran_out_now()
        return self.lost

    def lost_by_now(self) -> LockLost | None:
        """Its LockLost once lost, or once the work must stop by the clock, even while
        a renewal is still under way (held()'s check)."""
        if self.lost is None and _SEAMS.clock() >= self.stop_at():
            self.ran_out_now()
        return self.lost

    def let_go(self, renewed: _Hold | object) -> None:
        """Release a hold a renewal wrote once the work had been told it was lost, unless
        the owner held it before the work (then it is left as it is, to its own time)."""
        if self.kept or not isinstance(renewed, _Hold):
            return
        late = _Release(renewed.lock, renewed.owner)
        late.deadline = _SEAMS.clock() + _LATE_RELEASE_SEC
        try:
            _release_of(late)
        except (OSError, ValueError):
            pass  # it lapses at its own time

    def ran_out_now(self) -> None:
        failing = _duration_text(_SEAMS.clock() - self.renewed)
        kept = f"{self.grace + self.margin:.1f}"
        why = f"renewals failed for {failing}, until the hold would go stale within the {kept} s"
        why += " kept to stop the work"
        if self.failure is not None:
            why += f" ({self.failure})"
        else:
            # No renewal failed: none ran in time (a renewal under way, or the process
            # paused, or the machine asleep, past the moment to stop).
            why += " (none was answered in time)"
        self.ran_out = True
        self.lost = LockLost(self.lock, None, None, why)

    def grace_left(self) -> float:
        """run's time between SIGTERM and SIGKILL: what is left of the hold less the
        margin (at most 5 s) when it ran out; 5 s for a lock found lost, no longer its."""
        if not self.ran_out:
            return _RUN_GRACE_SEC
        left = self.renewed + self.lasts - self.margin - _SEAMS.clock()
        return max(0.0, min(_RUN_GRACE_SEC, left))
