"""Holding a lock while work runs: ``held()`` for a ``with`` block, and the checks
``run`` makes before it starts. The work itself (renewing every third of the timeout,
releasing however the work ends, the child process of ``run``) is in renewing.py,
carried as text: a call that holds nothing never compiles it."""

from __future__ import annotations

import os

from .contract import _UNIT_SECONDS
from .inputs import _checked_slots, _checked_stale_after, _checked_wait, _owner_with_run_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .renewing import _Lease

__all__ = ["held"]

_MIN_RENEWABLE_SEC = 3.0  # renewed every third of it: a second between


def _checked_renewable(stale_after: float, name: str, unit: str) -> float:
    if stale_after < _MIN_RENEWABLE_SEC:
        scale = _UNIT_SECONDS[unit]
        raise ValueError(
            f"{name} of {stale_after / scale:g} {unit} is too short to renew the lock safely"
            f" while work runs; give at least {_MIN_RENEWABLE_SEC / scale:g}"
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
) -> _Lease:
    """Hold the lock for a ``with`` block::

        with skf.held(path, "forge-tier-rw:write", 60.0, wait=30.0) as lease:
            ...  # lease.check() raises LockLost if the lock was lost


    Taken as by :func:`acquire_within` (``slots``: one of that many), renewed from a
    thread every third of ``stale_after`` (seconds, at least 3), released however the
    block ends; :class:`LockLost` at the end of a block that ended normally without it.
    """
    _owner_with_run_id(owner)
    _checked_renewable(_checked_stale_after(stale_after), "stale_after", "seconds")
    _checked_wait(wait)
    _checked_slots(slots)
    from .renewing import _Lease

    return _Lease(lock, owner, stale_after, wait, empty_is_stale, slots=slots)
