"""What deciding parts of a tree costs: a take's decision among many holders' parts, a
``check`` of a commit's paths against them, the index that matches many paths against
many parts, and two parts of 255 characters made to be hard (does a path lie in both?).

    uv run python bench/parts.py
    uv run python bench/parts.py --rounds 9 --against /tmp/old/skf-run-lock.py

The holds: 50 runs each hold 20 parts of a module of their own (folders, files,
``MOD/**/test_*.py``, ``MOD/sub1/*.py``, ``file1?.*``, ``docs/NAME/**/*.md``, a glob
before a folder's name), every module under ``src/``, so that the holders' parts share
their first folders, in a file lock on tmpfs (else the temp folder). Measured, medians
of ``--rounds`` runs, in milliseconds:

- a take's decision (``_decide_take``) of 1, 5 and 20 parts of another module beside
  them: no pair meets, so every pair is decided, as a take that is granted decides
  them; the first decision of a process (what a CLI call pays: each round loads the
  build afresh, nothing remembered), and the next one (a waiter's next look);
- an acquire of 20 parts beside them and its release, in process (each reads and
  writes the record under the file's guard);
- ``check`` of 1,000 paths of the tree against them (read from the file, in process);
- the index alone: 10,000 paths against 1,000 parts whose first folders are spread
  over 200, shared by 10, or all one (``src/``);
- the hardest pairs of two parts of up to 255 characters (``_overlap``), and the
  hardest part against a path of 255 characters (``_covers``).

With ``--against``, another build (a file) is measured beside this one, case by case in
one run, and the table gives both, the ratio of this build to the other, and what each
case found (the same for both, or the table says they DIFFER).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proc import SCRIPT, load_script

HOLDERS = 50
PARTS_EACH = 20


def hard_pairs() -> dict[str, tuple[str, str]]:
    """Named pairs of parts, each at most 255 characters long."""
    pairs = {
        "*a*a*...* / a*a*...b (shared)": ("*a" * 127 + "*", "a*" * 127 + "b"),
        "a*a*...b / a*a*...c (apart)": ("a*" * 127 + "b", "a*" * 127 + "c"),
        "*?*?...* / ?*?*...? (shared)": ("*?" * 127 + "*", "?*" * 127 + "?"),
        "*.*.*...* / .*.*...x (shared)": ("*." * 127 + "*", ".*" * 127 + "x"),
        "*A*A*...b / *a*a*...c (apart)": ("*A" * 126 + "*b", "*a" * 126 + "*c"),
        "???...? / *a*a*...* (apart: one too few)": ("?" * 126, "*a" * 127 + "*"),
        "???...? / *a*a*...* (shared)": ("?" * 255, "*a" * 127 + "*"),
        "*ab*ab...ab / *ba*ba...ba (apart)": ("*ab" * 85, "*ba" * 85),
        "18 segments *a*a...* / a*a*...a, then b / c (apart)": (
            "/".join(["*a" * 6 + "*"] * 18) + "/b",
            "/".join(["a*" * 6 + "a"] * 18) + "/c",
        ),
        "*/*/.../**/... / */*/.../b (shared: a ** decides)": (
            "/".join(["*"] * 120 + ["**"] * 5),
            "/".join(["*"] * 126) + "/b",
        ),
    }
    for name, (a, b) in pairs.items():
        assert len(a) <= 255 and len(b) <= 255, name
    return pairs


# --- A made-up tree ---------------------------------------------------------------------


def module_parts(module: str, draw: random.Random, count: int) -> list[str]:
    """``count`` distinct parts of one run's ``module`` (``src/pkg/mod``): what a run
    holds to work on it."""
    name = module.replace("/", "-")
    kinds: list[Callable[[], str]] = [
        lambda: f"{module}/sub{draw.randrange(8)}",
        lambda: f"{module}/sub{draw.randrange(8)}/file{draw.randrange(60)}.py",
        lambda: f"{module}/**/test_{draw.randrange(60)}*.py",
        lambda: f"{module}/sub{draw.randrange(8)}/*.py",
        lambda: f"{module}/sub{draw.randrange(8)}/file1?.*",
        lambda: f"{module}/*/fixtures{draw.randrange(8)}",
        lambda: f"docs/{name}/**/*.md",
        lambda: f"tests/{name}/unit{draw.randrange(8)}",
    ]
    parts: dict[str, None] = {}
    while len(parts) < count:
        parts[draw.choice(kinds)()] = None
    return list(parts)


def paths_of(modules: list[str], draw: random.Random, count: int) -> list[str]:
    """``count`` paths a commit might touch in ``modules``."""
    suffixes = [".py", ".md", ".json", ".txt"]
    paths = []
    for _ in range(count):
        module = draw.choice(modules)
        kind = draw.randrange(4)
        if kind == 0:
            name = module.replace("/", "-")
            paths.append(f"docs/{name}/guide/page{draw.randrange(20)}.md")
        elif kind == 1:
            paths.append(f"{module}/sub{draw.randrange(8)}/test_{draw.randrange(60)}x.py")
        else:
            file = f"file{draw.randrange(60)}{draw.choice(suffixes)}"
            paths.append(f"{module}/sub{draw.randrange(8)}/{file}")
    return paths


def modules_under(tops: int, count: int) -> list[str]:
    """``count`` modules spread over ``tops`` first folders (one: all under ``src``)."""
    return [
        f"src/pkg{n % 10}/mod{n}" if tops == 1 else f"top{n % tops}/pkg/mod{n}"
        for n in range(count)
    ]


# --- The measures -------------------------------------------------------------------------


def median_ms(run: Callable[[], object], rounds: int) -> float:
    """The median of ``rounds`` runs of ``run``, in milliseconds."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


