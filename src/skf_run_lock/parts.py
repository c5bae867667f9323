"""Parts of a tree: the path patterns a hold may name, checked, and the questions asked
of them: does a part cover a path (and which of many parts does each of many paths lie
in: indexed), and do two parts share one. Pure: no store, no clock. Compiled only for a
call that names parts or paths.

A part is read as git reads a ``:(glob)`` pathspec: segments between ``/``; ``*`` is
any characters within a segment, ``?`` one character (a code point), a segment of
stars alone (``**``) any number of whole segments, none included; elsewhere a run of
stars is ``*``. A part covers every path it matches and everything under such a path.
A path is literal (its ``*`` and ``?`` are characters). Both are compared with ASCII
case folded, everywhere: on macOS and Windows ``Src/A.py`` is ``src/a.py``, and a
false conflict on Linux is the safe side.

A part is kept as written after normalisation (``./`` at the start and every ``/`` at
the end dropped, its case kept), which is what messages show; it is compared by its
key (``_part_key``: ASCII folded, runs of stars collapsed), so a list of parts is a
set of keys, each shown by the least of the spellings given for it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    _Pattern = tuple[str, ...]  # a part's segments, each "**" or a glob (folded)

_PART_MAX_LEN = 255
_PARTS_MAX = 100
_GLOBSTAR = "**"
# What the characters read so far of one segment may be, one bit each: nothing, ".",
# "..", or anything else. Only the last is a segment: a path never holds an empty,
# "." or ".." segment, so two globs that share only those share no path.
_SOFAR_EMPTY = 1
_SOFAR_DOT = 2
_SOFAR_DOTS = 4
_SOFAR_SEGMENT = 8


def _checked_part(part: object) -> str:
    """``part`` as a hold keeps it: normalised, its case kept; or ValueError, one line
    naming the part and what is wrong with it."""
    if not isinstance(part, str):
        raise ValueError(f"a part must be a string, not {type(part).__name__}")
    if not part:
        raise ValueError("a part must not be empty: name a path or a pattern")
    shown = _shown(part)
    if len(part) > _PART_MAX_LEN:
        raise ValueError(
            f"part {shown} is {len(part)} characters long; at most {_PART_MAX_LEN} allowed"
        )
    if any(c < " " or "\x7f" <= c <= "\x9f" for c in part):
        raise ValueError(f"part {shown} holds a control character: name paths by printable ones")
    for c in "[]{}":
        if c in part:
            raise ValueError(
                f"part {shown} holds {c!r}: only '*', '?' and '**' are patterns in a part"
            )
    return _normalised(part, "part", shown)


def _checked_parts(parts: object) -> tuple[str, ...] | None:
    """The parts a caller gave, checked, as a set: one per key, in the order of the keys;
    None (no parts: the whole lock) stays None. ValueError, one line, for anything else
    than a list (or tuple, or set) of 1 to 100 parts."""
    if parts is None:
        return None
    if isinstance(parts, str):
        raise ValueError("parts must be a list of strings, not a string: put one part in a list")
    if not isinstance(parts, list | tuple | set | frozenset):
        raise ValueError(f"parts must be a list of strings, not {type(parts).__name__}")
    if not parts:
        raise ValueError("parts is empty: leave parts out to hold the lock whole")
    if len(parts) > _PARTS_MAX:
        raise ValueError(f"{len(parts)} parts given; at most {_PARTS_MAX} allowed")
    spellings: dict[str, str] = {}
    for part in parts:
        text = _checked_part(part)
        key = _part_key(text)
        # The least spelling, so that the same set given in any order is kept alike.
        spellings[key] = min(spellings.get(key, text), text)
    return tuple(spellings[key] for key in sorted(spellings))


def _checked_path(path: object, posix_names: bool = False) -> str:
    """``path`` (one a commit touches, as git prints it) normalised as a part is, its
    case kept; or ValueError, one line, naming it. Its ``*``, ``?`` and brackets are
    characters. A ``.`` segment is refused as ``..`` is (git never prints one). Where a
    file's name may hold a backslash or a colon (``posix_names``), they are characters
    of it (git names such a file so); elsewhere (Windows) a backslash is a separator a
    person typed, and a drive an absolute path: refused, as in a part."""
    if not isinstance(path, str):
        raise ValueError(f"a path must be a string, not {type(path).__name__}")
    if not path:
        raise ValueError("a path must not be empty")
    return _normalised(path, "path", _shown(path), posix_names)


def _checked_paths(paths: object, posix_names: bool = False) -> tuple[str, ...]:
    """The paths a caller asks about, each checked (_checked_path), in the order given,
    each once (the first time it came); ValueError, one line, for the first that is
    wrong, or for anything else than a list (or tuple) of strings."""
    if isinstance(paths, str):
        raise ValueError("paths must be a list of strings, not a string: put one path in a list")
    if not isinstance(paths, list | tuple):
        raise ValueError(f"paths must be a list of strings, not {type(paths).__name__}")
    return tuple(dict.fromkeys(_checked_path(path, posix_names) for path in paths))


def _normalised(text: str, what: str, shown: str, posix_names: bool = False) -> str:
    """``text`` without ``./`` at its start nor ``/`` at its end, or ValueError naming
    it (``what``: part or path) for what neither may hold (``posix_names``: a path whose
    names may hold a backslash or a colon)."""
    if "\\" in text and not posix_names:
        raise ValueError(f"{what} {shown} holds a backslash: separate segments with '/'")
    drive = text[1:2] == ":" and text[0].isascii() and text[0].isalpha() and not posix_names
    if text.startswith("/") or drive:
        raise ValueError(
            f"{what} {shown} is an absolute path: name it from the top of the tree,"
            " with '/' between segments"
        )
    if text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if text in ("", "."):
        if what == "part":
            raise ValueError(
                f"part {shown} names the whole tree: leave parts out to hold the lock whole"
            )
        raise ValueError(f"path {shown} names the top of the tree: name a file or folder in it")
    segments = text.split("/")
    if "" in segments:
        raise ValueError(f"{what} {shown} holds an empty segment (two '/' in a row): write one '/'")
    if "." in segments:
        raise ValueError(f"{what} {shown} holds a '.' segment: leave it out")
    if ".." in segments:
        raise ValueError(
            f"{what} {shown} holds a '..' segment: name the path from the top of the tree"
            " without one"
        )
    return text


def _shown(text: str) -> str:
    """``text`` as a message shows it: quoted on one line, a long one cut."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}..."


