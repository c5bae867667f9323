"""Fake TCP servers for tests of what the product does when a server misbehaves: a
listening socket on loopback whose connections a test's own function serves."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """Listen on a free loopback port, yielded; each connection is handed to ``handle``
    in a thread of its own (which closes it) until the block ends, when the listener
    closes. A handler still talking then ends as its client hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # so the loop sees the block end
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=handle, args=(connection,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join(timeout=10)
        listener.close()