class HeldTree:
    """A file lock whose 50 holders hold 20 parts each, and what a take asks beside it."""

    def __init__(self, folder: Path, skf: Any) -> None:
        draw = random.Random(73)
        self.modules = modules_under(1, HOLDERS + 1)
        self.lock = folder / "tree.lock"
        for n, module in enumerate(self.modules[:HOLDERS]):
            parts = module_parts(module, draw, PARTS_EACH)
            taken = skf.acquire(self.lock, f"bench:holder{n}:1", 3600.0, parts=parts)
            assert taken["acquired"], taken
        self.asked = module_parts(self.modules[HOLDERS], draw, PARTS_EACH)
        self.paths = paths_of(self.modules, draw, 1000)


def decision_ms(path: Path, tree: HeldTree, count: int, rounds: int) -> tuple[float, float]:
    """(the first decision of a process, the next one) of a take of ``count`` parts
    beside ``tree``'s holders, median milliseconds: each round loads the build afresh
    (its parts' module compiled before the clock starts)."""
    firsts: list[float] = []
    nexts: list[float] = []
    for n in range(rounds):
        skf = load_script(f"skf_parts_bench_{n}", path)
        skf._compile_carried("parts")
        store = skf._store_for(tree.lock)
        look = store.look()
        store.close()
        owner = "bench:taker:1"
        asked = tree.asked[:count]
        request = skf._checked(skf._Request(tree.lock, owner, "", 3600.0, parts=asked))
        now = time.time()
        for times in (firsts, nexts):
            started = time.perf_counter()
            take = skf._decide_take(request, look, None, now)
            times.append(time.perf_counter() - started)
            assert take.outcome == "take", take.outcome
    return statistics.median(firsts) * 1e3, statistics.median(nexts) * 1e3


def acquire_ms(skf: Any, tree: HeldTree, rounds: int) -> tuple[float, str]:
    """An acquire of 20 parts beside the tree's holders and its release, in process
    (each reads the record under the guard, and writes it), median milliseconds."""
    owner = "bench:taker:1"

    def run() -> None:
        taken = skf.acquire(tree.lock, owner, 3600.0, parts=tree.asked)
        assert taken["acquired"], taken
        skf.release(tree.lock, owner)

    return median_ms(run, rounds), "take"


def check_ms(skf: Any, tree: HeldTree, rounds: int) -> tuple[float, int]:
    """check of the tree's 1,000 paths, median milliseconds, and the entries found."""
    found = len(skf.check(tree.lock, tree.paths)["reserved"])
    return median_ms(lambda: skf.check(tree.lock, tree.paths), rounds), found


def index_case(tops: int) -> tuple[list[str], list[str]]:
    """1,000 parts (5 of each of 200 modules) and 10,000 paths, under ``tops`` first
    folders."""
    draw = random.Random(tops)
    modules = modules_under(tops, 200)
    parts = [part for module in modules for part in module_parts(module, draw, 5)]
    return parts, paths_of(modules, draw, 10_000)