def _folded(text: str) -> str:
    """``text`` with ASCII letters lowercased, and no other character changed."""
    if text.isascii():
        return text.lower()
    return "".join(c.lower() if c.isascii() else c for c in text)


def _pattern(part: str) -> _Pattern:
    """A checked part's segments, folded: ``**`` for a segment of two stars or more, a
    glob with each run of stars made one otherwise."""
    segments = []
    for written in _folded(part).split("/"):
        if len(written) > 1 and written.strip("*") == "":
            segments.append(_GLOBSTAR)
            continue
        glob = written
        while "**" in glob:
            glob = glob.replace("**", "*")
        segments.append(glob)
    return tuple(segments)


def _part_key(part: str) -> str:
    """What a checked part is compared by: two parts with one key are one part."""
    return "/".join(_pattern(part))


def _covers(part: str, path: str) -> bool:
    """Whether ``path`` lies in ``part`` (both checked): its first segments, some or
    all, match the pattern."""
    return _ready_covers(_Ready(part), _folded(path))


class _Ready:
    """A checked part made ready to be matched against many paths: ``folded``, and
    unless it is literal (``pattern`` None) its pattern and where its first star or
    "?" stands (``first``): what stands before it is literal (a "**" there may take no
    segment: "src/**" covers "src")."""

    __slots__ = ("first", "folded", "pattern")

    def __init__(self, part: str) -> None:
        self.folded = _folded(part)
        star, mark = self.folded.find("*"), self.folded.find("?")
        self.first = star if mark < 0 or 0 <= star < mark else mark
        self.pattern = None if self.first < 0 else _pattern(part)


