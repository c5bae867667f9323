"""Connections kept from one call to the next in a process: one idle list per server
endpoint, user, credentials and TLS files, each connection lent to one call at a time
(a Redis WATCH lives on its connection), sound when lent, never used by a forked child,
closed at exit. Compiled only for a server's lock."""

from __future__ import annotations

import atexit
import os
import threading

from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    from .server_gateway import _Connection

    _C = TypeVar("_C", bound=_Connection)

    # What a kept connection was made for: its scheme, its endpoint, the user, the
    # number of its secret (never the secret itself) and its TLS files as they stood.
    _KeptKey = tuple[object, ...]

# The idle connections kept per key: as many as a process's threads used at once, up to
# this (serve's tool calls and renewals each lend one while they run).
_IDLE_MAX = 4
# How long a request that changes nothing waits for the first answer on a kept
# connection before it is sent again on a new one: a NAT or a firewall that dropped the
# connection while it was idle swallows what comes on it without a word.
_UNPROVEN_ANSWER_SEC = 1.0


class _KeptConnections:
    """The process's kept connections: ``idle``, per key, each idle connection with
    when it was kept, the newest last; ``secrets``, the number of each secret a key was
    made with."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.idle: dict[_KeptKey, list[tuple[float, _Connection]]] = {}
        self.secrets: dict[str, int] = {}

    def secret_number(self, secret: str | None) -> int:
        """The number that stands for ``secret`` in a key (0: none), so that no key, and
        nothing that shows one, holds a password. A hash would cost a call hashlib's
        import, 2 ms."""
        if not secret:
            return 0
        with self.guard:
            return self.secrets.setdefault(secret, len(self.secrets) + 1)

    def lend(self, key: _KeptKey, kind: type[_C]) -> _C | None:
        """An idle connection kept for ``key``, sound (nothing came on it while it was
        idle), lent to the caller alone until it keeps it again; None if none is.
        It is ``unproven`` until its first answer."""
        now = _SEAMS.clock()
        while True:
            with self.guard:
                idle = self.idle.get(key)
                if not idle:
                    return None
                since, connection = idle.pop()
            # Idle too long, a NAT or a proxy may have dropped it without a word: a
            # request sent into that silence would wait out its deadline.
            fresh = now - since < _SEAMS.kept_idle_sec
            if isinstance(connection, kind) and fresh and connection.sound():
                connection.unproven = True
                return connection
            connection.close()

    def keep(self, connection: _Connection) -> None:
        """Keep ``connection``, clean (every answer read), for the next call made with
        its key; closed instead once enough are kept, or if another process made it."""
        if connection.pid != os.getpid() or connection.received:
            connection.close()
            return
        with self.guard:
            idle = self.idle.setdefault(connection.kept_as, [])
            if len(idle) < _IDLE_MAX:
                idle.append((_SEAMS.clock(), connection))
                return
        connection.close()

    def discard(self, key: _KeptKey) -> None:
        """Close the idle connections of ``key``: one of them was found broken (the
        server restarted, a proxy reset them), so the others likely are too."""
        with self.guard:
            idle = self.idle.pop(key, [])
        for _, connection in idle:
            connection.close()

    def close_all(self) -> None:
        """At exit."""
        with self.guard:
            idle, self.idle = self.idle, {}
        for connections in idle.values():
            for _, connection in connections:
                connection.close()

    def forget(self) -> None:
        """In a forked child: the parent's connections are the parent's. The child lets
        go of its copies (its descriptors closed, nothing sent: the parent's connection
        goes on) and makes its own. A new guard: a thread of the parent may have held
        this one when the process forked."""
        self.guard = threading.Lock()
        idle, self.idle = self.idle, {}
        for connections in idle.values():
            for _, connection in connections:
                connection.let_go()


_KEPT = _KeptConnections()
atexit.register(_KEPT.close_all)
if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_KEPT.forget)
