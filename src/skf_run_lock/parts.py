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
# Each part's pattern and literal leading segments, made once for its text: a take is
# decided against every part of every holder, and a waiter reads the same parts at
# each look. A memo starts afresh once full: no content makes one hold more than a few
# megabytes.
_SHAPES: dict[str, tuple[_Pattern, _Pattern]] = {}
_SHAPES_MAX = 2048
_SHAPES_LONGEST = 128  # characters: a longer part is made anew each time
# A hold's parts made ready to be met by others' (_Leads), by the hold's parts: a take
# meets every holder's parts with its own, a waiter's turn every place's with its own.
_LEADS: dict[tuple[str, ...], _Leads] = {}
_LEADS_MAX = 2  # the decisions meet one hold's parts with many in turn


def _checked_part(part: object) -> str:
    """``part`` as a hold keeps it: normalised, its case kept; or ValueError, one line
    naming the part and what is wrong with it."""
    if not isinstance(part, str):
        raise ValueError(f"a part must be a string, not {type(part).__name__}")
    if not part:
        raise ValueError("a part must not be empty: name a path or a pattern")
    if len(part) > _PART_MAX_LEN:
        raise ValueError(
            f"part {_shown(part)} is {len(part)} characters long; at most {_PART_MAX_LEN} allowed"
        )
    # Every record read checks each of its holders' parts: ASCII text is asked at once.
    controls = not part.isprintable() if part.isascii() else any(map(_is_control, part))
    if controls:
        raise ValueError(
            f"part {_shown(part)} holds a control character: name paths by printable ones"
        )
    for c in "[]{}":
        if c in part:
            raise ValueError(
                f"part {_shown(part)} holds {c!r}: only '*', '?' and '**' are patterns in a part"
            )
    return _normalised(part, "part")


def _is_control(c: str) -> bool:
    """Whether the character ``c`` is a control character (C0, DEL or C1)."""
    return c < " " or "\x7f" <= c <= "\x9f"


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
    return _normalised(path, "path", posix_names)


def _checked_paths(paths: object, posix_names: bool = False) -> tuple[str, ...]:
    """The paths a caller asks about, each checked (_checked_path), in the order given,
    each once (the first time it came); ValueError, one line, for the first that is
    wrong, or for anything else than a list (or tuple) of strings."""
    if isinstance(paths, str):
        raise ValueError("paths must be a list of strings, not a string: put one path in a list")
    if not isinstance(paths, list | tuple):
        raise ValueError(f"paths must be a list of strings, not {type(paths).__name__}")
    return tuple(dict.fromkeys(_checked_path(path, posix_names) for path in paths))