def _ready_covers(ready: _Ready, path: str) -> bool:
    """Whether the checked, folded ``path`` lies in the part ``ready`` is."""
    part = ready.folded
    if ready.pattern is None:  # the part's own path, or one under it
        return path.startswith(part) and path[len(part) : len(part) + 1] in ("", "/")
    if not (path + "/").startswith(part[: ready.first]):
        return False
    return _prefix_matches(ready.pattern, path.split("/"))


class _PartIndex:
    """Parts (checked) indexed to find, for each of many paths, those it lies in. Each
    part is asked once however many hold it (readers share the same parts). Every
    literal segment of a part (no star, no "?") must be some segment of a path it
    covers, folded: a part whose first segment is literal covers only paths whose
    first segment is that one, and is looked up by it; one whose first segment is a
    glob, by its last literal segment, among all of a path's segments; only one with
    no literal segment (``**/*.md``) is tried on every path, and only if the path holds
    each run of characters its globs must match (``.md``). Ten thousand paths against
    a thousand parts ask each path about the few parts that name its folders."""

    __slots__ = ("at", "by_any", "by_first", "everywhere", "pieces", "ready")

    def __init__(self, parts: list[str]) -> None:
        places: dict[str, list[int]] = {}  # each part's key, and where it stands
        for at, part in enumerate(parts):
            places.setdefault(_part_key(part), []).append(at)
        self.at = list(places.values())
        self.ready = [_Ready(parts[same[0]]) for same in self.at]
        self.by_first: dict[str, list[int]] = {}
        self.by_any: dict[str, list[int]] = {}
        self.everywhere: list[int] = []
        self.pieces = [_pieces(ready.folded) for ready in self.ready]
        for one, ready in enumerate(self.ready):
            segments = ready.folded.split("/")
            literal = [s for s in segments if "*" not in s and "?" not in s]
            if literal and literal[0] == segments[0]:
                self.by_first.setdefault(segments[0], []).append(one)
            elif literal:
                self.by_any.setdefault(literal[-1], []).append(one)
            else:
                self.everywhere.append(one)

    def covering(self, path: str) -> list[int]:
        """The places in ``parts``, in order, of those that ``path`` (checked) lies in."""
        folded = _folded(path)
        segments = folded.split("/")
        tried = [*self.by_first.get(segments[0], ()), *self.everywhere]
        if self.by_any:
            for segment in set(segments):
                tried += self.by_any.get(segment, ())
        found = [
            self.at[one]
            for one in tried
            if all(piece in folded for piece in self.pieces[one])
            and _ready_covers(self.ready[one], folded)
        ]
        if len(found) == 1:
            return list(found[0])
        return sorted(at for same in found for at in same)  # in the parts' order


def _pieces(part: str) -> list[str]:
    """The runs of characters (no star, no "?") of a folded part: a path it covers
    holds each of them, as its segments match the part's."""
    return [piece for piece in part.replace("?", "*").replace("/", "*").split("*") if piece]


def _prefix_matches(pattern: _Pattern, segments: list[str]) -> bool:
    """Whether some of the first ``segments`` (none to all) match ``pattern``: the
    positions in the pattern reached after each segment, a ``**`` passed over freely."""
    end = len(pattern)
    reached = _past_globstars(pattern, {0})
    for segment in segments:
        if end in reached:
            return True
        after = set()
        for at in reached:
            glob = pattern[at]
            if glob == _GLOBSTAR:
                after.add(at)
            elif _glob_matches(glob, segment):
                after.add(at + 1)
        if not after:
            return False
        reached = _past_globstars(pattern, after)
    return end in reached


def _past_globstars(pattern: _Pattern, reached: set[int]) -> set[int]:
    """``reached`` with every position a ``**`` matching no segment leads to."""
    more = set(reached)
    for start in reached:
        at = start
        while at < len(pattern) and pattern[at] == _GLOBSTAR:
            at += 1
            more.add(at)
    return more


