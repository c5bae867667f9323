"""Build skf-run-lock.py, the one file users copy, from the modules of src/skf_run_lock/.

    python3 tools/bundle.py            # write skf-run-lock.py
    python3 tools/bundle.py --check    # exit 0 if the committed file is what the
                                       # modules build, else 1, naming the first difference

As SQLite's amalgamation does, the build puts the modules one after another into one
namespace, in the order of ``FLAT``, each as its own chapter: the imports between them
are dropped (the names they bring are already defined there), the standard library's
are hoisted to the top once, and each module's docstring becomes a comment that heads
its chapter. A script run as ``__main__`` is compiled whole on every call, so the modules
a file-lock call never runs (``CARRIED``: the server stores, the listings, --help) go
in as text instead, which costs a call next to nothing to read. A module imports one
where it is used, inside a function (``from .etcd_store import _open_etcd``): the build
turns that import into ``_compile_carried("etcd_store")``, which compiles the text on
first use, numbered as it stands in the built file, so a traceback shows the line that
failed. That function is the boot code's (tools/boot.py), the build's own first chapter,
which runs as code and compiles the others; the package needs none of it. An import of
a flat module inside a function is dropped, as its names are already there; so is
``from . import NAME``, a name a caller may set on the package (here, this namespace's).

Any python3 >= 3.11 runs this; it needs nothing but the standard library. The build
refuses a name defined by two modules (one namespace holds them all), a flat module
that imports one placed after it, and a carried text that a raw string cannot hold.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "skf_run_lock"
OUTPUT = ROOT / "skf-run-lock.py"
# The boot code: the chapter that runs as code and compiles (or loads from its cache)
# the others, all text. The build's own, beside it: no module of the package.
BOOT = Path(__file__).resolve().parent / "boot.py"

# The chapters, in the order a reader meets them: what the contract names, POSIX's and
# Windows' rules and the choice of one, what callers give, interrupts, the seams (what
# the tests may set), the record, the decisions, the outputs, the store interface and
# the file store, the registry, the server stores, the lock calls, the listing, the
# renewer, held() and run, the CLI.
FLAT = (
    "__init__",
    "public_surface",
    "times",
    "quoting",
    "posix",
    "windows",
    "platforms",
    "inputs",
    "interrupts",
    "seams",
    "records",
    "hold",
    "decisions",
    "outputs",
    "store_protocol",
    "guard",
    "file_store",
    "registry",
)


# The texts a call compiles (or loads from its cache) only when a function imports one:
# the words of --help, the parts of a tree (a call that names none never compiles
# them), then the connections kept between calls and what both server stores share,
# the servers' protocols (etcd's HTTP/1.1, Redis's RESP), each server's gateway, store
# (etcd's with its watch) and listing, and the folder's listing. A server store's own
# imports (socket, ssl, ...) run only with it.
CARRIED = (
    "usage",
    "parts",
    "kept_connections",
    "server_gateway",
    "http1",
    "resp",
    "etcd_gateway",
    "etcd_watch",
    "etcd_store",
    "etcd_listing",
    "redis_gateway",
    "redis_store",
    "redis_listing",
    "file_listing",
    "serve",
)
AFTER = ("lock_calls", "listing", "renewer", "held_and_run", "cli", "__main__")
# The name of the text every call runs: the flat modules, one after another.
CORE = "core"

HEADER = """\
#!/usr/bin/env python3
# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
# skf-run-lock {version}. This file is BUILT by tools/bundle.py from the modules of
# src/skf_run_lock/, one chapter each, every chapter headed by its module's name: do
# not edit it by hand. Edit the modules, then run `python3 tools/bundle.py`.
"""

# The first code the built file runs. Python parses the whole file before it runs any of
# it, so everything outside the carried texts must stay parseable by the Pythons this
# turns away (3.8 to 3.10; the tests run them), and this runs before the standard
# library's imports, some of which they lack.
OLDER_PYTHONS = """\
import sys as _sys

