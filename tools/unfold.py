"""The script with its server stores' code as plain code, for ruff and mypy to check.

    uv run python tools/unfold.py            # writes .unfolded/skf-run-lock.py
    uv run python tools/unfold.py --check    # and runs ruff and mypy --strict on it

skf-run-lock.py keeps each server store's code as source text (``_ETCD_SOURCE =
r'''...'''``), compiled only by a call that names such a lock. To a linter that code
is a string. Unfolding replaces just the two lines that open and close each text,
so the copy has the same lines at the same numbers: what ruff or mypy reports for
it is at that line of skf-run-lock.py too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "skf-run-lock.py"
OUT = ROOT / ".unfolded" / "skf-run-lock.py"
OPENING = re.compile(r"^(_[A-Z]+_SOURCE) = r'''$")
CLOSING = "'''"


def unfolded(text: str) -> str:
    """``text`` with each server store's source text turned into plain code, line for
    line; a ValueError if a text is left open or none is found."""
    lines = text.split("\n")
    name = None
    found = 0
    for number, line in enumerate(lines):
        if name is None and (match := OPENING.match(line)):
            name = match.group(1)
            lines[number] = f'{name} = ""  # unfolded: its code follows as plain code'
        elif name is not None and line == CLOSING:
            lines[number] = f"# end of {name}"
            name, found = None, found + 1
    if name is not None or not found:
        raise ValueError(f"{SCRIPT.name}: a source text is left open, or there is none")
    return "\n".join(lines)


def main() -> int:
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(unfolded(SCRIPT.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    if "--check" not in sys.argv[1:]:
        return 0
    checks = [
        ["ruff", "check", str(OUT)],
        ["ruff", "format", "--check", str(OUT)],
        ["mypy", "--strict", str(OUT)],
    ]
    failed = [c for c in checks if subprocess.run(c, cwd=ROOT, check=False).returncode]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
