"""The registry of stores: which store keeps a lock, by the form of its name. A file
path is the file store; an address names a server store by its scheme. A server store's
module is loaded only by a call that names such a lock, so that a file-lock call never
pays for it. A new store is its modules, two functions that import them, and one entry
in ``_SERVER_STORES``: the address check, ``--help``, the README's list of forms and the
tests all read it."""

from __future__ import annotations

import os
import re

from .file_store import _open_file
from .quoting import _shown_address
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .store_protocol import _Store, _Survey


# Each server store's module is imported by the function that needs it, so that a call
# that names no such lock never loads it (the file users copy carries it as text).


def _open_etcd_lock(address: str) -> _Store:
    from .etcd_store import _open_etcd

    return _open_etcd(address)


def _survey_etcd_prefix(address: str) -> _Survey:
    from .etcd_listing import _survey_etcd

    return _survey_etcd(address)


def _open_redis_lock(address: str) -> _Store:
    from .redis_store import _open_redis

    return _open_redis(address)


def _survey_redis_prefix(address: str) -> _Survey:
    from .redis_listing import _survey_redis

    return _survey_redis(address)


class _ServerKind:
    """One server store: its schemes, the address form it takes, the function that
    opens a lock (``address -> _Store``), and the one that surveys the locks under a
    prefix (``address -> _Survey``)."""

    __slots__ = ("form", "name", "opener", "schemes", "surveyor")

    def __init__(
        self,
        name: str,
        schemes: tuple[str, ...],
        form: str,
        *,
        opener: Callable[[str], _Store],
        surveyor: Callable[[str], _Survey],
    ) -> None:
        self.name = name
        self.schemes = schemes
        self.form = form
        self.opener = opener
        self.surveyor = surveyor


_SERVER_STORES = (
    _ServerKind(
        "etcd",
        ("etcd", "etcd+https"),
        "etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY",
        opener=_open_etcd_lock,
        surveyor=_survey_etcd_prefix,
    ),
    _ServerKind(
        "redis",
        ("redis", "rediss"),
        "redis[s]://[USER@]HOST[:PORT]/KEY",
        opener=_open_redis_lock,
        surveyor=_survey_redis_prefix,
    ),
)

# An address, never a file (one letter is a drive: C://x).
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
_ADDRESS_FORMS = ", ".join(kind.form for kind in _SERVER_STORES[:-1])
_ADDRESS_FORMS += f" or {_SERVER_STORES[-1].form}"


def _refuse_scheme_typos(lock: str) -> None:
    """ValueError for a lock path that starts as an address does (a server's scheme,
    any case, and a colon) without its ``//``: a typo (redis:/host/key), never meant
    as a folder named "redis:"; likewise one whose first part is a scheme followed by
    an empty part, its colon dropped (redis//host/key), never meant as a folder "redis"."""
    first, slash, after = lock.partition("/")
    dropped = _kind_of_scheme(first) if slash and after.startswith("/") else None
    if dropped is not None:
        raise ValueError(
            f"the path {_without_credentials(lock, first + '//')} starts with {first}// but"
            f" not {first}://: an address of {dropped.name} is {dropped.form}"
        )
    scheme, colon, rest = lock.partition(":")
    if not colon or rest.startswith("//"):
        return
    kind = _kind_of_scheme(scheme)
    if kind is None:
        return
    shown = _without_credentials(lock, f"{scheme}:")
    # Windows names no file with a colon: there the address is the only way.
    as_a_file = (
        f"; a file whose path starts so is given as ./{scheme}:..."
        if _SEAMS.platform.colon_in_a_file_name
        else ""
    )
    raise ValueError(
        f"the path {shown} starts with {scheme}: but not {scheme}://: an address of"
        f" {kind.name} is {kind.form}{as_a_file}"
    )


def _kind_of_scheme(scheme: str) -> _ServerKind | None:
    """The server store whose scheme ``scheme`` is, in any case; None: no store's."""
    return next((k for k in _SERVER_STORES if scheme.lower() in k.schemes), None)


def _without_credentials(lock: str, start: str) -> str:
    """``lock`` as a message shows it: what stands before an @ may be a password, what
    follows it names the server."""
    at, tail = lock.rpartition("@")[1:]
    return f"{start}<credentials left out>@{tail}" if at else lock


def _server_kind(address: str) -> _ServerKind:
    """The server store of ``address``; ValueError for a scheme no store has."""
    scheme = address.partition("://")[0]
    for kind in _SERVER_STORES:
        if scheme in kind.schemes:
            return kind
    raise ValueError(
        f"the lock address {_shown_address(address)} has a scheme this version does not know"
        f" ({scheme}); give a file path, or {_ADDRESS_FORMS}"
    )


def _store_for(lock: str | os.PathLike[str]) -> _Store:
    """The store of a lock, as the seam gives it (``_SEAMS.opened``: as it is, unless a
    test wraps it); ValueError for an unknown scheme (never a folder)."""
    if isinstance(lock, str) and _ADDRESS.match(lock):
        return _SEAMS.opened(_server_kind(lock).opener(lock))
    _refuse_scheme_typos(os.fspath(lock))
    return _SEAMS.opened(_open_file(lock))


def _lock_identity(lock: str | os.PathLike[str]) -> tuple[object, ...]:
    """What names ``lock`` however it is spelled (its store says: a file by its folder
    and name, a server's lock by its scheme, endpoints and key); ValueError as
    _store_for. Opens nothing on the network, and no call of the CLI asks it."""
    store = _store_for(lock)
    try:
        return store.identity()
    finally:
        store.close()


def _survey_for(under: str | os.PathLike[str]) -> _Survey:
    """The locks under a place: a folder, or a server's address whose KEY is a prefix;
    ValueError for an unknown scheme or a place that is a file."""
    if isinstance(under, str) and _ADDRESS.match(under):
        return _server_kind(under).surveyor(under)
    _refuse_scheme_typos(os.fspath(under))
    from .file_listing import _survey_folder

    return _survey_folder(under)