if _sys.version_info < (3, 11):  # told what to use, in the contract's one JSON line
    _NEEDED = (
        "skf-run-lock needs Python 3.11 or later; this is Python %d.%d.%d:"
        " run it with python3.11 or newer, or with uv run" % _sys.version_info[:3]
    )
    if __name__ != "__main__":
        raise ImportError(_NEEDED)
    _sys.stderr.write('{"status": "error", "message": "%s"}\\n' % _NEEDED)
    raise SystemExit(1)
"""


@dataclass
class Line:
    """One line of the built file: its text, and the module line it comes from."""

    text: str
    module: str | None = None  # None: made by the build
    number: int = 0


@dataclass
class Chapter:
    """What one module gives the built file."""

    name: str
    docstring: list[str] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)  # the standard library's, top level
    body: list[Line] = field(default_factory=list)
    shown: str = ""  # its file, as its heading names it
    needs: list[str] = field(default_factory=list)  # modules of the package it imports
    uses: list[str] = field(default_factory=list)  # those its functions import as they run
    defines: set[str] = field(default_factory=set)


class BuildError(Exception):
    """The modules cannot be built into one file as they stand."""


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def _is_dropped(node: ast.stmt, first: bool) -> bool:
    """A statement the one namespace makes needless: the future import and
    ``TYPE_CHECKING = False`` (the build writes each once), the package's own imports,
    and every ``__all__`` but the first module's."""
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or node.module == "__future__"
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "TYPE_CHECKING":
            return True
        if isinstance(target, ast.Name) and target.id == "__all__":
            return not first
    return False


def _bound_names(node: ast.stmt) -> set[str]:
    """The names a top-level statement defines at run time."""
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.If) and not _is_type_checking(node):
        return {name for child in node.body + node.orelse for name in _bound_names(child)}
    return set()


def _package_imports(node: ast.AST) -> list[str]:
    """The package's modules that ``node`` imports when its module is imported (``from
    .x import ...``), not those a function imports when it runs."""
    found = []
    pending = [node]
    while pending:
        child = pending.pop()
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.ImportFrom) and child.level > 0:
            if child.module is None:
                raise BuildError("import what a module defines (from .x import y), not the module")
            found.append(child.module)
        pending.extend(ast.iter_child_nodes(child))
    return found


def _imports_in_functions(tree: ast.Module) -> list[ast.ImportFrom]:
    """The package's imports inside functions: each runs when its function does."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [
                child
                for child in ast.walk(node)
                if isinstance(child, ast.ImportFrom) and child.level > 0
            ]
    return found


def _package_names(name: str, node: ast.ImportFrom) -> str:
    """The module whose names ``from . import NAME`` brings: the package's own, as a
    caller may have set them (GUARD_WAIT_SEC); never a module, which that would load."""
    modules = set(FLAT + CARRIED + AFTER)
    if node.level != 1 or any(alias.name in modules for alias in node.names):
        raise BuildError(f"{name}.py: import what a module defines, not the module")
    return FLAT[0]


def _drop(keep: list[bool], node: ast.stmt) -> None:
    for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
        keep[number] = False


def _sort_out(chapter: Chapter, node: ast.stmt, keep: list[bool], first: bool, hoist: bool) -> None:
    """Keep, hoist or drop one top-level statement of ``chapter``'s module."""
    if not _is_type_checking(node):
        chapter.needs += _package_imports(node)
    chapter.defines |= _bound_names(node)
    if _is_dropped(node, first):
        _drop(keep, node)
    elif hoist and isinstance(node, ast.Import | ast.ImportFrom):
        chapter.imports.append(ast.unparse(node))
        _drop(keep, node)
    elif isinstance(node, ast.If) and _is_type_checking(node):
        # The package's own imports go; a block left with nothing goes whole.
        inner = [child for child in node.body if not _is_dropped(child, first)]
        for child in [c for c in node.body if c not in inner] if inner else [node]:
            _drop(keep, child)


def _squeezed(lines: list[Line]) -> list[Line]:
    """``lines`` with at most two blank lines in a row, and none at either end."""
    out: list[Line] = []
    blanks = 0
    for line in lines:
        if line.text.strip():
            blanks = 0
        elif not out or blanks == 2:
            continue
        else:
            blanks += 1
        out.append(line)
    while out and not out[-1].text.strip():
        out.pop()
    return out


