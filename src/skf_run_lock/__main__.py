"""``python -m skf_run_lock``, and the last lines of the one file users copy: run the
command line."""

from __future__ import annotations

from .cli import _entry

if __name__ == "__main__":
    _entry()
