"""The declared public surface: __all__ names the library API and nothing else is public.

Modelled on the standard library's test_tempfile.TestExports.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType

import pytest

API = {
    "acquire",
    "acquire_within",
    "check",
    "release",
    "status",
    "list_locks",
    "new_run_id",
    "main",
    "LockBusy",
    "held",
    "fence_of",
    "LockLost",
    "RUN_ID_RE",
    "OWNER_MAX_LEN",
    "DEFAULT_STALE_AFTER_MIN",
    "MAX_SLOTS",
    "MAX_STALE_AFTER_MIN",
    "GUARD_WAIT_SEC",
}
IMPORTED = {"errno", "os", "stat", "sys", "time", "fcntl", "msvcrt", "annotations"}


def test_all_is_exactly_the_library_api(skf: ModuleType) -> None:
    assert sorted(skf.__all__) == sorted(API)


def test_every_public_name_is_in_all(skf: ModuleType) -> None:
    for name in skf.__all__:
        getattr(skf, name)  # RUN_ID_RE is made on first use
    public = {
        name
        for name, value in vars(skf).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and name not in IMPORTED
        and name != "TYPE_CHECKING"
    }
    assert public == set(skf.__all__), public ^ set(skf.__all__)


def test_star_import_gives_exactly_all(skf: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "skf_run_lock", skf)
    namespace: dict[str, object] = {}
    exec("from skf_run_lock import *", {"__builtins__": __builtins__}, namespace)
    assert set(namespace) == set(skf.__all__)


def test_public_callables_have_docstrings(skf: ModuleType) -> None:
    for name in skf.__all__:
        value = getattr(skf, name)
        if callable(value) and not isinstance(value, type(skf.RUN_ID_RE)):
            assert inspect.getdoc(value), name


def test_run_id_re_is_compiled_on_first_use_and_kept(skf: ModuleType) -> None:
    first = skf.RUN_ID_RE
    assert first is skf.RUN_ID_RE and vars(skf)["RUN_ID_RE"] is first
    assert first.match("20260930T101500Z-3f9a1c2e")
    try:
        skf.NO_SUCH_NAME  # noqa: B018
    except AttributeError as exc:
        assert "NO_SUCH_NAME" in str(exc)
    else:
        raise AssertionError("a missing name must raise AttributeError")
