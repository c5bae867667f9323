"""No input crashes a call: every prefix and single-byte change of every shape the
script reads, and random bytes, fed to real CLI code in a fresh interpreter.

The cases run in tests/fuzz_driver.py, a process that imports nothing the CLI does
not (pytest imports json, and with it the json.decoder that hid a crash on 3.11).
The suite runs a sample CI can afford; ``--fuzz-long`` runs every mutation (with
``--timeout 0``: the etcd cases alone take about half an hour).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run
from loader import SCRIPT
from servers import Redis
from tcp_fakes import serving

DRIVER = Path(__file__).resolve().parent / "fuzz_driver.py"
RECORD = b'{"owner": "wf:sk:20261201T000000Z-0123abcd", "acquired_at": "2026-12-01T00:00:00Z"'
# Every shape a lock file has had: this version's record, 1.0's (no timeout), a
# fractional timeout, the oldest helpers' PID and time lines, an flock's empty file.
FILE_SHAPES = {
    "record": RECORD + b', "stale_after_seconds": 3600, "tool": "skf-run-lock"}\n',
    "record-1.0": RECORD + b', "tool": "skf-run-lock"}\n',
    "record-fraction": RECORD + b', "stale_after_seconds": 0.5, "tool": "skf-run-lock"}\n',
    "pid-and-time": b"4242\n2026-12-01T00:00:00Z\n",
    "empty": b"",
}
# Bytes a single-byte change puts in: ones that end strings, escape, nest, or are not UTF-8.
SWAPS = b'\x00\xff\x80\xc3"\\{}[]9-.:\n x'


def mutations(data: bytes, long: bool) -> Iterator[bytes]:
    """Every prefix of ``data``; each byte deleted and changed (all SWAPS when ``long``,
    else one, in turn); the bytes themselves."""
    yield data
    for end in range(len(data)):
        yield data[:end]
    for at in range(len(data)):
        yield data[:at] + data[at + 1 :]
        swaps = SWAPS if long else SWAPS[at % len(SWAPS) : at % len(SWAPS) + 1]
        for byte in swaps:
            if byte != data[at]:
                yield data[:at] + bytes([byte]) + data[at + 1 :]


def random_bytes(count: int, seed: int) -> Iterator[bytes]:
    rng = random.Random(seed)
    alphabet = b'{}[]":,\\ \n0123456789.-eE' + bytes(range(256))
    for _ in range(count):
        yield bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 160)))


def run_driver(mode: str, cases: Path, timeout: float | None) -> None:
    """Run the driver over ``cases``; ``timeout`` None (the long run) has no limit."""
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(SCRIPT), mode, str(cases)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("ok "), proc.stdout + proc.stderr[-3000:]
    assert int(proc.stdout.split()[1]) == len(list(cases.iterdir()))


@pytest.mark.timeout(600)
def test_no_lock_file_content_crashes_a_call(tmp_path: Path, fuzz_long: bool) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    count = 0
    for shape, data in FILE_SHAPES.items():
        for index, mutant in enumerate(mutations(data, fuzz_long)):
            (cases / f"{shape}-{index:05d}").write_bytes(mutant)
            count += 1
    for index, data in enumerate(random_bytes(3000 if fuzz_long else 200, seed=14)):
        (cases / f"random-{index:05d}").write_bytes(data)
    assert count > 600  # every shape was mutated, not a handful
    run_driver("file", cases, timeout=None if fuzz_long else 580)


# A line of two waiters that stopped long ago (alive ones would hold the lock for them).
LINE = (
    b'{"ticket": "0123abcd", "owner": "wf:sk:r1", "since": "2026-01-01T00:00:00Z",'
    b' "stale_after_seconds": 3600, "beat": 1767225600.5}\n'
    b'{"ticket": "4567cdef", "owner": "wf:sk:r2", "since": "2026-01-01T00:00:01Z",'
    b' "stale_after_seconds": 0.5, "beat": 1767225601}\n'
)


@pytest.mark.timeout(600)
def test_no_line_file_content_crashes_a_call(tmp_path: Path, fuzz_long: bool) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    every = list(mutations(LINE, fuzz_long))
    sample = every if fuzz_long else [every[0], *random.Random(19).sample(every[1:], 150)]
    for index, mutant in enumerate(sample):
        (cases / f"line-{index:05d}").write_bytes(mutant)
    for index, data in enumerate(random_bytes(1000 if fuzz_long else 50, seed=19)):
        (cases / f"random-{index:05d}").write_bytes(data)
    run_driver("line", cases, timeout=None if fuzz_long else 580)


def test_a_record_cut_off_mid_string_is_a_foreign_lock_in_a_fresh_cli(
    cli: Callable[..., Run], lock: Path
) -> None:
    """Python 3.11's C scanner failed with SystemError on this when json.decoder had not
    been imported, which was every CLI call: no in-process test could see it."""
    lock.parent.mkdir()
    lock.write_bytes(b'{"owner": "wf:sk:r", "acqu')
    for argv in (["acquire", "--owner", "wf:sk:me"], ["status"]):
        run = cli(argv[0], "--lock", lock, *argv[1:])
        assert run.code == 3, run.err
        assert run.json["held_by"] is None
    assert cli("release", "--lock", lock, "--owner", "wf:sk:me:r").json["reason"] == "not-owner"
    assert lock.read_bytes() == b'{"owner": "wf:sk:r", "acqu'


# --- etcd's answers ---------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def etcd_answer_bodies() -> dict[str, bytes]:
    """The raw HTTP answer etcd's gateway gives each request a call makes."""
    record = FILE_SHAPES["record-1.0"].replace(b"wf:sk:20261201T000000Z-0123abcd", b"fz:other:r1")
    kv = {"key": _b64(b"fz/lock"), "mod_revision": "4", "value": _b64(record), "lease": "77"}
    place = b'{"owner": "fz:waiter:w1", "since": "2026-12-01T00:00:00Z", "stale_after_seconds": 60}'
    waiter = {
        "key": _b64(b"fz/lock\0wait\09"),
        "create_revision": "5",
        "mod_revision": "5",
        "value": _b64(place),
        "lease": "9",
    }

    def fixed(body: dict[str, object]) -> bytes:
        data = json.dumps(body).encode()
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)

    def chunk(line: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(line), line)

    event = {"result": {"events": [{"type": "DELETE", "kv": {"key": _b64(b"fz/lock")}}]}}
    watch = chunk(b'{"result":{"header":{},"created":true}}\n') + chunk(
        json.dumps(event).encode() + b"\n"
    )
    return {
        "/v3/auth/authenticate": fixed({"header": {}, "token": "fztoken.7"}),
        "/v3/kv/range": fixed({"header": {"revision": "6"}, "kvs": [kv, waiter], "count": "2"}),
        "/v3/kv/put": fixed({"header": {}}),
        "/v3/lease/keepalive": fixed({"result": {"header": {}, "ID": "7587", "TTL": "3"}}),
        "/v3/lease/grant": fixed({"header": {}, "ID": "7587", "TTL": "60"}),
        "/v3/kv/txn": fixed({"header": {}, "succeeded": True}),
        "/v3/lease/revoke": fixed({"header": {}}),
        "/v3/watch": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + watch,
    }


