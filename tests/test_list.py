"""list: every lock under a place at once, on every store (a Redis Cluster too), each
judged as status judges it; read only; a folder's FIFOs, links and strangers' files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run, posix_only, root_only
from loader import SCRIPT
from servers import Redis
from stores import THREE_PLACES, PlaceUnderTest, left_behind, planted_record, shown_time
from test_status import STATUS_KEYS
from waiters import held_with_a_waiter

LISTED_KEYS = [key for key in STATUS_KEYS if key != "message"]


def listed(cli: Callable[..., Run], under: str | Path, *more: str) -> dict[str, Any]:
    """The JSON answer of ``list --under under``, which must be exit 0."""
    run = cli("list", "--under", under, *more)
    assert run.code == 0, run.err
    answer = run.json
    assert list(answer) == ["under", "locks", "message"]
    return answer


# --- What a listing shows, on every store ---------------------------------------------


def test_held_stale_waited_for_and_free_locks_are_listed_as_status_judges_them(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    place.store("held").plant(planted_record("wf:sk:held", shown_time(30), stale_after_seconds=600))
    place.store("stale").plant(planted_record("wf:sk:old", shown_time(7200)))
    place.store("not-a-lock").plant(b"written by some other tool")
    waiter = held_with_a_waiter(main, place.lock("busy"))
    try:
        # A planted place lapses 3 s after it was planted (nobody beats for it): it is
        # planted last, and its lock's status asked first, so that the listing and the
        # status both see it even on a slow machine.
        place.store("waited/for").plant_waiter("wf:sk:waiting")
        answer = listed(main, place.under)
        statuses = {
            name: main("status", "--lock", place.lock(name)).out
            for name in ("waited/for", "busy", "held", "stale")
        }
        statuses = {place.lock(name): out for name, out in statuses.items()}
    finally:
        waiter.kill()
        waiter.communicate()
    locks = answer["locks"]
    assert isinstance(locks, list)
    names = [place.lock(name) for name in ("busy", "held", "stale", "waited/for")]
    assert [entry["lock"] for entry in locks] == sorted(names)
    for entry in locks:
        assert list(entry) == LISTED_KEYS
        status = json.loads(statuses[entry["lock"]])
        status.pop("message")
        # The same judgement as status, a moment apart (the age may have ticked).
        assert entry | {"age_seconds": None} == status | {"age_seconds": None}
    by_name = {entry["lock"]: entry for entry in locks}
    assert by_name[place.lock("held")]["state"] == "held"
    assert by_name[place.lock("held")]["held_by"] == "wf:sk:held"
    assert by_name[place.lock("stale")]["state"] == "stale"
    assert by_name[place.lock("stale")]["stale_after_minutes"] == 60
    waited_for = by_name[place.lock("waited/for")]
    assert (waited_for["state"], waited_for["held_by"]) == ("free", None)
    assert [w["owner"] for w in waited_for["waiting"]] == ["wf:sk:waiting"]
    assert [w["owner"] for w in by_name[place.lock("busy")]["waiting"]] == ["wf:waiter:1"]
    assert answer["under"] == (
        os.path.abspath(place.under) if place.kind == "file" else place.under
    )
    assert answer["message"].startswith(f"4 locks under {answer['under']}: 2 held, 1 stale,")


def test_an_empty_place_is_an_empty_list_and_exit_0(
    cli: Callable[..., Run], place: PlaceUnderTest
) -> None:
    if place.kind == "file":
        os.makedirs(place.under)  # a folder that exists, with nothing in it
    answer = listed(cli, place.under)
    assert answer["locks"] == []
    assert answer["message"] == f"no locks under {answer['under']}"


def test_a_released_lock_is_no_longer_listed(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    lock = place.lock("done")
    assert main("acquire", "--lock", lock, "--owner", "wf:sk:r1").code == 0
    assert [e["lock"] for e in listed(main, place.under)["locks"]] == [lock]
    assert main("release", "--lock", lock, "--owner", "wf:sk:r1").json["released"]
    assert listed(main, place.under)["locks"] == []


def test_listing_changes_nothing_on_the_store(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    lock = place.lock("kept")
    assert main("acquire", "--lock", lock, "--owner", "wf:sk:r1").code == 0
    place.store("waited").plant_waiter("wf:sk:w")
    before = {name: left_behind(place.lock(name)) for name in ("kept", "waited")}
    value = place.store("kept").value()
    listed(main, place.under)
    assert main("list", "--under", place.under, "--table").code == 0
    assert {name: left_behind(place.lock(name)) for name in ("kept", "waited")} == before
    assert place.store("kept").value() == value


def test_the_caller_timeout_judges_records_without_one_of_their_own(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    place.store("old").plant(planted_record("wf:sk:old", shown_time(600)))
    assert listed(main, place.under)["locks"][0]["state"] == "held"  # 60 minutes
    (entry,) = listed(main, place.under, "--stale-after", "5")["locks"]
    assert (entry["state"], entry["stale_after_minutes"]) == ("stale", 5)


def test_the_table_is_aligned_for_a_person(cli: Callable[..., Run], place: PlaceUnderTest) -> None:
    place.store("a").plant(planted_record("wf:sk:first", shown_time(90), stale_after_seconds=600))
    place.store("bb/long-name").plant(planted_record("wf:sk:old", shown_time(7200)))
    place.store("c").plant_waiter("wf:sk:w")
    run = cli("list", "--under", place.under, "--table")
    assert run.code == 0 and run.err == ""
    header, *rows, message = run.out.splitlines()
    assert header.split() == ["LOCK", "STATE", "MODE", "HOLDER", "AGE", "STALE", "IN", "WAITING"]
    assert len(rows) == 3
    for title in ("STATE", "MODE", "HOLDER", "AGE", "STALE IN", "WAITING"):
        column = header.index(title)
        assert all(row[column - 2 : column] == "  " and row[column] != " " for row in rows)
    first, second, third = rows
    assert first.startswith(place.lock("a") + " ") and first.split()[1:3] == ["held", "exclusive"]
    assert "wf:sk:first" in first and "1 min 3" in first and " 8 min " in first
    assert second.startswith(place.lock("bb/long-name")) and " stale " in second
    assert third.split()[1:] == ["free", "-", "-", "-", "-", "1"]
    assert message.startswith("3 locks under ")


def test_the_library_gives_what_the_cli_prints(
    skf: ModuleType, cli: Callable[..., Run], place: PlaceUnderTest
) -> None:
    place.store("x").plant(planted_record("wf:sk:x", shown_time(5), stale_after_seconds=600))
    result = skf.list_locks(place.under, stale_after=600.0)
    printed = listed(cli, place.under, "--stale-after", "10")
    assert result | {"locks": None} == printed | {"locks": None}
    assert [e["lock"] for e in result["locks"]] == [e["lock"] for e in printed["locks"]]
    assert "list_locks" in skf.__all__


def test_every_lock_listed_works_as_lock_as_printed(
    cli: Callable[..., Run], place: PlaceUnderTest
) -> None:
    """What a listing prints is what status takes: each lock, fed back as printed."""
    place.store("held").plant(planted_record("wf:sk:held", shown_time(30), stale_after_seconds=600))
    place.store("deep/er").plant(planted_record("wf:sk:old", shown_time(7200)))
    locks = [entry["lock"] for entry in listed(cli, place.under)["locks"]]
    assert len(locks) == 2
    for lock in locks:
        status = cli("status", "--lock", lock)
        assert status.code in (0, 3), status
        assert status.json["lock"] == lock


# --- Bad places and unreachable ones --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "list needs --under"),
        (("--under", "ftp://host/locks/"), "scheme this version does not know"),
        (("--under", "x", "--stale-after", "0"), "--stale-after must be"),
        (("--under", "x", "--table=yes"), "--table takes no value"),
        (("--under", "x", "--lock", "y"), "list does not take"),
        (("--under", "etcd://127.0.0.1/locks/"), "must be etcd://HOST:PORT"),
        (("--under", "redis:/127.0.0.1/locks/"), "starts with redis: but not redis://"),
        (("--under", "redis://127.0.0.1/a?db=1"), "must not contain ? or #"),
    ],
)
def test_a_bad_argument_is_exit_1_with_one_json_line(
    main: Callable[..., Run], args: tuple[str, ...], says: str
) -> None:
    run = main("list", *args)
    assert run.code == 1
    assert says in run.error


def test_a_place_that_is_a_file_is_exit_1(cli: Callable[..., Run], tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    run = cli("list", "--under", tmp_path / "a-file")
    assert run.code == 1
    assert "is not a folder" in run.error


def test_a_server_out_of_reach_is_exit_2(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    for under in ("etcd://127.0.0.1:9/locks/", "redis://127.0.0.1:9/locks/"):
        run = subprocess.run(
            [sys.executable, str(SCRIPT), "list", "--under", under],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "ETCDCTL_COMMAND_TIMEOUT": "1s", "SKF_REDIS_TIMEOUT": "1"},
        )
        assert run.returncode == 2
        assert "could not be reached" in Run(run.returncode, run.stdout, run.stderr).error


# --- A folder: what counts as a lock, and what must not hang or be followed -------------


def test_only_records_lines_and_lock_files_count_as_locks_in_a_folder(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    folder = tmp_path / "locks"
    assert cli("acquire", "--lock", folder / "real.lock", "--owner", "wf:sk:r1").code == 0
    (folder / "notes.txt").write_text("hello\n")
    (folder / "data.json").write_text('{"name": "not a lock"}\n')
    (folder / "empty").write_bytes(b"")
    (folder / "old-helper").write_text("12345\n2026-01-01T00:00:00Z\n")
    (folder / "x.lock.skf-guard").write_bytes(b"")
    (folder / "x.lock.skf-0123abcd-tmp").write_text(json.dumps({"owner": "wf:sk:tmp"}))
    (folder / "deep" / "er").mkdir(parents=True)
    nested = folder / "deep" / "er" / "nested.lock"
    assert cli("acquire", "--lock", nested, "--owner", "wf:sk:r2").code == 0
    locks = listed(cli, folder)["locks"]
    assert [e["lock"] for e in locks] == [str(nested), str(folder / "real.lock")]


@posix_only("FIFOs, devices and symbolic links")
def test_fifos_devices_and_links_are_neither_read_nor_followed(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    folder = tmp_path / "locks"
    assert cli("acquire", "--lock", folder / "mine.lock", "--owner", "wf:sk:r1").code == 0
    os.mkfifo(folder / "a-fifo")  # opened for reading, it would block forever
    elsewhere = tmp_path / "elsewhere"
    assert cli("acquire", "--lock", elsewhere / "theirs.lock", "--owner", "wf:sk:r2").code == 0
    (folder / "to-a-folder").symlink_to(elsewhere, target_is_directory=True)
    (folder / "to-a-lock").symlink_to(elsewhere / "theirs.lock")
    if os.geteuid() == 0:
        os.mknod(folder / "a-device", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null
    run = cli("list", "--under", folder, timeout=30)
    assert run.code == 0
    assert [e["lock"] for e in run.json["locks"]] == [str(folder / "mine.lock")]


@root_only("file modes and another user")
def test_another_users_unreadable_files_and_folders_are_passed_over(tmp_path: Path) -> None:
    """Run as `nobody`: root's lock files it cannot read, and a folder it cannot open,
    are left out; the rest is listed, exit 0."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="skf-list-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        script = shared / "skf-run-lock.py"
        shutil.copy(SCRIPT, script)
        script.chmod(0o644)
        folder = shared / "locks"
        for name, mode in (("readable.lock", 0o644), ("secret.lock", 0o600)):
            (folder / "inner").mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(planted_record("wf:sk:" + name, shown_time(5)))
            (folder / name).chmod(mode)
        (folder / "inner" / "hidden.lock").write_bytes(planted_record("wf:sk:h", shown_time(5)))
        (folder / "inner").chmod(0o700)
        folder.chmod(0o755)
        python = shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable
        run = subprocess.run(
            [python, str(script), "list", "--under", str(folder)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            user=65534,
            group=65534,
            extra_groups=[],
            cwd="/",
        )
        outcome = Run(run.returncode, run.stdout, run.stderr)
        assert outcome.code == 0, outcome.err
        assert [e["lock"] for e in outcome.json["locks"]] == [str(folder / "readable.lock")]
    finally:
        for path in shared.rglob("*"):
            path.chmod(0o755) if path.is_dir() else None
        shutil.rmtree(shared)


def test_a_folder_that_does_not_exist_holds_no_locks_and_says_so(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    answer = listed(cli, tmp_path / "not" / "yet")
    assert answer["locks"] == []
    assert (
        answer["message"] == f"no locks under {tmp_path / 'not' / 'yet'}: there is no such folder"
    )
    assert listed(cli, tmp_path)["message"] == f"no locks under {tmp_path}"
    assert not (tmp_path / "not").exists()


@pytest.mark.parametrize(
    "content",
    [b"", bytes(range(256)), b"12345\n2026-01-01T00:00:00Z\n", b"locked\n", b'"json"'],
    ids=["empty", "foreign bytes", "an older version's PID and time", "a word", "JSON text"],
)
def test_a_lock_file_acquire_would_refuse_or_replace_is_listed_as_status_sees_it(
    main: Callable[..., Run], tmp_path: Path, content: bytes
) -> None:
    """Named *.lock and blocking acquire, it is listed with no holder's name: the entry
    is status's output but its message."""
    lock = tmp_path / "locks" / "x.lock"
    lock.parent.mkdir()
    lock.write_bytes(content)
    status = main("status", "--lock", lock)
    (entry,) = listed(main, lock.parent)["locks"]
    assert entry["held_by"] is None and entry["state"] in ("held", "stale")
    assert {k: v for k, v in status.json.items() if k not in ("message", "age_seconds")} == {
        k: v for k, v in entry.items() if k != "age_seconds"
    }
    refused = main("acquire", "--lock", lock, "--owner", "wf:sk")
    assert refused.code == (3 if entry["state"] == "held" else 0)
    assert lock.read_bytes() == content or refused.code == 0


def test_the_table_shows_how_many_slots_are_held_and_by_whom(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    """2 of 3 slots held: never "free -"; the longest holder and a count of the rest."""
    lock = place.lock("slots")
    for owner in ("wf:sk:first", "wf:sk:second"):
        assert main("acquire", "--lock", lock, "--owner", owner, "--slots", "3").code == 0
        time.sleep(1.1)  # the first holds longest, by a whole second
    one = place.lock("one")
    assert main("acquire", "--lock", one, "--owner", "wf:sk:only", "--slots", "3").code == 0
    run = main("list", "--under", place.under, "--table")
    _, *rows, _ = run.out.splitlines()
    by_lock = {row.split()[0]: row.split("  ") for row in rows}
    cells = [c.strip() for c in by_lock[one][1:] if c.strip()]
    assert cells[:3] == ["1/3 held", "exclusive", "wf:sk:only"], rows
    cells = [c.strip() for c in by_lock[lock][1:] if c.strip()]
    assert cells[:3] == ["2/3 held", "exclusive", "wf:sk:first and 1 more"], rows
    assert cells[3] != "-" and cells[4] != "-" and cells[5] == "0"


def test_the_table_shows_a_holders_parts_or_how_many(
    main: Callable[..., Run], place: PlaceUnderTest
) -> None:
    """Held in parts: the longest holder with its parts while they are short (else how
    many), and a count of the rest; a hold of the whole lock shows no parts. The JSON
    lists every holder's parts."""
    held = place.lock("held")
    for owner, parts in [("wf:sk:first", ["src/**", "docs"]), ("wf:sk:second", ["tests"])]:
        more = [arg for part in parts for arg in ("--part", part)]
        assert main("acquire", "--lock", held, "--owner", owner, *more).code == 0
    many, long = place.lock("many"), place.lock("long")
    five = [arg for n in range(5) for arg in ("--part", f"pkg{n}/sub")]
    assert main("acquire", "--lock", many, "--owner", "wf:sk:many", *five).code == 0
    far = "a-long-folder-name/that-goes-on/and-on/**"
    assert main("acquire", "--lock", long, "--owner", "wf:sk:long", "--part", far).code == 0
    whole = place.lock("whole")
    assert main("acquire", "--lock", whole, "--owner", "wf:sk:whole").code == 0
    run = main("list", "--under", place.under, "--table")
    assert run.code == 0 and run.err == "", run
    _, *rows, _ = run.out.splitlines()
    by_lock = {
        row.split()[0]: [c.strip() for c in row.split("  ")[1:] if c.strip()] for row in rows
    }
    assert by_lock[held][:3] == ["held", "exclusive", "wf:sk:first (docs, src/**) and 1 more"]
    assert by_lock[many][:3] == ["held", "exclusive", "wf:sk:many (5 parts)"]
    assert by_lock[long][:3] == ["held", "exclusive", "wf:sk:long (1 part)"]
    assert by_lock[whole][:3] == ["held", "exclusive", "wf:sk:whole"]
    holders = {e["lock"]: e["holders"] for e in listed(main, place.under)["locks"]}
    assert [(h["owner"], h["parts"]) for h in holders[held]] == [
        ("wf:sk:first", ["docs", "src/**"]),
        ("wf:sk:second", ["tests"]),
    ]
    assert [h["parts"] for h in holders[whole]] == [None]


@posix_only("a newline and an escape byte in a name, which Windows refuses")
def test_names_that_need_escaping_are_listed_exactly_and_shown_quoted(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    folder = tmp_path / "locks"
    odd = folder / "two\nlines \x1b[31m.lock"
    assert cli("acquire", "--lock", odd, "--owner", "wf:sk:r1").code == 0
    assert [e["lock"] for e in listed(cli, folder)["locks"]] == [str(odd)]
    table = cli("list", "--under", folder, "--table").out
    assert "\x1b" not in table and len(table.splitlines()) == 3
    assert json.dumps(str(odd)) in table


# --- Prefixes on a server -------------------------------------------------------------


@pytest.mark.parametrize("server", ["etcd", "redis", "redis_cluster"])
def test_a_prefix_is_taken_literally(
    main: Callable[..., Run], request: pytest.FixtureRequest, server: str
) -> None:
    """Glob characters in a Redis prefix match only themselves, and no key outside the
    prefix is listed (a sibling that shares its first characters)."""
    store = request.getfixturevalue(server)
    root = f"skf-list/{os.urandom(4).hex()}/"
    for key in ("a*b/one", "axb/two", "a*b-sibling/three", "[ab]/four"):
        assert main("acquire", "--lock", store.url(root + key), "--owner", "wf:sk:r").code == 0
    for prefix, keys in (("a*b/", ["a*b/one"]), ("[ab]/", ["[ab]/four"])):
        answer = listed(main, store.url(root + prefix))
        assert [e["lock"] for e in answer["locks"]] == [store.url(root + k) for k in keys]


@pytest.mark.parametrize("server", ["etcd", "redis", "redis_cluster"])
def test_a_server_named_without_the_slash_before_its_prefix_is_exit_1_saying_how(
    main: Callable[..., Run], request: pytest.FixtureRequest, server: str
) -> None:
    """``--under redis://HOST:PORT`` names no place a lock's address can: the advice,
    the same address with its slash, lists every lock there, each as printed."""
    store = request.getfixturevalue(server)
    whole_server = store.url("")
    run = main("list", "--under", whole_server[:-1])
    assert run.code == 1, run
    assert f"give {whole_server} for every lock there" in run.error
    assert run.out == ""
    lock = store.url(f"skf-list/{os.urandom(4).hex()}/whole")
    assert main("acquire", "--lock", lock, "--owner", "wf:sk:r").code == 0
    assert lock in [e["lock"] for e in listed(main, whole_server)["locks"]]
    assert main("release", "--lock", lock, "--owner", "wf:sk:r").json["released"] is True


def test_a_redis_key_of_another_type_under_the_prefix_is_no_lock(
    cli: Callable[..., Run], redis: Redis
) -> None:
    root = f"skf-list/{os.urandom(4).hex()}/"
    redis.client().hset(root + "a-hash", "field", "value")
    redis.client().rpush(root + "a-list", "item")
    assert cli("acquire", "--lock", redis.url(root + "lock"), "--owner", "wf:sk:r").code == 0
    assert [e["lock"] for e in listed(cli, redis.url(root))["locks"]] == [redis.url(root + "lock")]


def test_pages_and_batches_never_split_or_repeat_a_lock(
    skf: ModuleType, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny pages on etcd and tiny batches and scans on Redis: a lock's keys may fall in
    two pages, and still every lock is listed once, with its line."""
    monkeypatch.setattr(skf._SEAMS, "survey_page", 3)
    monkeypatch.setattr(skf._SEAMS, "survey_batch", 2)
    monkeypatch.setattr(skf._SEAMS, "scan_count", 2)
    for server in ("etcd", "redis", "redis_cluster"):
        store = request.getfixturevalue(server)
        root = store.url(f"skf-list/{os.urandom(4).hex()}/")
        names = [f"lock-{i}" for i in range(7)]
        for name in names:
            assert skf.acquire(root + name, "wf:sk:r", 600.0)["acquired"]
        kind = "cluster" if server == "redis_cluster" else server
        PlaceUnderTest(kind, root).store("lock-3").plant_waiter("wf:sk:w")
        result = skf.list_locks(root)
        assert [e["lock"] for e in result["locks"]] == [root + n for n in names], server
        assert [len(e["waiting"]) for e in result["locks"]] == [0, 0, 0, 1, 0, 0, 0], server


# --- Under churn ---------------------------------------------------------------------


@THREE_PLACES
def test_listing_during_heavy_churn_never_fails_or_repeats_a_lock(
    cli: Callable[..., Run], place: PlaceUnderTest
) -> None:
    """Four processes take and release twelve locks as fast as they can while the
    place is listed again and again: every listing is exit 0, names each lock once,
    and lists nothing but those locks; once they stop, nothing is left."""
    names = [f"churn-{i}" for i in range(12)]
    churner = (
        "import importlib.util, random, sys\n"
        "spec = importlib.util.spec_from_file_location('skf', sys.argv[1])\n"
        "skf = importlib.util.module_from_spec(spec); spec.loader.exec_module(skf)\n"
        "locks = sys.argv[3:]\n"
        "for i in range(int(sys.argv[2])):\n"
        "    lock = random.choice(locks)\n"
        "    owner = f'wf:churn:{random.getrandbits(32):08x}'\n"
        "    if skf.acquire(lock, owner, 600.0)['acquired']:\n"
        "        skf.release(lock, owner)\n"
    )
    locks = [place.lock(name) for name in names]
    procs = [
        subprocess.Popen([sys.executable, "-c", churner, str(SCRIPT), "150", *locks])
        for _ in range(4)
    ]
    listings: list[Run] = []
    stop = threading.Event()

    def keep_listing() -> None:
        while not stop.is_set():
            listings.append(cli("list", "--under", place.under))

    lister = threading.Thread(target=keep_listing)
    lister.start()
    try:
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    finally:
        stop.set()
        lister.join(timeout=60)
        for proc in procs:
            proc.kill()
    assert len(listings) >= 2
    for run in listings:
        assert run.code == 0 and run.err == "", run.err
        shown = [entry["lock"] for entry in run.json["locks"]]
        assert len(shown) == len(set(shown)) and set(shown) <= set(locks)
    assert listed(cli, place.under)["locks"] == []
    assert all(left_behind(lock) == [] for lock in locks if place.kind != "file")
    if place.kind == "file":
        assert not Path(place.under).exists() or os.listdir(place.under) == []


def test_a_name_in_any_script_is_shown_in_the_table_as_it_is(tmp_path: Path) -> None:
    """Not as JSON escapes: a person reads the table (a control character stays escaped,
    above; so does a name the terminal's encoding cannot show)."""
    folder = tmp_path / "locks"
    lock = folder / "café-日本.lock"
    command = [sys.executable, str(SCRIPT)]
    utf8 = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    taken = subprocess.run(
        [*command, "acquire", "--lock", str(lock), "--owner", "wf:sk"], env=utf8, check=False
    )
    assert taken.returncode == 0
    table = subprocess.run(
        [*command, "list", "--under", str(folder), "--table"],
        env=utf8,
        capture_output=True,
        check=False,
    )
    assert table.returncode == 0
    assert str(lock).encode() in table.stdout.splitlines()[1]
    ascii_only = {**os.environ, "PYTHONIOENCODING": "ascii"}
    narrow = subprocess.run(
        [*command, "list", "--under", str(folder), "--table"],
        env=ascii_only,
        capture_output=True,
        check=False,
    )
    assert narrow.returncode == 0 and json.dumps(str(lock)).encode() in narrow.stdout
