"""A hold: what one take gave (acquire, a renewal, run's, held()'s, a waiter's), as one
value. The outputs format it at the edge; run, held() and the renewer keep it and renew
it, never an output."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from .records import _Record


class _Hold:
    """One hold taken or renewed: the lock as its store names it, the whole owner and
    its run id, its fence (None: the take could give none), whether it ``renewed`` the
    owner's own hold, its ``holder_timeout`` (seconds), ``since`` (whole seconds), the
    stale hold of another it ``replaced`` (renewing: the first it dropped; None: none),
    the record it left (``after``), which the message describes, whether it is an
    agent session's hold (``session``: kept for the session's lease), whether it is
    ``shared``, and the ``parts`` it holds (None: the lock whole)."""

    __slots__ = (
        "after",
        "fence",
        "holder_timeout",
        "lock",
        "owner",
        "parts",
        "renewed",
        "replaced",
        "run_id",
        "session",
        "shared",
        "since",
    )

    def __init__(
        self,
        lock: str,
        owner: str,
        run_id: str,
        *,
        since: int,
        holder_timeout: float,
        renewed: bool,
        replaced: _Record | None,
        after: _Record,
        fence: int | None,
        session: bool = False,
        shared: bool = False,
        parts: tuple[str, ...] | None = None,
    ) -> None:
        self.lock = lock
        self.owner = owner
        self.run_id = run_id
        self.since = since
        self.holder_timeout = holder_timeout
        self.renewed = renewed
        self.replaced = replaced
        self.after = after
        self.fence = fence
        self.session = session
        self.shared = shared
        self.parts = parts

    @property
    def kind(self) -> Literal["exclusive", "slots", "shared"]:
        """How it holds: the lock alone, one of several slots, or shared."""
        if self.shared:
            return "shared"
        return "slots" if self.after.slots > 1 else "exclusive"