@pytest.mark.timeout(600)
def test_no_etcd_answer_crashes_a_call(tmp_path: Path, fuzz_long: bool) -> None:
    cases, good = tmp_path / "cases", tmp_path / "cases-good"
    cases.mkdir()
    good.mkdir()
    rng = random.Random(14)
    count = 0
    for path, answer in etcd_answer_bodies().items():
        (good / path.strip("/").replace("/", "-")).write_bytes(answer)
        every = list(mutations(answer, fuzz_long))
        # The sample: the answer itself, a cut in its head and each of its parts, and
        # changes spread over it (every one with --fuzz-long).
        sample = every if fuzz_long else [every[0], *rng.sample(every[1:], 14)]
        for index, mutant in enumerate(sample):
            (cases / f"{path.strip('/').replace('/', '-')}-{index:05d}").write_bytes(
                path.encode() + b"\n" + mutant
            )
            count += 1
    assert count >= 8 * 15
    run_driver("etcd", cases, timeout=None if fuzz_long else 580)


# --- Redis: what its server answers, and what is stored on it ---------------------------

# Every shape of answer the Redis store reads: statuses, numbers, nil, a record, a line
# of tickets, EXEC's answer (holding LRANGE's), an error.
RESP_SHAPES = {
    "status": b"+OK\r\n",
    "number": b":3599000\r\n",
    "nil": b"$-1\r\n",
    "record": b"$%d\r\n%b\r\n" % (len(FILE_SHAPES["record"]), FILE_SHAPES["record"]),
    "line": b"*2\r\n$16\r\n0123456789abcdef\r\n$16\r\nfedcba9876543210\r\n",
    "exec": b"*3\r\n+OK\r\n:1\r\n*1\r\n$2\r\nab\r\n",
    "null-exec": b"*-1\r\n",
    "error": b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
}


def test_no_resp_answer_crashes_the_reader(skf: ModuleType, fuzz_long: bool) -> None:
    """Every prefix and change of every answer, and random bytes: the reader returns an
    answer, wants more bytes, or says the answer is not RESP; nothing else."""
    count = 0
    cases = [m for shape in RESP_SHAPES.values() for m in mutations(shape, fuzz_long)]
    for data in [*cases, *random_bytes(2000, 20)]:
        connection = object.__new__(skf._RespConnection)
        connection.received = bytearray(data)
        try:
            connection._parse(0, 0)
        except (ValueError, skf._Incomplete):
            pass
        count += 1
    assert count > 2000


