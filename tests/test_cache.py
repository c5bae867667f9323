"""The built file's own bytecode cache: a call loads what an earlier call compiled, and
never runs code that another user could have written, nor code kept for another file;
a cache that fails costs a call time, never its answer. Every call in a fresh process,
its cache in a folder of the test's own."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from calls import (
    CACHE_BASE,
    TEMP_VARIABLES,
    Run,
    compiled_by_cli,
    posix_only,
    root_only,
    temp_folder_at,
)
from loader import SCRIPT

CALL = ("run-id",)


def entries(cache: Path) -> list[Path]:
    folder = cache / "skf-run-lock"
    return sorted(folder.glob("*.code")) if folder.exists() else []


def test_a_second_call_loads_what_the_first_compiled(tmp_path: Path) -> None:
    code, compiled, _ = compiled_by_cli(*CALL, cache=tmp_path)
    assert code == 0 and [line for _, line in compiled] != []  # the first compiles
    (entry,) = entries(tmp_path)
    code, compiled, _ = compiled_by_cli(*CALL, cache=tmp_path)
    assert (code, compiled) == (0, [])  # the second compiles nothing
    assert entries(tmp_path) == [entry]


@posix_only("file modes and owners")
def test_the_cache_is_this_users_alone(tmp_path: Path) -> None:
    assert compiled_by_cli(*CALL, cache=tmp_path)[0] == 0
    folder = tmp_path / "skf-run-lock"
    (entry,) = entries(tmp_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert {folder.stat().st_uid, entry.stat().st_uid} == {os.geteuid()}
    assert sorted(p.name for p in folder.iterdir()) == [entry.name]  # no temp file left


def planted(tmp_path: Path) -> Path:
    """The cache entry a first call left, its code replaced by code that says "planted"
    and exits: what a call must never run unless the entry is its own."""
    assert compiled_by_cli(*CALL, cache=tmp_path)[0] == 0
    (entry,) = entries(tmp_path)
    header = entry.read_bytes().split(b"\n", 1)[0] + b"\n"
    evil = compile("print('planted'); raise SystemExit(0)", str(SCRIPT), "exec")
    entry.write_bytes(header + marshal.dumps(evil))
    return entry


def runs_planted_code(cli: Callable[..., Run], tmp_path: Path) -> bool:
    """Whether a call with its cache under ``tmp_path`` ran the planted code (its temp
    folder, where a cache refused goes, beside it)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CACHE_BASE, str(tmp_path))
        for name, value in temp_folder_at(tmp_path.parent / f"{tmp_path.name}-temp").items():
            env.setenv(name, value)
        done = cli(*CALL)
    assert done.code == 0, done.err
    return done.out == "planted\n"


@posix_only("file modes and owners")
def test_an_entry_others_may_write_is_never_run(cli: Callable[..., Run], tmp_path: Path) -> None:
    entry = planted(tmp_path)
    assert runs_planted_code(cli, tmp_path)  # the cache is read: the test can bite
    entry.chmod(0o620)  # its group may write it
    assert not runs_planted_code(cli, tmp_path)
    planted(tmp_path).chmod(0o600)
    (tmp_path / "skf-run-lock").chmod(0o777)  # anyone may write the folder
    assert not runs_planted_code(cli, tmp_path)


@root_only("gives a file to another user")
def test_another_users_entry_is_never_run(cli: Callable[..., Run], tmp_path: Path) -> None:
    entry = planted(tmp_path)
    os.chown(entry, 65534, -1)
    assert not runs_planted_code(cli, tmp_path)
    os.chown(entry, 0, -1)
    os.chown(tmp_path / "skf-run-lock", 65534, -1)  # a folder another user owns
    assert not runs_planted_code(cli, tmp_path)


def test_an_entry_kept_for_the_file_before_it_changed_is_not_run(tmp_path: Path) -> None:
    """The same build, edited by hand: its size and time differ, so it compiles anew."""
    copy = tmp_path / "skf-run-lock.py"
    shutil.copy(SCRIPT, copy)
    cache = tmp_path / "cache"
    assert compiled_by_cli(*CALL, script=copy, cache=cache)[1] != []
    assert compiled_by_cli(*CALL, script=copy, cache=cache)[1] == []
    with copy.open("a", encoding="utf-8") as edited:
        edited.write("# edited by hand\n")
    code, compiled, _ = compiled_by_cli(*CALL, script=copy, cache=cache)
    assert code == 0 and compiled != []


