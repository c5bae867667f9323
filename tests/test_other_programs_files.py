"""A file that is plainly another program's (a data file, another tool's lockfile) is no
lock: acquire and status refuse it as a usage error, naming it, release leaves it
alone, and list leaves it out, saying how many. What this tool, its older versions and
flock leave is a lock as ever, whatever its size. Each a CLI call in a fresh process."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from calls import Run

# Other programs' files: more than 4 KiB, no record, nor the start of one.
DATA_FILE = ("line of a data file\n" * 400).encode()
PIPFILE_LOCK = (json.dumps({"_meta": {"hash": {"sha256": "ab" * 3000}}}, indent=4) + "\n").encode()
UV_LOCK = ('version = 1\nrequires-python = ">=3.11"\n' + '[[package]]\nname = "x"\n' * 300).encode()


@pytest.mark.parametrize("content", [DATA_FILE, PIPFILE_LOCK, UV_LOCK])
def test_acquire_and_status_refuse_another_programs_file_and_release_leaves_it(
    cli: Callable[..., Run], tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(content)
    os.utime(path, (0, 0))  # old: as a lock it would be stale, and replaced
    for command in (("acquire", "--owner", "wf:sk"), ("status",)):
        refused = cli(command[0], "--lock", path, *command[1:])
        assert (refused.code, refused.out) == (1, ""), refused
        assert f"the lock path {path} is a file of another program's" in refused.error
        assert "a lock needs a file of its own" in refused.error
    release = cli("release", "--lock", path, "--owner", "wf:sk:r1")
    assert release.code == 0 and release.json["reason"] == "not-owner"
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["data.txt"]


@pytest.mark.parametrize(
    "content",
    [
        b"",  # flock(1)'s
        b"12345\n2026-12-06T10:15:00Z\n",  # an older version's PID and time lines
        b'{"owner": "wf:sk:r1", "acqu',  # a record cut short
        b'{"owner": "wf:sk:r1", "acquired_at": "2026-12-06T10:15:00Z", "pad": "'
        + b"x" * 20000
        + b'"}\n',  # a record of any size
        b"garbage" * 100,  # small foreign bytes: a foreign lock, as the contract has it
    ],
)
def test_what_this_tool_older_versions_and_flock_leave_is_still_a_lock(
    cli: Callable[..., Run], tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "x.lock"
    path.write_bytes(content)
    os.utime(path, (0, 0))  # stale, by its time or its file's
    taken = cli("acquire", "--lock", path, "--owner", "wf:new")
    assert taken.code == 0 and taken.json["stale_replaced"] is not None, taken


def test_list_leaves_out_other_programs_lockfiles_and_says_how_many(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    (tmp_path / "Pipfile.lock").write_bytes(PIPFILE_LOCK)
    (tmp_path / "uv.lock").write_bytes(UV_LOCK)
    (tmp_path / "flock.lock").write_bytes(b"")
    taken = cli("acquire", "--lock", tmp_path / "mine.lock", "--owner", "wf:sk")
    assert taken.code == 0
    listing = cli("list", "--under", tmp_path).json
    assert [entry["lock"] for entry in listing["locks"]] == [
        str(tmp_path / "flock.lock"),
        str(tmp_path / "mine.lock"),
    ]
    assert listing["message"].endswith("; left out 2 files of other programs named *.lock")


def test_the_refusal_gives_the_whole_size_of_a_large_file(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A lock's first 64 KiB are all a call reads; the message says the file's size."""
    path = tmp_path / "big.txt"
    path.write_bytes(DATA_FILE * 20)  # 160,000 bytes
    refused = cli("status", "--lock", path)
    assert refused.code == 1
    assert f"is a file of another program's ({len(DATA_FILE) * 20} bytes" in refused.error
