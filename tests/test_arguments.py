"""Arguments: lock paths that cannot be locks, and a command line parsed strictly."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, posix_only
from lockfiles import NOW, ago, beside, write_record

COMMANDS = {
    "acquire": ["--owner", "wf:sk:r"],
    "release": ["--owner", "wf:sk:r"],
    "status": [],
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "name",
    [
        "run.lock.skf-guard",
        "run.lock.skf-line",
        "run.lock.skf-0123abcd-tmp",
        "x.skf-ffffffff-tmp",
        ".skf-guard",
    ],
)
def test_a_reserved_lock_name_is_a_bad_argument(
    main: Callable[..., Run], tmp_path: Path, command: str, name: str
) -> None:
    """Such a lock would share its files with another lock's guard or temp file."""
    folder = tmp_path / "locks"
    folder.mkdir()
    run = main(command, "--lock", folder / name, *COMMANDS[command])
    assert run.code == 1 and "reserved" in run.error and name in run.error
    assert os.listdir(folder) == []


@pytest.mark.parametrize(
    "name",
    ["run.lock.skf-0123ABCD-tmp", "run.lock.skf-guard.x", "a.skf-1-tmp", "run.lock.skf-line.x"],
)
def test_names_that_only_look_reserved_are_fine(skf: ModuleType, tmp_path: Path, name: str) -> None:
    assert skf.acquire(tmp_path / name, "wf:sk:r", 60.0)["acquired"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_lock_path_ending_with_a_separator_is_a_bad_argument(
    main: Callable[..., Run], tmp_path: Path, command: str
) -> None:
    run = main(command, "--lock", f"{tmp_path}/newdir/", *COMMANDS[command])
    assert run.code == 1 and "separator" in run.error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_lock_path_is_a_bad_argument(
    main: Callable[..., Run], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    run = main(command, "--lock", "", *COMMANDS[command])
    assert run.code == 1 and run.error.startswith("usage error: ") and "--lock" in run.error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda skf, path: skf.acquire(path, "wf:sk:r", 60.0), "empty"),
        (lambda skf, path: skf.release(path, "wf:sk:r"), "empty"),
        (lambda skf, path: skf.status(path, 60.0), "empty"),
    ],
)
def test_an_empty_lock_path_is_a_value_error_in_the_library(
    skf: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    call: Callable[..., object],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=message):
        call(skf, "")
    assert os.listdir(tmp_path) == []


def test_a_parent_that_is_a_file_says_so(main: Callable[..., Run], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = main("acquire", "--lock", blocker / "sub" / "x.lock", "--owner", "wf:sk:r")
    assert run.code == 2 and f"{blocker} is a file" in run.error
    assert "File exists" not in run.error and blocker.read_text() == "x"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("lock", "scheme"),
    [
        ("redis:/127.0.0.1:16399/demo", "redis:"),
        ("REDIS:demo.lock", "REDIS:"),
        ("rediss:x", "rediss:"),
        ("etcd:/127.0.0.1:2379/k", "etcd:"),
        ("Etcd+Https:k", "Etcd+Https:"),
        ("redis:/user:secret@127.0.0.1/k", "redis:"),
    ],
)
def test_a_scheme_without_its_slashes_is_exit_1_naming_the_address_form(  # noqa: PLR0917
    main: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    lock: str,
    scheme: str,
) -> None:
    """A typo of an address is never taken for a folder named after the scheme."""
    monkeypatch.chdir(tmp_path)
    run = main(command, "--lock", lock, *COMMANDS[command])
    assert run.code == 1, run
    assert f"starts with {scheme} but not {scheme}//" in run.error
    assert "an address of " in run.error and "/KEY" in run.error, run
    assert "secret" not in run.error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("lock", "start"),
    [
        ("redis//127.0.0.1:16399/k", "redis"),
        ("ETCD//127.0.0.1:2379/k", "ETCD"),
        ("Rediss//user:secret@127.0.0.1/k", "Rediss"),
    ],
)
def test_a_scheme_without_its_colon_is_exit_1_naming_the_address_form(  # noqa: PLR0917
    main: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    lock: str,
    start: str,
) -> None:
    """redis//host/key (a colon dropped) is never taken for a folder named redis."""
    monkeypatch.chdir(tmp_path)
    run = main(command, "--lock", lock, *COMMANDS[command])
    assert run.code == 1, run
    assert f"starts with {start}// but not {start}://" in run.error
    assert "an address of " in run.error and "/KEY" in run.error, run
    assert "secret" not in run.error
    assert os.listdir(tmp_path) == []


