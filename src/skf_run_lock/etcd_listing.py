"""The etcd store's listing: every lock under a prefix, read in ranges of one revision
(one consistent view, a page at a time). Compiled only for a listing of etcd."""

from __future__ import annotations

from .etcd_gateway import _b64, _EtcdGateway, _not_etcd, _unb64
from .etcd_store import _looked
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .store_protocol import _Survey


def _survey_etcd(address: str) -> _Survey:
    """Every lock whose key starts with the address's KEY, from ranges of one revision
    (one consistent view, a page at a time); read only."""
    gateway = _EtcdGateway(address, prefix=True)
    prefix = gateway.key_text.encode()
    try:
        # etcd takes no empty key: the whole keyspace starts at NUL.
        start = prefix or b"\0"
        end = _prefix_end(prefix)
        revision = 0
        groups: dict[bytes, list[Any]] = {}
        while True:
            body: dict[str, Any] = {
                "key": _b64(start),
                "range_end": _b64(end),
                "limit": _SEAMS.survey_page,
                "revision": revision,
            }
            answer = gateway.post("/v3/kv/range", body)
            try:
                revision = revision or int(answer["header"]["revision"])
                kvs = answer.get("kvs", [])
                for kv in kvs:
                    name = _unb64(kv["key"])
                    groups.setdefault(name.partition(b"\0")[0], []).append(kv)
            except (AttributeError, KeyError, TypeError, ValueError):
                raise _not_etcd("range", "kvs") from None
            if not (answer.get("more") and kvs):
                break
            start = name + b"\0"
    finally:
        gateway._give_back()
    try:
        looks = {key: _looked(key, found, revision) for key, found in groups.items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        raise _not_etcd("range", "kvs") from None
    found = [(gateway.address_of(key, "replace"), look) for key, look in looks.items()]
    return address, found, ""


def _prefix_end(prefix: bytes) -> bytes:
    """The end of etcd's range of keys that start with ``prefix`` (all keys: NUL)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])
