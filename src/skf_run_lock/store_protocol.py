"""The store protocol: what the lock calls ask of a store. A store reads, applies a
change atomically against what it read, keeps the line of waiters, and waits; it decides
nothing (the decisions are functions of what it read). Every store class is checked
against this Protocol by mypy: each store module's opener returns a ``_Store``, and
its surveyor (the locks under a place, for a listing) a ``_Survey``."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from .records import _Look, _Place, _Record

    # What a store's survey of a place gives a listing: the place as shown, each lock
    # found there (its name as a lock's address, and a look at it, as ``look`` would
    # give), and a note on the place for the listing's message ("": none; a folder that
    # does not exist says so). A survey only reads: no guard, no change, no waiting.
    _Survey = tuple[str, list[tuple[str, _Look]], str]

    class _Store(Protocol):
        """One lock in one store, for one call."""

        lock: str
        # Set by a call that waits in line: a server that refuses connections is tried
        # again until the step's deadline, not given up after a moment.
        patient: bool
        # Set by a call that must be done by a moment (``_SEAMS.clock``), a renewal whose
        # holder must stop then: no request of the call waits on the network past it,
        # however long a step may take (inf: each step's own deadline alone).
        call_deadline: float
        # True where a hold ends by its record's time, written in whole seconds (a
        # file): others may judge it stale up to a second before the take began.
        dated_in_seconds: bool

        def look(self, upto: str | None = None) -> _Look:
            """The lock as it is now, with its line, outside any change. ``upto``, a
            waiter's ticket: the line may end at that waiter's place, leaving out the
            places behind it, which its waiting never needs (a store may give them)."""

        def change(self, create: bool) -> _Store:
            """The store, to be entered for one change (a file: under its guard;
            ``create``: the lock's folder may be made)."""

        def __enter__(self) -> _Store: ...

        def __exit__(self, *exc_info: object) -> None: ...

        def read(self, line: bool = True) -> _Look:
            """Within a change: what the change must find unchanged to apply (``line``
            False: the change needs no line, a release, and a store may leave it out).
            A store may give, once a call, what its own last change left (``remembered``:
            its apply compares all of it); a call whose decision on it would change
            nothing reads again, since only a change proves it."""

        def apply(
            self,
            look: _Look,
            record: _Record | None,
            owner: str,
            place: _Place | None = None,
        ) -> bool:
            """Write ``record`` (None: delete it), ``place`` leaving the line in the same
            change, if the lock is still as ``look`` found it: False if not. A server
            marks each new holder of a lock of several slots (``mark``) so that its slot
            ends on the server's clock, and keeps the record while any slot may live."""

        def join(self, look: _Look, place: _Place, now: float) -> None:
            """Put ``place`` at the end of the line unless it is in it."""

        def prune(self, look: _Look, now: float) -> None:
            """Drop the places of ``look``'s line whose waiters are gone."""

        def beat(self, place: _Place) -> bool:
            """Show ``place``'s waiter alive: False if its place had lapsed."""

        def leave(self, place: _Place) -> None:
            """Take ``place`` out of the line."""

        def wait(
            self, left: float, look: _Look, ahead: list[_Place], place: _Place, away: int
        ) -> bool:
            """Up to ``left`` s until what ``place``'s waiter waits on changes (True): a
            place ``ahead`` of it ends (those it waits to leave, the last just ahead of
            it), or (``away`` 0: it takes the next slot that frees) a slot frees or its
            server ends it. ``away``: how many places must leave the line before it is
            among the first N (N slots), which take the slots that free, or, shared, before
            no exclusive waiter is ahead of it."""

        def vouches(self, look: _Look) -> bool:
            """Whether a wait that just ended unwoken saw every change since ``look`` to
            what it waits on (a watch that streams all of them): then the waiter needs
            no new look to go on waiting. False where a wait can miss one (a place
            ahead that lapsed, shown only by a look)."""

        def identity(self) -> tuple[object, ...]:
            """What names this lock however its name is spelled: two spellings of one
            lock give the same (a session matches its holds by it). Asked of no call."""

        def by_hand(self) -> str:
            """How a person clears the lock by hand, as a command to follow literally."""

        def close(self) -> None:
            """Let go of whatever the store holds (connections, a guard)."""
