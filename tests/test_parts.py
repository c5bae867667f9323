"""Parts of a tree: a part checked and normalised, a path checked, a part covering a
path, and two parts (or two holds' sets of parts) sharing a path, decided exactly and
held to a brute-force search (brute_force_paths.py)."""

from __future__ import annotations

from types import ModuleType

import pytest
from brute_force_paths import lies_in, one_segment_matching, shared_path
from hypothesis import given, settings
from hypothesis import strategies as st

# --- Two parts -----------------------------------------------------------------------------

OVERLAPPING = [
    ("src/*.py", "src/a*"),  # src/a.py
    ("src/**/test_*.py", "src/api/*"),  # src/api/test_x.py
    ("src", "src/api/*.py"),  # all under src is in src
    ("src/**/x.py", "src/x.py"),  # ** takes no segment
    ("**", "docs/a.md"),
    ("src/api", "src/api"),
    ("Src/API", "src/api/routes.py"),  # ASCII case folded
    ("*/b", "a/*"),
    ("?", "a"),
    ("*", "*/*"),
    ("a?c", "*b*"),
    ("**/c", "a/**"),
    ("src/***", "src/x"),  # a segment of stars alone is **
    ("a**b", "ab"),  # elsewhere a run of stars is one *
    ("a**b", "axyb/c"),
    ("src/**/x.py", "src/**/y.py"),  # src/x.py/y.py: a folder may be named x.py
    ("**/*.md", "**/*.py"),  # a.md/b.py, likewise
    ("é", "?"),  # ? is one code point
    (".*", "?.."),  # "...": three dots are a segment
]
APART = [
    ("docs/*.md", "docs/*.txt"),
    ("a*b", "*c"),
    ("src/a", "src/b"),
    ("src/api", "srcapi"),
    ("a?", "a"),  # ? is never no character
    ("?", "é?"),  # nor two
    ("a/*", "b/*"),
    ("É", "é"),  # only ASCII letters fold
    ("?/.*", "*/?"),  # only "x/." would lie in both: no path holds a "." segment
    (".*", "?."),  # only ".."
    (".?", "?."),  # only ".."
    ("src/*.py", "src/*.pyc"),  # no segment ends in both
    ("src/**/x.py", "docs/**/x.py"),
]

# A property tried on hundreds of examples in this process: seconds alone, over a
# minute beside CI's other lanes on two cores.
MANY_EXAMPLES = pytest.mark.timeout(300)


@pytest.mark.parametrize(("a", "b"), OVERLAPPING)
def test_parts_that_share_a_path_overlap_either_way(skf: ModuleType, a: str, b: str) -> None:
    assert (skf._overlap(a, b), skf._overlap(b, a)) == (True, True)


@pytest.mark.parametrize(("a", "b"), APART)
def test_parts_that_share_no_path_do_not_overlap(skf: ModuleType, a: str, b: str) -> None:
    assert (skf._overlap(a, b), skf._overlap(b, a)) == (False, False)


def test_a_part_shares_the_paths_under_a_shorter_one_that_it_meets(skf: ModuleType) -> None:
    # "a/x" lies in "*/x" and in "a", which holds all under it.
    assert skf._overlap("*/x", "a") is True
    assert skf._overlap("*/x", "a/y") is False
    assert skf._overlap("*/x", "a/x/y") is True


# --- Covering a path -----------------------------------------------------------------------

COVERED = [
    ("src/api", "src/api/routes.py"),
    ("src/api", "src/api"),
    ("src/api", "SRC/Api/x"),
    ("src/**/x.py", "src/x.py"),
    ("src/**/x.py", "src/a/b/x.py/more"),
    ("src/**", "src"),
    ("**", "anything/at/all"),
    ("*.md", "README.md"),
    ("?", "é/x"),
    ("a*", "a*"),  # a path's * is a character, matched by the pattern's *
    ("*", "[x]"),
]
NOT_COVERED = [
    ("src/api", "src/apix"),
    ("src/api", "src"),  # above a part is not in it
    ("src/*", "src"),
    ("src/**/x.py", "src/a/y.py"),
    ("*.md", "docs.txt"),
    ("?", "ab"),
    ("a?", "a"),
    ("?a", "a"),
    ("É", "é"),
    ("a?c", "a/c"),
]


@pytest.mark.parametrize(("part", "path"), COVERED)
def test_a_part_covers_its_matches_and_all_under_them(
    skf: ModuleType, part: str, path: str
) -> None:
    assert skf._covers(part, path) is True