def _glob_matches(glob: str, text: str) -> bool:
    """Whether the segment ``text`` matches ``glob`` (both folded). A star first takes
    nothing; on a mismatch the last star takes one character more (the other stars'
    choices need no revisiting), so this is at worst the product of the lengths."""
    if "*" not in glob and "?" not in glob:
        return glob == text
    at = read = 0
    star = -1  # the last star passed, and where the text stood after what it took
    resume = 0
    while read < len(text):
        token = glob[at] if at < len(glob) else ""
        if token == "*":
            star, resume = at, read
            at += 1
        elif token and (token == "?" or token == text[read]):
            at += 1
            read += 1
        elif star >= 0:
            resume += 1
            at, read = star + 1, resume
        else:
            return False
    return glob[at:].strip("*") == ""


def _overlap(a: str, b: str) -> bool:
    """Whether some path lies in both parts (checked): decided exactly, in time
    proportional to the product of their lengths."""
    return _patterns_overlap(_pattern(a), _pattern(b))


def _first_overlap(
    ours: tuple[str, ...] | None, theirs: tuple[str, ...] | None
) -> tuple[str | None, str | None] | None:
    """The first pair (our part, their part), in the parts' order, that shares a path,
    or None if no pair does. None for a set is a whole hold: it conflicts with every
    part, and stands as None in the pair."""
    if ours is None or theirs is None:
        return (ours[0] if ours else None, theirs[0] if theirs else None)
    patterns = [_pattern(part) for part in theirs]
    for part in ours:
        pattern = _pattern(part)
        for other, other_pattern in zip(theirs, patterns, strict=True):
            if _patterns_overlap(pattern, other_pattern):
                return (part, other)
    return None


def _patterns_overlap(a: _Pattern, b: _Pattern) -> bool:
    """Whether some path lies in both. Walk the two patterns' segments side by side
    (the product of their segment automata, whose only moves are these): two globs
    take one segment together, so some segment must match both. A ``**`` reached on
    either side decides: it takes, one at a time, the segments the rest of the other
    part needs (some segment matches every glob of a checked part) until that part is
    used up. A part used up holds all under what it matched, so the other part is
    finished under it."""
    for x, y in zip(a, b, strict=False):
        if _GLOBSTAR in (x, y):
            return True
        if not _globs_meet(x, y):
            return False
    return True  # one part is used up


def _globs_meet(g: str, h: str) -> bool:
    """Whether some segment (never empty, ``.`` or ``..``) matches both globs (folded,
    runs of stars made one): the product of the two globs, one cell per pair of token
    positions, each holding what the characters read so far may be (``_SOFAR_*``).
    Where either side takes any character, one that is not a dot is best (a segment
    stays one whatever follows). Every move goes forward but a star meeting a star,
    which only reads one more character; so one pass over the cells in order sees
    each reached cell after all that lead to it."""
    columns = len(h) + 1
    cells = [0] * ((len(g) + 1) * columns)
    cells[0] = _SOFAR_EMPTY
    for i in range(len(g) + 1):
        x = g[i] if i < len(g) else ""
        for j in range(columns):
            here = cells[i * columns + j]
            if not here:
                continue
            y = h[j] if j < len(h) else ""
            if x == "*":
                if y == "*":
                    here |= _SOFAR_SEGMENT
                cells[(i + 1) * columns + j] |= here  # the star takes no more
            if y == "*":
                cells[i * columns + j + 1] |= here
            if not x or not y or x == y == "*":
                continue
            # One character read: which positions it leads to, and which it may be.
            if x == "*":
                target, known = i * columns + j + 1, y
            elif y == "*":
                target, known = (i + 1) * columns + j, x
            elif "?" in (x, y) or x == y:
                target, known = (i + 1) * columns + j + 1, y if x == "?" else x
            else:
                continue
            cells[target] |= _after(here, known)
    return bool(cells[-1] & _SOFAR_SEGMENT)


def _after(sofar: int, character: str) -> int:
    """What a segment read so far (``sofar``) may be after one more ``character``
    ("?": any one, and not a dot is best)."""
    if character != ".":
        return _SOFAR_SEGMENT
    return (sofar << 1) & (_SOFAR_DOT | _SOFAR_DOTS | _SOFAR_SEGMENT) | sofar & _SOFAR_SEGMENT