def _normalised(text: str, what: str, posix_names: bool = False) -> str:
    """``text`` without ``./`` at its start nor ``/`` at its end, or ValueError naming
    it (``what``: part or path) for what neither may hold (``posix_names``: a path whose
    names may hold a backslash or a colon)."""
    given = text  # as messages show it
    if "\\" in text and not posix_names:
        raise ValueError(f"{what} {_shown(given)} holds a backslash: separate segments with '/'")
    drive = text[1:2] == ":" and text[0].isascii() and text[0].isalpha() and not posix_names
    if text.startswith("/") or drive:
        raise ValueError(
            f"{what} {_shown(given)} is an absolute path: name it from the top of the tree,"
            " with '/' between segments"
        )
    if text.startswith("./"):
        text = text[2:]
    text = text.rstrip("/")
    if text in ("", "."):
        if what == "part":
            raise ValueError(
                f"part {_shown(given)} names the whole tree: leave parts out to hold the lock whole"
            )
        raise ValueError(
            f"path {_shown(given)} names the top of the tree: name a file or folder in it"
        )
    segments = text.split("/")
    if "" in segments:
        raise ValueError(
            f"{what} {_shown(given)} holds an empty segment (two '/' in a row): write one '/'"
        )
    if "." in segments:
        raise ValueError(f"{what} {_shown(given)} holds a '.' segment: leave it out")
    if ".." in segments:
        raise ValueError(
            f"{what} {_shown(given)} holds a '..' segment: name the path from the top of the tree"
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
    return _shape(part)[0]


def _shape(part: str) -> tuple[_Pattern, _Pattern]:
    """A checked part's pattern, and its literal leading segments (those before the
    first that holds a star or "?"), made once for each text (_SHAPES)."""
    shape = _SHAPES.get(part)
    if shape is None:
        pattern = _made_pattern(part)
        lead = next((at for at, s in enumerate(pattern) if "*" in s or "?" in s), len(pattern))
        shape = (pattern, pattern[:lead])
        if len(part) <= _SHAPES_LONGEST:
            if len(_SHAPES) >= _SHAPES_MAX:
                _SHAPES.clear()
            _SHAPES[part] = shape
    return shape


def _made_pattern(part: str) -> _Pattern:
    """A part's pattern (see _pattern), made."""
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
    covers, folded: a part is filed in a tree of folders by its literal leading
    segments (``src/api`` for ``src/api/*.py``), and there by its last literal segment
    after them (looked for among a path's segments), else (no literal segment after
    them: ``**/*.md``, ``src/*``) tried on every path that reaches its folder, and only
    if the path holds each run of characters its globs must match (``.md``). A path
    walks down its own first segments: ten thousand paths against a thousand parts,
    all under one folder, ask each path about the few parts that name its folders."""

    __slots__ = ("at", "pieces", "ready", "top")

    def __init__(self, parts: list[str]) -> None:
        places: dict[str, list[int]] = {}  # each part's key, and where it stands
        for at, part in enumerate(parts):
            places.setdefault(_part_key(part), []).append(at)
        self.at = list(places.values())
        self.ready = [_Ready(parts[same[0]]) for same in self.at]
        self.pieces = [_pieces(ready.folded) for ready in self.ready]
        self.top = _IndexFolder()
        for one, ready in enumerate(self.ready):
            segments = ready.folded.split("/")
            folder, depth = self.top, 0
            for segment in segments:
                if "*" in segment or "?" in segment:
                    break
                folder = folder.under.setdefault(segment, _IndexFolder())
                depth += 1
            literal = [s for s in segments[depth:] if "*" not in s and "?" not in s]
            if literal:
                folder.by_any.setdefault(literal[-1], []).append(one)
            else:
                folder.everywhere.append(one)

    def covering(self, path: str) -> list[int]:
        """The places in ``parts``, in order, of those that ``path`` (checked) lies in."""
        folded = _folded(path)
        segments = folded.split("/")
        tried: list[int] = []
        folder = self.top
        named: set[str] | None = None  # the path's segments, once a folder asks
        for segment in [*segments, ""]:  # "" names no folder: the path's own is the last
            tried += folder.everywhere
            if folder.by_any:
                named = set(segments) if named is None else named
                for one in named:
                    tried += folder.by_any.get(one, ())
            below = folder.under.get(segment)
            if below is None:
                break
            folder = below
        found = [
            self.at[one]
            for one in tried
            if all(piece in folded for piece in self.pieces[one])
            and _ready_covers(self.ready[one], folded)
        ]
        if len(found) == 1:
            return list(found[0])
        return sorted(at for same in found for at in same)  # in the parts' order


class _IndexFolder:
    """A folder of a _PartIndex: the parts whose literal leading segments lead to it,
    by their last literal segment after those (``by_any``) or tried on every path
    (``everywhere``), and the folders ``under`` it, by their folded names."""

    __slots__ = ("by_any", "everywhere", "under")

    def __init__(self) -> None:
        self.by_any: dict[str, list[int]] = {}
        self.everywhere: list[int] = []
        self.under: dict[str, _IndexFolder] = {}


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
    part, and stands as None in the pair. Only pairs whose literal leading segments
    agree are tried (_Leads)."""
    if ours is None or theirs is None:
        return (ours[0] if ours else None, theirs[0] if theirs else None)
    leads = _LEADS.get(ours)
    if leads is None:
        leads = _Leads(ours)
        if len(_LEADS) >= _LEADS_MAX:
            _LEADS.clear()
        _LEADS[ours] = leads
    shapes = [_shape(part) for part in theirs]
    tried = sorted((mine, at) for at, shape in enumerate(shapes) for mine in leads.meeting(shape))
    for mine, at in tried:
        if _patterns_overlap(leads.patterns[mine], shapes[at][0]):
            return (ours[mine], theirs[at])
    return None


class _Leads:
    """A hold's parts made ready to be met by other parts: each one's pattern, and
    their places filed in a tree of folders by their literal leading segments. A
    path's first segments are those of both parts it lies in, so two parts share one
    only if their literal leading segments agree as far as both have them
    (``src/api/**`` and ``src/cli/*.py`` never do): ours end on the way down to where
    theirs end, or under it."""

    __slots__ = ("patterns", "top")

    def __init__(self, parts: tuple[str, ...]) -> None:
        self.patterns: list[_Pattern] = []
        self.top = _LeadFolder()
        for at, part in enumerate(parts):
            pattern, lead = _shape(part)
            self.patterns.append(pattern)
            folder = self.top
            for segment in lead:
                folder.under_or_here.append(at)
                folder = folder.under.setdefault(segment, _LeadFolder())
            folder.under_or_here.append(at)
            folder.here.append(at)

    def meeting(self, shape: tuple[_Pattern, _Pattern]) -> list[int]:
        """Our places whose literal leading segments agree with those of ``shape``."""
        found: list[int] = []
        folder = self.top
        for segment in shape[1]:
            found += folder.here
            below = folder.under.get(segment)
            if below is None:
                return found
            folder = below
        return found + folder.under_or_here


class _LeadFolder:
    """A folder of _Leads: the places of the parts whose literal leading segments end
    ``here``, of those that end here or under it, and the folders ``under`` it."""

    __slots__ = ("here", "under", "under_or_here")

    def __init__(self) -> None:
        self.here: list[int] = []
        self.under_or_here: list[int] = []
        self.under: dict[str, _LeadFolder] = {}


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
    runs of stars made one). A literal one is that segment; a glob meets itself (its
    stars and "?" taking letters); two others are met by _globs_share."""
    if g == h or ("*" not in g and "?" not in g):
        return g not in ("", ".", "..") and _glob_matches(h, g)
    if "*" not in h and "?" not in h:
        return h not in ("", ".", "..") and _glob_matches(g, h)
    return _globs_share(g, h)


def _globs_share(g: str, h: str) -> bool:
    """Whether some segment matches both globs: the product of the two, walked a row
    (a position in ``g``) at a time, each row one set of positions in ``h`` (bit j:
    position j) for each of what the characters read so far may be: nothing (``e``),
    ``.`` (``d1``), ``..`` (``d2``), or anything else (``s``, a segment: a path never
    holds an empty, ``.`` or ``..`` segment, so two globs that share only those share
    no path). Where either side takes any character, one that is not a dot is best (a
    segment stays one whatever follows). Moves go to the next row, or along the row to
    a later position (over a star of ``h`` that takes nothing, or a character that a
    star of ``g`` takes), never back: so each row is finished before the next, and a
    whole row moves at once, its sets shifted and masked: exact, and as fast as a few
    operations on integers a row."""
    while "**" in g or "**" in h:  # one star of a run is enough, and moves once
        g, h = g.replace("**", "*"), h.replace("**", "*")
    end = len(h)
    full = (1 << (end + 1)) - 1
    stars = characters = 0  # the positions in h of its stars, and of the rest
    equal: dict[str, int] = {}  # of each character (and of "?")
    for j, y in enumerate(h):
        if y == "*":
            stars |= 1 << j
        else:
            characters |= 1 << j
            equal[y] = equal.get(y, 0) | 1 << j
    dots = equal.get(".", 0)
    anything = equal.get("?", 0)
    e, d1, d2, s = 1, 0, 0, 0
    for x in g + "/":  # "/", in no glob: the row past g's end
        reached = e | d1 | d2 | s
        if not reached:
            return False
        if x == "*":
            # Along the row: a star of h takes nothing, and g's star takes each
            # character of h, a dot moving e, d1 and d2 on and any other making a
            # segment; two stars together read any character, a segment. So every
            # position right of the first reached is reached, and right of the first
            # segment all are one.
            e |= (e & stars) << 1
            d1 |= (e & dots) << 1
            d1 |= (d1 & stars) << 1
            d2 |= (d1 & dots) << 1
            d2 |= (d2 & stars) << 1
            after = full & -(reached & -reached)
            s |= after & stars | (after & characters & ~dots) << 1 | (d2 & dots) << 1
            s = full & -(s & -s)
            continue  # down: the star takes no more
        e |= (e & stars) << 1
        d1 |= (d1 & stars) << 1
        d2 |= (d2 & stars) << 1
        s |= (s & stars) << 1
        if x == "/":
            break
        # Down: x read beside a star of h (which takes it), or beside a token of h
        # that it matches (diagonally): a dot moves e, d1 and d2 on, any other
        # character makes a segment.
        matched = characters if x == "?" else equal.get(x, 0) | anything
        dotted = matched if x == "." else dots if x == "?" else 0  # read as a dot
        starred = stars if x == "." else 0  # beside which a dot is read
        beside = e | d1 | d2 | s
        e, d1, d2, s = (
            0,
            e & starred | (e & dotted) << 1,
            d1 & starred | (d1 & dotted) << 1,
            (d2 | s) & starred
            | ((d2 | s) & dotted) << 1
            | beside & stars & ~starred
            | (beside & matched & ~dotted) << 1,
        )
    return bool(s >> end & 1)
