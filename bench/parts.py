"""What deciding parts of a tree costs: two parts of 255 characters made to be hard
(does a path lie in both?), and a path checked against many holds' parts (which hold
covers it?).

    uv run python bench/parts.py
    uv run python bench/parts.py --rounds 9

Pairs: each is decided ``--rounds`` times, the table gives the median, in
milliseconds, and which is slowest: the decision takes time proportional to the
product of the two parts' lengths, and these pairs make it walk most of that product
(stars against stars and single characters, dots, folded case, a last character that
rules a match out only at the end). Two long single segments are the worst case:
segments pair off one to one, and a ``**`` reached decides at once. Covers: 1,000 paths
of a made-up tree against 50 holders of 20 parts each (literal folders and files, and
globs), each path against every holder (a holder's parts until one covers it), as a
``check`` of a commit's paths would; the median of the rounds, in milliseconds for all
1,000 paths and microseconds for one path against one part; and the hardest part
against a path of 255 characters.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from proc import load_script


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


def time_pairs(skf: Any, rounds: int) -> list[tuple[str, bool, float]]:
    """(name, shared, median milliseconds) for each hard pair."""
    results = []
    for name, pair in hard_pairs().items():
        a, b = (skf._checked_part(part) for part in pair)
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            shared = skf._overlap(a, b)
            times.append(time.perf_counter() - started)
        results.append((name, shared, statistics.median(times) * 1e3))
    return results


def time_hard_cover(skf: Any, rounds: int) -> float:
    """Median milliseconds for the hardest part against a path of 255 characters: each
    place the star may stop is tried (128), and from each the rest of the part is read
    (127 characters)."""
    part = skf._checked_part("*" + "a" * 126 + "b")
    path = skf._checked_path("a" * 255)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        skf._covers(part, path)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def made_up_tree(seed: int) -> tuple[list[str], list[list[str]]]:
    """1,000 paths of a tree, and 50 holders' 20 parts each, drawn from one shape: the
    parts name folders, files and globs of that tree (some cover many paths, most few)."""
    draw = random.Random(seed)
    tops = ["src", "tests", "docs", "tools", "bench"]
    kinds = ("api", "core", "ui")
    folders = [f"{top}/{kind}{n}" for top in tops for kind in kinds for n in range(8)]
    suffixes = [".py", ".md", ".json", ".txt"]
    paths = [
        f"{draw.choice(folders)}/sub{draw.randrange(5)}/file{draw.randrange(60)}"
        f"{draw.choice(suffixes)}"
        for _ in range(1000)
    ]

    def part() -> str:
        folder = draw.choice(folders)
        return draw.choice(
            [
                folder,
                f"{folder}/sub{draw.randrange(5)}",
                f"{folder}/sub{draw.randrange(5)}/file{draw.randrange(60)}.py",
                f"{folder}/*/*{draw.choice(suffixes)}",
                f"{folder.split('/')[0]}/**/file{draw.randrange(60)}.*",
                f"**/{folder.split('/')[1]}/sub?/*.md",
                f"{folder}/sub{draw.randrange(5)}/file1?.*",
            ]
        )

    holders = [[part() for _ in range(20)] for _ in range(50)]
    return paths, holders


def time_covers(skf: Any, rounds: int) -> tuple[float, float, int]:
    """(median milliseconds for all 1,000 paths, microseconds for one path against one
    part, how many (path, holder) pairs cover)."""
    paths, holders = made_up_tree(seed=73)
    paths = [skf._checked_path(path) for path in paths]
    checked = [skf._checked_parts(parts) for parts in holders]
    covers = skf._covers
    times = []
    tried = found = 0
    for _ in range(rounds):
        tried = found = 0
        started = time.perf_counter()
        for path in paths:
            for parts in checked:
                for part in parts:
                    tried += 1
                    if covers(part, path):
                        found += 1
                        break
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return median * 1e3, median / tried * 1e6, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each case (default 5)")
    args = parser.parse_args()
    skf = load_script()
    skf._compile_carried("parts")
    pairs = time_pairs(skf, args.rounds)
    width = max(len(name) for name, _, _ in pairs)
    print(f"| two parts of up to 255 characters{' ' * (width - 34)} | shared | ms |")
    print(f"|{'-' * (width + 2)}|---|---|")
    for name, shared, ms in pairs:
        print(f"| {name:{width}} | {'yes' if shared else 'no'} | {ms:.1f} |")
    slowest = max(pairs, key=lambda row: row[2])
    print(f"\nslowest pair: {slowest[0]}, {slowest[2]:.1f} ms")
    hard = time_hard_cover(skf, args.rounds)
    print(f"covers: *aaa...ab (128 characters) against the path aaa...a (255): {hard:.1f} ms")
    total, each, found = time_covers(skf, args.rounds)
    print(
        f"covers: 1,000 paths against 50 holders of 20 parts: {total:.0f} ms"
        f" ({each:.2f} us a path and a part; {found} of 50,000 path-holder pairs covered)"
    )


if __name__ == "__main__":
    main()