# Arrays whose items are read in the array's own loop (bulk strings) or by the reader
# of any answer (the rest): a line's places, an empty string, a nil among them, a
# string holding CR LF, a string with a sign or a space in its length.
RESP_ARRAYS = {
    "places": b'*3\r\n$14\r\n{"owner": "a"}\r\n$0\r\n\r\n$2\r\nab\r\n',
    "mixed": b"*4\r\n$-1\r\n:7\r\n$4\r\na\r\nb\r\n+OK\r\n",
    "odd lengths": b"*3\r\n$+2\r\nab\r\n$ 2\r\nab\r\n$02\r\nab\r\n",
    "nested": b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n",
}


def _outcome(read: Callable[[], object]) -> object:
    """What ``read`` gives, an error answer as its text, or the kind of its failure."""

    def plain(value: object) -> object:
        if isinstance(value, list | tuple):
            return [plain(item) for item in value]
        text = getattr(value, "text", None)
        return ("error answer", text) if isinstance(text, str) else value

    try:
        return plain(read())
    except Exception as exc:
        return type(exc).__name__


def _read_whole(skf: ModuleType, data: bytes) -> object:
    connection = object.__new__(skf._RespConnection)
    connection.received = bytearray(data)
    return _outcome(lambda: connection._parse(0, 0))


def _read_one_by_one(skf: ModuleType, data: bytes, count: int, at: int) -> object:
    connection = object.__new__(skf._RespConnection)
    connection.received = bytearray(data)

    def read() -> object:
        items, end = [], at
        for _ in range(count):
            item, end = connection._parse(end, 1)
            items.append(item)
        return items, end

    return _outcome(read)


def test_an_arrays_items_read_in_its_loop_are_read_as_one_by_one(
    skf: ModuleType, fuzz_long: bool
) -> None:
    """The array's own loop reads a bulk string itself, for speed: for every prefix and
    change of each array, what it gives (the items and where they end, or the failure:
    more bytes wanted, or not RESP) is what reading its items one by one gives."""
    compared = 0
    for data in [m for shape in RESP_ARRAYS.values() for m in mutations(shape, fuzz_long)]:
        end = data.find(b"\r\n")
        if not (data.startswith(b"*") and end > 1 and data[1:end].isdigit()):
            continue  # not an array of a count: nothing read in its loop
        count = int(data[1:end])
        assert _read_whole(skf, data) == _read_one_by_one(skf, data, count, end + 2), data
        compared += 1
    assert compared > 200


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "is this Redis's port?"),
        (b"$99999999999\r\n", "is this Redis's port?"),
        (b"*1\r\n" * 10, "is this Redis's port?"),  # nested deeper than any answer
        (b":12x\r\n", "is this Redis's port?"),
        (b"+" + b"x" * 5000, "a line too long"),
        (b"$5\r\nab", "the connection closed mid-answer"),
    ],
)
def test_a_broken_answer_is_exit_2_saying_what_was_wrong(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, answer: bytes, words: str
) -> None:
    """A server that answers every request with ``answer`` and hangs up."""

    def answer_and_hang_up(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            connection.sendall(answer)

    monkeypatch.setenv("SKF_REDIS_TIMEOUT", "0.5")
    with serving(answer_and_hang_up) as port:
        lock = f"redis://127.0.0.1:{port}/locks/x"
        for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
            run = main(argv[0], "--lock", lock, *argv[1:])
            assert run.code == 2 and run.out == "" and words in run.error, (argv, run)
            assert "Redis could not be reached within 0.5 s" in run.error


@pytest.mark.timeout(180)  # 48 fresh processes: a loaded machine needs more than a minute
def test_no_value_stored_on_redis_crashes_a_call(redis: Redis, tmp_path: Path) -> None:
    """Any bytes at the lock's key, its last holder, its line and places in it: every
    command, in a fresh interpreter, ends 0, 2 or 3 with one JSON line."""
    client = redis.client()
    rng = random.Random(21)
    values = [*mutations(FILE_SHAPES["record"], False), *random_bytes(40, 22)]
    for n, value in enumerate(rng.sample(values, 12)):
        key = f"skf-tests/fuzz/{n}"
        base = "{" + key + "}"
        client.set(key, value) if n % 3 else client.set(base + "\0last", value)
        client.rpush(base + "\0line", value[:40], "0123456789abcdef")
        client.set(base + "\0wait\0" + "0123456789abcdef", value, px=3000)
        lock = redis.url(key)
        for argv in (
            ["status"],
            ["acquire", "--owner", "wf:sk:1"],
            ["acquire", "--owner", "wf:w:1", "--wait", "0.2"],
            ["release", "--owner", "wf:sk:1"],
        ):
            done = subprocess.run(
                [sys.executable, str(SCRIPT), argv[0], "--lock", lock, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert done.returncode in (0, 2, 3), (value, argv, done.stderr)
            printed = (done.stdout or done.stderr).splitlines()
            assert len(printed) == 1 and isinstance(json.loads(printed[0]), dict), (value, done)