def read_chapter(package: Path, name: str, *, first: bool = False, hoist: bool = True) -> Chapter:
    """The chapter module ``name`` of ``package`` gives: ``hoist`` its standard-library
    imports to the top (a carried module keeps them, so that only its call pays for
    them). The boot code is read the same way, from beside the build."""
    path = package / f"{name}.py"
    source = path.read_text(encoding="utf-8")
    lines = source.split("\n")
    tree = ast.parse(source, str(path))
    shown = BOOT.relative_to(ROOT) if path == BOOT else Path("src", "skf_run_lock", path.name)
    chapter = Chapter(name, shown=shown.as_posix())
    keep = [True] * (len(lines) + 2)  # by line number, from 1
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        docstring = body[0]
        chapter.docstring = lines[docstring.lineno - 1 : docstring.end_lineno]
        _drop(keep, docstring)
        body = body[1:]
    for node in body:
        _sort_out(chapter, node, keep, first, hoist)
    # An import inside a function: a carried module's compiled there; a flat one's
    # names are in the one namespace already.
    replaced: dict[int, str] = {}
    for node in _imports_in_functions(tree):
        used = node.module or _package_names(name, node)
        _drop(keep, node)
        chapter.uses.append(used)
        if node.module in CARRIED:
            replaced[node.lineno] = " " * node.col_offset + f"_compile_carried({node.module!r})"
    kept = [
        Line(replaced.get(n, text), name, n)
        for n, text in enumerate(lines, start=1)
        if keep[n] or n in replaced
    ]
    chapter.body = _squeezed(kept)
    return chapter


def source_of(module: str, package: Path = PACKAGE) -> Path:
    """The file a chapter's lines come from (a built line's ``module``): the boot code,
    or a module of ``package``."""
    return BOOT if module == BOOT.stem else package / f"{module}.py"


def _heading(chapter: Chapter, carried: bool) -> list[Line]:
    path = chapter.shown
    rule = "# " + "-" * 86
    how = ", carried as text: compiled only for a lock of its store" if carried else ""
    lines = [Line(""), Line(""), Line(rule), Line(f"# {path}{how}")]
    text = "\n".join(chapter.docstring).strip().strip('"').strip()
    lines += [Line(f"# {row.strip()}".rstrip()) for row in text.split("\n") if text]
    lines.append(Line(rule))
    lines.append(Line(""))
    return lines


def _check(chapters: list[Chapter]) -> None:
    """BuildError for two modules defining one name, or a flat module importing one
    placed after it (a carried module may import any flat one, and carried ones before
    it)."""
    owner: dict[str, str] = {}
    for chapter in chapters:
        for name in sorted(chapter.defines - {"TYPE_CHECKING", "__all__"}):
            if name in owner:
                raise BuildError(f"{name} is defined by {owner[name]}.py and {chapter.name}.py")
            owner[name] = chapter.name
    placed: list[str] = []
    flat = set(FLAT + AFTER)
    for chapter in chapters:
        for need in chapter.needs:
            if chapter.name == "__init__":
                continue
            if need in flat and need not in placed:
                raise BuildError(f"{chapter.name}.py imports {need}.py, which comes after it")
            if need in CARRIED and chapter.name not in CARRIED:
                raise BuildError(f"{chapter.name}.py imports the carried module {need}.py")
        placed.append(chapter.name)


