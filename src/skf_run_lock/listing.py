"""The listing: every lock under a place at once (a folder, an etcd prefix, a Redis
keyspace or a whole Redis Cluster), as its store's survey found them, each judged as
``status`` judges it, and the list output with its table. A survey only reads; which of
what it found are locks is a decision (``_listed``)."""

from __future__ import annotations

import json
import os
import sys
import time

from .decisions import _left_out, _listed, _live, _standing
from .inputs import _checked_stale_after, _Query
from .outputs import _holder_text, _status_result
from .public_surface import DEFAULT_STALE_AFTER_MIN
from .registry import _survey_for
from .times import _duration_text, _parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .public_surface import Holder, ListedLock, ListResult, StatusResult

__all__ = ["list_locks"]


def list_locks(
    under: str | os.PathLike[str], stale_after: float = DEFAULT_STALE_AFTER_MIN * 60
) -> ListResult:
    """List every lock under ``under``: a folder (searched recursively, links not
    followed), or an ``etcd://``/``redis://`` address whose KEY is a prefix (a Redis
    Cluster: every primary). Read only, like :func:`status`.

    :param under: the folder or the address of the locks to list.
    :param stale_after: seconds; judges a record without a timeout of its own.
    :returns: the list output, its locks sorted by name.
    :raises ValueError: a place that is a file, or an unknown scheme.
    :raises OSError: the place could not be read.
    """
    return _list_locks(under, stale_after)


def _list_locks(under: str | os.PathLike[str], stale_after: float) -> ListResult:
    """list_locks's work: survey ``under``, keep the locks, judge each."""
    query = _Query(under, _checked_stale_after(stale_after))  # what it asks of each lock
    shown, found, note = _survey_for(under)
    now = time.time()
    statuses: list[StatusResult] = []
    others = 0  # files named as locks are but plainly another program's
    for lock, look in found:
        record = look.record or look.last
        line = _live(look.line, now)
        if _listed(lock, look, line):
            statuses.append(_status_result(lock, _standing(record, query, now), line, now))
        elif _left_out(lock, look):
            others += 1
    result = _list_result(shown, statuses, note, now)
    if others:
        files = "file" if others == 1 else "files"
        result["message"] += f"; left out {others} {files} of other programs named *.lock"
    return result


def _listed_lock(status: StatusResult) -> ListedLock:
    """A lock as a listing shows it: its status output's keys but ``message``."""
    return {
        "state": status["state"],
        "lock": status["lock"],
        "held_by": status["held_by"],
        "held_since": status["held_since"],
        "stale_at": status["stale_at"],
        "age_seconds": status["age_seconds"],
        "stale_after_minutes": status["stale_after_minutes"],
        "waiting": status["waiting"],
        "slots": status["slots"],
        "holders": status["holders"],
        "mode": status["mode"],
        "fence": status["fence"],
    }


def _list_result(
    under: str, statuses: list[StatusResult], note: str = "", now: float = 0.0
) -> ListResult:
    """The listing of ``under``: its locks sorted by name, and a count of each state,
    a lock with slots both held and free counted as partly held (``note``: the
    survey's word on the place)."""
    locks = sorted(map(_listed_lock, statuses), key=lambda entry: entry["lock"])
    states = [_shown_state(entry, now) for entry in locks]
    kinds = ("held", "partly held", "stale", "free")
    counts = [f"{states.count(s)} {s}" for s in kinds if s in states]
    waiting = sum(len(entry["waiting"]) for entry in locks)
    if not locks:
        message = f"no locks under {under}" + (f": {note}" if note else "")
    else:
        noun = "lock" if len(locks) == 1 else "locks"
        message = f"{len(locks)} {noun} under {under}: {', '.join(counts)}"
        if waiting:
            message += f"; {waiting} {'run waits' if waiting == 1 else 'runs wait'} in line"
    return {"under": under, "locks": locks, "message": message}


def _live_holders_at(entry: ListedLock, now: float) -> list[Holder]:
    """The holders of a listed lock whose slots are live at ``now``."""
    return [h for h in entry["holders"] if (_parse_time(h["stale_at"]) or 0) > now]


def _shown_state(entry: ListedLock, now: float) -> str:
    """A lock's state as a listing counts it: a status's, but a lock of several slots
    that some hold while others are free is "partly held" (a status calls it free)."""
    if entry["state"] == "free" and entry["slots"] > 1 and _live_holders_at(entry, now):
        return "partly held"
    return entry["state"]


def _shown_name(text: str) -> str:
    """``text`` for a table: as it is if printable (any script: a person reads it),
    else quoted with escapes (a name may hold a newline, or a terminal's control
    characters), as is one that stdout cannot encode."""
    plain = text.isprintable() and text.strip() == text
    if plain and not text.isascii():
        try:
            text.encode(sys.stdout.encoding or "utf-8")
        except (UnicodeEncodeError, LookupError):
            plain = False
    return text if plain else json.dumps(text)


# --- The table for a person


def _list_table(result: ListResult, now: float) -> str:
    """The listing as an aligned table for a person: one row a lock, then its message."""
    rows = [["LOCK", "STATE", "MODE", "HOLDER", "AGE", "STALE IN", "WAITING"]]
    rows += [_table_row(entry, now) for entry in result["locks"]]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join([*lines, result["message"]]) + "\n"


def _table_row(entry: ListedLock, now: float) -> list[str]:
    """One lock's row, with its mode (shared or exclusive) while anyone holds it. A lock
    of several slots that anyone holds shows how many of its slots are held, and one
    held shared or in parts how many hold it, and by whom: the longest holder (its age,
    when it goes stale, its parts) and a count of the rest; a status of a lock of slots
    may say "free" while a slot is."""
    state: str = entry["state"]
    holder = "-" if entry["held_since"] is None else _shown_name(_holder_text(entry["held_by"]))
    age = entry["age_seconds"]
    stale_at = entry["stale_at"] if state == "held" else None
    live = _live_holders_at(entry, now)
    parted = any(h["parts"] is not None for h in live)
    if (entry["slots"] > 1 or entry["mode"] == "shared" or parted) and live:
        longest = live[0]  # holders come longest held first
        if entry["slots"] > 1:
            state = f"{len(live)}/{entry['slots']} held"
        holder = _shown_name(_holder_text(longest["owner"])) + _parts_cell(longest["parts"])
        if len(live) > 1:
            holder += f" and {len(live) - 1} more"
        since = _parse_time(longest["since"])
        age = None if since is None else max(0, int(now - since))
        stale_at = longest["stale_at"]
    stale_in = "-"
    if stale_at is not None:
        left = _parse_time(stale_at)
        stale_in = "-" if left is None else _duration_text(max(0, left - now))
    return [
        _shown_name(entry["lock"]),
        state,
        entry["mode"] or "-",
        holder,
        "-" if age is None else _duration_text(age),
        stale_in,
        str(len(entry["waiting"])),
    ]


# The most characters of parts a holder's cell shows: more are shown as a count.
_PARTS_SHOWN_MAX = 32


def _parts_cell(parts: list[str] | None) -> str:
    """What a holder's cell says of its parts: `` (src/**, docs)`` while they are
    short, else `` (3 parts)``; nothing for a hold of the whole lock."""
    if parts is None:
        return ""
    shown = ", ".join(parts)
    if len(shown) <= _PARTS_SHOWN_MAX and _shown_name(shown) == shown:
        return f" ({shown})"
    return f" ({len(parts)} part{'s' if len(parts) != 1 else ''})"
