"""The record: what a lock says, read from its bytes and written as bytes; a waiter's
place in the line; and one look at a lock, as a store read it."""

from __future__ import annotations

import json

from .contract import _MAX_STALE_AFTER_SEC, _TOOL
from .inputs import _format_time, _parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

_RECORD_MAX_BYTES = 64 * 1024


class _Record:
    """What a lock says; on a server, ``lease`` "live" or "expired" (the last holder)."""

    __slots__ = ("empty", "lease", "owner", "since", "stale_after")

    def __init__(
        self, owner: str | None, since: int, stale_after: float | None = None, empty: bool = False
    ) -> None:
        self.owner = owner
        self.since = since
        self.stale_after = stale_after
        self.empty = empty
        self.lease: Literal["live", "expired"] | None = None


class _Place:
    """A waiter's place in the line (``beat`` None: the server's expiry keeps it)."""

    __slots__ = ("beat", "joined", "owner", "since", "stale_after", "ticket")

    def __init__(
        self, ticket: str, owner: str, since: int, stale_after: float, beat: float | None
    ) -> None:
        self.ticket = ticket
        self.owner = owner
        self.since = since
        self.stale_after = stale_after
        self.beat = beat
        self.joined = False  # True while this is the caller's own place, in the line


class _Look:
    """One look at a lock: records, what a change compares, the line, what shows a change."""

    __slots__ = ("last", "lease", "line", "record", "revision", "seen")

    def __init__(
        self,
        record: _Record | None,
        last: _Record | None = None,
        revision: str = "0",
        lease: str | None = None,
        *,
        line: list[_Place] | None = None,
        seen: str = "0",
    ) -> None:
        self.record = record
        self.last = last  # on a server: the last holder's record, once its own expired
        self.revision = revision  # what a server's change compares
        self.lease = lease
        self.line = line or []
        self.seen = seen  # what shows the lock changed


def _holder_timeout(value: object) -> float | None:
    """A record's ``stale_after_seconds`` if valid (> 0 and <= a year), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value <= _MAX_STALE_AFTER_SEC else None


def _parse_record(data: bytes, mtime: int) -> _Record:
    """The record a lock's bytes give (else no owner, dated by a second line or ``mtime``)."""
    if len(data) > _RECORD_MAX_BYTES:
        return _Record(None, mtime)
    try:
        content = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        content = None
    if isinstance(content, dict):
        owner = content.get("owner")
        when = content.get("acquired_at")
        since = _parse_time(when) if isinstance(when, str) else None
        return _Record(
            owner if isinstance(owner, str) and owner else None,
            mtime if since is None else since,
            _holder_timeout(content.get("stale_after_seconds")),
        )
    lines = data.split(b"\n", 2)
    since = _parse_time(lines[1].strip().decode("ascii", "replace")) if len(lines) > 1 else None
    return _Record(None, mtime if since is None else since, empty=not data)


def _record_bytes(owner: str, since: int, stale_after: float) -> bytes:
    seconds = int(stale_after) if stale_after.is_integer() else stale_after
    record = {
        "owner": owner,
        "acquired_at": _format_time(since),
        "stale_after_seconds": seconds,
        "tool": _TOOL,
    }
    return (json.dumps(record) + "\n").encode("ascii")