def test_a_file_whose_path_starts_like_an_address_is_given_as_the_message_says(
    cli: Callable[..., Run], tmp_path: Path
) -> None:
    """POSIX: as ./redis:x.lock. Windows names no file with a colon, so the message
    offers no such path there (and that path is refused as a stream's name)."""
    refused = cli("acquire", "--lock", "redis:x.lock", "--owner", "wf:sk:r", cwd=tmp_path)
    assert refused.code == 1, refused
    taken = cli("acquire", "--lock", "./redis:x.lock", "--owner", "wf:sk:r", cwd=tmp_path)
    if sys.platform == "win32":
        assert "./redis:" not in refused.error
        assert taken.code == 1 and "cannot be a lock file" in taken.error, taken
        assert os.listdir(tmp_path) == []
    else:
        assert "is given as ./redis:..." in refused.error
        assert taken.code == 0, taken
        assert os.listdir(tmp_path) == ["redis:x.lock"]


@pytest.mark.parametrize("server", ["etcd", "redis"])
@pytest.mark.parametrize("key", ["demo?db=1", "demo#top"])
def test_a_query_or_fragment_in_a_servers_key_is_exit_1_saying_the_path_is_the_key(
    skf: ModuleType, cli: Callable[..., Run], request: pytest.FixtureRequest, server: str, key: str
) -> None:
    store = request.getfixturevalue(server)
    root = f"skf-args/{os.urandom(4).hex()}/"
    run = cli("acquire", "--lock", store.url(root + key), "--owner", "wf:sk:r")
    assert run.code == 1, run
    assert "must not contain ? or #" in run.error and "the key itself" in run.error
    assert skf.list_locks(store.url(root))["locks"] == []


# --- The command line ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["acquire", "--lock", "A", "--lock", "B", "--owner", "wf:sk"], "--lock is given more"),
        (["acquire", "--lock=A", "--owner", "wf:sk", "--owner=wf:sk:2"], "--owner is given more"),
        (["status", "--lock", "A", "--empty-is-stale", "--empty-is-stale"], "given more"),
        (["--lock", "A", "acquire", "--owner", "wf:sk"], "put the command first"),
        (["--stale-after", "5", "status", "--lock", "A"], "put the command first"),
        (["acquire", "--lock", "--owner", "wf:sk"], "--lock needs a value"),
        (["acquire", "--owner", "--lock", "A"], "--owner needs a value"),
        (["acquire", "--lock=--x", "--owner", "wf:sk"], "--lock needs a value"),
        (["acquire", "--lock", "A", "--owner", "wf:sk", "--empty-is-stale=yes"], "takes no value"),
        (["release", "--lock", "A", "--owner", "wf:sk:r", "--empty-is-stale"], "does not take"),
    ],
)
def test_command_line_mistakes_are_usage_errors(
    main: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    words: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    run = main(*argv)
    assert run.code == 1 and run.error.startswith("usage error: ") and words in run.error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["acquire", "--lock", "L", "--onwer", "wf:sk"],
            "acquire does not take '--onwer' (did you mean --owner?);"
            " acquire --help shows its options",
        ),
        (
            ["acquire", "--lock", "L", "--owner", "wf:sk", "--stale=5"],
            "acquire does not take '--stale=5' (did you mean --stale-after?);",
        ),
        (
            ["status", "L"],
            "status does not take {r} on its own: options come as --name value; give it as"
            " --lock {q}; status --help shows its options",
        ),
        (
            ["list", "L"],
            "list does not take {r} on its own: options come as --name value; give it as"
            " --under {q}; list --help shows its options",
        ),
        (["run-id", "L"], "run-id takes no value such as {r}; run-id --help shows its options"),
        (["-v"], "unknown option '-v' (did you mean --version?); --help shows how to use each"),
        (["-x"], "unknown option '-x'; --help shows how to use each"),
        (
            ["aquire", "--lock", "L"],
            "unknown command 'aquire' (did you mean acquire?); use acquire, release, status,"
            " check, run, list, serve or run-id; --help shows how to use each",
        ),
    ],
)
def test_a_typo_is_answered_with_the_closest_name_and_where_help_is(
    cli: Callable[..., Run], tmp_path: Path, argv: list[str], says: str
) -> None:
    lock = str(tmp_path / "a lock")
    run = cli(*[lock if arg == "L" else arg for arg in argv])
    assert run.code == 1, run
    assert run.error.startswith("usage error: " + says.format(r=repr(lock), q=shlex.quote(lock)))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "text", ["1_0", " 5", "5 ", "0x10", "1e3", "nan", "inf", "\u0665", "5.0.0", "+"]
)
@pytest.mark.parametrize("option", ["--stale-after", "--wait"])
def test_numbers_are_plain_decimals_only(
    main: Callable[..., Run], lock: Path, option: str, text: str
) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", option, text)
    assert run.code == 1 and run.error.startswith("usage error: ")
    assert f"{option} must be a number of " in run.error
    assert "or a duration such as 90s, 10m, 2h, 1.5h, 1d or 1h30m, not " in run.error
    assert not lock.parent.exists()


