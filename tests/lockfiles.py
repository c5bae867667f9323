"""Lock files as a test writes and reads them by hand, at a fixed or a relative time."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

NOW = datetime(2026, 9, 30, 10, 15, 0, tzinfo=UTC)


def beside(lock: Path) -> list[str]:
    """Names in the lock's folder (empty if the folder is missing)."""
    try:
        return sorted(os.listdir(lock.parent))
    except FileNotFoundError:
        return []


def write_record(lock: Path, owner: str | None, when: datetime, **extra: Any) -> None:
    lock.parent.mkdir(parents=True, exist_ok=True)
    content: dict[str, Any] = {"owner": owner, "acquired_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
    content.update(extra or {"tool": "skf-run-lock"})
    # Written whole and put in place at once, as the tool writes: a run renewing the
    # lock meanwhile reads the old record or this one, never a half-written file.
    temp = lock.with_name(lock.name + ".by-test")
    temp.write_text(json.dumps(content) + "\n")
    deadline = time.monotonic() + 5
    while True:
        try:
            os.replace(temp, lock)
            return
        except PermissionError:  # Windows: a reader has the lock file open this moment
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def taken_over(skf: ModuleType, lock: Path, owner: str) -> None:
    """Another run takes ``lock`` over as this tool would: its record, dated now, written
    under the lock's guard. Written bare, it could land between a renewal's read and its
    write, and the renewal would put its own record back over it."""
    with skf._Guard(lock):
        write_record(lock, owner, datetime.now(UTC))


def read_json(lock: Path) -> dict[str, Any]:
    raw = lock.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    result = json.loads(raw)
    assert isinstance(result, dict)
    return result


def ago(**kwargs: float) -> datetime:
    return datetime.now(UTC) - timedelta(**kwargs)
