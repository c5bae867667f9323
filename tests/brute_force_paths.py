"""Whether two parts share a path, found by trying paths one by one: the oracle the
property tests of parts hold the built file's exact decision to. It shares nothing
with the file's algorithm: a segment matches a glob by the standard library's
``fnmatch``, a path lies in a part by plain recursion over its segments, and a witness
is looked for among every path within bounds that provably hold the smallest one.

The bounds, for a pair of parts ``a`` and ``b`` (``g``: a part's glob segments, those
that are not ``**``):

- Segments: if some path lies in both, one of at most ``g(a) + g(b)`` segments does.
  Take a witness, its shortest prefix that a prefix matching ``a`` and one matching
  ``b`` both fit in, and one match of each. A segment that ``a``'s match gives to a
  ``**`` (or that lies past ``a``'s prefix) and ``b``'s alike can be cut out: both
  matches still hold. So each segment left is taken by a glob of ``a`` or of ``b``.
- Characters: a segment taken by a glob ``x`` of ``a`` and a glob ``y`` of ``b`` (or
  by one alone) may be replaced by any segment both match. Cut, one at a time, a
  character both take by a star, while what is left is a segment (not empty, ``.`` or
  ``..``): what remains is at most 3 long, or has each character taken by a non-star
  token of ``x`` or ``y``, so it is at most ``max(3, n(x) + n(y))`` long (``n``: the
  non-star tokens). A character no literal takes may be any letter that is not a dot:
  so the letters of ``x`` and ``y`` (ASCII folded) and one fresh letter are enough.

So: for each pair (x, y), one shortest segment that both match (if any, within that
bound, over those letters); then every path of up to ``g(a) + g(b)`` such segments.
"""

from __future__ import annotations

import itertools
from fnmatch import fnmatchcase
from functools import cache

FRESH = "z"  # a letter no generated part holds


def folded(text: str) -> str:
    """ASCII letters lowercased, nothing else."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def is_globstar(segment: str) -> bool:
    return len(segment) > 1 and set(segment) == {"*"}


def lies_in(part: str, path: str) -> bool:
    """Whether some of ``path``'s first segments (none to all) match ``part``."""
    pattern = folded(part).split("/")
    segments = folded(path).split("/")

    @cache
    def fits(at: int, read: int) -> bool:  # pattern[at:] matches some of segments[read:]
        if at == len(pattern):
            return True
        if is_globstar(pattern[at]):
            return fits(at + 1, read) or (read < len(segments) and fits(at, read + 1))
        return (
            read < len(segments)
            and fnmatchcase(segments[read], pattern[at])
            and fits(at + 1, read + 1)
        )

    return fits(0, 0)


def non_stars(glob: str) -> int:
    return len(glob.replace("*", ""))


def one_segment_matching(globs: list[str]) -> str | None:
    """A shortest segment (not ``.`` nor ``..``) that every glob of ``globs`` matches,
    looked for up to the bound above, or None."""
    letters = sorted({c for glob in globs for c in glob if c not in "*?"} | {FRESH})
    most = max(3, sum(non_stars(glob) for glob in globs))
    for length in range(1, most + 1):
        for chars in itertools.product(letters, repeat=length):
            segment = "".join(chars)
            if segment not in (".", "..") and all(fnmatchcase(segment, g) for g in globs):
                return segment
    return None


def shared_path(a: str, b: str) -> str | None:
    """A path that lies in both parts (checked), within the bounds above, or None."""
    globs_a = [s for s in folded(a).split("/") if not is_globstar(s)]
    globs_b = [s for s in folded(b).split("/") if not is_globstar(s)]
    pairs = [[x, y] for x in globs_a for y in globs_b] + [[x] for x in globs_a + globs_b]
    segments = sorted({s for pair in pairs if (s := one_segment_matching(pair)) is not None})
    for count in range(1, len(globs_a) + len(globs_b) + 1):
        for chosen in itertools.product(segments, repeat=count):
            path = "/".join(chosen)
            if lies_in(a, path) and lies_in(b, path):
                return path
    if not globs_a and not globs_b:  # both all "**": every path lies in both
        return FRESH
    return None
