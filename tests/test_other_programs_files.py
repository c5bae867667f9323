"""A file that is another program's (a package manager's lockfile by its name, a JSON or
TOML document, a data file) is no lock, whatever its size: acquire, status and run refuse
it as a usage error, naming it, release leaves it alone, and list leaves it out, saying
how many. A record is a lock whatever the file's name, and what this tool, its older
versions and flock leave is a lock as ever. Each a CLI call in a fresh process, the
names' many calls aside (main() in the test's own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, posix_only
from loader import SCRIPT
from wrapped import WrappedPlatform, follow_rules

# Other programs' files: more than 4 KiB, no record, nor the start of one.
DATA_FILE = ("line of a data file\n" * 400).encode()
PIPFILE_LOCK = (json.dumps({"_meta": {"hash": {"sha256": "ab" * 3000}}}, indent=4) + "\n").encode()
UV_LOCK = ('version = 1\nrequires-python = ">=3.11"\n' + '[[package]]\nname = "x"\n' * 300).encode()
# And small ones, as a project has them: documents whatever their size.
SMALL_UV_LOCK = b'version = 1\nrequires-python = ">=3.11"\n'
SMALL_PIPFILE_LOCK = b'{"_meta": {"sources": []}, "default": {}, "develop": {}}\n'
JSON_ARRAY = b'["wf:sk:r", "2026-09-30T10:15:00Z"]'
EMPTY_OBJECT = b"{}"
TOML_TABLE = b"[tool.x]\n"  # a key: the table's name

# The names package managers give their lockfiles (the list).
PACKAGE_LOCKFILES = (
    "uv.lock",
    "Pipfile.lock",
    "poetry.lock",
    "pdm.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lock",
    "Cargo.lock",
    "Gemfile.lock",
    "composer.lock",
    "flake.lock",
    "go.sum",
)
RECORD = b'{"owner": "wf:sk:r1", "acquired_at": "2026-12-06T10:15:00Z", "tool": "skf-run-lock"}\n'


@pytest.mark.parametrize(
    "content",
    [
        DATA_FILE,
        PIPFILE_LOCK,
        UV_LOCK,
        SMALL_UV_LOCK,
        SMALL_PIPFILE_LOCK,
        JSON_ARRAY,
        EMPTY_OBJECT,
        TOML_TABLE,
        b'{"pid": 4242}',
        b'\xef\xbb\xbf{"editor.tabSize": 4}\r\n',  # PowerShell 5's Out-File, UTF-8
        '{"owner": "someone", "n": 1}'.encode("utf-16"),  # UTF-16, its mark first
        b"\xef\xbb\xbf[1, 2]",
        b"\xef\xbb\xbfname = 'x'\n",
    ],
    ids=lambda v: repr(v)[:30],
)
def test_acquire_status_and_run_refuse_another_programs_file_and_release_leaves_it(
    main: Callable[..., Run], tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "data.txt"
    path.write_bytes(content)
    os.utime(path, (0, 0))  # old: as a lock it would be stale, and replaced
    for command in (("acquire", "--owner", "wf:sk"), ("status",)):
        refused = main(command[0], "--lock", path, *command[1:])
        assert (refused.code, refused.out) == (1, ""), refused
        assert f"the lock path {path} is a file of another program's" in refused.error
        assert "a lock needs a file of its own" in refused.error
    ran = main("run", "--lock", path, "--owner", "wf:sk", "--", "touch", tmp_path / "ran")
    assert ran.code == 1 and "is a file of another program's" in ran.error
    release = main("release", "--lock", path, "--owner", "wf:sk:r1")
    assert release.code == 0 and release.json["reason"] == "not-owner"
    assert release.json["released"] is False and release.json["held_by"] is None
    assert "is a file of another program's" in release.json["message"]
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["data.txt"]


@pytest.mark.parametrize("name", PACKAGE_LOCKFILES)
def test_a_package_managers_lockfile_is_another_programs_there_or_not_empty_or_not(
    skf: ModuleType, main: Callable[..., Run], tmp_path: Path, name: str
) -> None:
    """By its very name: absent (its folder not made), empty, an ownerless lock's lines
    or a record cut short, old or new; each refused naming the file, never written."""
    path = tmp_path / "project" / name
    owner = ("--owner", "wf:sk:r1")
    for command in (("acquire", *owner), ("status",), ("run", *owner, "--", "false")):
        refused = main(command[0], "--lock", path, *command[1:])
        assert refused.code == 1, refused
        assert f"names another program's file ({name}: a package manager's" in refused.error
    assert not path.parent.exists()  # no folder made for it
    assert main("release", "--lock", path, *owner).json["reason"] == "absent"
    path.parent.mkdir()
    for content in (b"", b"4242\n2026-12-06T10:15:00Z\n", b'{"owner": "wf:sk:r1", "acqu', b"x"):
        path.write_bytes(content)
        os.utime(path, (0, 0))  # old: as a lock it would be stale, and replaced
        assert main("acquire", "--lock", path, "--owner", "wf:sk").code == 1
        left = main("release", "--lock", path, *owner).json
        assert (left["released"], left["reason"], left["held_by"]) == (False, "not-owner", None)
        assert f"names another program's file ({name}: a package manager's" in left["message"]
        with pytest.raises(ValueError, match="another program's"):
            skf.acquire_within(path, "wf:sk:r2", 60.0, 1.0, empty_is_stale=True)
        assert path.read_bytes() == content
        assert sorted(os.listdir(path.parent)) == [name]


@pytest.mark.parametrize("name", ["uv.lock", "Cargo.lock", "package-lock.json", "go.sum"])
def test_a_record_is_a_lock_whatever_the_files_name(
    main: Callable[..., Run], tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(RECORD)
    assert main("status", "--lock", path).json["held_by"] == "wf:sk:r1"
    replaced = main("acquire", "--lock", path, "--owner", "wf:sk:r2")  # stale since 2026-12-06
    assert replaced.code == 0 and replaced.json["stale_replaced"]["held_by"] == "wf:sk:r1"
    assert main("release", "--lock", path, "--owner", "wf:sk:r2").json["released"] is True
    assert not path.exists()


class NamesFoldCase(WrappedPlatform):
    names_fold_case = True


class NamesKeepCase(WrappedPlatform):
    names_fold_case = False


@pytest.mark.parametrize("name", ["UV.LOCK", "cargo.lock", "Go.Sum", "PIPFILE.lock"])
def test_a_lockfiles_name_in_another_case_is_theirs_where_names_ignore_case(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    """Where names fold case (Windows, macOS) UV.LOCK is the file uv writes as uv.lock;
    elsewhere it is a file of its own, a lock as any other name is."""
    path = tmp_path / name
    follow_rules(skf, monkeypatch, NamesFoldCase(skf._SEAMS.platform))
    with pytest.raises(ValueError, match=f"another program's file \\({name}: a package manager's"):
        skf.acquire(path, "wf:sk:r1", 60.0)
    follow_rules(skf, monkeypatch, NamesKeepCase(skf._SEAMS.platform))
    assert skf.acquire(path, "wf:sk:r1", 60.0)["acquired"] is True
    assert skf.release(path, "wf:sk:r1")["released"] is True


@posix_only("symbolic links")
def test_a_link_named_as_a_lockfile_is_theirs_and_left_in_place(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    (tmp_path / "target").write_bytes(RECORD)
    link = tmp_path / "uv.lock"
    link.symlink_to(tmp_path / "target")
    assert cli("acquire", "--lock", link, "--owner", "wf:sk").code == 1
    assert cli("release", "--lock", link, "--owner", "wf:sk:r1").json["reason"] == "not-owner"
    assert link.is_symlink() and (tmp_path / "target").read_bytes() == RECORD


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
        b"locked\n",  # a short line
        b'{"tool": "skf-run-lock"}',  # a record that names no owner
        b'{"owner": null, "acquired_at": "2026-12-06T10:15:00Z"}',
        b"# a TOML comment, no key\n",
        b'"a JSON string"',
        bytes(range(256)),  # binary
    ],
    ids=lambda v: repr(v)[:30],
)
def test_what_this_tool_older_versions_and_flock_leave_is_still_a_lock(
    cli: Callable[..., Run], tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "x.lock"
    path.write_bytes(content)
    os.utime(path, (0, 0))  # stale, by its time or its file's
    taken = cli("acquire", "--lock", path, "--owner", "wf:new")
    assert taken.code == 0 and taken.json["stale_replaced"] is not None, taken


@pytest.mark.parametrize(
    ("pipfile", "uv"), [(PIPFILE_LOCK, UV_LOCK), (SMALL_PIPFILE_LOCK, SMALL_UV_LOCK), (b"", b"")]
)
def test_list_leaves_out_other_programs_lockfiles_and_says_how_many(
    cli: Callable[..., Run], tmp_path: Path, pipfile: bytes, uv: bytes
) -> None:
    (tmp_path / "Pipfile.lock").write_bytes(pipfile)
    (tmp_path / "uv.lock").write_bytes(uv)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "yarn.lock").write_bytes(b"# yarn lockfile v1\n")
    (tmp_path / "sub" / "data.lock").write_bytes(SMALL_PIPFILE_LOCK)
    (tmp_path / "package-lock.json").write_bytes(SMALL_PIPFILE_LOCK)  # never named as a lock
    (tmp_path / "flock.lock").write_bytes(b"")
    (tmp_path / "Cargo.lock").write_bytes(RECORD)  # a record: a lock, whatever the name
    taken = cli("acquire", "--lock", tmp_path / "mine.lock", "--owner", "wf:sk")
    assert taken.code == 0
    listing = cli("list", "--under", tmp_path).json
    assert [entry["lock"] for entry in listing["locks"]] == [
        str(tmp_path / "Cargo.lock"),
        str(tmp_path / "flock.lock"),
        str(tmp_path / "mine.lock"),
    ]
    assert listing["message"].endswith("; left out 4 files of other programs named *.lock")


def test_the_refusal_gives_the_whole_size_of_a_large_file(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """A lock's first 64 KiB are all a call reads; the message says the file's size."""
    path = tmp_path / "big.txt"
    path.write_bytes(DATA_FILE * 20)  # 160,000 bytes
    refused = cli("status", "--lock", path)
    assert refused.code == 1
    assert f"is a file of another program's ({len(DATA_FILE) * 20} bytes" in refused.error


def imported_by(*args: str | os.PathLike[str]) -> tuple[int, set[str]]:
    """The exit code of a CLI call in a fresh process, and the modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}


