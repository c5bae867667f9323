"""etcd's watch, as a waiter on an etcd lock keeps one: a stream of the changes to a key
or a range of keys, made from now on its own connection through the gateway, read a
message at a time until a deadline. Compiled only for an etcd lock."""

from __future__ import annotations

import errno
import json

from .etcd_gateway import _b64, _unb64
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .etcd_gateway import _EtcdGateway
    from .http1 import _HttpConnection


class _EtcdWatch:
    """One watch of a waiter's, on the ``gateway``'s endpoints and credentials: open
    while ``connection`` is, streaming the changes to ``watching`` after revision
    ``watched``; ``streamed``: the revision of the latest change it streamed."""

    def __init__(self, gateway: _EtcdGateway) -> None:
        self.gateway = gateway
        self.connection: _HttpConnection | None = None
        # The keys it watches: from a key to a range's end (None: that key alone).
        self.watching: tuple[bytes, bytes | None] | None = None
        self.watched = 0  # the revision after which the open watch streams changes
        self.streamed = 0  # the revision of the latest change a watch streamed

    def vouches(self, seen: int) -> bool:
        """Whether it is open, streams every change after revision ``seen`` and has
        streamed none of them yet."""
        return self.connection is not None and 0 < self.watched <= seen and self.streamed <= seen

    def stop(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def start(self, until: float, keys: tuple[bytes, bytes | None]) -> bool:
        """Watch ``keys`` (a key and a range's end, or None: that key alone) from now:
        True once it streams, ``watched`` the revision it streams the changes after."""
        gateway = self.gateway
        gateway.deadline = min(until, _SEAMS.clock() + gateway.timeout)
        key, end = keys
        watch = {"key": _b64(key)}
        if end is not None:
            watch["range_end"] = _b64(end)
        self.watching = keys
        payload = json.dumps({"create_request": watch}).encode()
        try:
            gateway._authorize()
        except (OSError, ValueError):
            return False  # the next step says why
        for endpoint in gateway.endpoints:
            try:
                self.connection = gateway._open(endpoint)
                self.connection.send("/v3/watch", payload, gateway.headers, gateway.deadline)
                if self.connection.start_answer(gateway.deadline) == 200 and self._created(until):
                    return True
            except (OSError, ValueError):
                pass
            self.stop()
        return False

    def _created(self, until: float) -> bool:
        """Whether the watch's first message says it was made; ``watched``: its revision."""
        try:
            result = self._message(until)
            revision = result["header"]["revision"]
        except (AttributeError, KeyError, TypeError, ValueError):
            return False
        if not (result.get("created") and isinstance(revision, str) and revision.isdigit()):
            return False
        self.watched = int(revision)
        return True

    def deleted(self, until: float, kept: dict[bytes, Any] | None, seen: int) -> set[bytes]:
        """The keys deleted after revision ``seen`` in the watch's next message; each
        change after ``seen`` is applied to ``kept``. A watch kept from an earlier wait
        may still bring changes the look at ``seen`` already saw: they are passed over.
        ConnectionResetError if the stream ended."""
        try:
            result = self._message(until)
            if result.get("canceled"):
                raise ValueError("canceled")
            deleted = set()
            # A PUT, the default, has no type in etcd's JSON.
            for event in result.get("events") or []:
                kv = event["kv"]
                revision = int(kv["mod_revision"])
                if revision <= seen:
                    continue
                self.streamed = max(self.streamed, revision)
                key = _unb64(kv["key"])
                if event.get("type") == "DELETE":
                    deleted.add(key)
                    if kept is not None:
                        kept.pop(key, None)
                elif kept is not None:
                    kept[key] = kv
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ConnectionResetError(errno.ECONNRESET, "the watch ended") from None
        return deleted

    def _message(self, until: float) -> Any:
        """The result of the watch's next message (TimeoutError if none came by then)."""
        assert self.connection is not None
        return json.loads(self.connection.readline(until).decode("utf-8"))["result"]
