"""check: which paths lie in a part of a lock that another run holds, changing nothing;
on every store, through the CLI in fresh processes and through the library; and the
index that matches many paths against many parts, held to one part at a time."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, call_to_end
from hypothesis import given, settings
from hypothesis import strategies as st
from loader import SCRIPT
from servers import free_port
from stores import StoreUnderTest, planted_record, shown_time

CHECK_KEYS = ["free", "reserved", "message"]
ENTRY_KEYS = ["path", "held_by", "part", "kind", "stale_at"]

# A property tried on hundreds of examples in this process: seconds alone, over a
# minute beside CI's other lanes on two cores.
MANY_EXAMPLES = pytest.mark.timeout(300)


def checking(lock: str | Path, *args: str, stdin: bytes | None = None) -> Run:
    """``check --lock LOCK ARGS`` in a fresh process, ``stdin`` on its stdin (None:
    nothing to read)."""
    return call_to_end(
        [sys.executable, str(SCRIPT), "check", "--lock", str(lock), *args], 60, stdin=stdin
    )


def entry(path: str, taken: Any, part: str | None, kind: str) -> dict[str, Any]:
    """The entry of ``reserved`` for ``path`` in ``part`` of the hold ``taken`` gave."""
    return {
        "path": path,
        "held_by": taken["owner"],
        "part": part,
        "kind": kind,
        "stale_at": taken["stale_at"],
    }


def without_message(result: dict[str, Any]) -> dict[str, Any]:
    """An output but its message, which names the command that runs this copy (the
    CLI's and the library's differ there only)."""
    return {key: value for key, value in result.items() if key != "message"}


# --- On every store ------------------------------------------------------------------


def test_each_path_in_another_runs_part_is_named_in_the_order_given_and_exits_3(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """Each path that lies in a live part of another run, exclusive or shared (a commit
    is a write), gets an entry for each holder and part it lies in, holders longest held
    first, paths in the order given (normalised as parts are, case kept; matched with
    ASCII case folded); the lock is left as it was; the library says the same."""
    lock = store.lock
    a = skf.acquire(lock, "wf:a:1", 3600.0, parts=["src/api/**", "docs/*.md"])
    b = skf.acquire(lock, "wf:b:1", 1800.0, parts=["tests", "README.md"], shared=True)
    c = skf.acquire(lock, "wf:c:1", 3600.0, parts=["Tests/Unit"], shared=True)
    assert [taken["acquired"] for taken in (a, b, c)] == [True, True, True]
    before = store.value()
    paths = [
        "README.md",
        "src/api/routes.py",
        "lib/x.py",
        "tests/unit/test_a.py",
        "docs/guide.md",
        "docs/img/a.png",
        "./src/API/",
    ]
    run = checking(lock, *paths)
    assert run.code == 3, run
    result = run.json
    assert list(result) == CHECK_KEYS
    assert result["free"] is False
    assert result["reserved"] == [
        entry("README.md", b, "README.md", "shared"),
        entry("src/api/routes.py", a, "src/api/**", "exclusive"),
        entry("tests/unit/test_a.py", b, "tests", "shared"),
        entry("tests/unit/test_a.py", c, "Tests/Unit", "shared"),
        entry("docs/guide.md", a, "docs/*.md", "exclusive"),
        entry("src/API", a, "src/api/**", "exclusive"),
    ]
    assert all(list(reserved) == ENTRY_KEYS for reserved in result["reserved"])
    message = result["message"]
    assert message.startswith(
        f"5 of the 7 paths lie in parts of {lock} held by any run: README.md in wf:b:1's"
        " part README.md, shared; src/api/routes.py in wf:a:1's part 'src/api/**';"
        " tests/unit/test_a.py in wf:b:1's part tests, shared; and 3 more, which"
        " reserved lists. Leave them unwritten until those holds end"
    ), message
    assert f" status --lock {shlex.quote(lock)} shows who holds what" in message
    assert store.value() == before  # read only
    assert without_message(dict(skf.check(lock, paths))) == without_message(result)


def test_the_owners_own_parts_are_left_out_and_every_other_runs_count(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """--owner (the whole owner) leaves out that one run's parts: another run of the
    same workflow and skill, or an owner that holds nothing, leaves out nothing."""
    lock = store.lock
    a = skf.acquire(lock, "wf:a:1", 3600.0, parts=["src/**"])
    b = skf.acquire(lock, "wf:b:1", 3600.0, parts=["docs"])
    mine = checking(lock, "--owner", "wf:a:1", "src/x.py", "docs/y")
    assert (mine.code, mine.json["reserved"]) == (3, [entry("docs/y", b, "docs", "exclusive")])
    said = mine.json["message"]
    assert "held by a run other than wf:a:1: docs/y in wf:b:1's part docs" in said
    free = checking(lock, "--owner", "wf:a:1", "src/x.py")
    assert free.code == 0 and free.json == {
        "free": True,
        "reserved": [],
        "message": f"the path src/x.py lies in no part of {lock} held by a run other than wf:a:1",
    }
    theirs = checking(lock, "--owner", "wf:b:1", "src/x.py", "docs/y")
    assert (theirs.code, theirs.json["reserved"]) == (
        3,
        [entry("src/x.py", a, "src/**", "exclusive")],
    )
    for owner in ("wf:a:2", "wf:nobody:1"):
        everyone = checking(lock, "--owner", owner, "src/x.py", "docs/y")
        assert everyone.code == 3 and len(everyone.json["reserved"]) == 2, owner
    library = skf.check(lock, ["src/x.py", "docs/y"], owner="wf:a:1")
    assert without_message(dict(library)) == without_message(mine.json)


def test_a_whole_hold_reserves_every_path_exclusive_or_shared(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    lock = store.lock
    whole = skf.acquire(lock, "wf:whole:1", 3600.0)
    paths = ["src/a.py", "x", "deep/er/path.txt"]
    run = checking(lock, *paths)
    assert run.code == 3
    assert run.json["reserved"] == [entry(path, whole, None, "exclusive") for path in paths]
    assert (
        "src/a.py in the whole lock, held by wf:whole:1; x in the whole lock"
        in (run.json["message"])
    )
    own = checking(lock, "--owner", "wf:whole:1", *paths)
    assert own.code == 0 and own.json["free"] is True
    assert skf.release(lock, "wf:whole:1")["released"] is True

    first = skf.acquire(lock, "wf:r1:1", 3600.0, shared=True)
    second = skf.acquire(lock, "wf:r2:1", 3600.0, shared=True)
    readers = checking(lock, "x", "y/z")
    assert readers.code == 3
    assert readers.json["reserved"] == [
        entry("x", first, None, "shared"),
        entry("x", second, None, "shared"),
        entry("y/z", first, None, "shared"),
        entry("y/z", second, None, "shared"),
    ]


def test_a_stale_hold_reserves_nothing(skf: ModuleType, store: StoreUnderTest) -> None:
    """A hold past its own timeout (on a server, once its server ended it too), still
    in the record beside a live one, reserves nothing; once the live one is released,
    every path is free (exit 0)."""
    lock = store.lock
    live = skf.acquire(lock, "wf:live:1", 3600.0, parts=["docs"])
    old = skf.acquire(lock, "wf:old:1", 0.05, parts=["src", "lib"], shared=True)
    assert live["acquired"] and old["acquired"]
    stale_at = skf._parse_time(old["stale_at"])
    # Its time is shown in whole seconds: its hold ends within a second after (an etcd
    # lease lasts whole seconds, one more).
    deadline = time.monotonic() + 30
    while time.time() <= stale_at + 1.1 or skf.check(lock, ["src/a.py"])["reserved"]:
        assert time.monotonic() < deadline, "wf:old:1's hold never went stale"
        time.sleep(0.05)
    assert sorted(store.holders()) == ["wf:live:1", "wf:old:1"]  # still there, stale
    run = checking(lock, "src/a.py", "docs/b", "lib")
    assert run.code == 3
    assert run.json["reserved"] == [entry("docs/b", live, "docs", "exclusive")]
    assert skf.release(lock, "wf:live:1")["released"] is True
    free = checking(lock, "src/a.py", "lib")
    assert free.code == 0 and free.json == {
        "free": True,
        "reserved": [],
        "message": f"none of the 2 paths lies in a part of {lock} held by any run",
    }


def test_a_record_without_its_own_timeout_is_judged_by_sixty_minutes(
    store: StoreUnderTest,
) -> None:
    since = shown_time(59 * 60)
    store.plant(planted_record("wf:old:1", since))  # no stale_after_seconds: older tools
    run = checking(store.lock, "a/b")
    assert run.code == 3
    assert run.json["reserved"] == [
        {
            "path": "a/b",
            "held_by": "wf:old:1",
            "part": None,
            "kind": "exclusive",
            "stale_at": shown_time(-3600, since),
        }
    ]
    store.plant(planted_record("wf:old:1", shown_time(60 * 60)))
    gone = checking(store.lock, "a/b")
    assert gone.code == 0 and gone.json["reserved"] == []


def test_a_lock_that_names_no_owner_reserves_every_path_while_live(
    store: StoreUnderTest,
) -> None:
    store.plant(b"locked\n")
    run = checking(store.lock, "a")
    assert run.code == 3
    [reserved] = run.json["reserved"]
    assert (reserved["held_by"], reserved["part"]) == (None, None)
    assert "a in the whole lock, held by a lock file that names no owner" in run.json["message"]


def test_no_paths_at_all_are_free(skf: ModuleType, store: StoreUnderTest) -> None:
    """No argument, empty stdin, blank lines, a lone NUL: no path, so none is reserved,
    even of a lock held whole."""
    assert skf.acquire(store.lock, "wf:whole:1", 3600.0)["acquired"]
    said = f"no path was given, so none lies in a part of {store.lock} held by any run"
    for args, stdin in [
        ((), None),
        (("-",), b""),
        (("-",), b"\n\r\n\n"),
        (("--null", "-"), b"\0"),
        (("--",), None),
    ]:
        run = checking(store.lock, *args, stdin=stdin)
        assert run.code == 0, (args, run)
        assert run.json == {"free": True, "reserved": [], "message": said}


def test_ten_thousand_paths_are_each_matched_against_every_part(
    skf: ModuleType, store: StoreUnderTest
) -> None:
    """Ten thousand paths on stdin against holders whose parts start with a folder,
    with a glob before a folder's name, or with globs alone: the entries are exactly
    those a part-by-part test of each path finds, in order."""
    lock = store.lock
    holds = {
        "wf:a:1": ["src/api", "src/cli/**/*.py", "README*"],
        "wf:b:1": ["*/tests/**", "**/fixtures"],
        "wf:c:1": ["**/*.md", "d?cs"],
    }
    taken = {
        owner: skf.acquire(lock, owner, 3600.0, parts=parts, shared=True)
        for owner, parts in holds.items()
    }
    folders = ["src/api", "src/cli/x", "lib/tests", "docs", "DOCS/sub", "pkg/fixtures", "x"]
    names = ["a.py", "b.md", "README.txt", "c.MD", "fixtures", "tests"]
    paths = [f"{folders[n % 7]}/{n}/{names[n % 6]}" for n in range(10_000)]
    run = checking(lock, "-", stdin="\n".join(paths).encode())
    assert run.code == 3
    kept = {owner: skf._checked_parts(parts) for owner, parts in holds.items()}
    expected = [
        entry(path, taken[owner], part, "shared")
        for path in dict.fromkeys(paths)
        for owner in holds
        for part in kept[owner]
        if skf._covers(part, path)
    ]
    assert len(expected) > 5_000
    assert run.json["reserved"] == expected


# --- Paths, stdin and the command line (a file lock) -----------------------------------------

NAMES = [
    "dir with space/file name.txt",
    "quote\"d/it's.md",
    "naïve/日本語.txt",
    "a*/[b]?",  # a path's pattern characters are characters
    "-",
    "--help",
]


def test_paths_come_one_a_line_on_stdin_or_nul_ended_with_null(skf: ModuleType, lock: Path) -> None:
    """With -, one path a line (a line may end in CRLF); with --null -, each ended by a
    NUL, so that a name may hold a line break; non-ASCII names as UTF-8. After a bare
    --, every argument is a path, - and --help too."""
    every = skf.acquire(lock, "wf:all:1", 3600.0, parts=["**"])

    def reserved(run: Run) -> list[str]:
        assert run.code == 3, run
        assert all(e == entry(e["path"], every, "**", "exclusive") for e in run.json["reserved"])
        return [e["path"] for e in run.json["reserved"]]

    lines = "\r\n".join(NAMES[:3]) + "\n" + "\n".join(NAMES[3:]) + "\n"
    assert reserved(checking(lock, "-", stdin=lines.encode())) == NAMES
    broken = [*NAMES, "line\nbreak.txt", "tab\tand\rreturn"]
    nul_ended = b"".join(name.encode() + b"\0" for name in broken)
    assert reserved(checking(lock, "--null", "-", stdin=nul_ended)) == broken
    assert reserved(checking(lock, "--null", "-", stdin=nul_ended[:-1])) == broken  # no last NUL
    assert reserved(checking(lock, "x", "--", *NAMES)) == ["x", *NAMES]
    lib = skf.check(lock, broken)
    assert [e["path"] for e in lib["reserved"]] == broken


def test_a_path_given_twice_is_named_once(skf: ModuleType, lock: Path) -> None:
    every = skf.acquire(lock, "wf:all:1", 3600.0)
    run = checking(lock, "a/b", "./a/b/", "c", "a/b", "A/B")
    assert [e["path"] for e in run.json["reserved"]] == ["a/b", "c", "A/B"]
    assert run.json["reserved"][0] == entry("a/b", every, None, "exclusive")
    assert run.json["message"].startswith(f"3 of the 3 paths lie in parts of {lock}")


BAD_PATHS = [
    ("/etc/passwd", "path '/etc/passwd' is an absolute path: name it from the top of the tree"),
    ("a/../b", "path 'a/../b' holds a '..' segment: name the path from the top of the tree"),
    ("..", "path '..' holds a '..' segment"),
    ("a//b", "path 'a//b' holds an empty segment (two '/' in a row): write one '/'"),
    ("a/./b", "path 'a/./b' holds a '.' segment: leave it out"),
    (".", "path '.' names the top of the tree: name a file or folder in it"),
]


@pytest.mark.parametrize(("path", "message"), BAD_PATHS)
def test_a_bad_path_is_exit_1_naming_it_and_changes_nothing(
    skf: ModuleType, lock: Path, path: str, message: str
) -> None:
    """As an argument, after --, or on stdin (either way), among good paths: one line
    naming the path and what is wrong; the lock as it was, nothing beside it."""
    assert skf.acquire(lock, "wf:a:1", 3600.0, parts=["src"])["acquired"]
    before, beside = lock.read_bytes(), sorted(os.listdir(lock.parent))
    for args, stdin in [
        (("src/x", path, "docs"), None),
        (("--", "src/x", path), None),
        (("-",), f"src/x\n{path}\ndocs\n".encode()),
        (("--null", "-"), f"src/x\0{path}\0".encode()),
    ]:
        run = checking(lock, *args, stdin=stdin)
        assert run.code == 1, (args, run)
        assert run.error.startswith(message), (args, run.error)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        skf.check(lock, ["src/x", path])
    assert lock.read_bytes() == before and sorted(os.listdir(lock.parent)) == beside


def test_a_name_with_a_backslash_or_a_colon_is_a_files_name_where_the_system_allows_it(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git names a POSIX file ``src\\a.py`` (or ``c:x``) as it is: a file at the top of
    the tree, which ``src`` does not cover and ``*`` does. Under Windows' rules such a
    path is a separator or a drive a person typed: refused, naming it."""
    assert skf.acquire(lock, "wf:a:1", 3600.0, parts=["src", "c*"])["acquired"]
    monkeypatch.setattr(skf._SEAMS, "platform", skf._POSIX)  # as on Linux and macOS
    checked = skf.check(lock, ["src\\a.py", "c:x", "src/b.py"])
    assert [(e["path"], e["part"]) for e in checked["reserved"]] == [
        ("c:x", "c*"),
        ("src/b.py", "src"),
    ]
    monkeypatch.setattr(skf._SEAMS, "platform", skf._WINDOWS)
    for path, words in (("src\\a.py", "holds a backslash"), ("c:x", "is an absolute path")):
        with pytest.raises(ValueError, match=words):
            skf.check(lock, [path])


