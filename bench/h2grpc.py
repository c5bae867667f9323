"""A gRPC client on the standard library alone: HTTP/2's frames, HPACK and gRPC's
length-prefixed messages, enough to speak to etcd as etcdctl does.

A prototype, to measure before building: what a transport of the script's own that
spoke gRPC would cost the process that sends, beside the JSON gateway's HTTP/1.1
(``bench/etcd_requests.py --own``). It speaks HTTP/2 over plain TCP with prior
knowledge (h2c), as etcd's client port serves it without TLS, and is not in the
product. What it leaves out, a product's transport would need: TLS with ALPN,
etcd's auth token as metadata, and reconnecting after GOAWAY.

RFC 9113 (HTTP/2) and RFC 7541 (HPACK) are what it follows; gRPC's framing is
gRPC's "PROTOCOL-HTTP2" document; protocol buffers' wire format is that of varints
and length-delimited fields only, the two etcd's messages use.
"""

from __future__ import annotations

import socket
import struct
import time
from collections import deque

__all__ = [
    "Channel",
    "GrpcError",
    "HpackDecoder",
    "huffman_decoded",
    "message_fields",
    "pb_field",
    "read_varint",
    "varint",
]

# -- protocol buffers: varints and length-delimited fields ---------------------------


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint; a negative int64 as its two's complement."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def pb_field(number: int, value: bytes | int) -> bytes:
    """One protobuf field: bytes (length-delimited, wire type 2) or an integer (0)."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at`` in ``data``, and where what follows it starts."""
    byte = data[at]
    if byte < 0x80:  # most varints in etcd's answers are one byte
        return byte, at + 1
    value = 0
    shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at
        if shift > 63:
            raise ValueError("a varint longer than ten bytes")


