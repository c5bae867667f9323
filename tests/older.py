"""Older versions of the tool on a lock this one holds: 1.2.0 (files and etcd), 1.4.0
and 1.11.0 (every store), kept as they were released in ``fixtures/``. They know one holder
a lock, and must see a lock of several holders as held by an owner no release can name
until every hold is past."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from stores import StoreUnderTest

FIXTURES = Path(__file__).parent / "fixtures"
OLDER = {
    "1.2.0": FIXTURES / "skf-run-lock-1.2.0.py",
    "1.4.0": FIXTURES / "skf-run-lock-1.4.0.py",
    "1.11.0": FIXTURES / "skf-run-lock-1.11.0.py",
}


def older_versions(store: StoreUnderTest) -> list[str]:
    """The older versions that know this store (1.2.0 knows no Redis)."""
    return ["1.4.0"] if store.kind in ("redis", "cluster") else ["1.2.0", "1.4.0"]


def older(version: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(OLDER[version]), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_older_versions_see_it_held(store: StoreUnderTest, held_by: str, holder: str) -> None:
    """Each older version refuses the lock (exit 3) naming ``held_by``, cannot release
    ``holder``'s hold (its owner is not the record's), calls it held, and changes
    nothing."""
    value = store.value()
    for version in older_versions(store):
        refused = older(version, "acquire", "--lock", store.lock, "--owner", "wf:old:1")
        assert refused.returncode == 3, (version, refused.stderr)
        assert json.loads(refused.stdout)["held_by"] == held_by
        mine = older(version, "release", "--lock", store.lock, "--owner", holder)
        assert json.loads(mine.stdout)["reason"] == "not-owner"
        status = older(version, "status", "--lock", store.lock)
        assert status.returncode == 3 and json.loads(status.stdout)["state"] == "held"
        assert store.value() == value


def assert_older_version_takes_it_only_once_past(
    skf: ModuleType, store: StoreUnderTest, stale_at: str
) -> None:
    """An older version is refused while the last hold is live, and takes the lock
    once that hold's ``stale_at`` has passed (shown in whole seconds: within a second
    after it). Each try starts a process that compiles the older file, so it tries
    again only every half second."""
    version = older_versions(store)[0]
    args = ["acquire", "--lock", store.lock, "--owner", "wf:old:1", "--stale-after", "60"]
    assert older(version, *args).returncode == 3
    past = skf._parse_time(stale_at) + 1
    time.sleep(max(0.0, past - time.time()))
    deadline = time.monotonic() + 30
    while older(version, *args).returncode != 0:
        assert time.monotonic() < deadline, "the older version never took the lock"
        time.sleep(0.5)
    assert json.loads(store.value() or b"{}")["owner"] == "wf:old:1"