def test_an_empty_path_argument_is_exit_1(lock: Path) -> None:
    run = checking(lock, "a", "")
    assert run.code == 1 and run.error == "a path must not be empty"


def test_paths_on_stdin_that_are_not_utf8_are_exit_1(lock: Path) -> None:
    run = checking(lock, "-", stdin=b"ok\n\xff\xfe.txt\n")
    assert run.code == 1
    assert run.error == (
        "the paths on stdin are not UTF-8 (byte 3 is not): give each path as git prints it"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-", "a"],
            "usage error: check reads its paths from stdin (-) or takes them as arguments,"
            " not both: give - alone, or the paths (a path named - after --)",
        ),
        (["-", "-"], "usage error: check reads its paths from stdin (-) or takes them"),
        (["-", "--", "a"], "usage error: check reads its paths from stdin (-) or takes them"),
        (
            ["--null", "a"],
            "usage error: --null says how stdin separates paths: give - to read them from stdin",
        ),
        (["--owner", "wf:a", "x"], "check needs the whole owner with its run id"),
        (["--owner", "nobody", "x"], "owner 'nobody' must be workflow:skill[:run_id]"),
        (["--owner"], "usage error: --owner needs a value"),
        (["--stale-after", "5"], "usage error: check does not take '--stale-after'"),
        (["-x"], "usage error: check does not take '-x'"),
        (["--null=1", "-"], "usage error: --null takes no value"),
    ],
)
def test_a_bad_command_line_is_exit_1_and_reads_nothing(
    lock: Path, args: list[str], message: str
) -> None:
    run = checking(lock, *args, stdin=b"a\n")
    assert run.code == 1 and run.error.startswith(message), run
    assert not lock.parent.exists()


