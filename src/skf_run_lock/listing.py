"""The listing: every lock under a place at once (a folder, an etcd prefix, a Redis
keyspace or a whole Redis Cluster), each judged as ``status`` judges it. A store's
survey only reads; which of what it found are locks is a decision of its own."""

from __future__ import annotations

import os
import time

from .contract import DEFAULT_STALE_AFTER_MIN
from .decisions import _listed, _live
from .inputs import _checked_stale_after
from .outputs import _list_result, _status_result
from .registry import _survey_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .contract import ListResult, StatusResult

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
    stale_after = _checked_stale_after(stale_after)
    shown, found = _survey_for(under)
    now = time.time()
    statuses: list[StatusResult] = []
    for lock, look in found:
        record = look.record or look.last
        line = _live(look.line, now)
        if _listed(record, line):
            statuses.append(_status_result(lock, record, stale_after, now, False, line=line))
    return _list_result(shown, statuses)
