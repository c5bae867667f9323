"""The listing: every lock under a place at once (a folder, an etcd prefix, a Redis
keyspace or a whole Redis Cluster), each judged as ``status`` judges it. Its work is
in ``survey``, which the built file carries as text and compiles only for a listing,
so that a lock call never pays for it."""

from __future__ import annotations

import os

from .contract import DEFAULT_STALE_AFTER_MIN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .contract import ListResult

__all__ = ["list_locks"]


def list_locks(
    under: str | os.PathLike[str], stale_after: float = DEFAULT_STALE_AFTER_MIN * 60
) -> ListResult:
    """List every lock under ``under``: a folder (searched recursively, links not
    followed), or an ``etcd://``/``redis://`` address whose KEY is a prefix (a Redis
    Cluster: every primary). Read only, like :func:`status`.

    :param under: the folder or the address of the locks to list.
    :param stale_after: seconds; judges a record without a timeout of its own.
    :returns: the list output, its locks sorted by name.
    :raises ValueError: a place that is a file, or an unknown scheme.
    :raises OSError: the place could not be read.
    """
    from .survey import _list_locks

    return _list_locks(under, stale_after)