@pytest.mark.parametrize(("part", "path"), NOT_COVERED)
def test_a_part_covers_no_other_path(skf: ModuleType, part: str, path: str) -> None:
    assert skf._covers(part, path) is False


# --- Checking what a caller gives ----------------------------------------------------------

REFUSED_PARTS = [
    (7, "a part must be a string, not int"),
    ("", "a part must not be empty: name a path or a pattern"),
    ("/src", "part '/src' is an absolute path: name it from the top of the tree"),
    ("C:/src", "part 'C:/src' is an absolute path"),
    ("a/./b", "part 'a/./b' holds a '.' segment: leave it out"),
    ("a/../b", "part 'a/../b' holds a '..' segment: name the path from the top of the tree"),
    ("..", "part '..' holds a '..' segment"),
    ("a//b", "part 'a//b' holds an empty segment (two '/' in a row): write one '/'"),
    ("a\\b", "part 'a\\\\b' holds a backslash: separate segments with '/'"),
    ("a[b]", "part 'a[b]' holds '[': only '*', '?' and '**' are patterns in a part"),
    ("a]", "part 'a]' holds ']'"),
    ("{a,b}", "part '{a,b}' holds '{'"),
    ("a}", "part 'a}' holds '}'"),
    ("a\nb", "part 'a\\nb' holds a control character"),
    ("a\x7f", "part 'a\\x7f' holds a control character"),
    ("a\x85", "part 'a\\x85' holds a control character"),
    ("." * 256, "part '" + "." * 60 + "'... is 256 characters long; at most 255 allowed"),
    (".", "part '.' names the whole tree: leave parts out to hold the lock whole"),
    ("./", "part './' names the whole tree"),
    ("/", "part '/' is an absolute path"),
]


