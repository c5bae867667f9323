"""Work done while a lock is held: ``held()`` for a ``with`` block and ``run``'s
command. Both take the lock as acquire does, keep it with the renewer, and release it
however the work ends, unless their owner held it before they started: that hold is
theirs to renew, never to end, and is left no shorter than it was. A lock lost meanwhile
is reported."""

from __future__ import annotations

import os

from .hold import _Hold
from .inputs import _check_how, _check_owner_and_timeout, _check_wait, _Release, _Request
from .interrupts import _Interrupts, _signal_name
from .lock_calls import _release_of, _wait_for, release
from .outputs import _acquired_result, _describe_os_error, _fail
from .public_surface import _EXIT_HELD
from .renewer import _checked_renewable, _Renewer
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    import threading

    from .public_surface import AcquireResult

__all__ = ["held"]


def held(
    lock: str | os.PathLike[str],
    owner: str,
    stale_after: float = 3600.0,
    wait: float = 0.0,
    *,
    empty_is_stale: bool = False,
    slots: int = 1,
    shared: bool = False,
    parts: list[str] | None = None,
) -> _Lease:
    """Hold the lock for a ``with`` block::

        with skf.held(path, "forge-tier-rw:write", 60.0, wait=30.0) as lease:
            ...  # lease.check() raises LockLost if the lock was lost


    Taken as by :func:`acquire_within` (``slots``: one of that many; ``shared``: a
    shared hold; ``parts``: those parts of it; an owner's hold it had is kept as it is,
    and the parts named must be among its own), renewed from a thread every third of
    ``stale_after`` (seconds, at least 3), released however the block ends;
    :class:`LockLost` at the end of a block that ended normally without it.
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
        parts=parts,  # type: ignore[arg-type]  # a list given, a set kept: checked
        keep_longer=True,
    )
    # Each part checked once, the owner and the timeout first (held()'s order).
    _check_owner_and_timeout(request)
    _checked_renewable(request.stale_after, "stale_after", "seconds", repr(stale_after))
    _check_wait(request)
    _check_how(request)
    return _Lease(request)


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
        while not self.stop.wait(self.renewer.next_look()):
            if self.renewer.renew_if_due() is not None:
                return

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        assert self.stop is not None and self.thread is not None and self.renewer is not None
        renewer = self.renewer
        # Nothing here waits past the hold's stop point: not the renewal under way (it
        # ends by then, unless its store hangs), nor the release.
        try:
            self.stop.set()
            self.thread.join(renewer.stop_in())
        finally:
            try:
                # A hold the owner had before is left as it is; a lost one too (its
                # record is another's, or ends on the server within the grace).
                if not self.kept and renewer.lost_by_now() is None:
                    _release_of(_Release(self.lock, self.owner, renewer.stop_at()))
            except (OSError, ValueError) as failure:
                # A lost lock is what the block is told (its server out of reach, most
                # likely, as the renewals found): the failed release is a note on it.
                told = exc if exc is not None else renewer.lost_by_now()
                if told is None:
                    raise
                told.add_note(f"and the lock could not be released: {failure}")
        if (lost := renewer.lost_by_now()) is not None and exc_type is None:
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
        dies_with_run = _SEAMS.platform.dies_with_run()  # Linux: SIGTERM when run dies
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
        waiter.join(renewer.next_look())
        if not waiter.is_alive():
            break
        lost = renewer.renew_if_due()
        if lost is not None:
            _stop_command(child, waiter, renewer.grace_left())
            break
    # A hold found lost is no longer the work's (another's, cleared, or changed by a call
    # of its owner): nothing of its own to release. One that ran out may still be.
    _release_for_run(lock, owner, kept or (lost is not None and not renewer.ran_out))
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