@pytest.mark.parametrize("damage", [b"", b"not a header\n", None])
def test_a_damaged_entry_is_compiled_anew(tmp_path: Path, damage: bytes | None) -> None:
    assert compiled_by_cli(*CALL, cache=tmp_path)[0] == 0
    (entry,) = entries(tmp_path)
    if damage is None:  # the header right, the code cut off
        data = entry.read_bytes()
        damage = data[: data.index(b"\n") + 20]
    entry.write_bytes(damage)
    code, compiled, _ = compiled_by_cli(*CALL, cache=tmp_path)
    assert code == 0 and compiled != []
    assert compiled_by_cli(*CALL, cache=tmp_path)[1] == []  # written again, whole


@posix_only("folder modes")
def test_a_cache_that_cannot_be_written_costs_time_not_the_answer(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "acquire",
            "--lock",
            str(tmp_path / "x.lock"),
            "--owner",
            "wf:sk",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, CACHE_BASE: str(blocked)},
    )
    assert done.returncode == 0 and json.loads(done.stdout)["acquired"], done.stderr


def test_no_cache_is_kept_when_turned_off(
    cli: Callable[..., Run], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_BASE, str(tmp_path))
    monkeypatch.setenv("SKF_RUN_LOCK_NO_CACHE", "1")
    assert cli(*CALL).code == 0
    assert list(tmp_path.iterdir()) == []


def test_only_the_newest_entries_are_kept(tmp_path: Path) -> None:
    """Entries of other builds and Pythons (planted here as old files) are pruned down to
    the 64 newest when an entry is written."""
    folder = tmp_path / "skf-run-lock"
    folder.mkdir(mode=0o700)
    for n in range(70):
        old = folder / f"{n:016x}-core-cpython-0.code"
        old.write_bytes(b"old")
        os.utime(old, ns=(n * 10**9, n * 10**9))
    assert compiled_by_cli(*CALL, cache=tmp_path)[0] == 0
    kept = entries(tmp_path)
    assert len(kept) == 64
    assert folder / f"{0:016x}-core-cpython-0.code" not in kept  # the oldest went


# --- Where HOME cannot keep it: a folder of this user's own in the temp folder


def temp_entries(temp: Path) -> list[Path]:
    name = "skf-run-lock" if sys.platform == "win32" else f"skf-run-lock-{os.geteuid()}"
    return sorted((temp / name).glob("*.code")) if (temp / name).exists() else []


def home_that_keeps_no_cache(tmp_path: Path) -> dict[str, str]:
    """An environment whose HOME is read-only (as agents' sandboxes keep it) and cannot
    hold a cache folder even for root, whom modes do not stop: its .cache is a file."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("not a folder")
    (home / "AppData").write_text("not a folder")
    home.chmod(0o555)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", *TEMP_VARIABLES)}
    return env | {"HOME": str(home), "LOCALAPPDATA": str(home / "AppData" / "Local")}


def test_with_home_read_only_the_second_call_compiles_nothing(tmp_path: Path) -> None:
    env = home_that_keeps_no_cache(tmp_path)
    temp = tmp_path / "temp"
    code, compiled, _ = compiled_by_cli(*CALL, temp=temp, env=env)
    assert code == 0 and compiled != []
    (entry,) = temp_entries(temp)
    code, compiled, _ = compiled_by_cli(*CALL, temp=temp, env=env)
    assert (code, compiled) == (0, [])
    assert temp_entries(temp) == [entry]
    assert (tmp_path / "home" / ".cache").read_text() == "not a folder"


@posix_only("file modes and owners")
def test_a_temp_folder_others_may_write_is_never_used(tmp_path: Path) -> None:
    env = home_that_keeps_no_cache(tmp_path)
    temp = tmp_path / "temp"
    planted_folder = temp / f"skf-run-lock-{os.geteuid()}"
    planted_folder.mkdir(parents=True)
    planted_folder.chmod(0o777)  # made first by someone else's hand, open to all
    for _ in range(2):
        code, compiled, _ = compiled_by_cli(*CALL, temp=temp, env=env)
        assert code == 0 and compiled != []  # compiled each time: nothing kept there
    assert list(planted_folder.iterdir()) == []


@root_only("gives a folder to another user")
def test_another_users_folder_in_the_temp_folder_is_never_used(tmp_path: Path) -> None:
    env = home_that_keeps_no_cache(tmp_path)
    temp = tmp_path / "temp"
    theirs = temp / f"skf-run-lock-{os.geteuid()}"
    theirs.mkdir(parents=True, mode=0o700)
    os.chown(theirs, 65534, 65534)
    for _ in range(2):
        code, compiled, _ = compiled_by_cli(*CALL, temp=temp, env=env)
        assert code == 0 and compiled != []
    assert list(theirs.iterdir()) == []