@pytest.mark.parametrize(("part", "message"), REFUSED_PARTS)
def test_a_part_is_refused_naming_it_and_what_is_wrong(
    skf: ModuleType, part: object, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        skf._checked_part(part)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_a_part_is_kept_as_written_without_its_dot_slash_and_trailing_slashes(
    skf: ModuleType,
) -> None:
    assert skf._checked_part("./Src/API//") == "Src/API"
    assert skf._checked_part("src/**/*.py") == "src/**/*.py"
    assert skf._checked_part("a" * 255) == "a" * 255
    assert skf._checked_part("é/ü?") == "é/ü?"
    assert skf._part_key(skf._checked_part("./Src/A**b/***/")) == "src/a*b/**"


def test_parts_are_a_set_after_normalisation(skf: ModuleType) -> None:
    assert skf._checked_parts(["b", "./a/"]) == ("a", "b")
    assert skf._checked_parts(("./a/", "b")) == ("a", "b")
    assert skf._checked_parts({"b", "a"}) == ("a", "b")
    # One key, the least spelling shown, whatever the order given.
    assert skf._checked_parts(["src", "Src/", "SRC"]) == ("SRC",)
    assert skf._checked_parts(["SRC", "src"]) == ("SRC",)
    assert skf._checked_parts(["a*b", "a**b"]) == ("a**b",)
    assert skf._checked_parts(["x"] * 100) == ("x",)
    assert skf._checked_parts(None) is None  # no parts: the whole lock


REFUSED_LISTS = [
    ([], "parts is empty: leave parts out to hold the lock whole"),
    ("src", "parts must be a list of strings, not a string: put one part in a list"),
    ({"src": 1}, "parts must be a list of strings, not dict"),
    (b"src", "parts must be a list of strings, not bytes"),
    ([f"p{n}" for n in range(101)], "101 parts given; at most 100 allowed"),
    (["src", 3], "a part must be a string, not int"),
    (["src", None], "a part must be a string, not NoneType"),
    (["src", "/etc"], "part '/etc' is an absolute path"),
]


@pytest.mark.parametrize(("parts", "message"), REFUSED_LISTS)
def test_a_list_of_parts_is_refused_saying_why(
    skf: ModuleType, parts: object, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        skf._checked_parts(parts)
    assert str(refused.value).startswith(message)


REFUSED_PATHS = [
    (None, "a path must be a string, not NoneType"),
    ("", "a path must not be empty"),
    ("/etc/passwd", "path '/etc/passwd' is an absolute path"),
    ("c:/x", "path 'c:/x' is an absolute path"),
    ("a/../b", "path 'a/../b' holds a '..' segment"),
    ("a/./b", "path 'a/./b' holds a '.' segment"),
    (".", "path '.' names the top of the tree: name a file or folder in it"),
    ("./", "path './' names the top of the tree"),
    ("a/.", "path 'a/.' holds a '.' segment"),
    ("a//b", "path 'a//b' holds an empty segment"),
    ("src\\a.py", "path 'src\\\\a.py' holds a backslash: separate segments with '/'"),
]


@pytest.mark.parametrize(("path", "message"), REFUSED_PATHS)
def test_a_path_is_refused_naming_it_and_what_is_wrong(
    skf: ModuleType, path: object, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        skf._checked_path(path)
    assert str(refused.value).startswith(message)


def test_a_path_is_literal_and_normalised_as_a_part_is(skf: ModuleType) -> None:
    assert skf._checked_path("./Src/a.py/") == "Src/a.py"
    assert skf._checked_path("a*/[b]/{c}?") == "a*/[b]/{c}?"
    assert skf._checked_path("x" * 1000) == "x" * 1000  # no bound but the tree's own
    assert skf._covers("a?", "a*") is True
    assert skf._covers("a*", "ab") is True
    assert skf._covers("ab", "a?") is False
    assert skf._covers("a*", "a[b]") is True


# --- Two holds -------------------------------------------------------------------------------


def test_two_holds_name_the_first_pair_of_parts_that_overlaps(skf: ModuleType) -> None:
    ours = ("docs/*.md", "src/api", "src/cli")
    theirs = ("docs/*.txt", "src/**/test_*.py", "src/cli/main.py")
    assert skf._first_overlap(ours, theirs) == ("src/api", "src/**/test_*.py")
    assert skf._first_overlap(theirs, ours) == ("src/**/test_*.py", "src/api")
    assert skf._first_overlap(("docs/*.md",), ("docs/*.txt", "src")) is None
    # Our first part that meets any of theirs, though another of ours meets one before.
    assert skf._first_overlap(("*.py", "src"), ("src/a", "x.py")) == ("*.py", "x.py")


def test_a_whole_hold_conflicts_with_every_part(skf: ModuleType) -> None:
    assert skf._first_overlap(None, ("docs/a.md", "src")) == (None, "docs/a.md")
    assert skf._first_overlap(("src",), None) == ("src", None)
    assert skf._first_overlap(None, None) == (None, None)


# --- Against the brute-force search --------------------------------------------------------

# Small parts, each pair over a few letters drawn from: lower and upper case (folded), a
# dot (no path holds a "." or ".." segment), and é and É (a code point for "?", and no
# Unicode folding). Few letters a pair make shared and unshared characters alike
# common. At most two glob segments a part keep the search within reach
# (brute_force_paths.py states its bounds and why they hold the smallest witness).
LETTERS = st.lists(
    st.sampled_from(["a", "A", "aA", "b", ".", "é", "É", "éÉ"]), min_size=1, max_size=2
).map(lambda families: sorted(set("".join(families))))
# Globs whose only shared segments may be "." or "..".
DOTTED = st.sampled_from(["?", "??", ".*", "*.", ".?", "?.", ".*.", "*.*"])


def valid(segment: str) -> bool:
    return segment not in ("", ".", "..")


@st.composite
def part_over(draw: st.DrawFn, letters: list[str]) -> str:
    word = st.text(alphabet=st.sampled_from(letters), min_size=1, max_size=3)
    glob = st.text(alphabet=st.sampled_from([*letters, "?", "*"]), min_size=1, max_size=3)
    globs = draw(st.lists(st.one_of(word, glob, glob, DOTTED).filter(valid), max_size=2))
    stars = draw(st.lists(st.sampled_from(["**", "***"]), min_size=0 if globs else 1, max_size=2))
    return "/".join(draw(st.permutations(globs + stars)))


@st.composite
def near(draw: st.DrawFn, part: str, letters: list[str]) -> str:
    """A part made from ``part``: tokens kept, their case changed, made "?" or "*",
    left out or another letter, a "**" made "*" (two glob segments at most still);
    segments cut at the end, or a "**" added."""
    token = st.sampled_from([*letters, "?", "*"])
    segments: list[str] = []
    globs = sum(1 for glob in part.split("/") if glob.strip("*") or len(glob) == 1)
    for glob in part.split("/"):
        if glob.strip("*") == "" and len(glob) > 1:
            star = globs < 2 and draw(st.booleans())
            globs += star
            segments.append("*" if star else glob)
            continue
        text = ""
        for c in glob:
            way = draw(st.integers(0, 5))
            text += [c, c.swapcase(), "?", "*", "", draw(token)][way]
        segments.append(text if valid(text) else "?")
    segments = segments[: draw(st.integers(1, len(segments)))]
    return "/".join(segments + draw(st.lists(st.just("**"), max_size=1)))


@st.composite
def two_parts(draw: st.DrawFn) -> tuple[str, str]:
    """Two parts: drawn apart, or the second made from the first (half the time), so
    that pairs that differ by one rule (a case, a dot, a "?") are common."""
    letters = draw(LETTERS)
    a = draw(part_over(letters))
    b = draw(near(a, letters)) if draw(st.booleans()) else draw(part_over(letters))
    return a, b


@st.composite
def a_part_and_a_path(draw: st.DrawFn) -> tuple[str, str]:
    """A part, and a path: any, or (most of the time) one made from the part, each "*",
    "?" and "**" replaced, letters' case changed at random (only ASCII's folds),
    segments cut or added at the end, so that paths in and just beside it are common."""
    letters = draw(LETTERS)
    part = draw(part_over(letters))
    character = st.sampled_from([*letters, "z", "?", "*"])
    segment = st.text(alphabet=character, min_size=1, max_size=3).filter(valid)
    if draw(st.integers(0, 3)) == 0:
        return part, "/".join(draw(st.lists(segment, min_size=1, max_size=5)))
    made: list[str] = []
    for glob in part.split("/"):
        if glob.strip("*") == "":
            made += draw(st.lists(segment, max_size=2)) if len(glob) > 1 else [draw(segment)]
            continue
        text = ""
        for token in glob:
            if token == "*":
                text += draw(st.text(alphabet=character, max_size=2))
            elif token == "?":
                text += draw(character)
            else:
                text += token.swapcase() if draw(st.booleans()) else token
        made.append(text if valid(text) else "z")
    made = made[: draw(st.integers(0, len(made)))] if draw(st.booleans()) else made
    made += draw(st.lists(segment, max_size=2))
    return part, "/".join(made or ["z"])


@MANY_EXAMPLES
@settings(max_examples=400, deadline=None)
@given(pair=two_parts())
def test_two_parts_overlap_exactly_when_a_path_lies_in_both(
    skf: ModuleType, pair: tuple[str, str]
) -> None:
    a, b = (skf._checked_part(part) for part in pair)
    witness = shared_path(a, b)
    assert skf._overlap(a, b) is (witness is not None), witness
    assert skf._overlap(b, a) is skf._overlap(a, b)
    if witness is not None:
        assert skf._covers(a, witness) and skf._covers(b, witness)


@MANY_EXAMPLES
@settings(max_examples=250, deadline=None)
@given(pair=a_part_and_a_path())
def test_a_part_covers_a_path_exactly_when_a_prefix_matches(
    skf: ModuleType, pair: tuple[str, str]
) -> None:
    part, path = pair
    assert skf._covers(skf._checked_part(part), skf._checked_path(path)) is lies_in(part, path)


# One segment: globs longer than a path's parts above are drawn, over a letter, its other
# case, a dot, "?" and "*": the rows of the decision meet stars and runs of dots.
GLOB_TOKENS = st.sampled_from(["a", "A", ".", "?", "*"])


@MANY_EXAMPLES
@settings(max_examples=400, deadline=None)
@given(
    g=st.text(GLOB_TOKENS, min_size=1, max_size=4), h=st.text(GLOB_TOKENS, min_size=1, max_size=4)
)
def test_two_globs_meet_exactly_when_a_segment_matches_both(
    skf: ModuleType, g: str, h: str
) -> None:
    """Two single segments, decided as parts of one segment are, held to a segment
    looked for one by one (a part that is not a segment, as "." or "**", is left out)."""
    globs = [skf._pattern(glob)[0] for glob in (g, h) if valid(glob)]
    if len(globs) < 2 or skf._GLOBSTAR in globs or "/" in "".join(globs):
        return
    witness = one_segment_matching(globs)
    assert skf._globs_meet(*globs) is (witness is not None), witness
    assert skf._globs_meet(*reversed(globs)) is skf._globs_meet(*globs)


@st.composite
def two_long_globs(draw: st.DrawFn) -> tuple[str, str, str]:
    """A segment of up to 120 characters (a letter, its other case, "b", a dot), and two
    globs each made from it: characters made "?", runs made "*", case changed."""
    segment = draw(st.text(st.sampled_from(["a", "A", "b", "."]), min_size=1, max_size=120))
    segment = segment if valid(segment) else segment + "a"

    def made() -> str:
        glob, at = "", 0
        while at < len(segment):
            way = draw(st.integers(0, 5))
            if way == 0:
                glob += "?"
            elif way == 1:
                glob += "*"
                at += draw(st.integers(0, 4))
                continue
            else:
                glob += segment[at].swapcase() if way == 2 else segment[at]
            at += 1
        return glob

    return segment, made(), made()


@MANY_EXAMPLES
@settings(max_examples=150, deadline=None)
@given(drawn=two_long_globs())
def test_long_globs_made_from_one_segment_meet_and_apart_by_one_last_character(
    skf: ModuleType, drawn: tuple[str, str, str]
) -> None:
    """Both globs match the segment they were made from, so they meet; each given a
    last character of its own ("x", "y") after it, no segment ends in both."""
    segment, g, h = drawn
    g, h = (skf._pattern(glob)[0] for glob in (g, h))
    assert skf._glob_matches(g, skf._folded(segment)) and skf._glob_matches(h, skf._folded(segment))
    assert skf._globs_meet(g, h) is True
    assert skf._globs_meet(g + "x", h + "y") is False
    assert skf._globs_meet(g + "x", h + "?") is True


# Holds' parts that share their first folders, deep: ours meets theirs only where their
# literal leading segments agree as far as both go, which decides which pairs are tried.
FOLDERS = st.sampled_from(["src", "src/a", "SRC/a/b", "src/a/b/c", "src/b", "docs", ""])
TAILS = st.sampled_from(["x.py", "*.py", "**", "*", "a", "b/*", "**/c", "?", "b", "c/x.py"])


@st.composite
def a_deep_part(draw: st.DrawFn) -> str:
    """A part under one of a few nested folders (or none), with a literal or glob tail."""
    tail = draw(st.lists(TAILS, max_size=2))
    segments = [draw(FOLDERS), *tail]
    return "/".join(segment for segment in segments if segment) or "a"


@MANY_EXAMPLES
@settings(max_examples=250, deadline=None)
@given(
    ours=st.lists(a_deep_part(), min_size=1, max_size=6),
    theirs=st.lists(a_deep_part(), min_size=1, max_size=6),
)
def test_two_holds_name_the_first_pair_that_overlaps_pair_by_pair(
    skf: ModuleType, ours: list[str], theirs: list[str]
) -> None:
    """Two holds' parts under shared folders, in any order: the pair named is the first,
    in our parts' order and then theirs, that shares a path, part by part (_overlap);
    none if none."""
    mine, others = (tuple(skf._checked_part(part) for part in parts) for parts in (ours, theirs))
    expected = next(((a, b) for a in mine for b in others if skf._overlap(a, b)), None)
    assert skf._first_overlap(mine, others) == expected
    reverse = next(((b, a) for b in others for a in mine if skf._overlap(a, b)), None)
    assert skf._first_overlap(others, mine) == reverse


# --- Long adversarial parts (their times: bench/parts.py) ----------------------------------

ADVERSARIAL = [
    ("*a" * 127 + "*", "a*" * 127 + "b", True),
    ("a*" * 127 + "b", "a*" * 127 + "c", False),
    ("*a" * 127 + "*", "?" * 255, True),
    ("*." * 127 + "*", ".*" * 127 + "x", True),
    ("/".join(["**"] * 85), "/".join(["*"] * 127) + "/b", True),
    ("/".join(["*a*"] * 63) + "/b", "/".join(["**"] * 84) + "/c", True),
    ("/".join(["*a*b"] * 51), "/".join(["*b*a"] * 51), False),  # no segment ends in both
    ("/".join(["*a*b*"] * 42), "/".join(["*b*a*"] * 42), True),
    ("/".join(["a*"] * 84) + "/b", "/".join(["*c"] * 84) + "/d", False),
    ("**/" + "/".join(["*a?"] * 62) + "/x", "**/" + "/".join(["?a*"] * 62) + "/y", True),
]


@pytest.mark.parametrize(("a", "b", "shared"), ADVERSARIAL)
def test_long_adversarial_parts_are_decided(skf: ModuleType, a: str, b: str, shared: bool) -> None:
    a, b = skf._checked_part(a), skf._checked_part(b)
    assert max(len(a), len(b)) >= 250
    assert (skf._overlap(a, b), skf._overlap(b, a)) == (shared, shared)
