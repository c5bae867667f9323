"""The registry of stores: which store keeps a lock, by the form of its name. A file
path is the file store; an address names a server store by its scheme. A server store's
module is loaded only by a call that names such a lock, so that a file-lock call never
pays for it. A new store is one module and one entry in ``_SERVER_STORES``: the address
check, ``--help``, the README's list of forms and the tests all read it."""

from __future__ import annotations

import os
import re

from .file_store import _FileStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .interface import _Store, _Survey


class _ServerKind:
    """One server store: its schemes, the address form it takes, its module and the
    function there that opens a lock (``address -> _Store``), and its listing's module
    and the function there that surveys the locks under a prefix (``address ->
    _Survey``)."""

    __slots__ = ("form", "listing", "module", "name", "opener", "schemes", "surveyor")

    def __init__(
        self,
        name: str,
        schemes: tuple[str, ...],
        form: str,
        module: str,
        *,
        opener: str,
        listing: str,
        surveyor: str,
    ) -> None:
        self.name = name
        self.schemes = schemes
        self.form = form
        self.module = module
        self.opener = opener
        self.listing = listing
        self.surveyor = surveyor


_SERVER_STORES = (
    _ServerKind(
        "etcd",
        ("etcd", "etcd+https"),
        "etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY",
        "etcd_store",
        opener="_open_etcd",
        listing="etcd_listing",
        surveyor="_survey_etcd",
    ),
    _ServerKind(
        "redis",
        ("redis", "rediss"),
        "redis[s]://[USER@]HOST[:PORT]/KEY",
        "redis_store",
        opener="_open_redis",
        listing="redis_listing",
        surveyor="_survey_redis",
    ),
)

# An address, never a file (one letter is a drive: C://x).
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
_ADDRESS_FORMS = ", ".join(kind.form for kind in _SERVER_STORES[:-1])
_ADDRESS_FORMS += f" or {_SERVER_STORES[-1].form}"

# Filled by the build (tools/bundle.py) in the one file users copy, where each server
# store's module is carried as text: its name -> the line of that file its text starts
# at, the modules it needs compiled first, and the text. In the package it stays empty,
# and the modules are imported as any others.
_CARRIED: dict[str, tuple[int, tuple[str, ...], str]] = {}
_COMPILED: set[str] = set()


def _shown_address(address: str) -> str:
    """``address`` as a message may show it: what stands before an ``@`` is left out."""
    scheme, sep, rest = address.partition("://")
    if "@" not in rest:
        return address
    return f"{scheme}{sep}<credentials left out>@{rest.rpartition('@')[2]}"


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


def _compile_carried(module: str) -> None:
    """Compile and run a carried module's text in this namespace (once), numbered as its
    lines stand in this file, so that tracebacks and coverage point at them."""
    if module in _COMPILED:
        return
    first, needs, source = _CARRIED[module]
    for need in needs:
        _compile_carried(need)
    import __future__

    where = globals().get("__file__", "<skf-run-lock>")
    # Its own future flags, not a caller's.
    flags = __future__.annotations.compiler_flag
    code = compile("\n" * (first - 1) + source, where, "exec", flags, dont_inherit=True)
    exec(code, globals())
    _COMPILED.add(module)


def _loaded(module: str, function: str) -> Any:
    """The function named ``function`` of a carried ``module`` (a store, or work a call
    seldom needs), loaded first."""
    if _CARRIED:
        _compile_carried(module)
        return globals()[function]
    import importlib

    return getattr(importlib.import_module(f"{__package__}.{module}"), function)


def _opener(kind: _ServerKind) -> Callable[[str], _Store]:
    """The function that opens a lock of ``kind``."""
    opener: Callable[[str], _Store] = _loaded(kind.module, kind.opener)
    return opener


def _store_for(lock: str | os.PathLike[str]) -> _Store:
    """The store of a lock; ValueError for an unknown scheme (never a folder)."""
    if isinstance(lock, str) and _ADDRESS.match(lock):
        return _opener(_server_kind(lock))(lock)
    return _FileStore(lock)


def _survey_for(under: str | os.PathLike[str]) -> _Survey:
    """The locks under a place: a folder, or a server's address whose KEY is a prefix;
    ValueError for an unknown scheme or a place that is a file."""
    if isinstance(under, str) and _ADDRESS.match(under):
        kind = _server_kind(under)
        surveyor: Callable[[str], _Survey] = _loaded(kind.listing, kind.surveyor)
        return surveyor(under)
    folder: Callable[[str | os.PathLike[str]], _Survey] = _loaded("survey", "_survey_folder")
    return folder(under)
