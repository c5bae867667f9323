"""What a test sets through the seams of the built file (its ``_SEAMS``, the only thing
of it a test may set): a store of the test's own around each store a call opens, and
the platform's rules in force (the timings are fields a test sets itself)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest


class WrappedStore:
    """A store a call opened, wrapped by a test: each method of the store interface goes
    to the store inside (``real``), those a subclass overrides aside, which spy, pause,
    signal or fail, and as a rule call the real one. A change is entered through the
    wrapper, so that what the call does within it (read, apply, join, prune) reaches the
    wrapper too."""

    real: Any

    def __init__(self, real: Any) -> None:
        object.__setattr__(self, "real", real)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("patient", "call_deadline"):  # what a call sets on its store
            setattr(self.real, name, value)
        else:
            object.__setattr__(self, name, value)

    def change(self, create: bool) -> WrappedStore:
        self.real.change(create)
        return self

    def __enter__(self) -> WrappedStore:
        self.real.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.real.__exit__(*exc_info)


def wrap_stores(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, wrapper: Callable[[Any], Any]
) -> None:
    """Every store a call opens from now on is ``wrapper(store)`` (a class of
    ``WrappedStore``'s, say), until ``monkeypatch`` is undone; around whatever wraps it
    already (a fixture's), so that wrappers stack."""
    before = skf._SEAMS.opened
    monkeypatch.setattr(skf._SEAMS, "opened", lambda store: wrapper(before(store)))


class WrappedPlatform:
    """The platform's rules in force, wrapped by a test: each rule is the one inside
    (``real``), those a subclass overrides aside."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def follow_rules(skf: ModuleType, monkeypatch: pytest.MonkeyPatch, platform: object) -> None:
    """``platform``'s rules in force in ``skf`` until ``monkeypatch`` is undone."""
    monkeypatch.setattr(skf._SEAMS, "platform", platform)
