"""The one file users copy is built from the package's modules, and built so that a call
pays only for the store it names.

tools/bundle.py puts the modules into skf-run-lock.py one after another; the server
stores' modules go in as text that only a call naming a server's lock compiles,
numbered as they stand in the built file. These tests hold the build to that: what a
call compiles, that the committed file is what the modules build, that the build
refuses what one namespace cannot hold, that every line of code in the built file is a
line of its module, and that mypy checks each store against the store interface.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import shlex
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from types import FunctionType, ModuleType

import pytest
from calls import compiled_by_cli, needs_system_tool, posix_only
from loader import PACKAGE, ROOT, SCRIPT, build_if_stale, load_script

# The build tool and the mutation tool run where the file is built (Linux, in CI); the
# Windows lane installs neither mypy nor the tools' own dependencies.
BUILDING = posix_only("the build and mutation tools, and mypy, which run where CI builds")

# The modules alone: CI's other suites may be writing bytecode beside them meanwhile.
NO_CACHE = shutil.ignore_patterns("__pycache__")


def bundle_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bundle", ROOT / "tools" / "bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bundle"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# --- What a call compiles ----------------------------------------------------------------


def test_a_file_lock_call_compiles_nothing_but_the_script(skf: ModuleType, tmp_path: Path) -> None:
    """Without its cache, a file-lock call compiles the text every call runs and nothing
    more, never server code (with it, nothing: test_cache.py)."""
    lock = str(tmp_path / "demo.lock")
    owner = ["--owner", "wf:skill:1"]
    starts = {skf._CARRIED[name][0]: name for name in skf._CARRIED}
    for command, more, expected, carried in (
        ("acquire", owner, 0, ["core"]),
        ("status", [], 3, ["core"]),
        ("acquire", [*owner, "--wait", "5"], 0, ["core"]),
        ("release", owner, 0, ["core"]),
    ):
        code, compiled, _ = compiled_by_cli(command, "--lock", lock, *more)
        modules = [starts.get(line) for name, line in compiled if name == str(SCRIPT)]
        assert (command, code, modules) == (command, expected, carried)  # status 3: held
        assert len(modules) == len(compiled)


def test_a_file_lock_call_imports_neither_datetime_nor_network_modules(tmp_path: Path) -> None:
    """A file-lock call imports what it uses: not datetime (its import cost a call 1.5
    ms; times are counted without it), nor anything a server's lock needs."""
    lock = str(tmp_path / "demo.lock")
    imported = []
    for command in ("acquire", "status", "release"):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", str(SCRIPT), command, "--lock", lock]
            + (["--owner", "wf:skill:1"] if command != "status" else []),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == (3 if command == "status" else 0), done.stderr
        imported += [
            line.rpartition("|")[2].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        ]
    assert "json" in imported  # the import times were read
    unwanted = {"datetime", "_datetime", "socket", "ssl", "selectors", "threading", "http"}
    assert sorted(unwanted.intersection(imported)) == []


@pytest.mark.parametrize(
    ("address", "store"), [("etcd://no-port/x", "etcd_store"), ("redis://h:99999/x", "redis_store")]
)
def test_a_server_lock_call_compiles_only_its_own_store(
    skf: ModuleType, address: str, store: str
) -> None:
    # A malformed address is refused by the store itself, so it compiles its module (the
    # servers' shared one first), and needs no server.
    code, compiled, error = compiled_by_cli("status", "--lock", address)
    starts = {skf._CARRIED[name][0]: name for name in skf._CARRIED}
    assert code == 1
    protocol = [(str(SCRIPT), "resp"), (str(SCRIPT), "redis_gateway")]
    if store == "etcd_store":
        protocol = [
            (str(SCRIPT), "http1"),
            (str(SCRIPT), "etcd_gateway"),
            (str(SCRIPT), "etcd_watch"),
        ]
    assert [(name, starts.get(line)) for name, line in compiled] == [
        (str(SCRIPT), "core"),
        (str(SCRIPT), "kept_connections"),
        (str(SCRIPT), "server_gateway"),
        *protocol,
        (str(SCRIPT), store),
    ]
    assert json.loads(error)["message"].startswith("the ")  # its own refusal, no traceback


