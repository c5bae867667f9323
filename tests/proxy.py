"""A TCP proxy on loopback in front of a real server, for tests of what a holder does
when the network fails under it: it forwards both ways until a test cuts it, then
blackholes (swallows every byte, answers nothing, keeps every socket open), resets
(closes each connection with a RST, and every new one as it comes, until mended),
finds them stale (resets each open one as its client next speaks), forgets them
(swallows, without a word, what comes on each one open now, as a NAT or a firewall
that dropped them while they were idle; new ones forwarded), chatters (sends
each client a line it never asked for), slows (each
chunk held back a while) or delays (each answer held back a while once its client has
asked twice on the connection: a change's answer comes late, the read before it at
once; what is asked passes at once). A chunk held back is on the wire: it arrives
though the link is blackholed meanwhile. Its threads end with the block, and at the
latest after its lifetime, so a test that forgets it leaves nothing running."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Literal

Fault = Literal["blackhole", "reset", "slow", "delay", "stale", "forget", "chatter"]

_POLL_SEC = 0.1  # how soon each thread sees a fault or the end


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a RST (SO_LINGER on, 0 s), not the FIN of a clean close."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class FaultyProxy:
    """Forwards each connection to 127.0.0.1:``target`` until ``cut(fault)``."""

    def __init__(self, target: int, slow_by: float, lifetime: float) -> None:
        self.target = target
        self.slow_by = slow_by  # each chunk's delay once slowed (each answer held back's)
        self.fault: Fault | None = None
        self.ends = time.monotonic() + lifetime
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.pairs: list[tuple[socket.socket, socket.socket]] = []  # client's, server's
        self.stale: set[socket.socket] = set()  # clients' connections reset as they speak
        self.forgotten: set[socket.socket] = set()  # clients' connections swallowed
        self.threads: list[threading.Thread] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(_POLL_SEC)
        self.port: int = self.listener.getsockname()[1]
        self._start(self._accept)

    def cut(self, fault: Fault) -> None:
        """From now on, ``fault``: for a reset, every open connection is reset at once;
        gone stale, each one open now is reset as its client next speaks (as a proxy
        that forgot it while it was idle answers its next packet), new ones forwarded;
        chatter: each client is sent a line it never asked for, once."""
        with self.lock:
            if fault == "stale":
                self.stale.update(client for client, _ in self.pairs)
                return
            if fault == "forget":
                self.forgotten.update(client for client, _ in self.pairs)
                return
            if fault == "chatter":
                for client, _ in self.pairs:
                    with contextlib.suppress(OSError):
                        # Sent now, not held back by Nagle until the last answer's ACK.
                        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        client.sendall(b"-ERR a line nobody asked for\r\n")
                return
            self.fault = fault
            pairs = list(self.pairs) if fault == "reset" else []
        for client, server in pairs:
            _reset(client)
            _reset(server)

    def mend(self) -> None:
        """From now on, every new connection is forwarded again."""
        self.fault = None

    def close(self) -> None:
        self.stop.set()
        with self.lock:
            pairs = list(self.pairs)
        for client, server in pairs:
            client.close()
            server.close()
        for thread in self.threads:
            thread.join(timeout=10)
        self.listener.close()

    def _ended(self) -> bool:
        return self.stop.is_set() or time.monotonic() > self.ends

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._ended():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.fault == "reset":
                _reset(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                _reset(client)
                continue
            with self.lock:
                self.pairs.append((client, server))
            asked = [0]  # the chunks its client sent
            self._start(self._pump, client, server, asked, False)
            self._start(self._pump, server, client, asked, True)
        self.stop.set()  # its lifetime is over: every pump ends too

    def _pump(
        self, source: socket.socket, sink: socket.socket, asked: list[int], answers: bool
    ) -> None:
        """Forward what ``source`` sends to ``sink`` (``answers``: the server's, to a
        client that sent ``asked[0]`` chunks so far), as the fault of the moment lets."""
        try:
            source.settimeout(_POLL_SEC)
        except OSError:
            return  # reset (closed) by cut() before this thread began
        while not self._ended():
            try:
                data = source.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            if not answers and source in self.stale:
                _reset(source)
                _reset(sink)
                return
            fault = self.fault
            if fault == "blackhole" or (not answers and source in self.forgotten):
                continue  # swallowed: no answer, no close
            if not answers:
                asked[0] += 1
            if fault == "slow" or (fault == "delay" and answers and asked[0] > 1):
                time.sleep(self.slow_by)
            if self.fault == "reset":
                break
            try:
                sink.sendall(data)
            except OSError:
                break
        if self.fault == "blackhole":
            return  # keep the other side's socket open: a blackhole never closes
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def proxy_to(target: int, slow_by: float = 1.5, lifetime: float = 120.0) -> Iterator[FaultyProxy]:
    """A proxy on a free loopback port to 127.0.0.1:``target``, closed as the block ends
    (or after ``lifetime`` seconds); ``slow_by``: each chunk's delay once slowed (each
    answer's held back, once delayed)."""
    proxy = FaultyProxy(target, slow_by, lifetime)
    try:
        yield proxy
    finally:
        proxy.close()
