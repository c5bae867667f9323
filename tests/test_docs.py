"""The README and docs/: every link resolves, and the README's snippets run as written."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from loader import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def headings_slugs(document: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings (code blocks left out)."""
    slugs, in_code = set(), False
    for line in document.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def local_links(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(), flags=re.DOTALL)
    return [t for t in LINK.findall(text) if not t.startswith(("http://", "https://", "mailto:"))]


@pytest.mark.parametrize("document", DOCS, ids=lambda p: p.name)
def test_every_link_resolves(document: Path) -> None:
    links = local_links(document)
    assert document.name != "README.md" or len(links) >= 8  # the README points to docs/
    for link in links:
        target, _, anchor = link.partition("#")
        path = (document.parent / target).resolve() if target else document
        assert path.exists(), f"{document.name}: {link} names no file"
        if anchor:
            assert anchor in headings_slugs(path), f"{document.name}: {link} names no heading"


# Paths that only the machine a doc was made on has: the checkout, the home folder, the
# interpreter's, and the temporary folders of the tests and the bench.
LOCAL_PATHS = sorted(
    {
        str(ROOT),
        os.path.expanduser("~"),
        sys.prefix,
        sys.base_prefix,
        "/tmp/pytest-of-",
        "/dev/shm/tmp",
    }
    - {"", "/"}
)


def unclean(data: bytes) -> list[str]:
    """Why ``data`` is not a doc a person reads: not UTF-8, control characters (NUL
    among them), a Python traceback, or a path of this machine."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"not UTF-8 ({exc})"]
    why = []
    controls = sorted({c for c in text if not c.isprintable() and c not in "\n\t"})
    if controls:
        why.append(f"control characters {controls}")
    if "Traceback (most recent call last)" in text:
        why.append("a Python traceback")
    why += [f"the local path {path}" for path in LOCAL_PATHS if path + "/" in text]
    return why


@pytest.mark.parametrize("document", DOCS, ids=lambda p: p.name)
def test_every_doc_is_clean_text(document: Path) -> None:
    assert unclean(document.read_bytes()) == []


def test_the_clean_text_check_bites() -> None:
    assert unclean(b"# Fine\n\n| a | b |\n`~/x` and /tmp/demo/x.lock\n") == []
    found = unclean(f'ok\0\0\nTraceback (most recent call last):\n  File "{ROOT}/x.py"\n'.encode())
    assert found == [
        "control characters ['\\x00']",
        "a Python traceback",
        f"the local path {ROOT}",
    ]
    assert unclean(b"\xff\xfe")[0].startswith("not UTF-8")


def test_the_docs_link_check_bites(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n[ok](#title) [gone](missing.md) [no anchor](#nowhere)\n")
    assert local_links(page) == ["#title", "missing.md", "#nowhere"]
    assert "title" in headings_slugs(page) and "nowhere" not in headings_slugs(page)
    assert not (tmp_path / "missing.md").exists()


def test_the_readme_lists_every_address_form_the_registry_knows(skf: ModuleType) -> None:
    """A new store is one registry entry: its address form must reach the README."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    missing = [kind.form for kind in skf._SERVER_STORES if f"`{kind.form}`" not in readme]
    assert missing == []


def test_the_changelog_names_this_version_first(skf: ModuleType) -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = [line.split()[1] for line in changelog.splitlines() if line.startswith("## ")]
    assert versions[0] == skf.__version__
    assert versions[-1] == "1.0.0"