def index_ms(skf: Any, case: tuple[list[str], list[str]], rounds: int) -> tuple[float, int]:
    """The index of ``case``'s parts built and asked about each path, median ms, and
    how many (path, part) pairs cover."""
    parts = [skf._checked_part(part) for part in case[0]]
    paths = [skf._checked_path(path) for path in case[1]]

    def run() -> int:
        index = skf._PartIndex(parts)
        return sum(len(index.covering(path)) for path in paths)

    return median_ms(run, rounds), run()


def pair_ms(skf: Any, pair: tuple[str, str], rounds: int) -> tuple[float, bool]:
    a, b = (skf._checked_part(part) for part in pair)
    return median_ms(lambda: skf._overlap(a, b), rounds), bool(skf._overlap(a, b))


def hard_cover_ms(skf: Any, rounds: int) -> float:
    """The hardest part against a path of 255 characters: each place the star may stop
    is tried (128), and from each the rest of the part is read (127 characters)."""
    part = skf._checked_part("*" + "a" * 126 + "b")
    path = skf._checked_path("a" * 255)
    return median_ms(lambda: skf._covers(part, path), rounds)


# --- The table ------------------------------------------------------------------------------

# A case measured on a build (loaded, and its file): median milliseconds, and what it
# found (which both builds must agree on).
Measure = Callable[[Any, Path], tuple[float, object]]


def cases(tree: HeldTree, rounds: int) -> list[tuple[str, Measure]]:
    """Every case but the decisions, named as the table names them."""
    named: list[tuple[str, Measure]] = [
        (
            f"acquire + release of {PARTS_EACH} parts beside them, on the file",
            lambda skf, _: acquire_ms(skf, tree, rounds),
        ),
        (
            f"check of 1,000 paths against {HOLDERS} x {PARTS_EACH}, on the file",
            lambda skf, _: check_ms(skf, tree, rounds),
        ),
    ]
    for tops, said in ((200, "under 200 first folders"), (10, "under 10"), (1, "all under one")):
        case = index_case(tops)
        named.append(
            (
                f"index: 10,000 paths against 1,000 parts {said}",
                lambda skf, _, case=case: index_ms(skf, case, rounds),  # type: ignore[misc]
            )
        )
    for name, pair in hard_pairs().items():
        named.append(
            (f"pair: {name}", lambda skf, _, pair=pair: pair_ms(skf, pair, rounds))  # type: ignore[misc]
        )
    named.append(
        (
            "covers: *aaa...ab (128) against the path aaa...a (255)",
            lambda skf, _: (hard_cover_ms(skf, rounds), ""),
        )
    )
    return named


def row(name: str, results: list[tuple[float, object]]) -> str:
    """One line of the table: this build's median, and the other's with the ratio."""
    cells = [name, f"{results[0][0]:.2f} ms"]
    if len(results) > 1:
        cells += [f"{results[1][0]:.2f} ms", f"{results[0][0] / results[1][0]:.3f}x"]
    found = {repr(result[1]) for result in results}
    cells.append(str(results[0][1]) if len(found) == 1 else f"DIFFER: {sorted(found)}")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each case (default 5)")
    parser.add_argument("--against", type=Path, help="another build to measure beside this one")
    args = parser.parse_args()
    builds = [SCRIPT] + ([args.against.resolve()] if args.against else [])
    loaded = [load_script(f"skf_parts_{n}", path) for n, path in enumerate(builds)]
    for skf in loaded:
        skf._compile_carried("parts")
    other = " other | ratio |" if args.against else ""
    print(f"| case | this build |{other} found |")
    print("|---|---|" + ("---|---|" if args.against else "") + "---|")
    tmpfs = Path("/dev/shm")
    where = tmpfs if tmpfs.is_dir() else None
    with tempfile.TemporaryDirectory(prefix="skf-parts-bench-", dir=where) as folder:
        tree = HeldTree(Path(folder), loaded[0])
        for count in (1, 5, 20):
            times = [decision_ms(path, tree, count, args.rounds) for path in builds]
            name = f"take of {count} parts beside {HOLDERS} x {PARTS_EACH}: first decision"
            print(row(name, [(first, "take") for first, _ in times]), flush=True)
            print(row("  the same, next decision", [(next_, "take") for _, next_ in times]))
        for name, measure in cases(tree, args.rounds):
            results = [measure(skf, path) for skf, path in zip(loaded, builds, strict=True)]
            print(row(name, results), flush=True)
    print("\n" + " ".join(["uv run python bench/parts.py", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
