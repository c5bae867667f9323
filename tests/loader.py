"""The one place the tests load skf-run-lock.py by path, as sibling scripts do.

A plain module (no pytest), so that tests/worker.py, whose short-lived processes
must start fast, shares it with conftest.py. SKF_RUN_LOCK_UNDER_TEST names
another copy of the script to test, and SKF_RUN_LOCK_PACKAGE_UNDER_TEST the modules it
was built from (tools/mutate.py sets both for a mutant).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(os.environ.get("SKF_RUN_LOCK_UNDER_TEST") or ROOT / "skf-run-lock.py").resolve()
PACKAGE = Path(
    os.environ.get("SKF_RUN_LOCK_PACKAGE_UNDER_TEST") or ROOT / "src" / "skf_run_lock"
).resolve()


def load_script(name: str = "skf_run_lock") -> ModuleType:
    """Load the script by path under the module name ``name``."""
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_if_stale(root: Path = ROOT) -> bool:
    """Write ``root``'s skf-run-lock.py anew where it is not what its modules build, as
    tools/bundle.py does: a run of the tests after an edit to a module, focused or
    whole, tests that edit. True if it was stale. (CI's tools/bundle.py --check still
    fails a commit whose file is not what its modules build.)"""
    spec = importlib.util.spec_from_file_location("skf_bundle_tool", root / "tools" / "bundle.py")
    assert spec is not None and spec.loader is not None
    bundle = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bundle  # its dataclasses look their module up there
    spec.loader.exec_module(bundle)
    want = bundle.built_text(root / "src" / "skf_run_lock")
    script = root / "skf-run-lock.py"
    try:
        have = script.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except FileNotFoundError:
        have = None
    if have == want:
        return False
    script.write_text(want, encoding="utf-8", newline="\n")
    return True
