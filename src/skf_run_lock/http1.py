"""HTTP/1.1, as etcd's JSON gateway speaks it: one request at a time on a connection
kept open, a body read by its length, in chunks (a watch's stream), or to the close,
every size bounded. Compiled only for an etcd lock."""

from __future__ import annotations

from .server_gateway import _ANSWER_MAX_BYTES, _Connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from typing import Literal

_HEAD_MAX_BYTES = 64 * 1024


class _HttpConnection(_Connection):
    """HTTP/1.1 to etcd. Not http.client: ~18 ms to import, 2-4x the CPU (bench 6d)."""

    protocol = "HTTP"

    def __init__(self, endpoint: str, context: ssl.SSLContext | None, deadline: float) -> None:
        super().__init__(endpoint, context, deadline)
        self.body = bytearray()  # not yet read

        self.framing: Literal["length", "chunked", "close"] = "length"
        self.left = 0  # bytes of the body still to come, when its length is known
        self.reusable = True

    def send(self, path: str, payload: bytes, headers: dict[str, str], deadline: float) -> None:
        if any("\r" in value or "\n" in value for value in headers.values()):
            raise ValueError("a header held a line break")
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        head = f"POST {path} HTTP/1.1\r\nHost: {self.endpoint}\r\n{fields}"
        self._send(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload, deadline)

    def start_answer(self, deadline: float) -> int:
        """Read the answer's status line and headers: its status code."""
        end = self._find(b"\r\n\r\n", deadline, _HEAD_MAX_BYTES)
        lines = self.received[:end].decode("latin-1").split("\r\n")
        del self.received[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not (code.isdigit() and rest[3:4] in ("", " ")):
            raise ValueError("the answer was not HTTP")
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValueError("the answer was not HTTP")
            headers[name.strip().lower()] = value.strip().lower()
        length = headers.get("content-length")
        self.reusable = headers.get("connection") != "close" and version == "HTTP/1.1"
        self.left = 0
        if "chunked" in headers.get("transfer-encoding", ""):
            self.framing = "chunked"
        elif length is None:
            self.framing = "close"
            self.reusable = False
        elif length.isdigit() and int(length) <= _ANSWER_MAX_BYTES:
            self.framing = "length"
            self.left = int(length)
        else:
            raise ValueError(f"the answer's length was {length!r}")
        self.body.clear()
        return int(code)

    def rest(self, deadline: float) -> bytes:
        while self._more_body(deadline):
            pass
        return bytes(self.body)

    def readline(self, deadline: float) -> bytes:
        """The body's next line (a watch's next message); b"" once the body ended."""
        while (end := self.body.find(b"\n")) < 0:
            if not self._more_body(deadline):
                end = len(self.body) - 1
                break
        line = bytes(self.body[: end + 1])
        del self.body[: end + 1]
        return line

    def _more_body(self, deadline: float) -> bool:
        piece = self._piece(deadline)
        if piece is None:
            return False
        self.body += piece
        if len(self.body) > _ANSWER_MAX_BYTES:
            raise ValueError("the answer was too large")
        return True

    def _piece(self, deadline: float) -> bytes | None:
        if self.framing == "chunked":
            return self._chunk(deadline)
        closes = self.framing == "close"
        if (not closes and self.left == 0) or (
            not self.received and not self._receive(deadline, end_ok=closes)
        ):
            return None
        size = len(self.received) if closes else min(self.left, len(self.received))
        piece = bytes(self.received[:size])
        del self.received[:size]
        self.left -= 0 if closes else size
        return piece

    def _chunk(self, deadline: float) -> bytes | None:
        end = self._find(b"\r\n", deadline, 1024)
        size_text = self.received[:end].split(b";")[0].strip()
        if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
            raise ValueError("the answer was not HTTP (a bad chunk)")
        size = int(size_text, 16)
        if size > _ANSWER_MAX_BYTES:
            raise ValueError("the answer was too large")
        if size == 0:
            trailer = self._find(b"\r\n\r\n", deadline, _HEAD_MAX_BYTES, end)
            del self.received[: trailer + 4]
            return None
        while len(self.received) < end + 2 + size + 2:
            self._receive(deadline)
        if self.received[end + 2 + size : end + 4 + size] != b"\r\n":
            raise ValueError("the answer was not HTTP (a bad chunk)")
        chunk = bytes(self.received[end + 2 : end + 2 + size])
        del self.received[: end + 4 + size]
        return chunk
