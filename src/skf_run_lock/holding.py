"""Holding a lock while work runs: ``held()`` for a ``with`` block, ``run``'s command,
and the renewer they share (every third of the timeout, sooner on failure). Both take
the lock as acquire does and release it however the work ends, unless their owner held
it before they started: that hold is theirs to renew, never to end, and is left no
shorter than it was. A lock lost meanwhile is reported."""

from __future__ import annotations

import os
import time

from .algorithm import _take, _wait_for, release
from .contract import _EXIT_HELD, _UNIT_SECONDS, LockLost
from .hold import _Hold
from .inputs import _check_how, _check_owner_and_timeout, _check_wait, _Request
from .interrupts import _Interrupts, _signal_name
from .outputs import _acquired_result, _describe_os_error, _fail
from .platforms import _PLATFORM
from .times import _duration_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    import threading

    from .contract import AcquireResult

__all__ = ["held"]


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


def held(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float = 3600.0,
    wait: float = 0.0,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
    shared: bool = False,
) -> _Lease:
    """Hold the lock for a ``with`` block::

        with skf.held(path, "forge-tier-rw:write", 60.0, wait=30.0) as lease:
            ...  # lease.check() raises LockLost if the lock was lost


    Taken as by :func:`acquire_within` (``slots``: one of that many; ``shared``: a
    shared hold), renewed from a thread every third of ``stale_after`` (seconds, at
    least 3), released however the block ends; :class:`LockLost` at the end of a block
    that ended normally without it.
    """
    request = _Request(
        lock,
        owner,
        "",
        stale_after,
        wait=wait,
        empty_is_stale=empty_is_stale,
        slots=slots,
        shared=shared,
        keep_longer=True,
    )
    # Each part checked once, the owner and the timeout first (held()'s order).
    _check_owner_and_timeout(request)
    _checked_renewable(request.stale_after, "stale_after", "seconds", repr(stale_after))
    _check_wait(request)
    _check_how(request)
    return _Lease(request)


_RUN_GRACE_SEC = 5.0  # between SIGTERM and SIGKILL, for a lock found lost

# A hold that cannot be renewed must end on this side before it can on the server's.
# The renewer counts it from the moment the try that took or last renewed it began (a
# lease, a record's expiry start later), and the work is stopped when what is left falls
# to a grace (run's SIGTERM to SIGKILL: 5 s, a sixth of a shorter hold) plus a margin:
# half a second for the killed command to be gone, and 1% of the hold for a server
# clock that runs faster than ours.
_GRACE_SHARE = 1 / 6
_MARGIN_SEC = 0.5
_CLOCK_RATE_MARGIN = 0.01


# --- The renewer, held()'s lease, run's command


class _Renewer:
    """Renews the hold for held() and run every third of its timeout (sooner on failure),
    and finds it lost once too little is left of the hold to stop the work before it
    ends: each renewal waits on the network no longer than that. ``hold`` is the hold
    as last taken or renewed (a renewal beside a newer holder may get a new fence)."""

    def __init__(self, request: _Request, hold: _Hold) -> None:
        self.hold = hold
        self.lock = hold.lock
        self.renewal = request.renewal(hold)
        self.lasts = request.stale_after  # no longer than the hold: it may be kept longer
        self.every = self.lasts / 3
        self.margin = _MARGIN_SEC + self.lasts * _CLOCK_RATE_MARGIN
        self.grace = min(_RUN_GRACE_SEC, self.lasts * _GRACE_SHARE)
        self.renewed = request.try_began  # the hold began no sooner
        self.next = self.renewed + self.every
        self.failure: Exception | None = None  # the last renewal's, since one succeeded
        self.ran_out = False  # lost by the clock, not found lost
        self.lost: LockLost | None = None

    def stop_at(self) -> float:
        """When the work must stop (monotonic clock): the grace and the margin before
        the soonest the hold may end."""
        return self.renewed + self.lasts - self.grace - self.margin

    def due_in(self) -> float:
        return max(0.0, min(self.next, self.stop_at()) - time.monotonic())

    def renew(self) -> LockLost | None:
        """Renew the lock now: None while held, its LockLost once not."""
        if self.lost is not None:
            return self.lost
        started = time.monotonic()
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
                if isinstance(renewed, _Hold):  # a renewal is never refused: held, or lost
                    self.hold = renewed
                self.renewed = self.renewal.try_began
                self.next = self.renewed + self.every
                self.failure = None
                return None
        if max(self.next, time.monotonic()) >= self.stop_at():  # no try left in time
            self.ran_out_now()
        return self.lost

    def lost_by_now(self) -> LockLost | None:
        """Its LockLost once lost, or once the work must stop by the clock, even while
        a renewal is still under way (held()'s check)."""
        if self.lost is None and time.monotonic() >= self.stop_at():
            self.ran_out_now()
        return self.lost

    def ran_out_now(self) -> None:
        failing = _duration_text(time.monotonic() - self.renewed)
        kept = f"{self.grace + self.margin:.1f}"
        why = f"renewals failed for {failing}, until the hold would go stale within the {kept} s"
        why += " kept to stop the work"
        if self.failure is not None:
            why += f" ({self.failure})"
        self.ran_out = True
        self.lost = LockLost(self.lock, None, None, why)

    def grace_left(self) -> float:
        """run's time between SIGTERM and SIGKILL: what is left of the hold less the
        margin (at most 5 s) when it ran out; 5 s for a lock found lost, no longer its."""
        if not self.ran_out:
            return _RUN_GRACE_SEC
        left = self.renewed + self.lasts - self.margin - time.monotonic()
        return max(0.0, min(_RUN_GRACE_SEC, left))