def _version(package: Path) -> str:
    tree = ast.parse((package / "public_surface.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__version__":
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise BuildError("public_surface.py defines no __version__")


def build(package: Path = PACKAGE) -> list[Line]:
    """The built file's lines, each with the module line it comes from (``package``:
    the folder of the modules)."""
    names = FLAT + CARRIED + AFTER
    missing = sorted({p.stem for p in package.glob("*.py")} - set(names))
    if missing:
        raise BuildError(f"modules the build does not place: {', '.join(missing)}")
    boot = read_chapter(BOOT.parent, BOOT.stem)
    chapters = [read_chapter(package, FLAT[0], first=True)]
    chapters += [read_chapter(package, name) for name in FLAT[1:]]
    chapters += [read_chapter(package, name) for name in AFTER[:-1]]
    chapters += [read_chapter(package, name, hoist=False) for name in CARRIED]
    main = read_chapter(package, AFTER[-1])  # __main__: the file runs, last
    _check([boot, *chapters, main])
    first, *rest = chapters
    out = [Line(text) for text in HEADER.format(version=_version(package)).split("\n")]
    out.pop()  # the header's last newline
    out += [Line(text, first.name, number) for number, text in enumerate(first.docstring, 1)]
    out.append(Line(""))
    out.append(Line("from __future__ import annotations"))
    out.append(Line(""))
    out += [Line(text) for text in OLDER_PYTHONS.split("\n")]
    imports = sorted({i for c in [boot, *chapters] for i in c.imports if i.startswith("import ")})
    imports += sorted({i for c in [boot, *chapters] for i in c.imports if i.startswith("from ")})
    out += [Line(text) for text in imports]
    # The code cache's chapter runs as code: it compiles (or loads) the rest, all text.
    out += _heading(boot, False)
    out += boot.body
    out.append(Line(""))
    texts: list[str] = []
    core = [Line("TYPE_CHECKING = False  # typing is imported by type checkers alone")]
    core += first.body
    for chapter in rest:
        if chapter.name in CARRIED:
            continue
        core += _heading(chapter, False)
        core += chapter.body
    out += _carried(CORE, (), core, len(out), texts)
    for chapter in rest:
        if chapter.name not in CARRIED:
            continue
        out += _heading(chapter, True)
        needs = tuple(need for need in dict.fromkeys(chapter.needs) if need in CARRIED)
        out += _carried(chapter.name, needs, chapter.body, len(out), texts)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    out.append(Line(""))
    out.append(Line(f"_BUILD = {digest!r}  # what a cache entry must name"))
    out.append(Line(f"_compile_carried({CORE!r})  # every call runs it"))
    out += main.body
    out.append(Line(""))
    return out


def _carried(
    name: str, needs: tuple[str, ...], body: list[Line], before: int, texts: list[str]
) -> list[Line]:
    """``body`` as a carried text, its first line numbered as it will stand after the
    ``before`` lines already built; the text is added to ``texts``."""
    text = "\n".join(line.text for line in body)
    if "'''" in text or "\r" in text:
        raise BuildError(f"{name} holds ''' or a CR: a raw string cannot carry it")
    texts.append(text)
    start = before + 1  # the line of the opening quotes
    return [
        Line(f"_CARRIED[{name!r}] = ({start}, {needs!r}, r'''"),
        *body,
        Line("''')"),
    ]


def built_text(package: Path = PACKAGE) -> str:
    """The built file, as the modules in ``package`` build it."""
    return "\n".join(line.text for line in build(package))


def _first_difference(have: str, want: str) -> str:
    have_lines = have.split("\n")
    want_lines = want.split("\n")
    for number, (a, b) in enumerate(zip(have_lines, want_lines, strict=False), start=1):
        if a != b:
            return f"line {number} differs: {a[:60]!r} where the modules build {b[:60]!r}"
    return f"it has {len(have_lines)} lines where the modules build {len(want_lines)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    try:
        text = built_text()
    except (BuildError, SyntaxError) as exc:
        print(f"bundle: cannot build: {exc}", file=sys.stderr)
        return 1
    compile(text, str(OUTPUT), "exec")
    if args.check:
        try:
            have = OUTPUT.read_bytes().decode("utf-8").replace("\r\n", "\n")
        except OSError as exc:
            print(f"bundle: {OUTPUT.name} cannot be read ({exc})", file=sys.stderr)
            return 1
        if have != text:
            why = _first_difference(have, text)
            message = f"bundle: {OUTPUT.name} is not what the modules build ({why})"
            print(f"{message}; run python3 tools/bundle.py and commit it", file=sys.stderr)
            return 1
        print(f"bundle: {OUTPUT.name} is what the modules build")
        return 0
    OUTPUT.write_text(text, encoding="utf-8", newline="\n")
    size = len(text.encode())
    print(f"bundle: wrote {OUTPUT.name} ({size:,} bytes, {text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
