"""The built file's boot code: the build's own first chapter of the one file users
copy (tools/bundle.py puts it there), no module of the package. Python compiles a
script run as ``python3 FILE`` whole on every call, and caches bytecode only for
imported modules, so the build puts every module into that file as text, compiled
here: those every call runs at once, the rest (each server store, the listings,
--help) only when a function imports one (``from .etcd_store import _open_etcd``).

What is compiled is kept, as Python keeps an imported module's bytecode, in a cache of
this user's own (``$XDG_CACHE_HOME/skf-run-lock``, else ``~/.cache/skf-run-lock``; on
Windows under ``%LOCALAPPDATA%``; where that cannot be made, ``skf-run-lock-UID`` in the
temp folder), so that the next call loads it instead. A cache entry
is used only when it names this very build, this Python and this file as it stands (its
size and time), and only from a folder and a file that this user owns and nobody else
may write: another user's files are never run. Any failure of the cache falls back to
compiling. ``SKF_RUN_LOCK_NO_CACHE=1`` turns the cache off. The package has none of
this: Python compiles and caches its modules itself."""

from __future__ import annotations

import marshal
import os
import stat
import sys
from types import CodeType as _CodeType

# Filled by the build in the file users copy: a carried text's name -> the line of that
# file its text starts at, the carried texts it needs compiled first, and the text; and
# the build's own name for its texts, which a cache entry must carry. Empty here.
_CARRIED: dict[str, tuple[int, tuple[str, ...], str]] = {}
_COMPILED: set[str] = set()
_BUILD = ""

_FOLDER: list[str | None] = []  # the cache folder, once looked for (a call compiles several)
_CACHE_ENTRIES_KEPT = 64  # a cache holds this many entries at most: the newest
_NOT_OTHERS_WRITABLE = stat.S_IWGRP | stat.S_IWOTH
# The cache folder is found before the modules are compiled, so before platforms.py
# chooses the platform's rules: this boot code tests the platform itself, here alone.
_ON_WINDOWS = os.name == "nt"


def _compile_carried(module: str) -> None:
    """Run a carried module's text in this namespace (once): its code from this user's
    cache, or compiled, numbered as its lines stand in this file so that tracebacks,
    coverage and ``inspect`` point at them."""
    if module in _COMPILED:
        return
    first, needs, source = _CARRIED[module]
    for need in needs:
        _compile_carried(need)
    where = globals().get("__file__", "<skf-run-lock>")
    entry = _cache_entry(module, where)
    code = _cached_code(entry) if entry is not None else None
    if code is None:
        import __future__

        # Its own future flags, not a caller's.
        flags = __future__.annotations.compiler_flag
        code = compile("\n" * (first - 1) + source, where, "exec", flags, dont_inherit=True)
        if entry is not None:
            _keep_code(entry, code)
    exec(code, globals())
    _COMPILED.add(module)


def _cache_folder() -> str | None:
    """This user's cache folder for this tool (made if missing), or None where there is
    no such folder this user alone may write; looked for once a process."""
    if not _FOLDER:
        _FOLDER.append(_found_cache_folder())
    return _FOLDER[0]


def _found_cache_folder() -> str | None:
    """This user's cache folder, else (HOME read-only, as agents' sandboxes keep it)
    one of this user's own under the temp folder, checked alike."""
    if _ON_WINDOWS:
        base = os.environ.get("LOCALAPPDATA")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = _private_folder(base, "skf-run-lock")
    if folder is None:
        folder = _private_folder(_temp_folder(), _temp_cache_name())
    return folder


def _private_folder(base: str | None, name: str) -> str | None:
    """``base``/``name``, made if missing, if it is a folder this user alone may write."""
    if not base or not os.path.isabs(base):
        return None
    folder = os.path.join(base, name)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or not _own_and_private(info):
        return None
    return folder


def _temp_folder() -> str | None:
    """The temp folder, as the tempfile module finds it but without importing it (a
    call that finds its cache pays for no more)."""
    for variable in ("TMPDIR", "TEMP", "TMP"):
        if os.environ.get(variable):
            return os.environ[variable]
    return None if _ON_WINDOWS else "/tmp"


def _temp_cache_name() -> str:
    """A name of this user's own in a temp folder every user shares (POSIX): a folder of
    that name that another user made first is not this user's, so it is never used."""
    return "skf-run-lock" if _ON_WINDOWS else f"skf-run-lock-{os.geteuid()}"


def _own_and_private(info: os.stat_result) -> bool:
    """True for a file or folder of this user's that no one else may write."""
    if _ON_WINDOWS:
        return True  # %LOCALAPPDATA% is the user's own
    return info.st_uid == os.geteuid() and not info.st_mode & _NOT_OTHERS_WRITABLE


def _cache_entry(module: str, where: str) -> tuple[str, bytes] | None:
    """Where ``module``'s code is kept, and the header that names what it was compiled
    from (this build, this Python, this file's size and time); None: no cache."""
    if not _BUILD or os.environ.get("SKF_RUN_LOCK_NO_CACHE") == "1":
        return None
    try:
        script = os.stat(where)
    except OSError:
        return None
    folder = _cache_folder()
    if folder is None:
        return None
    name = f"{_BUILD[:16]}-{module}-{sys.implementation.cache_tag}.code"
    header = f"{_BUILD} {sys.hexversion} {script.st_size} {script.st_mtime_ns}\n".encode()
    return os.path.join(folder, name), header


def _cached_code(entry: tuple[str, bytes]) -> _CodeType | None:
    """The code kept at ``entry``, if it is this user's own and names what it must;
    else None."""
    path, header = entry
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _own_and_private(info):
            return None
        with os.fdopen(fd, "rb") as kept:
            fd = -1
            data = kept.read()
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    if not data.startswith(header):
        return None
    try:
        code = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, _CodeType) else None


def _keep_code(entry: tuple[str, bytes], code: _CodeType) -> None:
    """Keep ``code`` at ``entry``: written whole to a file of its own, then renamed into
    place, so that no call reads half of it; the oldest entries beyond the kept number
    go. A failure keeps nothing."""
    path, header = entry
    temporary = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temporary, flags | getattr(os, "O_BINARY", 0), 0o600)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as kept:
            kept.write(header + marshal.dumps(code))
        os.replace(temporary, path)
    except (OSError, ValueError):
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return
    _prune(os.path.dirname(path))


def _prune(folder: str) -> None:
    """Remove the oldest entries beyond the number kept (other builds' and Pythons')."""
    try:
        with os.scandir(folder) as listing:
            entries = [entry for entry in listing if entry.name.endswith(".code")]
        entries.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
        for entry in entries[:-_CACHE_ENTRIES_KEPT]:
            os.unlink(entry.path)
    except OSError:
        pass