def test_a_library_call_compiles_only_the_module_of_the_store_it_names(tmp_path: Path) -> None:
    fresh = load_script("skf_run_lock_fresh")
    fresh.acquire(tmp_path / "a.lock", "wf:skill:1", 60)
    fresh.status(tmp_path / "a.lock", 60)
    fresh.release(tmp_path / "a.lock", "wf:skill:1")
    assert sorted(fresh._COMPILED) == ["core"]  # no server code
    with pytest.raises(ValueError, match="port"):
        fresh.status("redis://h:99999/x", 60)
    assert sorted(fresh._COMPILED) == [
        "core",
        "kept_connections",
        "redis_gateway",
        "redis_store",
        "resp",
        "server_gateway",
    ]
    with pytest.raises(ValueError, match="HOST:PORT"):
        fresh.status("etcd://no-port/x", 60)
    assert sorted(fresh._COMPILED) == [
        "core",
        "etcd_gateway",
        "etcd_store",
        "etcd_watch",
        "http1",
        "kept_connections",
        "redis_gateway",
        "redis_store",
        "resp",
        "server_gateway",
    ]


# --- The committed file is what the modules build ----------------------------------------


def run_bundle(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "tools" / "bundle.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the build reads and writes: the modules, the tool and its boot
    code, and the file built from those modules (under a planted bug, both are the
    mutated ones: the committed file would differ from them, and fail a test of the
    build for a bug the build has nothing to do with)."""
    (tmp_path / "tools").mkdir()
    for tool in ("bundle.py", "boot.py"):
        shutil.copy(ROOT / "tools" / tool, tmp_path / "tools" / tool)
    shutil.copytree(PACKAGE, tmp_path / "src" / "skf_run_lock", ignore=NO_CACHE)
    shutil.copy(SCRIPT, tmp_path / "skf-run-lock.py")
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_a_test_run_after_an_edit_to_a_module_tests_the_edit(tree: Path) -> None:
    """conftest builds a stale file anew before any test loads it (a focused run too),
    and leaves a current one as it is."""
    module = tree / "src" / "skf_run_lock" / "times.py"
    module.write_text(module.read_text() + "\n_EDITED_FOR_THE_TEST = 1\n")
    assert build_if_stale(tree) is True
    assert "_EDITED_FOR_THE_TEST = 1" in (tree / "skf-run-lock.py").read_text()
    assert run_bundle(tree, "--check").returncode == 0
    assert build_if_stale(tree) is False


@BUILDING
def test_every_mutant_names_text_that_occurs_once_in_the_modules() -> None:
    """tools/mutate.py refuses a mutant whose text a change moved only when that mutant
    is run; a change that moves one is caught here, at once. The modules read are the
    committed ones, never a mutated copy under test (which would fail this for every
    mutant)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    texts = [p.read_text(encoding="utf-8") for p in sorted(mutate.PACKAGE.glob("*.py"))]
    moved = [
        name
        for name, (_, old, _) in mutate.MUTANTS.items()
        if sum(text.count(old) for text in texts) != 1
    ]
    assert moved == []
    assert len(mutate.MUTANTS) >= 107


def test_no_mutant_named_for_one_store_plants_its_bug_in_the_other() -> None:
    """A change can move a mutant's text so that it still occurs once, in another
    store's module: etcd-unknown-outcome-silent once planted its bug in Redis's code,
    and survived, while etcd's went untested. Shared modules may serve either."""
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    others = {"etcd": ("redis_", "resp"), "redis": ("etcd_", "http1")}
    modules = {p.stem: p.read_text(encoding="utf-8") for p in mutate.PACKAGE.glob("*.py")}
    astray = [
        (name, stem)
        for name, (_, old, _) in mutate.MUTANTS.items()
        for store, foreign in others.items()
        if store in name.split("-")
        for stem, text in modules.items()
        if stem.startswith(foreign) and old in text
    ]
    assert astray == []


def test_a_mutant_runs_the_tests_its_name_names_first_then_all_the_rest() -> None:
    """An etcd mutant's verdict came after 7 to 9 minutes when test_etcd.py ran near
    the end; the files its name names run first, with the file ``_KILLED_IN`` says
    killed it before, and every file still runs."""
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    every = sorted(str(p) for p in (ROOT / "tests").glob("test_*.py"))
    for name, first in [
        ("etcd-ended-watch-no-pause", ["test_etcd.py"]),
        ("http-no-keep-alive", ["test_etcd.py"]),
        ("slots-redis-clock-ignored", ["test_redis.py", "test_slots.py"]),
        ("no-read-only-guard", ["test_guard.py", "test_shared_folder.py"]),
        ("lost-guard-kept", ["test_guard.py", "test_interrupts.py"]),
    ]:
        order = mutate._ordered(name)
        assert sorted(order) == every
        assert [Path(p).name for p in order[: len(first)]] == first
    for name, stem in mutate._KILLED_IN.items():
        assert name in mutate.MUTANTS
        assert (ROOT / "tests" / f"{stem}.py").is_file()
    plain = [Path(p).stem for p in mutate._ordered("fifo-ignored")]
    assert plain.index("test_acquire") < plain.index("test_etcd")


@BUILDING
def test_a_kill_names_the_first_test_that_failed() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import mutate

    summary = "\n".join(
        [
            "..F",
            "=== short test summary info ===",
            f"FAILED {ROOT / 'tests' / 'test_slots.py'}::test_n[file] - assert 4 == 3",
            "FAILED tests/test_line.py::test_other - boom",
        ]
    )
    failed = subprocess.CompletedProcess(["pytest"], 1, summary, "")
    assert mutate._killed_by(failed) == "killed by tests/test_slots.py::test_n[file]"
    crashed = subprocess.CompletedProcess(["pytest"], 3, "INTERNALERROR> x", "")
    assert mutate._killed_by(crashed) == "killed (pytest exit 3)"


@BUILDING
def test_a_changed_module_fails_the_check_naming_the_line_until_rebuilt(tree: Path) -> None:
    guard = tree / "src" / "skf_run_lock" / "guard.py"
    edit(guard, "_GUARD_POLL_SEC = 0.001", "_GUARD_POLL_SEC = 0.002")
    before = (tree / "skf-run-lock.py").read_bytes()
    number = before.decode().split("\n").index("_GUARD_POLL_SEC = 0.001") + 1
    done = run_bundle(tree, "--check")
    assert done.returncode == 1 and done.stdout == ""
    assert f"line {number} differs: '_GUARD_POLL_SEC = 0.001'" in done.stderr
    assert (tree / "skf-run-lock.py").read_bytes() == before  # a check writes nothing
    assert run_bundle(tree).returncode == 0
    assert run_bundle(tree, "--check").returncode == 0
    assert "_GUARD_POLL_SEC = 0.002" in (tree / "skf-run-lock.py").read_text(encoding="utf-8")


@BUILDING
@pytest.mark.parametrize(
    ("module", "old", "new", "words"),
    [
        (
            "outputs.py",
            "def _fail(",
            "def _decide_take() -> None:\n    pass\n\n\ndef _fail(",
            "_decide_take is defined by decisions.py and outputs.py",
        ),
        (
            "inputs.py",
            "import re\n",
            "import re\n\nfrom .cli import main\n",
            "inputs.py imports cli.py, which comes after it",
        ),
        (
            "held_and_run.py",
            "import os\n",
            "import os\n\nfrom .etcd_store import _open_etcd\n",
            "held_and_run.py imports the carried module etcd_store.py",
        ),
    ],
)
def test_the_build_refuses_what_one_namespace_cannot_hold(
    tree: Path, module: str, old: str, new: str, words: str
) -> None:
    edit(tree / "src" / "skf_run_lock" / module, old, new)
    before = (tree / "skf-run-lock.py").read_bytes()
    done = run_bundle(tree)
    assert done.returncode == 1 and words in done.stderr
    assert (tree / "skf-run-lock.py").read_bytes() == before


@BUILDING
def test_a_module_the_build_does_not_place_is_refused(tree: Path) -> None:
    (tree / "src" / "skf_run_lock" / "consul_store.py").write_text('"""A new store."""\n')
    done = run_bundle(tree, "--check")
    assert done.returncode == 1 and "modules the build does not place: consul_store" in done.stderr


# --- Every line of code is a line of its module ------------------------------------------


def functions_of(module: ModuleType) -> list[FunctionType]:
    """Every function the built file defines in ``module``: module-level ones and methods."""
    found: list[FunctionType] = []
    values = list(vars(module).values())
    for value in list(values):
        if inspect.isclass(value):
            values += list(vars(value).values())
    for value in values:
        function = value.__func__ if isinstance(value, staticmethod | classmethod) else value
        if isinstance(function, property):
            function = function.fget
        if isinstance(function, FunctionType) and function.__code__.co_filename == str(SCRIPT):
            found.append(function)
    return found


def test_every_function_in_the_built_file_stands_at_its_modules_line(skf: ModuleType) -> None:
    """What a traceback shows of the built file is its module's line, under a heading
    naming the module: the carried stores' lines are numbered as they stand too."""
    built = SCRIPT.read_text(encoding="utf-8").split("\n")
    origin = bundle_tool().build(PACKAGE)
    assert [line.text for line in origin] == built
    modules: dict[str, list[str]] = {}
    seen: set[str] = set()
    tool = bundle_tool()
    for function in functions_of(skf):
        number = function.__code__.co_firstlineno
        line = origin[number - 1]
        assert line.module is not None, (function, line)
        source = tool.source_of(line.module, PACKAGE)
        if line.module not in modules:
            modules[line.module] = source.read_text(encoding="utf-8").split("\n")
        assert modules[line.module][line.number - 1] == built[number - 1], function
        # As the build names it, wherever the modules are (a mutant's are elsewhere).
        shown = "tools/boot.py" if source == tool.BOOT else f"src/skf_run_lock/{source.name}"
        headings = [
            n for n, text in enumerate(built[:number]) if text.startswith(("# src/", "# tools/"))
        ]
        assert built[max(headings)].startswith(f"# {shown}"), (function, shown)
        seen.add(line.module)
    assert {"server_gateway", "etcd_store", "redis_store", "lock_calls", "cli", "boot"} <= seen


def test_a_traceback_from_a_carried_store_shows_its_line(skf: ModuleType) -> None:
    with pytest.raises(ValueError, match="port") as caught:
        skf._open_redis("redis://h:99999/x")
    frames = traceback.extract_tb(caught.value.__traceback__)
    last = [frame for frame in frames if frame.filename == str(SCRIPT)][-1]
    built = SCRIPT.read_text(encoding="utf-8").split("\n")
    assert last.lineno is not None and last.line is not None
    assert last.line.startswith("raise ValueError(")
    assert built[last.lineno - 1].strip() == last.line
    heading = max(n for n, text in enumerate(built[: last.lineno]) if text.startswith("# src/"))
    # The servers' shared module parses HOST:PORT.
    assert built[heading].startswith("# src/skf_run_lock/server_gateway.py, carried as text")


def test_every_module_says_in_its_first_line_what_it_holds() -> None:
    """One concept a module, named in its docstring's first line (not a line count:
    docs/development.md says when to split)."""
    said = {}
    for path in PACKAGE.glob("*.py"):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        said[path.name] = (docstring or "").split("\n", 1)[0].strip()
    assert [name for name, first in said.items() if len(first) < 20] == []


def imports_when_imported() -> dict[str, set[str]]:
    """Each module's package imports that run when it is imported (not a function's)."""
    bundle = bundle_tool()
    graph = {}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        needs = set()
        for node in tree.body:
            if not bundle._is_type_checking(node):
                needs |= set(bundle._package_imports(node))
        graph[path.stem] = needs
    return graph


def test_the_imports_a_module_runs_when_imported_form_no_cycle() -> None:
    graph = imports_when_imported()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, " -> ".join([*path, module])
        if module in done:
            return
        for need in sorted(graph[module]):
            visit(need, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


# The stores, and what stands above them: a store reads, applies a change and waits; it
# knows nothing of who asks, nor of the words a call prints.
STORES = (
    "guard",
    "file_store",
    "file_listing",
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
)
ABOVE_THE_STORES = (
    "registry",
    "lock_calls",
    "renewer",
    "held_and_run",
    "listing",
    "outputs",
    "usage",
    "cli",
)


def test_the_stores_import_nothing_from_the_layers_above_them() -> None:
    for store in STORES:
        tree = ast.parse((PACKAGE / f"{store}.py").read_text(encoding="utf-8"))
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module
        }
        assert imported.isdisjoint(ABOVE_THE_STORES), (store, imported & set(ABOVE_THE_STORES))


def project_classes() -> dict[str, tuple[str, list[str]]]:
    """Each class the modules define: its module, and the names of its bases that are
    classes of the project's own (a base such as ``Exception`` or ``Protocol`` is not)."""
    found: dict[str, tuple[str, list[str]]] = {}
    bases: dict[str, list[ast.expr]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                assert node.name not in found, (node.name, path.name)  # one namespace
                found[node.name] = (path.name, [])
                bases[node.name] = node.bases
    for name, (_, own) in found.items():
        own += [base.id for base in bases[name] if isinstance(base, ast.Name) and base.id in found]
    return found


def test_no_class_inherits_more_than_one_level_from_the_projects_own() -> None:
    """Composition over chains: a store has its gateway (and etcd's its watch) rather
    than being one; a class may inherit from one of the project's classes only if that
    one inherits from none of them (``_EtcdGateway`` from ``_ServerGateway``, say)."""
    classes = project_classes()

    def depth(name: str, path: tuple[str, ...]) -> int:
        assert name not in path, " -> ".join([*path, name])
        return max((1 + depth(base, (*path, name)) for base in classes[name][1]), default=0)

    depths = {f"{module}: {name}": depth(name, ()) for name, (module, _) in classes.items()}
    assert {where: levels for where, levels in depths.items() if levels > 1} == {}
    # It looks where the chains were: each server store inherits from the servers' one
    # base alone, and has its gateway.
    assert classes["_EtcdStore"][1] == classes["_RedisStore"][1] == ["_ServerStore"]
    assert classes["_RedisSurvey"][1] == []


def test_no_module_is_loaded_by_a_name_in_a_string() -> None:
    """Every module is reached by an import that mypy, editors and import graphs follow;
    only the build's own boot code (tools/boot.py, no module) compiles text, and only
    text the build put there."""
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert "importlib" not in [alias.name for alias in node.names], path.name
            if isinstance(node, ast.ImportFrom):
                assert node.module != "importlib", path.name
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called = node.func.id
                assert called not in ("exec", "__import__", "compile"), (path.name, node.lineno)


def test_every_module_is_reached_by_an_import() -> None:
    """A module of the package is code the package runs: each is imported, when its
    importer is or when a function runs, from the package itself or its ``python -m``
    entry. Code only the built file runs (its boot code) is the build's, in tools/."""
    imports: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports[path.stem] = {
            node.module or "__init__"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level > 0
        }
    reached: set[str] = set()
    pending = ["__init__", "__main__"]
    while pending:
        module = pending.pop()
        if module not in reached:
            reached.add(module)
            pending += sorted(imports[module])
    assert sorted(set(imports) - reached) == []


# --- Each platform in one place ----------------------------------------------------------

# The modules that may test which system runs them: the one choice of the platform's
# rules, and POSIX's rules (Linux among the POSIX systems, for run; macOS, whose names
# ignore case). Beside them the build's boot code, which finds its cache folder before
# the choice is compiled, tests it once.
TESTS_THE_PLATFORM = {"platforms.py", "posix.py"}


def platform_checks_in(tree: ast.Module) -> list[int]:
    """The lines of ``tree`` that read sys.platform or os.name."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in (("sys", "platform"), ("os", "name"))
    ]


def test_no_module_but_the_platforms_tests_the_platform() -> None:
    """What differs on Windows is in windows.py, what differs on POSIX in posix.py, and
    platforms.py chooses one once: no other module asks which system runs it."""
    found = {
        path.name: lines
        for path in sorted(PACKAGE.glob("*.py"))
        if (lines := platform_checks_in(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert set(found) <= TESTS_THE_PLATFORM, found
    assert len(found["platforms.py"]) == 1, found
    boot = bundle_tool().BOOT
    assert len(platform_checks_in(ast.parse(boot.read_text(encoding="utf-8")))) == 1


def test_posix_and_windows_give_the_same_names_with_the_same_signatures(
    skf: ModuleType,
) -> None:
    """One interface: every name of platforms._Platform, in both rules, alike (mypy
    checks each against the Protocol too)."""

    def surface(rules: type) -> dict[str, str]:
        names = [name for name in vars(rules) if not name.startswith("_")]
        return {
            name: str(inspect.signature(value))
            if callable(value := getattr(rules, name))
            else type(value).__name__
            for name in names
        }

    posix, windows = surface(skf._Posix), surface(skf._Windows)
    assert posix == windows
    assert {type(skf._POSIX), type(skf._WINDOWS)} == {skf._Posix, skf._Windows}
    assert skf._PLATFORM is (skf._WINDOWS if sys.platform == "win32" else skf._POSIX)


def test_both_platforms_rules_import_on_any_system() -> None:
    """Nothing only one system has is imported when the modules are: the tests drive
    Windows' rules on Linux."""
    for name in ("posix.py", "windows.py", "platforms.py"):
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        imported = {
            alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
        }
        assert imported <= {"errno", "os", "re", "sys", "time"}, (name, imported)


def test_no_module_but_the_seams_reads_the_platform_chosen() -> None:
    """Every module follows the rules in force, ``_SEAMS.platform``, which the seams
    take from platforms.py's choice: none reads that choice itself, so a test that
    sets Windows' rules in force has every module follow them."""
    readers = sorted(
        path.name
        for path in PACKAGE.glob("*.py")
        if any(
            isinstance(node, ast.Name) and node.id == "_PLATFORM"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        )
    )
    assert readers == ["platforms.py", "seams.py"]


# --- The tests reach the code through its seams ------------------------------------------

# The built file, as the tests name it: the ``skf`` fixture, and ``module`` where a test
# holds it beside something else (Windows' rules and their fake msvcrt).
BUILT = {"skf", "module"}
# The one value of it a test may set the fields of.
SEAMS = "_SEAMS"
TESTS = ROOT / "tests"


def derived_from_the_built_file(function: ast.AST) -> set[str]:
    """The names ``function`` binds to something reached from the built file (a class
    of it, a store it opened, a method of either), until none is added."""
    names = set(BUILT)
    while True:
        before = len(names)
        for node in ast.walk(function):
            if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) or not node.value:
                continue
            if {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & names:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if len(names) == before:
            return names


def patched_at(target: ast.expr, name: ast.expr, derived: set[str]) -> str | None:
    """What a setattr of ``name`` on ``target`` patches, if it is something of the built
    file's other than a field of the seams (None: it is not): the built file itself,
    anything reached from it but a standard module it imports (``skf.os.urandom`` is
    the standard library's), or a private name of anything."""
    given = name.value if isinstance(name, ast.Constant) else None
    private = isinstance(given, str) and given.startswith("_") and not given.endswith("__")
    roots = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    seams = (
        isinstance(target, ast.Attribute)
        and target.attr == SEAMS
        and isinstance(target.value, ast.Name)
        and target.value.id in BUILT
    )
    if seams and isinstance(given, str) and not given.startswith("_"):
        return None
    standard = (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id in BUILT
        and target.attr in sys.stdlib_module_names
    )
    if roots & derived and not standard:
        return ast.unparse(target) + (f".{given}" if isinstance(given, str) else "")
    if private or (roots & derived and not isinstance(given, str)):
        return f"{ast.unparse(target)}.{given if isinstance(given, str) else '?'}"
    return None


def setattr_arguments(call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """The target and the name of a patch: ``setattr(X, "name", ...)`` and
    ``monkeypatch.setattr(X, "name", ...)`` (``delattr`` alike); None for another call."""
    func = call.func
    verb = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if verb not in ("setattr", "delattr") or len(call.args) < 2:
        return None
    return call.args[0], call.args[1]


def scopes(tree: ast.Module) -> list[ast.stmt]:
    """The functions and classes a test file defines at its top, each with all it holds."""
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)]


def patching_helpers(trees: dict[str, ast.Module]) -> dict[str, tuple[int, int]]:
    """The tests' helpers that patch what they are given (``first_arguments_of(
    monkeypatch, owner, name)``): by name, the positions of the target and the name."""
    helpers = {}
    for tree in trees.values():
        for function in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:
            params = [arg.arg for arg in function.args.args]
            for call in ast.walk(function):
                found = isinstance(call, ast.Call) and setattr_arguments(call)
                if found and all(isinstance(a, ast.Name) and a.id in params for a in found):
                    target, name = found
                    assert isinstance(target, ast.Name) and isinstance(name, ast.Name)
                    helpers[function.name] = (params.index(target.id), params.index(name.id))
    return helpers


def private_patches_in(trees: dict[str, ast.Module]) -> list[str]:
    """Every patch the tests make of the built file beyond its seams' fields, as
    ``file:line what``."""
    helpers = patching_helpers(trees)
    found = []
    for file, tree in sorted(trees.items()):
        for scope in scopes(tree):
            derived = derived_from_the_built_file(scope)
            name = getattr(scope, "name", "")
            for call in ast.walk(scope):
                if not isinstance(call, ast.Call):
                    continue
                callee = call.func.id if isinstance(call.func, ast.Name) else None
                arguments = setattr_arguments(call)
                if callee in helpers and name != callee:
                    at, named = helpers[callee]
                    if max(at, named) < len(call.args):
                        arguments = call.args[at], call.args[named]
                elif name in helpers:
                    arguments = None  # checked where the helper is called
                what = arguments and patched_at(*arguments, derived)
                if what:
                    found.append(f"{file}:{call.lineno} {what}")
    return sorted(set(found))


def test_no_test_patches_the_built_file_but_its_seams() -> None:
    """The tests reach behaviour through the seams the code offers (``_SEAMS``: a store
    of their own around each store a call opens, the platform in force, the timings),
    through the standard library's functions, or through real faults: none patches a
    private name of the built file or of any of its classes, nor the file's own names."""
    trees = {path.name: ast.parse(path.read_text(encoding="utf-8")) for path in TESTS.glob("*.py")}
    assert private_patches_in(trees) == []


@pytest.mark.parametrize(
    "patch",
    [
        'monkeypatch.setattr(skf, "_take_in", spy)',
        'monkeypatch.setattr(skf, "os", failing)',
        'monkeypatch.setattr(skf, "GUARD_WAIT_SEC", 0.05)',
        'monkeypatch.setattr(skf._EtcdStore, "look", counted)',
        'monkeypatch.setattr(skf._SEAMS.platform, "try_lock", swapped)',
        'cls = getattr(skf, "_RedisStore")\n    monkeypatch.setattr(cls, "read", read)',
        'monkeypatch.setattr(module._PLATFORM, "try_lock", locked)',
        'patched.setattr(store, "_rung", rung)',
        'first_arguments_of(monkeypatch, skf, "_signature")',
        'setattr(skf._SEAMS, "_hidden", 1)',
    ],
)
def test_a_test_that_patches_the_built_file_beyond_its_seams_is_found(patch: str) -> None:
    helper = (
        "def first_arguments_of(monkeypatch, owner, name):\n"
        "    monkeypatch.setattr(owner, name, 1)\n"
    )
    test = f"def test_it(skf, monkeypatch, patched, store):\n    {patch}\n"
    allowed = (
        "def test_fine(skf, monkeypatch):\n"
        '    monkeypatch.setattr(skf._SEAMS, "beat_sec", 0.2)\n'
        '    monkeypatch.setattr(skf.os, "urandom", lambda n: b"")\n'
        '    monkeypatch.setattr(os, "open", spying)\n'
        '    first_arguments_of(monkeypatch, os, "lstat")\n'
    )
    trees = {"calls.py": ast.parse(helper), "test_x.py": ast.parse(test + allowed)}
    (found,) = private_patches_in(trees)
    file, _, line = found.partition(" ")[0].partition(":")
    assert file == "test_x.py" and int(line) < test.count("\n") + 1, found


# A function a call passes what it asks through takes that as one value (a request, a
# hold, a verdict), not one parameter a part: the public API aside, none takes more.
MOST_PARAMETERS = 6


def public_names() -> set[str]:
    """The names the modules' ``__all__`` lists: the public API, whose signatures are
    the contract's."""
    names: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
            ):
                assert isinstance(node.value, ast.List | ast.Tuple), path.name
                names |= {ast.literal_eval(item) for item in node.value.elts}
    return names


