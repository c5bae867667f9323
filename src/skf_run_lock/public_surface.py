"""The contract's names: the version, the limits callers may read, the exit codes, the
exceptions, and the shapes of the outputs (docs/reference.md says what each key means)."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a CLI call time it need not pay
    from collections.abc import Mapping
    from typing import Literal, TypedDict

    class StaleReplaced(TypedDict):
        held_by: str | None
        held_since: str

    class AcquireResult(TypedDict):
        acquired: bool
        refreshed: bool
        lock: str
        owner: str
        run_id: str
        held_by: str | None
        held_since: str | None  # None only when too many parts are refused on a free lock
        stale_at: str | None
        stale_after_minutes: int | float
        stale_replaced: StaleReplaced | None
        message: str

    class ReleaseResult(TypedDict):
        released: bool
        reason: Literal["absent", "not-owner"] | None
        lock: str
        owner: str
        held_by: str | None
        held_since: str | None
        message: str

    class Waiter(TypedDict):
        owner: str
        since: str

    class Holder(TypedDict):
        owner: str | None
        since: str
        stale_at: str
        fence: int | None
        parts: list[str] | None

    class ListedLock(TypedDict):
        """One lock of a listing: a status output's keys but ``message``."""

        state: Literal["free", "held", "stale"]
        lock: str
        held_by: str | None
        held_since: str | None
        stale_at: str | None
        age_seconds: int | None
        stale_after_minutes: int | float
        waiting: list[Waiter]
        slots: int
        holders: list[Holder]
        mode: Literal["shared", "exclusive"] | None
        fence: int | None

    class StatusResult(ListedLock):
        message: str

    class ListResult(TypedDict):
        under: str
        locks: list[ListedLock]
        message: str

    class Reservation(TypedDict):
        """A path that lies in a part of another's live hold, that holder and that part
        (None: a hold of the whole lock)."""

        path: str
        held_by: str | None
        part: str | None
        kind: Literal["shared", "exclusive"]
        stale_at: str

    class CheckResult(TypedDict):
        free: bool
        reserved: list[Reservation]
        message: str

    Output = (
        AcquireResult | ReleaseResult | StatusResult | ListResult | CheckResult | dict[str, str]
    )

__all__ = [
    "DEFAULT_STALE_AFTER_MIN",
    "GUARD_WAIT_SEC",
    "MAX_SLOTS",
    "MAX_STALE_AFTER_MIN",
    "OWNER_MAX_LEN",
    "RUN_ID_RE",
    "LockBusy",
    "LockLost",
    "__version__",
    "fence_of",
]

__version__ = "1.12.1"

OWNER_MAX_LEN = 200
DEFAULT_STALE_AFTER_MIN = 60
MAX_STALE_AFTER_MIN = 525600
GUARD_WAIT_SEC = 10.0
MAX_SLOTS = 1000  # a lock counts to at most this many holders at once
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")

_TOOL = "skf-run-lock"
_MAX_STALE_AFTER_SEC = MAX_STALE_AFTER_MIN * 60
_MAX_SLOTS = MAX_SLOTS
# The smallest timeout that prints as a non-zero stale_after_minutes.
_MIN_STALE_AFTER_SEC = 0.006
_MAX_WAIT_SEC = 86400
_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}

# The keys each command's JSON object has, in order (the TypedDicts above spell their
# types); --get takes one of them, checked before the command runs.
_OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "acquire": (
        "acquired",
        "refreshed",
        "lock",
        "owner",
        "run_id",
        "held_by",
        "held_since",
        "stale_at",
        "stale_after_minutes",
        "stale_replaced",
        "message",
    ),
    "release": ("released", "reason", "lock", "owner", "held_by", "held_since", "message"),
    "status": (
        "state",
        "lock",
        "held_by",
        "held_since",
        "stale_at",
        "age_seconds",
        "stale_after_minutes",
        "waiting",
        "slots",
        "holders",
        "mode",
        "fence",
        "message",
    ),
    "list": ("under", "locks", "message"),
    "check": ("free", "reserved", "message"),
    "run-id": ("run_id",),
}

# What a command's output carries beside its keys, which --get prints too: acquire's
# fence (a _Taken's; callers compare the JSON whole).
_BESIDE_KEYS: dict[str, tuple[str, ...]] = {"acquire": ("fence",)}

