"""The server stores' code is kept as source text and compiled only for a server's lock.

A file-lock call must never compile it (that is what keeps every file user's call
cheap); a call naming a server's lock compiles it once, with its lines numbered as
they stand in the script, so tracebacks and tools point at the right lines; and
tools/unfold.py turns it back into plain code, line for line, for ruff and mypy.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path
from types import FunctionType, ModuleType

import pytest
from conftest import ROOT, SCRIPT, load_script

# Runs the script as `python3 skf-run-lock.py ARGS` does, and prints on exit the file
# names of everything compiled after the script itself.
RECORD_COMPILES = """
import atexit, builtins, json, runpy, sys
compiled, real = [], builtins.compile
def recording(source, filename, *args, **kwargs):
    compiled.append(str(filename))
    return real(source, filename, *args, **kwargs)
builtins.compile = recording
atexit.register(lambda: print(json.dumps(compiled[1:]), file=sys.stderr))
script, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def compiled_by_cli(*args: str) -> tuple[int, list[str], str]:
    """The exit code of a CLI call in a fresh process, what it compiled beyond the script
    itself (file names), and the last line it wrote to stderr before that list."""
    done = subprocess.run(
        [sys.executable, "-c", RECORD_COMPILES, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    return done.returncode, json.loads(lines[-1]), lines[-2] if len(lines) > 1 else ""


def test_a_file_lock_call_compiles_nothing_but_the_script(tmp_path: Path) -> None:
    lock = str(tmp_path / "demo.lock")
    owner = ["--owner", "wf:skill:1"]
    for command, more, expected in (
        ("acquire", owner, 0),
        ("status", [], 3),
        ("release", owner, 0),
    ):
        code, compiled, _ = compiled_by_cli(command, "--lock", lock, *more)
        assert (command, code, compiled) == (command, expected, [])  # status 3: held


def test_the_script_stays_within_its_size_budget() -> None:
    """Every call compiles the whole file: it stays within 125 KB (issue 20), counted
    with LF line ends as the repository holds it."""
    size = len(SCRIPT.read_bytes().replace(b"\r\n", b"\n"))
    assert size <= 125_000, f"{SCRIPT.name} is {size:,} bytes; the budget is 125,000"


@pytest.mark.parametrize("address", ["etcd://no-port/x", "redis://h:99999/x"])
def test_a_call_naming_a_servers_lock_compiles_its_code_from_the_script(address: str) -> None:
    # A malformed address is refused by the store itself, so it compiles its code
    # (the shared part, then the store's), and needs no server.
    code, compiled, error = compiled_by_cli("status", "--lock", address)
    assert (code, compiled) == (1, [str(SCRIPT), str(SCRIPT)])
    assert json.loads(error)["message"].startswith("the ")  # its own refusal, no traceback


# Each server store's code (its text, and the function that compiles it), and a class
# it defines; the shared code too.
SOURCES = {
    "net": ("_NET_SOURCE", "_net_code", "_Connection"),
    "etcd": ("_ETCD_SOURCE", "_etcd_code", "_EtcdStore"),
    "redis": ("_REDIS_SOURCE", "_redis_code", "_RedisStore"),
}


def test_a_library_call_compiles_only_the_code_of_the_store_it_names(tmp_path: Path) -> None:
    fresh = load_script("skf_run_lock_fresh")
    compiled = lambda: {name for name, (_, _, c) in SOURCES.items() if c in vars(fresh)}  # noqa: E731
    fresh.acquire(tmp_path / "a.lock", "wf:skill:1", 60)
    fresh.status(tmp_path / "a.lock", 60)
    fresh.release(tmp_path / "a.lock", "wf:skill:1")
    assert compiled() == set()
    with pytest.raises(ValueError, match="port"):
        fresh.status("redis://h:99999/x", 60)
    assert compiled() == {"net", "redis"}
    with pytest.raises(ValueError, match="HOST:PORT"):
        fresh.status("etcd://no-port/x", 60)
    assert compiled() == {"net", "redis", "etcd"}


def functions_of(skf: ModuleType, source: str, compiler: str) -> list[FunctionType]:
    """Every function the code of ``source`` defines: module-level ones and methods."""
    found: list[FunctionType] = []
    names = [name for name, value in vars(skf).items() if inspect.isclass(value)]
    for value in [*vars(skf).values(), *(m for n in names for m in vars(vars(skf)[n]).values())]:
        function = value.__func__ if isinstance(value, staticmethod) else value
        if isinstance(function, property):
            function = function.fget
        if isinstance(function, FunctionType) and function.__code__.co_filename == str(SCRIPT):
            found.append(function)
    end = getattr(skf, compiler).__code__.co_firstlineno
    first = end - 3 - getattr(skf, source).count("\n")
    return [f for f in found if first < f.__code__.co_firstlineno < end]


@pytest.mark.parametrize(
    ("store", "some"),
    [
        ("net", {"_seconds_left", "tls_context", "_place_of", "_find", "_receive"}),
        ("etcd", {"post", "look", "wait", "_wait_place", "send", "_etcd_duration"}),
        ("redis", {"call", "look", "wait", "_rung", "_parse", "_slot_base", "code"}),
    ],
)
def test_the_server_code_keeps_its_line_numbers(skf: ModuleType, store: str, some: set) -> None:
    lines = SCRIPT.read_text(encoding="utf-8").split("\n")
    source, compiler, _ = SOURCES[store]
    functions = functions_of(skf, source, compiler)
    assert some <= {f.__name__ for f in functions}
    for function in functions:
        line = lines[function.__code__.co_firstlineno - 1].strip()
        assert line.startswith(("@", f"def {function.__name__}(")), (function, line)


def unfold_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unfold", ROOT / "tools" / "unfold.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_unfolding_changes_only_the_lines_that_open_and_close_the_text() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    before, after = text.split("\n"), unfold_tool().unfolded(text).split("\n")
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert changed == [
        (f"{name} = r'''", f'{name} = ""  # unfolded: its code follows as plain code')
        if at == 0
        else ("'''", f"# end of {name}")
        for name, _, _ in SOURCES.values()
        for at in (0, 1)
    ]


def test_the_unfolded_script_defines_the_server_stores_as_plain_code(tmp_path: Path) -> None:
    unfolded = tmp_path / "unfolded.py"
    unfolded.write_text(unfold_tool().unfolded(SCRIPT.read_text(encoding="utf-8")))
    spec = importlib.util.spec_from_file_location("unfolded", unfolded)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for source, _, cls in SOURCES.values():
        assert getattr(module, source) == ""
        assert inspect.isclass(getattr(module, cls))