class _Lease:
    """A lock held by :func:`held`: ``owner``, ``result``, ``fence``, ``lost``,
    ``check()``."""

    def __init__(self, request: _Request) -> None:
        self.request = request
        self.lock = request.lock
        self.owner = request.owner
        self.result: AcquireResult | None = None
        self.kept = False  # the owner held the lock before the block: left held after
        self.renewer: _Renewer | None = None
        self.stop: threading.Event | None = None
        self.thread: threading.Thread | None = None

    @property
    def fence(self) -> int | None:
        """The hold's fence as last taken or renewed, for each write the block makes
        (None before it is entered)."""
        return None if self.renewer is None else self.renewer.hold.fence

    @property
    def lost(self) -> bool:
        """True once the lock was found lost, or could not be renewed in time."""
        return self.renewer is not None and self.renewer.lost_by_now() is not None

    def check(self) -> None:
        """Raise :class:`LockLost` if the lock was lost."""
        if self.renewer is not None and (lost := self.renewer.lost_by_now()) is not None:
            raise lost

    def __enter__(self) -> _Lease:
        import threading

        hold = _wait_for(self.request, refused=None)
        self.result = _acquired_result(hold)
        self.owner = hold.owner
        self.kept = hold.renewed
        self.renewer = _Renewer(self.request, hold)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._keep, name="skf-run-lock renewal", daemon=True)
        try:
            self.thread.start()
        except BaseException:
            if not self.kept:
                release(self.lock, self.owner)
            raise
        return self

    def _keep(self) -> None:
        assert self.renewer is not None and self.stop is not None
        while not self.stop.wait(self.renewer.due_in()):
            if self.renewer.renew() is not None:
                return

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        assert self.stop is not None and self.thread is not None and self.renewer is not None
        try:
            self.stop.set()
            self.thread.join()
        finally:
            try:
                if not self.kept:  # a hold the owner had before is left as it is
                    release(self.lock, self.owner)  # a lost lock is left alone
            except (OSError, ValueError) as failure:
                # A lost lock is what the block is told (its server out of reach, most
                # likely, as the renewals found): the failed release is a note on it.
                told = exc if exc is not None else self.renewer.lost_by_now()
                if told is None:
                    raise
                told.add_note(f"and the lock could not be released: {failure}")
        if (lost := self.renewer.lost_by_now()) is not None and exc_type is None:
            raise lost


def _signal_child(child: subprocess.Popen[bytes], signum: int) -> None:
    try:
        child.send_signal(signum)
    except (OSError, ValueError):
        pass  # it has ended (or Windows)


def _stop_command(child: subprocess.Popen[bytes], waiter: threading.Thread, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    import signal

    _signal_child(child, signal.SIGTERM)
    waiter.join(grace)
    if waiter.is_alive():
        child.kill()
        waiter.join()


def _run_holding(request: _Request, hold: _Hold, command: list[str]) -> int:
    """Run ``command`` holding ``hold``, which ``request`` took: its exit code, 3 if
    lost, 126/127 if not run."""
    import subprocess
    import threading

    lock = os.fspath(request.lock)
    owner = hold.owner
    # A hold the owner had before run started (a workflow's lock, a run step inside it)
    # is left held when run ends, however it ends.
    kept = hold.renewed

    if _Interrupts.pending is not None:  # came while the lock was taken
        _release_for_run(lock, owner, kept)
        _fail(f"interrupted by {_signal_name(_Interrupts.pending)} before the command started")
        return 128 + _Interrupts.pending
    env = {**os.environ, "SKF_RUN_LOCK": lock, "SKF_RUN_LOCK_OWNER": owner}
    fence = hold.fence
    if fence is not None:  # the number its writes carry, for a resource that checks them
        env["SKF_RUN_LOCK_FENCE"] = str(fence)
    try:
        # The request runs between fork and exec, where a lock another thread held at
        # the fork would never be let go: it calls one C function and takes no lock.
        dies_with_run = _PLATFORM.dies_with_run()  # Linux: SIGTERM when run dies
        child = subprocess.Popen(command, env=env, preexec_fn=dies_with_run)  # noqa: PLW1509
    except OSError as exc:
        _release_for_run(lock, owner, kept)
        _fail(f"could not start {command[0]!r}: {_describe_os_error(exc)}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    _Interrupts.handle(lambda signum, _: _signal_child(child, signum))
    if _Interrupts.pending is not None:  # came while the command started
        _signal_child(child, _Interrupts.pending)
    waiter = threading.Thread(target=child.wait, daemon=True)
    waiter.start()
    renewer = _Renewer(request, hold)
    lost = None
    while True:
        waiter.join(renewer.due_in())
        if not waiter.is_alive():
            break
        lost = renewer.renew()
        if lost is not None:
            _stop_command(child, waiter, renewer.grace_left())
            break
    _release_for_run(lock, owner, kept)
    if lost is not None:
        _fail(f"{lost}; the command {command[0]!r} was stopped")
        return _EXIT_HELD
    code = child.returncode
    return 128 - code if code < 0 else code


def _release_for_run(lock: str, owner: str, kept: bool) -> None:
    """Release after run, unless the hold is ``kept`` (its owner's from before run); a
    failure is reported, and changes no exit code."""
    if kept:
        return
    try:
        release(lock, owner)
    except OSError as exc:
        _fail(f"the lock could not be released: {_describe_os_error(exc)}")
    except ValueError as exc:
        _fail(f"the lock could not be released: {exc}")