_EXIT_OK = 0
_EXIT_BAD_ARGS = 1
_EXIT_OS_ERROR = 2
_EXIT_HELD = 3


class LockBusy(Exception):
    """Raised by :func:`acquire_within` when the wait ran out.

    :ivar result: the last acquire output, which names the holder.
    """

    def __init__(self, result: AcquireResult) -> None:
        super().__init__(result["message"])
        self.result = result

    def __reduce__(self) -> tuple[type[LockBusy], tuple[AcquireResult]]:
        # Built again from its result, where a process that has the module unpickles
        # it (a pool's worker raising it to its caller), not from its message.
        return type(self), (self.result,)


_NO_FENCE = object()  # what fence_of finds on a mapping that carries none


class _Taken(dict):  # type: ignore[type-arg]
    """An acquire output that carries its hold's fence beside the dict, not in it: its
    keys and values stay exactly acquire's, which callers compare whole.

    A copy (``.copy()``, ``copy.copy``, ``copy.deepcopy``) is a ``_Taken`` with the same
    fence; a pickle is a plain dict (1.8's outputs were), so that a process that never
    loaded this file (a multiprocessing or concurrent.futures worker, a sibling that
    loaded it under another name) unpickles it; the fence stays behind (fence_of says so).
    """

    fence: int | None = None

    def copy(self) -> _Taken:
        twin = _Taken(self)
        twin.fence = self.fence
        return twin

    def __copy__(self) -> _Taken:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, object]) -> _Taken:
        import copy

        twin = _Taken(copy.deepcopy(dict(self), memo))
        twin.fence = self.fence
        return twin

    def __reduce__(self) -> tuple[type[dict], tuple[dict]]:  # type: ignore[type-arg]
        return dict, (dict(self),)


def _fenced(result: AcquireResult, fence: int | None) -> AcquireResult:
    """``result``, carrying ``fence`` beside its keys (fence_of reads it)."""
    taken = _Taken(result)
    taken.fence = fence
    # A dict with one attribute more: what the type says of its keys still holds
    # (typing.cast would cost every call the import of typing).
    return taken  # type: ignore[return-value]


def fence_of(result: Mapping[str, object]) -> int | None:
    """The fence of the hold an acquire output took or renewed: a number larger than
    that of every earlier take of the lock, to pass along with each write so that the
    resource can refuse a smaller one. None for a refusal (or a take that got none).

    The output carries it beside its keys, as does its ``.copy()``, ``copy.copy`` and
    ``copy.deepcopy``; a ``dict()`` copy or an output unpickled in another process
    does not: pass the fence itself along instead.

    :param result: what :func:`acquire` or :func:`acquire_within` gave, or a lease's ``result``.
    :raises ValueError: ``result`` says it acquired the lock but does not carry the fence.
    """
    fence = getattr(result, "fence", _NO_FENCE)
    if fence is not _NO_FENCE:
        return fence if isinstance(fence, int) else None
    if result.get("acquired") is True:
        raise ValueError(
            "fence_of: this acquire output does not carry its fence (a dict() copy, or a"
            " result pickled from another process); pass the fence itself along: read it"
            " with fence_of where acquire returned, or with --get fence in a shell"
        )
    return None


class LockLost(Exception):
    """The lock a :func:`held` block holds is no longer its own (taken over, cleared, or
    stale).

    :ivar lock: the lock.
    :ivar held_by: who holds it now, or None.
    :ivar held_since: since when, or None.
    """

    def __init__(self, lock: str, held_by: str | None, held_since: str | None, why: str) -> None:
        super().__init__(f"lost the lock {lock}: {why}")
        self.lock = lock
        self.held_by = held_by
        self.held_since = held_since

    def __reduce__(self) -> tuple[type[LockLost], tuple[str, str | None, str | None, str]]:
        why = str(self)[len(f"lost the lock {self.lock}: ") :]  # built again, as LockBusy
        return type(self), (self.lock, self.held_by, self.held_since, why)


class _NoFolder(Exception):
    """The lock's folder is missing, and was not to be created."""


class _UsageError(Exception):
    """The command line does not parse (exit 1)."""


class _OutcomeUnknown(OSError):
    """A server write failed after it was sent: whether it happened is unknown."""