@pytest.mark.parametrize("text", ["5", "5.", ".5", "+5", "0.25", "007"])
def test_plain_decimals_are_numbers(main: Callable[..., Run], lock: Path, text: str) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", text)
    assert run.code == 0 and run.json["stale_after_minutes"] == float(text)


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("90s", 1.5),
        ("10m", 10),
        ("2h", 120),
        ("1.5h", 90),
        (".5m", 0.5),
        ("3600s", 60),
        ("10", 10),
        ("1d", 1440),
        ("1h30m", 90),
        ("2m30s", 2.5),
        ("1d12h", 2160),
        ("1d1h1m60s", 1502),
    ],
)
def test_stale_after_takes_a_duration_with_a_unit(
    main: Callable[..., Run], lock: Path, text: str, minutes: float
) -> None:
    """In a fresh process: a unit says what the number counts; a bare number is minutes.
    The record keeps the exact seconds."""
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", text)
    assert run.code == 0 and run.json["stale_after_minutes"] == minutes, run
    assert json.loads(lock.read_text())["stale_after_seconds"] == minutes * 60


@pytest.mark.parametrize(("text", "waited"), [("1.5s", 1.5), ("1", 1.0)])
def test_wait_takes_a_duration_with_a_unit(
    cli: Callable[..., Run], lock: Path, text: str, waited: float
) -> None:
    assert cli("acquire", "--lock", lock, "--owner", "wf:holder:1").code == 0
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--wait", text)
    assert run.code == 3 and f"(of up to {waited:g} s)" in run.json["message"], run


@pytest.mark.parametrize(
    "text",
    [
        "10x",
        "-5m",
        "+5m",
        "5 m",
        "nanm",
        "infh",
        "m",
        "5mm",
        "1e3s",
        "1h1h",
        "30m1h",
        "1h 30m",
        "h30m",
        "1w",
    ],
)
@pytest.mark.parametrize("option", ["--stale-after", "--wait"])
def test_a_duration_that_is_not_one_is_exit_1_and_changes_nothing(
    main: Callable[..., Run], lock: Path, option: str, text: str
) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", option, text)
    assert run.code == 1 and run.error.startswith(f"usage error: {option} must be a number of ")
    assert run.error.endswith(
        f"or a duration such as 90s, 10m, 2h, 1.5h, 1d or 1h30m, not {text!r}"
    )
    assert not lock.parent.exists()


@pytest.mark.parametrize(
    ("option", "text", "words"),
    [
        ("--stale-after", "0s", "seconds > 0 and <= 31536000, not '0s'"),
        ("--stale-after", "8761h", "hours > 0 and <= 8760, not '8761h'"),
        ("--stale-after", "366d", "days > 0 and <= 365, not '366d'"),
        ("--stale-after", "525601", "minutes > 0 and <= 525600, not '525601'"),
        ("--stale-after", "0.001s", "of '0.001s' is too small: at least 0.006 seconds"),
        ("--stale-after", "0.00001", "of '0.00001' is too small: at least 0.0001 minutes"),
        ("--wait", "24.5h", "hours >= 0 and <= 24, not '24.5h'"),
        ("--wait", "1d1s", "seconds >= 0 and <= 86400, not '1d1s'"),
        ("--wait", "86401", "seconds >= 0 and <= 86400, not '86401'"),
    ],
)
def test_a_duration_out_of_bounds_is_exit_1_in_the_unit_it_was_given_in(
    main: Callable[..., Run], lock: Path, option: str, text: str, words: str
) -> None:
    run = main("acquire", "--lock", lock, "--owner", "wf:sk:r", option, text)
    assert run.code == 1 and run.error.endswith(words), run
    assert not lock.parent.exists()


def test_the_smallest_stale_after_in_the_message_is_accepted(
    main: Callable[..., Run], lock: Path
) -> None:
    refused = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", "0.00009")
    assert refused.code == 1 and "minutes" in refused.error
    smallest = refused.error.split("at least ", 1)[1].removesuffix(" minutes")
    assert smallest == "0.0001"
    taken = main("acquire", "--lock", lock, "--owner", "wf:sk:r", "--stale-after", smallest)
    assert taken.code == 0 and taken.json["stale_after_minutes"] == 0.0001


def test_a_library_callers_timeout_is_reported_in_seconds(skf: ModuleType, lock: Path) -> None:
    with pytest.raises(
        ValueError, match=r"stale_after of 0\.001 is too small: at least 0\.006 seconds"
    ):
        skf.acquire(lock, "wf:sk:r", 0.001)
    with pytest.raises(
        ValueError, match=r"stale_after must be a finite number of seconds > 0 and <= 31536000"
    ):
        skf.status(lock, 31_536_001)
    assert skf.acquire(lock, "wf:sk:r", 0.006)["stale_after_minutes"] == 0.0001


