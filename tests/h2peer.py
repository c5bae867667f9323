"""A scripted HTTP/2 peer for the tests of bench/h2grpc.py: it accepts one connection
on loopback, reads what the client sends until the client's first stream ends (or,
for further steps, until the client has sent so much DATA), then sends the frames a
test gives it, as a server would, and keeps what it read."""

from __future__ import annotations

import socket
import struct
import threading

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """One HTTP/2 frame: a 9-byte head (length, type, flags, stream), then its payload."""
    return struct.pack(">I B I", len(payload) << 8 | kind, flags, stream_id) + payload


def literal(name: bytes, value: bytes) -> bytes:
    """A header field as an HPACK literal not added to the table, neither Huffman-coded
    (both lengths under 127 bytes)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def frames_in(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """The frames in ``data`` (after the preface): (type, flags, stream, payload)."""
    found = []
    at = 0
    while at + 9 <= len(data):
        length = int.from_bytes(data[at : at + 3], "big")
        kind, flags = data[at + 3], data[at + 4]
        stream_id = int.from_bytes(data[at + 5 : at + 9], "big")
        found.append((kind, flags, stream_id, data[at + 9 : at + 9 + length]))
        at += 9 + length
    return found


class ScriptedPeer:
    """Serves one connection: once the client's first stream has ended (a DATA frame
    with END_STREAM), it sends ``script`` and goes on reading until the client closes.
    ``received``: every byte the client sent after the preface.

    ``more``: further steps, in order, each sent once the client has sent that many
    bytes of DATA in all (the first may come before the client's first stream ends,
    as a server gives back window for what it has read). ``read_before``: for each
    step, how many bytes the client had sent when it went out."""

    def __init__(self, script: bytes, more: list[tuple[int, bytes]] | None = None) -> None:
        self.script = script
        self.more = list(more or [])
        self.read_before: list[int] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        connection.settimeout(5.0)
        data = b""
        sent = False
        with connection:
            while True:
                try:
                    chunk = connection.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
                body = data[len(PREFACE) :]
                frames = frames_in(body)
                ended = any(k == 0 and f & 1 for k, f, _, _ in frames)
                if ended and not sent:
                    connection.sendall(self.script)
                    sent = True
                data_sent = sum(len(payload) for kind, _, _, payload in frames if kind == 0)
                while self.more and data_sent >= self.more[0][0]:
                    self.read_before.append(len(body))
                    connection.sendall(self.more.pop(0)[1])
        self.received = data[len(PREFACE) :]
        self.listener.close()

    def stop(self) -> list[tuple[int, int, int, bytes]]:
        """Wait for the client to close; the frames it sent."""
        self.thread.join(10.0)
        return frames_in(self.received)