def message_fields(message: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level fields of a protobuf ``message``, in order: (number, value),
    an integer for a varint, bytes for a length-delimited field. Fixed-width fields
    (wire types 1 and 5) are skipped: none of etcd's messages read here has one."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    end = len(message)
    while at < end:
        tag, at = read_varint(message, at)
        kind = tag & 7
        if kind == 0:
            number, at = read_varint(message, at)
            out.append((tag >> 3, number))
        elif kind == 2:
            size, at = read_varint(message, at)
            if at + size > end:
                raise ValueError("a field runs past its message")
            out.append((tag >> 3, message[at : at + size]))
            at += size
        elif kind == 1:
            at += 8
        elif kind == 5:
            at += 4
        else:
            raise ValueError(f"protobuf wire type {kind} is not read here")
    if at != end:
        raise ValueError("a fixed-width field runs past its message")
    return out


# -- HPACK (RFC 7541) -----------------------------------------------------------------

# Appendix A: the static table, indexes 1 to 61.
_STATIC: tuple[tuple[bytes, bytes], ...] = tuple(
    (name.encode(), value.encode())
    for name, value in (
        (":authority", ""),
        (":method", "GET"),
        (":method", "POST"),
        (":path", "/"),
        (":path", "/index.html"),
        (":scheme", "http"),
        (":scheme", "https"),
        (":status", "200"),
        (":status", "204"),
        (":status", "206"),
        (":status", "304"),
        (":status", "400"),
        (":status", "404"),
        (":status", "500"),
        ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"),
        ("accept-language", ""),
        ("accept-ranges", ""),
        ("accept", ""),
        ("access-control-allow-origin", ""),
        ("age", ""),
        ("allow", ""),
        ("authorization", ""),
        ("cache-control", ""),
        ("content-disposition", ""),
        ("content-encoding", ""),
        ("content-language", ""),
        ("content-length", ""),
        ("content-location", ""),
        ("content-range", ""),
        ("content-type", ""),
        ("cookie", ""),
        ("date", ""),
        ("etag", ""),
        ("expect", ""),
        ("expires", ""),
        ("from", ""),
        ("host", ""),
        ("if-match", ""),
        ("if-modified-since", ""),
        ("if-none-match", ""),
        ("if-range", ""),
        ("if-unmodified-since", ""),
        ("last-modified", ""),
        ("link", ""),
        ("location", ""),
        ("max-forwards", ""),
        ("proxy-authenticate", ""),
        ("proxy-authorization", ""),
        ("range", ""),
        ("referer", ""),
        ("refresh", ""),
        ("retry-after", ""),
        ("server", ""),
        ("set-cookie", ""),
        ("strict-transport-security", ""),
        ("transfer-encoding", ""),
        ("user-agent", ""),
        ("vary", ""),
        ("via", ""),
        ("www-authenticate", ""),
    )
)

# Appendix B's Huffman code is canonical: its codes follow from their lengths alone,
# shorter first and, of one length, in the order of the symbols. So the table is
# given as the symbols of each length (256 is EOS, which never stands in a string).
_HUFFMAN_LENGTHS: dict[int, tuple[int, ...]] = {
    5: tuple(b"012aceiost"),
    6: tuple(b" %-./3456789=A_bdfghlmnpru"),
    7: tuple(b":BCDEFGHIJKLMNOPQRSTUVWYjkqvwxyz"),
    8: tuple(b"&*,;XZ"),
    10: tuple(b'!"()?'),
    11: tuple(b"'+|"),
    12: tuple(b"#>"),
    13: tuple(b"\0$@[]~"),
    14: tuple(b"^}"),
    15: tuple(b"<`{"),
    19: (92, 195, 208),
    20: (128, 130, 131, 162, 184, 194, 224, 226),
    21: (153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230),
    22: (
        *(129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173, 178, 181),
        *(185, 186, 187, 189, 190, 196, 198, 228, 232, 233),
    ),
    23: (
        *(1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157, 158),
        *(165, 166, 168, 174, 175, 180, 182, 183, 188, 191, 197, 231, 239),
    ),
    24: (9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237),
    25: (199, 207, 234, 235),
    26: (192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255),
    27: (
        *(203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250),
        *(251, 252, 253, 254),
    ),
    28: (*range(2, 9), 11, 12, *range(14, 22), *range(23, 32), 127, 220, 249),
    30: (10, 13, 22, 256),
}


def _huffman_codes() -> dict[tuple[int, int], int]:
    """(length, code) -> symbol, for every symbol of the canonical code."""
    codes: dict[tuple[int, int], int] = {}
    code = 0
    previous = min(_HUFFMAN_LENGTHS)
    for length in sorted(_HUFFMAN_LENGTHS):
        code <<= length - previous
        previous = length
        for symbol in sorted(_HUFFMAN_LENGTHS[length]):
            codes[(length, code)] = symbol
            code += 1
    return codes


_HUFFMAN = _huffman_codes()
_EOS = 256


def huffman_decoded(data: bytes) -> bytes:
    """A string HPACK's Huffman code gave. The padding after the last symbol must be
    fewer than 8 bits, every one set (the start of EOS), as section 5.2 asks."""
    out = bytearray()
    code = 0
    length = 0
    for byte in data:
        for shift in range(7, -1, -1):
            code = code << 1 | (byte >> shift) & 1
            length += 1
            symbol = _HUFFMAN.get((length, code))
            if symbol is not None:
                if symbol == _EOS:
                    raise ValueError("EOS inside a Huffman string")
                out.append(symbol)
                code = 0
                length = 0
            elif length > 30:
                raise ValueError("no Huffman code matches")
    if length > 7 or code != (1 << length) - 1:
        raise ValueError("a Huffman string's padding is not the start of EOS")
    return bytes(out)


def _integer(block: bytes, at: int, prefix: int) -> tuple[int, int]:
    """The integer of an ``prefix``-bit prefix at ``at`` (section 5.1), and where what
    follows it starts."""
    limit = (1 << prefix) - 1
    value = block[at] & limit
    at += 1
    if value < limit:
        return value, at
    shift = 0
    while True:
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at
        if shift > 28:
            raise ValueError("an HPACK integer too large")


def _string(block: bytes, at: int) -> tuple[bytes, int]:
    huffman = block[at] & 0x80
    size, at = _integer(block, at, 7)
    if at + size > len(block):
        raise ValueError("an HPACK string runs past its block")
    raw = block[at : at + size]
    return (huffman_decoded(raw) if huffman else raw), at + size


def _encoded_integer(value: int, prefix: int, first: int) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encoded_string(text: bytes) -> bytes:
    """A string as it is, not Huffman-coded: the encoder may choose either."""
    return _encoded_integer(len(text), 7, 0) + text


class HpackDecoder:
    """The decoding context of one connection's header blocks: its dynamic table,
    newest first, and the size the table may take (section 4). (Plain classes here,
    not dataclasses: a module the build carries as text is compiled outside
    sys.modules, where a dataclass cannot be made.)"""

    def __init__(self) -> None:
        self.limit = 4096
        self.table: deque[tuple[bytes, bytes]] = deque()
        self.size = 0

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = []
        at = 0
        while at < len(block):
            first = block[at]
            if first & 0x80:  # indexed
                index, at = _integer(block, at, 7)
                headers.append(self._entry(index))
            elif first & 0xC0 == 0x40:  # literal, added to the table
                name, value, at = self._literal(block, at, 6)
                headers.append((name, value))
                self._add(name, value)
            elif first & 0xE0 == 0x20:  # the table's size changes
                size, at = _integer(block, at, 5)
                if size > 4096:
                    raise ValueError("a dynamic table larger than the 4096 bytes allowed")
                self.limit = size
                self._evict(0)
            else:  # literal, not added (0000) or never to be (0001)
                name, value, at = self._literal(block, at, 4)
                headers.append((name, value))
        return headers

    def _literal(self, block: bytes, at: int, prefix: int) -> tuple[bytes, bytes, int]:
        index, at = _integer(block, at, prefix)
        if index:
            name = self._entry(index)[0]
        else:
            name, at = _string(block, at)
        value, at = _string(block, at)
        return name, value, at

    def _entry(self, index: int) -> tuple[bytes, bytes]:
        if 1 <= index <= len(_STATIC):
            return _STATIC[index - 1]
        dynamic = index - len(_STATIC) - 1
        if 0 <= dynamic < len(self.table):
            return self.table[dynamic]
        raise ValueError(f"HPACK index {index} is in no table")

    def _add(self, name: bytes, value: bytes) -> None:
        size = len(name) + len(value) + 32
        self._evict(size)
        if size <= self.limit:
            self.table.appendleft((name, value))
            self.size += size

    def _evict(self, room: int) -> None:
        while self.table and self.size + room > self.limit:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32


# -- HTTP/2 (RFC 9113) and gRPC on it ------------------------------------------------

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA = 0x0
_HEADERS = 0x1
_RST_STREAM = 0x3
_SETTINGS = 0x4
_PUSH_PROMISE = 0x5
_PING = 0x6
_GOAWAY = 0x7
_WINDOW_UPDATE = 0x8
_CONTINUATION = 0x9
_END_STREAM = 0x1
_ACK = 0x1
_END_HEADERS = 0x4
_PADDED = 0x8
_PRIORITY = 0x20
_CANCEL = 0x8
_FRAME = struct.Struct(">I B I")  # the length rides in the first 24 bits, see _frame
_MAX_WINDOW = (1 << 31) - 1
# What this end grants: no server push, and a window as large as HTTP/2 allows, given
# back whenever half of it is used, so the server never waits on a WINDOW_UPDATE.
_SETTINGS_SENT = struct.pack(">HIHI", 0x2, 0, 0x4, _MAX_WINDOW)
_DEFAULT_WINDOW = 65535
_MAX_FRAME = 16384


class GrpcError(OSError):
    """A call that gRPC ended with a status other than OK, or that ended with no
    status: ``status`` is gRPC's code, or -1 for a stream the server reset or an
    answer that broke gRPC's rules (no status, a compressed or extra message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"gRPC status {status}: {message}")
        self.status = status


class _Stream:
    """What one stream has received: its data not yet taken apart into messages,
    its headers and trailers, and whether the server ended it."""

    def __init__(self, window: int) -> None:
        self.data = bytearray()
        self.headers: list[tuple[bytes, bytes]] = []
        self.ended = False
        self.reset: int | None = None
        self.received = 0  # bytes of DATA since this end last gave the window back
        self.window = window  # what this end may still send on it


class Channel:
    """One HTTP/2 connection to ``host``:``port`` over which gRPC calls go, each a
    stream: unary calls with :meth:`call`, streams with :meth:`open`, :meth:`send`,
    :meth:`receive` and :meth:`cancel`. One thread uses it at a time."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.authority = f"{host}:{port}".encode()
        self.buffer = bytearray()
        self.decoder = HpackDecoder()
        self.streams: dict[int, _Stream] = {}
        self.next_id = 1
        self.send_window = _DEFAULT_WINDOW  # the connection's, for what this end sends
        self.stream_window = _DEFAULT_WINDOW  # the server's initial window per stream
        self.received = 0  # the connection's DATA since the window was given back
        self.headers_of: dict[str, bytes] = {}  # each path's request headers, encoded
        self.continued: tuple[int, int, bytearray] | None = None  # a header block's frames
        opening = _PREFACE + self._frame(_SETTINGS, 0, 0, _SETTINGS_SENT)
        more = struct.pack(">I", _MAX_WINDOW - _DEFAULT_WINDOW)
        opening += self._frame(_WINDOW_UPDATE, 0, 0, more)
        self.sock.sendall(opening)

    def close(self) -> None:
        try:
            self.sock.sendall(self._frame(_GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
        except OSError:
            pass
        self.sock.close()

    # -- calls

    def call(self, path: str, message: bytes, timeout: float = 5.0) -> bytes:
        """A unary call: ``message`` sent on a new stream, the one answer returned,
        all within ``timeout`` (TimeoutError)."""
        deadline = time.monotonic() + timeout
        stream_id = self._start(path, message, end=True, deadline=deadline)
        stream = self.streams[stream_id]
        while not stream.ended:
            self._read_frame(deadline)
        del self.streams[stream_id]
        self._check(stream)
        answer = _next_message(stream.data)
        if answer is None:
            raise GrpcError(-1, "a unary call ended with no answer")
        if stream.data:
            raise GrpcError(-1, "a unary call answered with more than one message")
        return answer

    def open(self, path: str, message: bytes, timeout: float = 5.0) -> int:
        """A stream of calls to ``path`` (a bidirectional one, such as a watch or a
        lease's keep-alives), its first ``message`` sent; its id."""
        return self._start(path, message, end=False, deadline=time.monotonic() + timeout)

    def send(self, stream_id: int, message: bytes, timeout: float = 5.0) -> None:
        self._send_data(stream_id, _prefixed(message), False, time.monotonic() + timeout)

    def receive(self, stream_id: int, timeout: float) -> bytes:
        """The next message the stream carries; TimeoutError if none in ``timeout``."""
        deadline = time.monotonic() + timeout
        stream = self.streams[stream_id]
        while True:
            answer = _next_message(stream.data)
            if answer is not None:
                return answer
            if stream.ended:
                self._check(stream)
                raise GrpcError(-1, "the stream ended")
            self._read_frame(deadline)

    def cancel(self, stream_id: int) -> None:
        """End the stream from this end (RST_STREAM, CANCEL)."""
        if self.streams.pop(stream_id, None) is not None:
            self.sock.sendall(self._frame(_RST_STREAM, 0, stream_id, struct.pack(">I", _CANCEL)))

    # -- sending

    def _start(self, path: str, message: bytes, end: bool, deadline: float) -> int:
        """A new stream: its headers and first message, sent together (one write)."""
        stream_id = self.next_id
        self.next_id += 2
        self.streams[stream_id] = _Stream(window=self.stream_window)
        headers = self._frame(_HEADERS, _END_HEADERS, stream_id, self._request_headers(path))
        self._send_data(stream_id, _prefixed(message), end, deadline, first=headers)
        return stream_id

    def _request_headers(self, path: str) -> bytes:
        """A call's header block, the same for every call to ``path`` (made once): each
        header a literal not added to the server's table, or one of the static
        table's."""
        known = self.headers_of.get(path)
        if known is not None:
            return known
        block = bytes([0x83, 0x86])  # :method POST, :scheme http
        block += _encoded_integer(4, 4, 0) + _encoded_string(path.encode())  # :path
        block += _encoded_integer(1, 4, 0) + _encoded_string(self.authority)  # :authority
        block += _encoded_integer(31, 4, 0) + _encoded_string(b"application/grpc")
        block += b"\0" + _encoded_string(b"te") + _encoded_string(b"trailers")
        self.headers_of[path] = block
        return block

    def _send_data(
        self, stream_id: int, payload: bytes, end: bool, deadline: float, first: bytes = b""
    ) -> None:
        """Send ``first`` (a new stream's headers), then ``payload`` as DATA frames, as
        much as both windows have room for; when they have none, what is ready goes
        out and the rest waits for the server's WINDOW_UPDATE."""
        stream = self.streams[stream_id]
        ready = bytearray(first)
        at = 0
        while True:
            room = min(self.send_window, stream.window, _MAX_FRAME, len(payload) - at)
            if room <= 0 and at < len(payload):
                if stream.reset is not None:
                    raise GrpcError(-1, f"the server reset the stream (code {stream.reset})")
                self.sock.sendall(ready)
                ready.clear()
                self._read_frame(deadline)  # a WINDOW_UPDATE will give room
                continue
            piece = payload[at : at + max(room, 0)]
            at += len(piece)
            self.send_window -= len(piece)
            stream.window -= len(piece)
            last = at >= len(payload)
            ready += self._frame(_DATA, _END_STREAM if end and last else 0, stream_id, piece)
            if last:
                break
        self.sock.sendall(ready)

    @staticmethod
    def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
        return _FRAME.pack(len(payload) << 8 | kind, flags, stream_id) + payload

    # -- receiving

    def _read_frame(self, deadline: float) -> None:
        """Read one frame and act on it."""
        self._fill(9, deadline)
        head = bytes(self.buffer[:9])
        length = int.from_bytes(head[:3], "big")
        kind = head[3]
        flags = head[4]
        stream_id = int.from_bytes(head[5:9], "big") & _MAX_WINDOW
        self._fill(9 + length, deadline)
        payload = bytes(self.buffer[9 : 9 + length])
        del self.buffer[: 9 + length]
        if self.continued is not None and kind != _CONTINUATION:
            raise OSError("HTTP/2: a header block broken by another frame")
        if kind == _DATA:
            self._on_data(stream_id, flags, payload)
        elif kind in (_HEADERS, _CONTINUATION):
            self._on_headers(kind, stream_id, flags, payload)
        else:
            self._on_control(kind, stream_id, flags, payload)

    def _on_control(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        """A frame that carries no stream's content: settings, pings, windows, resets."""
        if kind == _SETTINGS:
            self._on_settings(flags, payload)
        elif kind == _PING:
            if not flags & _ACK:
                self.sock.sendall(self._frame(_PING, _ACK, 0, payload))
        elif kind == _WINDOW_UPDATE:
            increment = int.from_bytes(payload, "big") & _MAX_WINDOW
            if stream_id == 0:
                self.send_window += increment
            elif stream_id in self.streams:
                self.streams[stream_id].window += increment
        elif kind == _RST_STREAM:
            stream = self.streams.get(stream_id)
            if stream is not None:
                stream.reset = int.from_bytes(payload, "big")
                stream.ended = True
        elif kind == _GOAWAY:
            raise OSError("HTTP/2: the server is going away")
        elif kind == _PUSH_PROMISE:
            raise OSError("HTTP/2: a push this end refused")
        # PRIORITY and frames of unknown types are ignored, as RFC 9113 asks

    def _fill(self, size: int, deadline: float) -> None:
        while len(self.buffer) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)  # TimeoutError if nothing comes in time
            if not chunk:
                raise OSError("HTTP/2: the server closed the connection")
            self.buffer += chunk

    def _on_data(self, stream_id: int, flags: int, payload: bytes) -> None:
        size = len(payload)  # padding counts toward the window too
        if flags & _PADDED:
            payload = payload[1 : len(payload) - payload[0]]
        self.received = self._given_back(0, self.received + size)
        stream = self.streams.get(stream_id)
        if stream is None:
            return  # a stream this end cancelled
        stream.data += payload
        if flags & _END_STREAM:
            stream.ended = True
        else:
            stream.received = self._given_back(stream_id, stream.received + size)

    def _given_back(self, stream_id: int, received: int) -> int:
        """What is left of ``received`` bytes not yet given back to the window of
        ``stream_id`` (0: the connection's): all of it is, once it passes half."""
        if received <= _MAX_WINDOW // 2:
            return received
        self.sock.sendall(self._frame(_WINDOW_UPDATE, 0, stream_id, struct.pack(">I", received)))
        return 0

    def _on_headers(self, kind: int, stream_id: int, flags: int, payload: bytes) -> None:
        if kind == _HEADERS:
            if flags & _PADDED:
                payload = payload[1 : len(payload) - payload[0]]
            if flags & _PRIORITY:
                payload = payload[5:]
            self.continued = (stream_id, flags, bytearray(payload))
        elif self.continued is None or self.continued[0] != stream_id:
            raise OSError("HTTP/2: a CONTINUATION with no header block before it")
        else:
            self.continued[2].extend(payload)
        if not flags & _END_HEADERS:
            return
        stream_id, first_flags, block = self.continued
        self.continued = None
        headers = self.decoder.decode(bytes(block))  # every block, to keep the table
        stream = self.streams.get(stream_id)
        if stream is not None:
            stream.headers += headers
            if first_flags & _END_STREAM:
                stream.ended = True

    def _on_settings(self, flags: int, payload: bytes) -> None:
        if flags & _ACK:
            return
        for at in range(0, len(payload) - 5, 6):
            name, value = struct.unpack_from(">HI", payload, at)
            if name == 0x4:  # the server's initial window for streams
                change = value - self.stream_window
                self.stream_window = value
                for stream in self.streams.values():
                    stream.window += change
        self.sock.sendall(self._frame(_SETTINGS, _ACK, 0, b""))

    @staticmethod
    def _check(stream: _Stream) -> None:
        if stream.reset is not None:
            raise GrpcError(-1, f"the server reset the stream (code {stream.reset})")
        found = dict(stream.headers)
        status = found.get(b"grpc-status")
        if status is None:
            raise GrpcError(-1, "no grpc-status in the answer")
        if status != b"0":
            message = found.get(b"grpc-message", b"").decode("utf-8", "replace")
            raise GrpcError(int(status), message)


def _prefixed(message: bytes) -> bytes:
    """A gRPC message on the wire: not compressed, its length, then itself."""
    return struct.pack(">BI", 0, len(message)) + message


def _next_message(data: bytearray) -> bytes | None:
    """The first whole gRPC message in ``data``, taken out of it; None if none is
    whole yet."""
    if len(data) < 5:
        return None
    if data[0] != 0:
        raise GrpcError(-1, "a compressed message, which this end did not ask for")
    size = int.from_bytes(data[1:5], "big")
    if len(data) < 5 + size:
        return None
    message = bytes(data[5 : 5 + size])
    del data[: 5 + size]
    return message