def test_the_owner_without_its_run_id_is_refused_saying_why(skf: ModuleType, lock: Path) -> None:
    message = (
        "check needs the whole owner with its run id (workflow:skill:run_id, as acquire"
        " printed it), not 'wf:a': it leaves out that run's own parts; without an owner it"
        " names every run's"
    )
    assert checking(lock, "--owner", "wf:a", "x").error == message
    with pytest.raises(ValueError) as refused:
        skf.check(lock, ["x"], owner="wf:a:")
    assert str(refused.value) == message.replace("'wf:a'", "'wf:a:'")


def test_check_needs_its_lock(lock: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check", "a"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert Run(done.returncode, done.stdout, done.stderr).error == (
        "usage error: check needs --lock"
    )


def test_get_prints_checks_keys_alone(skf: ModuleType, lock: Path) -> None:
    whole = skf.acquire(lock, "wf:whole:1", 3600.0)
    run = checking(lock, "a", "--get", "free", "--get", "reserved")
    assert (run.code, run.err) == (3, "")
    free, reserved = run.out.splitlines()
    assert free == "false"
    assert json.loads(reserved) == [entry("a", whole, None, "exclusive")]
    said = checking(lock, "--owner", whole["owner"], "a", "--get", "message")
    assert (said.code, said.out) == (
        0,
        f"the path a lies in no part of {lock} held by a run other than wf:whole:1\n",
    )
    unknown = checking(lock, "a", "--get", "held_by")
    assert unknown.code == 1 and unknown.error == (
        "usage error: check prints no key 'held_by'; its keys are free, reserved, message"
    )


