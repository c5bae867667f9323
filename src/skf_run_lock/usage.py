"""What the command line shows a person, carried as text (a lock call never compiles
it): the text of ``--help``, and the line a waiting call keeps rewriting on a terminal."""

from __future__ import annotations

import os
import sys

from .contract import _MAX_SLOTS, _MAX_WAIT_SEC, DEFAULT_STALE_AFTER_MIN, MAX_STALE_AFTER_MIN
from .inputs import _duration_text
from .outputs import _holder_text, _ordinal
from .registry import _SERVER_STORES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .contract import AcquireResult


def _help() -> str:
    """The text of ``--help``; the lock's forms come from the registry of stores."""
    name = "skf-run-lock" if __name__ == "skf_run_lock.usage" else "skf-run-lock.py"
    pad = " " * len(name)
    forms = "".join(f"\n{'':28}{kind.form}" for kind in _SERVER_STORES)
    return f"""\
usage: {name} acquire --lock LOCK --owner WORKFLOW:SKILL[:RUN_ID]
       {pad}         [--stale-after MINUTES] [--wait SECONDS] [--slots N] [--empty-is-stale]
       {name} release --lock LOCK --owner WORKFLOW:SKILL:RUN_ID
       {name} status --lock LOCK [--stale-after MINUTES] [--slots N] [--empty-is-stale]
       {name} run --lock LOCK --owner WORKFLOW:SKILL[:RUN_ID] [--stale-after MINUTES]
       {pad}     [--wait SECONDS] [--slots N] [--empty-is-stale] -- COMMAND [ARG...]
       {name} list --under PLACE [--stale-after MINUTES] [--table]
       {name} run-id | --version

A run lock kept in a file, etcd or Redis, for workflows made of many processes.

commands:
  acquire   take the lock, or renew this owner's; a missing run id is added
  release   delete the lock if this owner holds it
  status    say who holds the lock, without taking it
  run       hold the lock while COMMAND runs, renewing it; exit with its code
  list      every lock under PLACE, as status sees each one (--table: for a person)
  run-id    print a new run id

options:
  --lock LOCK             a file (~ expanded, made absolute), or a server's address:{forms}
  --owner OWNER           workflow:skill[:run_id]; release needs the run id
  --under PLACE           a folder, or a server's address whose KEY is a prefix
  --stale-after MINUTES   this run's timeout: its lock is abandoned once this old
                          (default {DEFAULT_STALE_AFTER_MIN}, from 0.0001 to {MAX_STALE_AFTER_MIN});
                          a lock is judged by its holder's own timeout
  --wait SECONDS          acquire, run: wait in line this long, first come, first
                          served (default 0, at most {_MAX_WAIT_SEC})
  --slots N               up to N runs hold the lock at once, each its own slot
                          (default 1, at most {_MAX_SLOTS}); while any slot is held,
                          every call must name the count its holders did
  --empty-is-stale        an empty lock file (an flock user leaves one) is stale
  -h, --help, --version   show this help, or the version

Prints one line of JSON (run: nothing on stdout but COMMAND's). Exit 0 done,
1 bad arguments, 2 the lock could not be read or written, 3 held by another run
(run: or lost while COMMAND ran), 128+n interrupted by signal n.
"""


class _WaitLine:
    """While --wait waits on a terminal: a line on stderr, rewritten in place."""

    def __init__(self) -> None:
        self.shown = False

    def __call__(self, result: AcquireResult, left: float, place: int) -> None:
        try:
            width = os.get_terminal_size(sys.stderr.fileno()).columns
        except (OSError, ValueError):
            width = 0
        line = (
            f"waiting, {_ordinal(place)} in line: held by {_holder_text(result['held_by'])}"
            f" since {result['held_since']}, giving up in {_duration_text(-(-left // 1))}"
            f" ({result['lock']})"
        )
        # A wrapped line could not be taken back by \r.
        sys.stderr.write(f"\r{line[: width - 1] if width else line}\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
