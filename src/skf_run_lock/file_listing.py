"""The file store's survey for ``list``: every lock under a folder, each looked at as
``status`` looks, reading only. Carried as text in the built file: compiled only by a
listing of a folder."""

from __future__ import annotations

import os
import stat

from .file_store import _LINE_SUFFIX, _TEMP_NAME, _read_line, _read_record
from .guard import _GUARD_SUFFIX
from .records import _Look

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .store_protocol import _Survey


def _survey_folder(under: str | os.PathLike[str]) -> _Survey:
    """Every lock file under the folder ``under`` (searched recursively, no link
    followed), and every line whose lock file is missing, each looked at as ``status``
    looks: bounded, non-blocking reads, no guard, nothing created. A subfolder or a
    file this user cannot read is passed over: it shows no lock to them."""
    folder = os.fspath(under)
    if not isinstance(folder, str) or not folder:
        raise ValueError(f"the place to list must be a folder's path, not {folder!r}")
    folder = os.path.abspath(os.path.expanduser(folder))
    try:
        mode = os.stat(folder).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return folder, [], "there is no such folder"  # so no lock, as status finds none
    if not stat.S_ISDIR(mode):
        raise ValueError(f"the place {folder} is not a folder; give a folder to list")
    found: list[tuple[str, _Look]] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError:
            if current == folder:
                raise
            continue
        names = {entry.name for entry in entries}
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):  # no link, FIFO or device
                    found += _looks_of_file(entry, names)
            except (OSError, ValueError):
                continue  # gone, or turned into something else, since it was listed
    return folder, found, ""


def _looks_of_file(entry: os.DirEntry[str], names: set[str]) -> list[tuple[str, _Look]]:
    """The lock a regular file of a folder may be, its line read with it (a line
    without its lock file: a free lock with waiters)."""
    name = entry.name
    if name.endswith(_LINE_SUFFIX):
        if name[: -len(_LINE_SUFFIX)] in names:
            return []  # looked at with its lock file
        lock = entry.path[: -len(_LINE_SUFFIX)]
        look = _Look(None, line=_read_line(entry.path) or [], file_name=os.path.basename(lock))
        return [(lock, look)]
    if name.endswith(_GUARD_SUFFIX) or _TEMP_NAME.fullmatch(name[-17:]):
        return []
    record = _read_record(entry.path)
    line = _read_line(entry.path + _LINE_SUFFIX) if name + _LINE_SUFFIX in names else None
    return [(entry.path, _Look(record, line=line, file_name=name))]
