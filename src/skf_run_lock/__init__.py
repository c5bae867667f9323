"""A run lock kept in a file, etcd or Redis, for workflows made of many separate processes:
it names its holder, and is abandoned once older than the holder's timeout. CLI:
``--help``; library: ``__all__``."""

from __future__ import annotations

from .cli import main
from .held_and_run import held
from .inputs import new_run_id
from .listing import list_locks
from .lock_calls import acquire, acquire_within, check, release, status
from .public_surface import (
    DEFAULT_STALE_AFTER_MIN,
    GUARD_WAIT_SEC,
    MAX_SLOTS,
    MAX_STALE_AFTER_MIN,
    OWNER_MAX_LEN,
    RUN_ID_RE,
    LockBusy,
    LockLost,
    fence_of,
)
from .public_surface import __version__ as __version__

__all__ = [
    "DEFAULT_STALE_AFTER_MIN",
    "GUARD_WAIT_SEC",
    "MAX_SLOTS",
    "MAX_STALE_AFTER_MIN",
    "OWNER_MAX_LEN",
    "RUN_ID_RE",
    "LockBusy",
    "LockLost",
    "acquire",
    "acquire_within",
    "check",
    "fence_of",
    "held",
    "list_locks",
    "main",
    "new_run_id",
    "release",
    "status",
]
