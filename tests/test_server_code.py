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


def compiled_by_cli(*args: str) -> tuple[int, list[str]]:
    """The exit code of a CLI call in a fresh process, and what it compiled beyond the
    script itself (file names)."""
    done = subprocess.run(
        [sys.executable, "-c", RECORD_COMPILES, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode, json.loads(done.stderr.strip().splitlines()[-1])


def test_a_file_lock_call_compiles_nothing_but_the_script(tmp_path: Path) -> None:
    lock = str(tmp_path / "demo.lock")
    owner = ["--owner", "wf:skill:1"]
    for command, more, expected in (
        ("acquire", owner, 0),
        ("status", [], 3),
        ("release", owner, 0),
    ):
        code, compiled = compiled_by_cli(command, "--lock", lock, *more)
        assert (command, code, compiled) == (command, expected, [])  # status 3: held


def test_a_call_naming_an_etcd_lock_compiles_the_etcd_code_from_the_script() -> None:
    # A malformed etcd address is refused by the etcd store itself, so it compiles its
    # code, and needs no server.
    code, compiled = compiled_by_cli("status", "--lock", "etcd://no-port/x")
    assert (code, compiled) == (1, [str(SCRIPT)])


def test_a_library_call_on_a_file_lock_leaves_the_etcd_code_uncompiled(tmp_path: Path) -> None:
    fresh = load_script("skf_run_lock_fresh")
    fresh.acquire(tmp_path / "a.lock", "wf:skill:1", 60)
    fresh.status(tmp_path / "a.lock", 60)
    fresh.release(tmp_path / "a.lock", "wf:skill:1")
    assert "_EtcdStore" not in vars(fresh)
    try:
        fresh.status("etcd://no-port/x", 60)
    except ValueError:
        pass
    assert "_EtcdStore" in vars(fresh)


def functions_of_the_etcd_code(skf: ModuleType) -> list[FunctionType]:
    """Every function the etcd code defines: its module-level ones and its methods."""
    found: list[FunctionType] = []
    names = [name for name, value in vars(skf).items() if inspect.isclass(value)]
    for value in [*vars(skf).values(), *(m for n in names for m in vars(vars(skf)[n]).values())]:
        function = value.__func__ if isinstance(value, staticmethod) else value
        if isinstance(function, FunctionType) and function.__code__.co_filename == str(SCRIPT):
            found.append(function)
    first = skf._etcd_code.__code__.co_firstlineno - 3 - skf._ETCD_SOURCE.count("\n")
    return [
        f
        for f in found
        if first < f.__code__.co_firstlineno < skf._etcd_code.__code__.co_firstlineno
    ]


def test_the_etcd_code_keeps_its_line_numbers(skf: ModuleType) -> None:
    lines = SCRIPT.read_text(encoding="utf-8").split("\n")
    functions = functions_of_the_etcd_code(skf)
    assert {"post", "look", "wait", "_wait_place", "send", "_etcd_duration"} <= {
        f.__name__ for f in functions
    }
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
        ("_ETCD_SOURCE = r'''", '_ETCD_SOURCE = ""  # unfolded: its code follows as plain code'),
        ("'''", "# end of _ETCD_SOURCE"),
    ]


def test_the_unfolded_script_defines_the_etcd_store_as_plain_code(tmp_path: Path) -> None:
    unfolded = tmp_path / "unfolded.py"
    unfolded.write_text(unfold_tool().unfolded(SCRIPT.read_text(encoding="utf-8")))
    spec = importlib.util.spec_from_file_location("unfolded", unfolded)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module._ETCD_SOURCE == ""
    assert inspect.isclass(module._EtcdStore) and inspect.isclass(module._HttpConnection)
