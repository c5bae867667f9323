"""The seams: the one value, ``_SEAMS``, whose fields the tests may set, and nothing else
of the code. Every store a call opens passes through ``opened`` (as it is, unless a test
wraps it in a store of its own), ``platform`` is the platform's rules in force, and the
timings and sizes are read where they are used, so a test may shorten them for a call.
Each is an attribute read where it is used: a call pays nothing for it.

No wait on another clock (a sleep, a thread's join, an event's or a socket's timeout:
the system's, which may stop while the machine sleeps) lasts longer than
``_LONGEST_BLIND_WAIT_SEC``: after that it reads ``clock`` again, so a machine that wakes
finds a deadline that passed in its sleep within a second."""

from __future__ import annotations

from .platforms import _PLATFORM

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .platforms import _Platform
    from .store_protocol import _Store


_LONGEST_BLIND_WAIT_SEC = 1.0


def _blind_wait(seconds: float) -> float:
    """How long a wait on another clock than ``_SEAMS.clock`` may last of the ``seconds``
    left: at most a second, then the deadline is read again on the clock."""
    return min(seconds, _LONGEST_BLIND_WAIT_SEC)


def _as_opened(store: _Store) -> _Store:
    """A store as its opener made it: what ``opened`` is unless a test sets it."""
    return store


class _Seams:
    """What a test may set, each field read by the code where it is used."""

    __slots__ = (
        "beat_sec",
        "clock",
        "guard_wait_sec",
        "kept_idle_sec",
        "longest_call_wait_sec",
        "name_kept_sec",
        "opened",
        "place_ttl_sec",
        "platform",
        "scan_count",
        "sharing_retry_sec",
        "survey_batch",
        "survey_page",
    )

    def __init__(self) -> None:
        # Every store a call opens (the registry's _store_for) is what this gives for it.
        self.opened: Callable[[_Store], _Store] = _as_opened
        # The platform's rules every call follows: this system's, chosen once.
        self.platform: _Platform = _PLATFORM
        # The clock every deadline counts on (a hold's, a call's, a wait's): one that
        # counts the machine's sleep where the system has one (seconds, any start).
        self.clock: Callable[[], float] = _PLATFORM.hold_clock()
        # A place in line lapses place_ttl_sec after its waiter's last beat; a waiter
        # beats every beat_sec.
        self.place_ttl_sec = 3.0
        self.beat_sec = 1.0
        # How long a call waits for a lock's guard; None: the public GUARD_WAIT_SEC, as
        # the caller has set it on the module it loaded when the call runs (guard.py).
        self.guard_wait_sec: float | None = None
        # A server's host name, once looked up, is not looked up again for this long.
        self.name_kept_sec = 60.0
        # A connection kept between calls is not used again once idle this long (a NAT
        # or a proxy may have dropped it without a word); 0: each call connects anew.
        self.kept_idle_sec = 60.0
        # How long a session's acquire waits in line in one call, at most: clients end
        # a tool call that runs longer than their own limit (Codex: 60 s).
        self.longest_call_wait_sec = 50.0
        # Windows: how long a file another program has open (a scanner, an indexer, a
        # sync client) may refuse to be read, replaced or deleted before a call says so.
        self.sharing_retry_sec = 5.0
        # A listing: the keys a range of etcd's asks for at once, the keys a Redis node
        # looks at for one SCAN, and the locks read in one round trip.
        self.survey_page = 1000
        self.scan_count = 1000
        self.survey_batch = 500


_SEAMS = _Seams()