def test_no_function_outside_the_public_api_takes_more_than_six_parameters() -> None:
    """Counting every parameter (positional, keyword-only, ``*args``, ``**kwargs``),
    ``self`` and ``cls`` aside; a value's constructor (``__init__``) aside too."""
    public = public_names()
    assert {"acquire", "acquire_within", "held", "main"} <= public
    over = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name in public or node.name == "__init__":
                continue
            args = node.args
            names = [arg.arg for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
            names += [arg.arg for arg in (args.vararg, args.kwarg) if arg is not None]
            if names[:1] in (["self"], ["cls"]):
                names = names[1:]
            if len(names) > MOST_PARAMETERS:
                over.append(f"{path.name}:{node.lineno} {node.name} takes {len(names)}")
    assert not over, over


# --- The package is the source ------------------------------------------------------------


def in_package(*args: str) -> subprocess.CompletedProcess[str]:
    """Python with the package's source first on its path, as an installed wheel has it."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""},
    )


def test_the_package_and_the_built_file_are_one_version_and_one_surface(skf: ModuleType) -> None:
    done = in_package("-c", "import json, skf_run_lock as s; print(json.dumps(s.__all__))")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == list(skf.__all__)
    version = in_package("-m", "skf_run_lock", "--version")
    assert (version.returncode, version.stdout) == (0, '{"version": "1.12.1"}\n')
    assert skf.__version__ == "1.12.1"


def test_the_package_takes_a_file_lock_as_the_file_does(tmp_path: Path) -> None:
    lock = str(tmp_path / "demo.lock")
    taken = in_package("-m", "skf_run_lock", "acquire", "--lock", lock, "--owner", "wf:sk:1")
    assert taken.returncode == 0 and json.loads(taken.stdout)["acquired"] is True
    refused = in_package("-m", "skf_run_lock", "acquire", "--lock", lock, "--owner", "wf:sk:2")
    assert refused.returncode == 3 and json.loads(refused.stdout)["held_by"] == "wf:sk:1"
    released = in_package("-m", "skf_run_lock", "release", "--lock", lock, "--owner", "wf:sk:1")
    assert released.returncode == 0 and json.loads(released.stdout)["released"] is True
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@posix_only("a command started by a script's name (Windows starts an .exe)")
@pytest.mark.parametrize("on_path", [True, False])
def test_the_installed_commands_advice_names_that_command_and_runs_as_printed(
    tmp_path: Path, on_path: bool
) -> None:
    """Called as ``skf-run-lock`` (on PATH) the advice says ``skf-run-lock release``;
    started by its path, that path; never the interpreter behind the command."""
    folder = tmp_path / "a bin"
    folder.mkdir()
    command = folder / "skf-run-lock"
    command.write_text(f"#!{sys.executable}\nfrom skf_run_lock.cli import _entry\n_entry()\n")
    command.chmod(0o755)
    path = f"{folder}{os.pathsep}{os.environ['PATH']}" if on_path else os.environ["PATH"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PATH": path}
    started = "skf-run-lock" if on_path else str(command)
    lock = str(tmp_path / "a folder" / "demo.lock")

    def call(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, env=env
        )

    assert call(started, "acquire", "--lock", lock, "--owner", "wf:sk:1").returncode == 0
    refused = call(started, "acquire", "--lock", lock, "--owner", "wf:sk:2")
    advice = json.loads(refused.stdout)["message"].split("clear it with: ", 1)[1]
    assert advice.startswith(f"{shlex.quote(started)} release --lock "), advice
    done = call(*shlex.split(advice))
    assert json.loads(done.stdout)["released"] is True, done.stderr
    assert not os.path.exists(lock)


# --- The stores are checked against the store interface ----------------------------------


STORE_CLASSES = {
    "redis_store.py": "_RedisStore",
    "etcd_store.py": "_EtcdStore",
    "file_store.py": "_FileStore",
}


def mypy(source: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(cache),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=source.parent,
    )


# Each store's method changed: one mypy run of the copy with the three edits, each of
# which must fail its own store's opener, and nothing else (the copy unedited passes).
MISMATCHED_METHODS = [
    (
        "redis_store.py",
        "def beat(self, place: _Place) -> bool:",
        "def beat(self, place: _Place, extra: int) -> bool:",
    ),
    (
        "etcd_store.py",
        "def leave(self, place: _Place) -> None:",
        "def leave(self, place: _Place, why: str) -> None:",
    ),
    (
        "file_store.py",
        "def by_hand(self) -> str:",
        "def by_hand(self) -> bytes:",
    ),
]


@BUILDING
@pytest.mark.timeout(600)
def test_mypy_fails_a_store_whose_method_does_not_match_the_interface(tmp_path: Path) -> None:
    copy = tmp_path / "src" / "skf_run_lock"
    shutil.copytree(PACKAGE, copy, ignore=NO_CACHE)
    for module, old, new in MISMATCHED_METHODS:
        edit(copy / module, old, new)
    edit(copy / "file_store.py", 'return f"delete the file {_quoted(self.lock)}"', 'return b""')
    done = mypy(copy, tmp_path / "cache")
    assert done.returncode == 1, done.stdout
    errors = sorted(
        (line.split(":")[0], line.split(" error: ")[1])
        for line in done.stdout.splitlines()
        if " error: " in line
    )
    assert errors == sorted(
        (
            f"skf_run_lock/{module}",
            f'Incompatible return value type (got "{STORE_CLASSES[module]}", expected'
            ' "_Store")  [return-value]',
        )
        for module, _, _ in MISMATCHED_METHODS
    ), done.stdout


# --- Older Pythons are told what to use -----------------------------------------------


def older_python(version: str) -> str:
    """An interpreter of ``version`` (3.8, 3.9, 3.10): pyenv's, else one on PATH; the
    test is skipped where there is none, saying how to get one."""
    pyenv_root = (
        subprocess.run(
            ["pyenv", "root"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if shutil.which("pyenv")
        else ""
    )
    found = (
        sorted(Path(pyenv_root, "versions").glob(f"{version}.*/bin/python")) if pyenv_root else []
    )
    if found:
        return str(found[-1])
    return needs_system_tool(f"python{version}", f"pyenv install {version}")


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10"])
def test_an_older_python_gets_one_json_line_naming_the_python_it_needs(
    version: str, tmp_path: Path
) -> None:
    """The file copied alone, run by an older Python: one JSON error line, exit 1, no
    traceback, nothing made; loaded as a module, an ImportError saying the same."""
    python = older_python(version)
    alone = tmp_path / "skf-run-lock.py"
    shutil.copyfile(SCRIPT, alone)
    lock = tmp_path / "locks" / "x.lock"
    run = subprocess.run(
        [python, str(alone), "acquire", "--lock", str(lock), "--owner", "wf:sk"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (run.returncode, run.stdout) == (1, ""), run
    error = json.loads(run.stderr)
    assert run.stderr.count("\n") == 1 and list(error) == ["status", "message"]
    assert error["message"].startswith(
        f"skf-run-lock needs Python 3.11 or later; this is Python {version}."
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["skf-run-lock.py"]
    load = (
        "import importlib.util as u, sys\n"
        f"s = u.spec_from_file_location('skf', {str(alone)!r})\n"
        "try:\n    s.loader.exec_module(u.module_from_spec(s))\n"
        "except ImportError as e:\n    print(e)\n"
    )
    loaded = subprocess.run(
        [python, "-c", load], capture_output=True, text=True, timeout=60, check=False
    )
    assert (loaded.returncode, loaded.stderr) == (0, "") and loaded.stdout == error[
        "message"
    ] + "\n"