def test_a_lock_that_cannot_be_read_is_exit_2() -> None:
    where = f"127.0.0.1:{free_port()}"
    run = checking(f"redis://{where}/k", "a")
    assert run.code == 2
    assert run.error.startswith(f"the lock could not be read or written: Redis at {where}")


def test_another_programs_file_is_exit_1_as_status_says(tmp_path: Path) -> None:
    lockfile = tmp_path / "uv.lock"
    lockfile.write_text('version = 1\n[[package]]\nname = "x"\n')
    run = checking(lockfile, "a")
    status = subprocess.run(
        [sys.executable, str(SCRIPT), "status", "--lock", str(lockfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.code == 1 and run.error == Run(status.returncode, "", status.stderr).error
    assert "names another program's file" in run.error
    assert lockfile.read_text() == 'version = 1\n[[package]]\nname = "x"\n'


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ("src/a.py", "paths must be a list of strings, not a string: put one path in a list"),
        ({"a"}, "paths must be a list of strings, not set"),
        (["a", 3], "a path must be a string, not int"),
        (None, "paths must be a list of strings, not NoneType"),
    ],
)
def test_the_library_takes_a_list_of_paths(
    skf: ModuleType, lock: Path, paths: object, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        skf.check(lock, paths)
    assert str(refused.value) == message
    assert skf.check(lock, ("a", "b"))["free"] is True
    assert not lock.parent.exists()


# --- The index: many paths against many parts ------------------------------------------------

SEGMENTS = st.sampled_from(["src", "Src", "a", "b.md", "x.py", "tests", "é"])
GLOBS = st.sampled_from(["*", "**", "*.md", "?", "s*", "*s", "a?", "***", "*.PY", "t*s"])


@st.composite
def a_part(draw: st.DrawFn) -> str:
    """A part: literal or glob segments, a glob first half the time."""
    segments = draw(st.lists(st.one_of(SEGMENTS, GLOBS), min_size=1, max_size=4))
    return "/".join(segments)


@st.composite
def a_path(draw: st.DrawFn) -> str:
    return "/".join(draw(st.lists(SEGMENTS, min_size=1, max_size=5)))


@MANY_EXAMPLES
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(a_part(), min_size=1, max_size=12), paths=st.lists(a_path(), max_size=12))
def test_the_index_finds_exactly_the_parts_each_path_lies_in(
    skf: ModuleType, parts: list[str], paths: list[str]
) -> None:
    """Parts of every kind (a literal first segment, a glob first with a literal later,
    globs alone), one part given twice in two spellings: for each path, the places of
    the parts it lies in, in order, as _covers finds them one by one."""
    parts = [skf._checked_part(part) for part in parts]
    parts.append(parts[0].upper())  # the same part, another spelling: asked once
    index = skf._PartIndex(parts)
    for path in paths:
        expected = [at for at, part in enumerate(parts) if skf._covers(part, path)]
        assert index.covering(path) == expected, (parts, path)


# Folders shared deep, as a tree's runs share them: parts filed by their literal leading
# segments, a glob at any depth under them, and paths down the same folders (and beside).
DEEP_FOLDERS = st.sampled_from(["src", "Src/api", "src/api/v1", "src/API/v1/x.py", "src/cli", ""])


@st.composite
def a_part_under_shared_folders(draw: st.DrawFn) -> str:
    tail = draw(st.lists(st.one_of(SEGMENTS, GLOBS, st.just("api")), max_size=3))
    return "/".join(s for s in [draw(DEEP_FOLDERS), *tail] if s) or "src"


@st.composite
def a_path_under_shared_folders(draw: st.DrawFn) -> str:
    tail = draw(st.lists(st.one_of(SEGMENTS, st.just("api"), st.just("v1")), max_size=3))
    return "/".join(s for s in [draw(DEEP_FOLDERS), *tail] if s) or "src"


@MANY_EXAMPLES
@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(a_part_under_shared_folders(), min_size=1, max_size=16),
    paths=st.lists(a_path_under_shared_folders(), max_size=12),
)
def test_the_index_finds_exactly_the_parts_each_path_lies_in_under_shared_folders(
    skf: ModuleType, parts: list[str], paths: list[str]
) -> None:
    """Parts that share their first folders, several deep (``src/api/v1``), each with a
    literal or glob tail: for each path, the places of the parts it lies in, in order,
    as _covers finds them one by one."""
    parts = [skf._checked_part(part) for part in parts]
    index = skf._PartIndex(parts)
    for path in paths:
        expected = [at for at, part in enumerate(parts) if skf._covers(part, path)]
        assert index.covering(path) == expected, (parts, path)
