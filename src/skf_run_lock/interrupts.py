"""Interrupts: the CLI ends cleanly on SIGINT, SIGTERM and SIGHUP, never halfway through
a change. A signal is held back while a change is sent, and a call that has changed the
lock (or has its answer) is disarmed: it finishes and answers."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

# The same numbers on every OS. SIGTERM's handler goes in last: a process seen catching
# SIGTERM catches all three, which is what the tests wait for.
_SIGNAL_NAMES = {2: "SIGINT", 1: "SIGHUP", 15: "SIGTERM"}


class _Interrupted(BaseException):
    """The CLI got a signal before it changed anything (no ``except OSError`` stops it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Interrupts:
    """The CLI's signals end a call cleanly, never halfway through a change."""

    armed = False
    shield = 0
    pending: int | None = None

    @staticmethod
    def signals() -> list[int]:
        import signal

        return [signum for signum, name in _SIGNAL_NAMES.items() if hasattr(signal, name)]

    @classmethod
    def handle(cls, handler: Any) -> None:
        import signal

        for signum in cls.signals():
            signal.signal(signum, handler)

    @classmethod
    def install(cls) -> None:
        cls.handle(cls._on_signal)
        sys.unraisablehook = cls._unraisable
        cls.armed = True

    @classmethod
    def ignore(cls) -> None:
        """Ignore signals: the answer is out (teardown would restore their default)."""
        import signal

        if not hasattr(signal, "pthread_sigmask"):  # Windows
            cls.handle(signal.SIG_IGN)
            return
        # Masked, not reported as "ignored due to race condition": the OS drops it.
        before = signal.pthread_sigmask(signal.SIG_BLOCK, cls.signals())
        try:
            cls.handle(signal.SIG_IGN)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    @staticmethod
    def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
        # Dropped in a weakref callback, it stays pending.
        if not isinstance(unraisable.exc_value, _Interrupted):
            sys.__unraisablehook__(unraisable)

    @classmethod
    def _on_signal(cls, signum: int, frame: FrameType | None) -> None:
        if cls.pending is None:
            cls.pending = signum
        if not cls.shield:
            cls.raise_pending()

    @classmethod
    def raise_pending(cls) -> None:
        """Raise _Interrupted for a pending signal (kept: a weakref callback drops it)."""
        if cls.armed and cls.pending is not None:
            raise _Interrupted(cls.pending)

    @classmethod
    def disarm(cls) -> None:
        cls.armed = False  # the call has changed the lock, or has its answer


class _SignalsHeld:
    """Signals held back for a ``with`` block (blocks nest)."""

    def __enter__(self) -> None:
        _Interrupts.shield += 1

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        _Interrupts.shield -= 1
        if exc_type is None:
            _Interrupts.raise_pending()


_SIGNALS_HELD = _SignalsHeld()


def _signal_name(signum: int) -> str:
    return _SIGNAL_NAMES.get(signum, f"signal {signum}")


def _interrupted(signum: int) -> str:
    """What the CLI says when signal ``signum`` ended it."""
    return f"interrupted by {_signal_name(signum)} before it changed anything"
