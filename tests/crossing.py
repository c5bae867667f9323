"""What a process pool's worker runs in tests/test_results_cross_processes.py: a plain
module (no pytest) that a spawned worker imports by name, and that loads the built
file by path under a name of its own, as a sibling script does."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from loader import load_script

_loaded: list[ModuleType] = []


def sibling() -> ModuleType:
    """The built file, loaded once a process under the name a sibling script gives it."""
    if not _loaded:
        _loaded.append(load_script("skf_sibling_loaded"))
    return _loaded[0]


def call(name: str, *args: Any) -> Any:
    """``name`` of the library (acquire, acquire_within, release) called in this process:
    its output goes back to the caller's process pickled."""
    return getattr(sibling(), name)(*args)


def echo(value: Any) -> tuple[str, Any]:
    """``value`` as it arrived (pickled from the caller's process), and its type's name."""
    return type(value).__name__, value