@posix_only("reads python -X importtime of a file lock's CLI call")
def test_only_a_file_that_is_no_json_nor_a_locks_own_is_read_as_toml(tmp_path: Path) -> None:
    """A file-lock call pays nothing for the TOML check: tomllib is imported only for
    bytes that are no JSON, not empty, no older version's lines, no record cut short."""
    lock = tmp_path / "x.lock"
    owner = ("--owner", "wf:sk:r1")
    for content, code in (
        (None, 0),  # a take
        (RECORD, 0),  # stale: replaced
        (b"", 0),
        (b"4242\n2026-12-06T10:15:00Z\n", 0),
        (b'{"owner": "wf:sk:r9", "acqu', 0),
        (b'{"owner": "wf:sk:r9", "acquired_at": "2999-01-01T00:00:00Z"}', 3),  # held
    ):
        lock.unlink(missing_ok=True)
        if content is not None:
            lock.write_bytes(content)
            os.utime(lock, (0, 0))
        exit_code, imported = imported_by("acquire", "--lock", lock, *owner)
        assert exit_code == code and "json" in imported and "tomllib" not in imported, content
        assert imported_by("release", "--lock", lock, *owner)[0] == 0
    lock.write_bytes(SMALL_UV_LOCK)
    exit_code, imported = imported_by("status", "--lock", lock)
    assert exit_code == 1 and "tomllib" in imported  # read as TOML, and refused
