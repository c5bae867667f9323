"""The Redis store's listing: every lock under a prefix on one node, or on every
primary of a Redis Cluster, found with SCAN (never KEYS, the prefix matched
literally) and read a batch of locks to a round trip. Compiled only for a listing of
Redis."""

from __future__ import annotations

import errno
import re

from .redis_gateway import _REDIS_BUSY
from .redis_store import _RedisStore, _slot_base
from .resp import _errors_in, _RedisError
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .records import _Look
    from .store_protocol import _Survey


def _lock_keys(key: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """The keys of the lock at ``key``: its record, last holder, line and places'
    prefix (as _RedisStore keeps them)."""
    base = (_slot_base(key.decode("utf-8", "surrogateescape")) or "").encode(
        "utf-8", "surrogateescape"
    )
    return key, base + b"\0last", base + b"\0line", base + b"\0wait\0"


def _lock_key_of(name: bytes) -> bytes | None:
    """The lock a key found by a scan may belong to: a record's key is its own; a last
    holder's or a line's gives its lock's; None for the other keys."""
    if b"\0" not in name:
        return name
    base, _, rest = name.partition(b"\0")
    if rest not in (b"last", b"line"):
        return None  # a waiter's place or bell: its line shows the lock
    text = base.decode("utf-8", "surrogateescape")
    if text.startswith("{") and text.endswith("}") and _slot_base(text[1:-1]) == text:
        return base[1:-1]
    return base if _slot_base(text) == text else None


def _glob_escaped(data: bytes) -> bytes:
    """``data`` as a SCAN pattern matches it literally."""
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", data)


class _RedisSurvey:
    """What reads many locks at once, for a listing, through a Redis ``store`` of the
    prefix (its reads) and that store's ``gateway``: the nodes to scan, the locks' keys
    under the prefix on one, a look at a batch of them."""

    def __init__(self, address: str) -> None:
        self.store = _RedisStore(address, prefix=True)
        self.gateway = self.store.gateway

    def primaries(self) -> list[str]:
        """The address's node, or every primary of the Redis Cluster it is a node of."""
        gateway = self.gateway
        (nodes,) = gateway.call(("CLUSTER", "NODES"), raw=True)
        if isinstance(nodes, _RedisError):
            if "cluster support disabled" in nodes.text:
                return [gateway.endpoint]
            raise gateway._refusal(nodes)
        if not isinstance(nodes, bytes):
            raise OSError(errno.EPROTO, "Redis answered CLUSTER NODES in a shape it never has")
        found = []
        for line in nodes.decode("utf-8", "replace").splitlines():
            fields = line.split()
            flags = fields[2].split(",") if len(fields) > 2 else []
            if "master" in flags and "fail" not in flags and "noaddr" not in flags:
                found.append(gateway._node_address(fields[1].partition("@")[0]))
        return found or [gateway.endpoint]

    def scan(self) -> set[bytes]:
        """The keys of the locks on this node that start with the prefix: the records'
        keys, and the locks of last holders and lines (``{KEY}`` starts them)."""
        keys = set()
        prefix = self.store.key
        escaped = _glob_escaped(prefix)
        for pattern in (escaped + b"*", b"\\{" + escaped + b"*"):
            cursor: bytes | None = b"0"
            while cursor is not None:
                (answer,) = self.gateway.call(
                    ("SCAN", cursor, "MATCH", pattern, "COUNT", _SEAMS.scan_count)
                )
                if not (isinstance(answer, list) and len(answer) == 2):
                    raise OSError(errno.EPROTO, "Redis answered SCAN in a shape it never has")
                following, names = answer
                for name in names if isinstance(names, list) else []:
                    key = _lock_key_of(name) if isinstance(name, bytes) else None
                    if key is not None and key.startswith(prefix):
                        keys.add(key)
                cursor = following if isinstance(following, bytes) and following != b"0" else None
        return keys

    def looks(self, keys: list[bytes]) -> list[tuple[bytes, _Look]]:
        """A look at each lock of ``keys``, all read in one round trip; a lock whose
        slot moved meanwhile is looked at alone (following it), and a key that holds
        another type of value is no lock."""
        store = self.store
        commands = [command for key in keys for command in store._reads(_lock_keys(key))]
        answers = self.gateway.call(*commands, raw=True)
        per = len(store._reads())  # each lock's reads, answered in order
        looks = []
        for at, key in enumerate(keys):
            mine = answers[per * at : per * at + per]
            errors = _errors_in(mine)
            if not errors:
                looks.append((key, store._looked(mine, _lock_keys(key)[3])))
            elif errors[0].code in (*_REDIS_BUSY, "MOVED", "ASK"):
                lone = _RedisStore(self.gateway.address_of(key))
                try:
                    looks.append((key, lone.look()))
                finally:
                    lone.close()
        return looks


def _survey_redis(address: str) -> _Survey:
    """Every lock whose key starts with the address's KEY, on the node it names or on
    every primary of its Cluster: found with SCAN (never KEYS), then read a batch at
    a time; read only."""
    survey = _RedisSurvey(address)
    gateway = survey.gateway
    try:
        found: dict[bytes, str] = {}  # each lock's key, and the node that holds it
        for node in survey.primaries():
            gateway._go(node)
            for key in survey.scan():
                found.setdefault(key, node)
        by_node: dict[str, list[bytes]] = {}
        for key, node in found.items():
            by_node.setdefault(node, []).append(key)
        looks: list[tuple[bytes, _Look]] = []
        for node, keys in by_node.items():
            for at in range(0, len(keys), _SEAMS.survey_batch):
                gateway._go(node)
                looks += survey.looks(keys[at : at + _SEAMS.survey_batch])
    finally:
        survey.store.close()
    return address, [(gateway.address_of(key), look) for key, look in looks], ""