def test_a_cli_callers_timeout_is_reported_in_minutes(main: Callable[..., Run], lock: Path) -> None:
    run = main("status", "--lock", lock, "--stale-after", "525601")
    assert run.code == 1
    assert (
        run.error
        == "--stale-after must be a finite number of minutes > 0 and <= 525600, not '525601'"
    )


# --- Empty lock files on the command line -----------------------------------------


def test_acquire_empty_is_stale_takes_an_empty_file_at_once(
    cli: Callable[..., Run], lock: Path
) -> None:
    lock.parent.mkdir()
    lock.touch()
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:r").code == 3
    run = cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--empty-is-stale")
    assert run.code == 0 and run.json["stale_replaced"]["held_by"] is None
    assert beside(lock) == ["run.lock"]


def test_status_empty_is_stale_calls_an_empty_file_stale(
    cli: Callable[..., Run], skf: ModuleType, lock: Path
) -> None:
    lock.parent.mkdir()
    lock.touch()
    held = cli("status", "--lock", lock)
    assert held.code == 3 and held.json["state"] == "held"
    stale = cli("status", "--lock", lock, "--empty-is-stale")
    assert stale.code == 0 and stale.json["state"] == "stale"
    assert skf.status(lock, 60.0, empty_is_stale=True)["state"] == "stale"
    assert skf.status(lock, 60.0)["state"] == "held"
    assert lock.read_bytes() == b""


def test_empty_is_stale_leaves_a_non_empty_record_alone(
    cli: Callable[..., Run], lock: Path
) -> None:
    write_record(lock, "wf:sk:holder", ago(seconds=5))
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:r", "--empty-is-stale").code == 3
    assert cli("status", "--lock", lock, "--empty-is-stale").json["state"] == "held"


# --- Upstream compatibility ---------------------------------------------------------


def test_upstreams_guard_context_manager_holds_the_guard(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream suite holds the guard with _Guard(lock), lock a pathlib.Path."""
    monkeypatch.setattr(skf._SEAMS, "guard_wait_sec", 0.05)
    with skf._Guard(lock):
        assert beside(lock) == ["run.lock.skf-guard"]
        with pytest.raises(TimeoutError, match="guard"):
            skf.acquire(lock, "wf:sk:r", 60.0)
    assert beside(lock) == []
    assert skf.acquire(lock, "wf:sk:r", 60.0, now=NOW)["acquired"]
    assert not skf.acquire(lock, "wf:sk:x", 60.0, now=NOW + timedelta(seconds=1))["acquired"]


@posix_only("the message names a POSIX path")
def test_a_refusal_says_how_old_the_lock_is(skf: ModuleType, lock: Path) -> None:
    write_record(lock, "wf:sk:holder", NOW)
    for later, age in [
        (5, "5 s"),
        (95, "1 min 35 s"),
        (3 * 3600 + 120, "3 h 2 min"),
        (90000, "1 d 1 h"),
    ]:
        message = skf.acquire(lock, "wf:sk:r", 10**6, now=NOW + timedelta(seconds=later))["message"]
        assert f"since 2026-09-30T10:15:00Z ({age} ago)" in message


@pytest.mark.parametrize(
    "holder", ["wf:sk", "wf:sk:", "wf:sk:run id", "w f:sk:r", ":sk:r", "x" * 201]
)
def test_a_holder_that_no_release_can_name_gets_no_clearing_command(
    skf: ModuleType, lock: Path, holder: str
) -> None:
    lock.parent.mkdir()
    lock.write_text(f'{{"owner": "{holder}", "acquired_at": "2026-09-30T10:15:00Z"}}\n')
    result = skf.acquire(lock, "wf:sk:r", 3600.0, now=NOW + timedelta(seconds=5))
    assert result["held_by"] == holder
    message = result["message"]
    assert "clear it with" not in message and "skf-run-lock.py" not in message
    assert (
        "wait until it goes stale" in message
        and f"delete the file {shlex.quote(str(lock))}" in message
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("3600", "; --stale-after 3600 is 3600 minutes: 2 days 12 hours (seconds: 3600s)"),
        ("1441", "; --stale-after 1441 is 1441 minutes: 1 day (seconds: 1441s)"),
        ("1440", ""),
        ("3600m", ""),
        ("3600s", ""),
        ("3d", ""),
    ],
)
def test_a_bare_stale_after_above_a_day_says_how_long_it_took_it_to_be(
    cli: Callable[..., Run], tmp_path: Path, given: str, said: str
) -> None:
    """A user meaning seconds (3600) holds for two and a half days: the take says so in
    its message, and nothing new on stderr."""
    lock = tmp_path / "units.lock"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk", "--stale-after", given)
    assert (taken.code, taken.err) == (0, ""), taken
    message = taken.json["message"]
    assert message.endswith(f"unless renewed{said}"), message
