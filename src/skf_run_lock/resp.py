"""RESP2, the protocol of Redis and Valkey: commands pipelined on one connection, and
answers read whole, every size bounded, an error answer kept as an answer. Compiled only
for a Redis lock."""

from __future__ import annotations

from .server_gateway import _ANSWER_MAX_BYTES, _Connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    _Command = tuple[bytes | str | int, ...]

_RESP_MAX_ITEMS = 1_000_000  # a waiter is one item
_RESP_MAX_DEPTH = 3  # EXEC's answer holds LRANGE's
# Each kind of answer's first byte, as indexing bytes gives it.
_SIMPLE = ord("+")
_ERROR = ord("-")
_INTEGER = ord(":")
_BULK = ord("$")
_ARRAY = ord("*")


# The commands sent so far whose encoding is short (a lock's reads, MULTI, EXEC...; not
# a SET of a record): most of each call's, sent again by the next call on that lock.
_ENCODED: dict[_Command, bytes] = {}
_ENCODED_MAX = 1024
_ENCODED_LONGEST = 128


def _encoded(command: _Command) -> bytes:
    """``command`` as RESP sends it: an array of bulk strings."""
    out = [b"*%d\r\n" % len(command)]
    for arg in command:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%b\r\n" % (len(data), data))
    encoded = b"".join(out)
    if len(encoded) <= _ENCODED_LONGEST:
        if len(_ENCODED) >= _ENCODED_MAX:
            _ENCODED.clear()  # a long-lived process keeps it small
        _ENCODED[command] = encoded
    return encoded


class _RedisError:
    """An error answer (``-WRONGTYPE ...``), kept as an answer: later ones must be read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def code(self) -> str:
        return self.text.partition(" ")[0]


def _errors_in(answers: list[Any]) -> list[_RedisError]:
    """The error answers among ``answers``, alone or inside EXEC's answer."""
    errors = [answer for answer in answers if isinstance(answer, _RedisError)]
    for answer in answers:
        if isinstance(answer, list):
            errors += [item for item in answer if isinstance(item, _RedisError)]
    return errors


class _Incomplete(Exception):
    """More bytes must come before the answer can be read."""


class _RespConnection(_Connection):
    """RESP2: commands pipelined, answers read whole, every size bounded."""

    protocol = "RESP (Redis)"
    watching = False  # a WATCH an earlier call left on it, kept (redis_gateway)

    def send(self, commands: list[_Command], deadline: float) -> None:
        sent = [_ENCODED.get(command) or _encoded(command) for command in commands]
        self._send(b"".join(sent), deadline)

    def answer(self, deadline: float) -> Any:
        return self.answers(1, deadline)[0]

    def answers(self, count: int, deadline: float) -> list[Any]:
        """The next ``count`` answers, each read whole; the bytes they took are let go
        once, after the last."""
        found: list[Any] = []
        received = self.received
        at = 0
        while len(found) < count:
            end = received.find(b"\r\n", at)
            if end > at and received[at] == _SIMPLE:  # +OK, +QUEUED: most answers
                found.append(bytes(received[at + 1 : end]))
                at = end + 2
                continue
            try:
                value, at = self._parse(at, 0)
            except _Incomplete:
                if len(received) - at > _ANSWER_MAX_BYTES + 1024:
                    raise ValueError("the answer was too large") from None
                self._receive(deadline)
                continue
            found.append(value)
        del received[:at]
        return found

    def _parse(self, at: int, depth: int) -> tuple[Any, int]:
        """The answer that starts at ``at`` in what was received, and where it ends."""
        received = self.received
        end = received.find(b"\r\n", at)
        if end < 0:
            if len(received) - at > 1024:
                raise ValueError(f"the answer was not {self.protocol} (a line too long)")
            raise _Incomplete
        kind = received[at]
        line = received[at + 1 : end]
        if kind == _SIMPLE:
            return bytes(line), end + 2
        if kind == _ERROR:
            return _RedisError(line.decode("utf-8", "replace")), end + 2
        # A number: plain digits (bytearray.isdigit() is true of ASCII digits alone),
        # after a minus sign or not, 18 at most.
        digits = line[1:] if line[:1] == b"-" else line
        if kind in (_INTEGER, _BULK, _ARRAY) and digits.isdigit() and len(digits) <= 18:
            size = int(line)
            if kind == _INTEGER:
                return size, end + 2
            if size == -1:
                return None, end + 2
            if kind == _BULK and 0 <= size <= _ANSWER_MAX_BYTES:
                if len(received) < end + 2 + size + 2:
                    raise _Incomplete
                if received[end + 2 + size : end + 4 + size] != b"\r\n":
                    raise ValueError(f"the answer was not {self.protocol} (a bad length)")
                return bytes(received[end + 2 : end + 2 + size]), end + 4 + size
            if kind == _ARRAY and 0 <= size <= _RESP_MAX_ITEMS and depth < _RESP_MAX_DEPTH:
                return self._items(end + 2, size, depth + 1)
        raise ValueError(f"the answer was not {self.protocol}")

    def _items(self, at: int, count: int, depth: int) -> tuple[list[Any], int]:
        """The ``count`` items of an array that start at ``at``, and where they end. A
        whole bulk string is read here, in the loop: a line of 64 waiters is an answer
        of 64 of them, and parsing each by a call of its own was a fifth of a Redis
        waiter's CPU. Anything else (another kind, a nil, a string not all received, a
        length that is not plain digits) is _parse's, which reads it or says why not."""
        received = self.received
        items: list[Any] = []
        for _ in range(count):
            end = received.find(b"\r\n", at) if at < len(received) else -1
            # bytearray.isdigit() is true only of ASCII digits: no sign, space or "_".
            header = received[at + 1 : end] if end > at and received[at] == _BULK else b""
            if header.isdigit() and len(header) <= 18:
                size = int(header)
                start = end + 2
                stop = start + size
                if size <= _ANSWER_MAX_BYTES and received[stop : stop + 2] == b"\r\n":
                    items.append(bytes(received[start:stop]))
                    at = stop + 2
                    continue
            item, at = self._parse(at, depth)
            items.append(item)
        return items, at
