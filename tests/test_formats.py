"""Lock-file formats: what each kind of content means, and what is written."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from calls import Run, posix_only
from lockfiles import NOW, beside

MTIME = 1_700_000_000  # 2023-11-14T22:13:20Z
MTIME_TEXT = "2023-11-14T22:13:20Z"


@pytest.mark.parametrize(
    ("content", "owner", "since"),
    [
        (
            b'{"owner": "wf:sk:r", "acquired_at": "2026-09-30T10:15:00Z",'
            b' "tool": "skf-run-lock"}\n',
            "wf:sk:r",
            "2026-09-30T10:15:00Z",
        ),
        (
            b'{"owner": "wf:sk:r", "acquired_at": "2026-09-30T10:15:00Z"}',
            "wf:sk:r",
            "2026-09-30T10:15:00Z",
        ),
        (b'{"owner": "wf:sk:r"}', "wf:sk:r", MTIME_TEXT),
        (b'{"owner": "wf:sk:r", "acquired_at": "yesterday"}', "wf:sk:r", MTIME_TEXT),
        (b'{"owner": "wf:sk:r", "acquired_at": 1700000000}', "wf:sk:r", MTIME_TEXT),
        (b'{"owner": "", "acquired_at": "2026-09-30T10:15:00Z"}', None, "2026-09-30T10:15:00Z"),
        (b'{"owner": 42, "acquired_at": "2026-09-30T10:15:00Z"}', None, "2026-09-30T10:15:00Z"),
        (b'{"owner": null}', None, MTIME_TEXT),
        (b'{"tool": "skf-run-lock"}', None, MTIME_TEXT),
        (b"4242\n2026-09-30T10:15:00Z\n", None, "2026-09-30T10:15:00Z"),
        (b"4242\r\n2026-09-30T10:15:00Z\r\n", None, "2026-09-30T10:15:00Z"),
        (b"4242\n", None, MTIME_TEXT),
        (b"4242", None, MTIME_TEXT),
        (b"", None, MTIME_TEXT),
        (b"garbage \x00\x01 here", None, MTIME_TEXT),
        (b"\xff\xfe\n2026-09-30T10:15:00Z", None, "2026-09-30T10:15:00Z"),
        (b'"wf:sk:r"', None, MTIME_TEXT),
        (b'"wf:sk:r"\n2026-09-30T10:15:00Z', None, "2026-09-30T10:15:00Z"),
        (b"locked\n", None, MTIME_TEXT),
        (b"# a comment, no key\n", None, MTIME_TEXT),
        (b'{"owner": "wf:sk:r", "acquired_at": "2026-09-30T10:15:00Z"} x', None, MTIME_TEXT),
        (b'{"owner": "wf:sk:r"}{"owner": "wf:sk:s"}', None, MTIME_TEXT),
        (b'  {"owner": "wf:sk:r"} \r\n\t', "wf:sk:r", MTIME_TEXT),
        # Nested deeper than json reads, as large as bytes that are no document may be
        # and still count as a lock (a larger one is refused: test_other_programs_files).
        (b"[" * 4096, None, MTIME_TEXT),
        (b"[" * 2000, None, MTIME_TEXT),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_lock_file_content_names_holder_and_time(
    skf: ModuleType, lock: Path, content: bytes, owner: str | None, since: str
) -> None:
    lock.parent.mkdir()
    lock.write_bytes(content)
    os.utime(lock, (MTIME, MTIME))
    result = skf.status(lock, 60.0)
    assert (result["held_by"], result["held_since"]) == (owner, since)
    record = skf._read_record(str(lock))
    assert record.owner == owner and record.empty is (content == b"")


def test_record_written_is_one_json_line_with_the_fence_after_the_four_keys_of_old(
    skf: ModuleType, lock: Path
) -> None:
    taken = skf.acquire(lock, "wf:sk:é", 60.0, now=NOW)
    raw = lock.read_bytes()
    assert raw == (
        b'{"owner": "wf:sk:\\u00e9", "acquired_at": "2026-09-30T10:15:00Z",'
        b' "stale_after_seconds": 60, "tool": "skf-run-lock", "fence": '
        + str(skf.fence_of(taken)).encode()
        + b"}\n"
    )
    keys = ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]
    assert list(json.loads(raw)) == keys


def test_oversized_lock_file_names_no_owner_and_is_not_read_whole(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock.parent.mkdir()
    with open(lock, "wb") as f:
        f.write(b'{"owner": "wf:sk:r", "acquired_at": "2026-09-30T10:15:00Z", "pad": "')
        f.truncate(3 * 1024**3)  # a sparse 3 GiB file
    os.utime(lock, (MTIME, MTIME))
    reads: list[int] = []
    real_read = os.read

    def counting_read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counting_read)
    record = skf._read_record(str(lock))
    assert (record.owner, skf._format_time(record.since)) == (None, MTIME_TEXT)
    assert sum(reads) <= 64 * 1024 + 1


def test_valid_record_padded_past_64_kib_names_no_owner(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    lock.write_bytes(b'{"owner": "wf:sk:r"}' + b" " * (64 * 1024))
    assert skf._read_record(str(lock)).owner is None


def test_record_of_exactly_64_kib_is_still_read(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    head = b'{"owner": "wf:sk:r", "acquired_at": "2026-09-30T10:15:00Z", "pad": "'
    lock.write_bytes(head + b"x" * (64 * 1024 - len(head) - 2) + b'"}')
    assert lock.stat().st_size == 64 * 1024
    assert skf._read_record(str(lock)).owner == "wf:sk:r"


@posix_only("symbolic links and O_NOFOLLOW")
def test_symlinked_lock_names_no_owner_and_is_replaced_not_written_through(
    skf: ModuleType, lock: Path
) -> None:
    lock.parent.mkdir()
    target = lock.parent / "target"
    target.write_text('{"owner": "wf:sk:r1", "acquired_at": "2026-09-30T10:15:00Z"}')
    lock.symlink_to(target)
    os.utime(lock, (MTIME, MTIME), follow_symlinks=False)
    status = skf.status(lock, 60.0, now=NOW)
    assert (status["held_by"], status["held_since"], status["state"]) == (None, MTIME_TEXT, "stale")
    assert skf.release(lock, "wf:sk:r1")["reason"] == "not-owner"
    result = skf.acquire(lock, "wf:sk:r2", 60.0, now=NOW)
    assert result["stale_replaced"] == {"held_by": None, "held_since": MTIME_TEXT}
    assert not lock.is_symlink() and json.loads(lock.read_text())["owner"] == "wf:sk:r2"
    assert json.loads(target.read_text())["owner"] == "wf:sk:r1"


@posix_only("/dev/zero and symbolic links")
def test_link_to_dev_zero_costs_nothing(skf: ModuleType, lock: Path) -> None:
    lock.parent.mkdir()
    lock.symlink_to("/dev/zero")
    assert skf._read_record(str(lock)).owner is None


@posix_only("FIFOs")
def test_fifo_at_lock_path_is_an_os_error_without_blocking(
    skf: ModuleType, lock: Path, cli: Callable[..., Run]
) -> None:
    """In a real process with a short limit: a read that blocks fails this test in 10 s."""
    lock.parent.mkdir()
    os.mkfifo(lock)
    for argv in (
        ("acquire", "--lock", lock, "--owner", "wf:sk:r"),
        ("release", "--lock", lock, "--owner", "wf:sk:r"),
        ("status", "--lock", lock),
    ):
        run = cli(*argv, timeout=10)
        assert run.code == 2 and "FIFO" in run.error and "regular file" in run.error
    assert beside(lock) == ["run.lock"]


@posix_only("AF_UNIX sockets")
def test_socket_at_lock_path_is_an_os_error(
    skf: ModuleType, tmp_path: Path, main: Callable[..., Run]
) -> None:
    short = Path("/tmp") / f"skf-sock-{os.getpid()}"  # AF_UNIX paths are short
    short.mkdir(exist_ok=True)
    path = short / "s.lock"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(path))
        run = main("acquire", "--lock", path, "--owner", "wf:sk:r")
        assert run.code == 2 and "socket" in run.error
        assert sorted(os.listdir(short)) == ["s.lock"]
    finally:
        sock.close()
        path.unlink()
        short.rmdir()


def test_parse_record_never_raises_for_odd_json(skf: ModuleType) -> None:
    for data in (b"1" * 5000, b'{"owner": "\\ud800"}', b"\xef\xbb\xbf{}", b"NaN", b"1e999999"):
        record = skf._parse_record(data, 5)
        assert isinstance(record.since, int)


@posix_only("/dev/null")
def test_device_at_lock_path_is_an_os_error(main: Callable[..., Run]) -> None:
    """status never writes, so it can safely look at a real device node."""
    run = main("status", "--lock", "/dev/null")
    assert run.code == 2 and "a device" in run.error and "regular file" in run.error


def test_a_record_is_written_as_json_dumps_writes_it(skf: ModuleType, lock: Path) -> None:
    """A take writes its record without json.dumps, byte for byte as it would: an owner
    with quotes, backslashes and characters past ASCII escaped, the keys in order."""
    owner = 'w"f\\é€😀:sk:run1'
    for stale_after, session in ((90.5, False), (3600.0, True)):
        request = skf._checked(skf._Request(lock, owner, "", stale_after, session=session))
        assert skf._take(request).session is session
        data = lock.read_bytes()
        content = json.loads(data)
        assert data == (json.dumps(content) + "\n").encode("ascii")
        keys = ["owner", "acquired_at", "stale_after_seconds", "tool", "fence"]
        assert list(content) == keys + ["session"] * session
        assert content["owner"] == owner and content["stale_after_seconds"] == stale_after
        assert skf.release(lock, owner)["released"]


def test_a_file_locks_calls_make_no_json_encoder_or_decoder(
    skf: ModuleType, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record is read by one decoder made once and written without json.dumps: json.loads
    given a hook makes a decoder at each call, and json.dumps walks a dict."""
    skf.acquire(lock, "wf:sk:run1", 60.0)
    made: list[object] = []
    decoder, dumps = json.JSONDecoder.__init__, json.dumps

    def counted_decoder(self: json.JSONDecoder, *args: object, **kwargs: object) -> None:
        made.append(self)
        decoder(self, *args, **kwargs)  # type: ignore[arg-type]

    def counted_dumps(value: object, *args: object, **kwargs: object) -> str:
        made.append(value)
        return dumps(value, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(json.JSONDecoder, "__init__", counted_decoder)
    monkeypatch.setattr(json, "dumps", counted_dumps)
    assert skf.acquire(lock, "wf:sk:run1", 60.0)["refreshed"]
    assert skf.release(lock, "wf:sk:run1")["released"]
    assert made == []
