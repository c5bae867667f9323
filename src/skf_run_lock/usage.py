"""What the command line shows a person, carried as text (a lock call never compiles
it): the text of ``--help``, the whole tool's and each command's, and the line a waiting
call keeps rewriting on a terminal. Kept apart from cli.py for that: compiling it would
cost every lock call 0.8 ms (``compile()`` of this module, best of 50, CPython 3.11 on
2 cores; a call takes about 60 ms)."""

from __future__ import annotations

import os
import sys
import textwrap

from .outputs import _holder_text, _ordinal
from .public_surface import (
    _MAX_SLOTS,
    _OUTPUT_KEYS,
    DEFAULT_STALE_AFTER_MIN,
    MAX_STALE_AFTER_MIN,
)
from .registry import _SERVER_STORES
from .times import _duration_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .public_surface import AcquireResult

# Each command: what it does, in a line, and an example that runs as shown.
_COMMAND_HELP = {
    "acquire": (
        "take the lock, or renew this owner's hold; a missing run id is added",
        "{name} acquire --lock ~/.locks/demo.lock --owner demo:build --stale-after 30m",
    ),
    "release": (
        "end this owner's hold; a lock it does not hold is left alone",
        "owner=$({name} acquire --lock ~/.locks/demo.lock --owner demo:build --get owner)\n"
        '  {name} release --lock ~/.locks/demo.lock --owner "$owner"',
    ),
    "status": (
        "say who holds the lock, changing nothing",
        "{name} status --lock ~/.locks/demo.lock --get state",
    ),
    "check": (
        "say which of these paths lie in a part another run holds, changing nothing",
        "git diff --name-only -z HEAD | {name} check --lock ~/.locks/demo.lock --null -",
    ),
    "run": (
        "hold the lock while COMMAND runs, renewing it; exit with its code",
        "{name} run --lock ~/.locks/demo.lock --owner demo:test --wait 5m -- make test",
    ),
    "list": (
        "every lock under PLACE, as status sees each one",
        "{name} list --under ~/.locks --table",
    ),
    "serve": (
        "an MCP server over stdio for an agent session, whose holds end with it",
        "uv run --with 'mcp>=2.3,<3' {name} serve --lease 30s",
    ),
    "run-id": (
        "print a new run id",
        'owner="demo:build:$({name} run-id --get run_id)"',
    ),
}

# What each command's exit codes mean.
_EXITS = {
    "acquire": "0 taken or renewed, 1 bad arguments, 2 the lock could not be read or"
    " written, 3 held by another run (the JSON names it)",
    "release": "0 answered (released, or reason says absent or not-owner), 1 bad arguments,"
    " 2 the lock could not be read or written",
    "status": "0 free or stale, 3 held, 1 bad arguments, 2 the lock could not be read",
    "check": "0 no path lies in a part another run holds (or no path given), 3 some do"
    " (reserved names each path, holder and part), 1 bad arguments or paths, 2 the lock"
    " could not be read",
    "run": "COMMAND's own; before it starts 1, 2 or 3 as acquire (JSON on stderr), 126 or"
    " 127 if it cannot start; 3 if the lock is lost while it runs (COMMAND is stopped)",
    "list": "0 listed, 1 bad arguments, 2 the place could not be read",
    "serve": "0 when the session ends (stdin closed, SIGTERM, SIGINT, SIGHUP, the parent"
    " gone), its holds released; 1 bad arguments, or the MCP SDK missing (the message says"
    " how to bring it)",
    "run-id": "0",
}


def _option_lines(command: str) -> dict[str, tuple[str, str]]:
    """Each option a command may take: its form, and what it means (wrapped where it is
    shown; a line of its own after a newline)."""
    forms = "".join(f"\n{kind.form}" for kind in _SERVER_STORES)
    keys = ", ".join(_OUTPUT_KEYS.get(command, ()))
    owner = (
        "workflow:skill:run_id, as acquire printed it"
        if command == "release"
        else "workflow:skill[:run_id]; a missing run id is added. The run id names one run"
        " and must be unique to it: two runs given deploy:site:main both hold the lock as"
        " one (let acquire add it)"
    )
    if command == "check":
        owner = (
            "workflow:skill:run_id, as acquire printed it: leave out this run's own parts"
            " (default: every run's parts count)"
        )
    return {
        "--lock": (
            "--lock LOCK",
            f"a file of its own (~ expanded, made absolute), or an address:{forms}",
        ),
        "--owner": ("--owner OWNER", owner),
        "--under": ("--under PLACE", "a folder, or a server's address whose KEY is a prefix"),
        "--stale-after": (
            "--stale-after DURATION",
            "the holder's timeout: a hold not renewed for this long is abandoned,"
            " and the next acquire takes it; 90s, 10m, 2h, 1.5h, 1d or 1h30m (a bare number is"
            f" minutes; default {DEFAULT_STALE_AFTER_MIN}m, at most {MAX_STALE_AFTER_MIN}m)."
            " A hold is judged by its holder's own timeout; this one judges only"
            " records that carry none"
            + ("; run needs at least 3s, renewing every third of it" if command == "run" else ""),
        ),
        "--wait": (
            "--wait DURATION",
            "wait in line this long for the lock, first come, first served;"
            " 30s, 5m, 1h or 2m30s (a bare number is seconds; default 0, at most 24h)",
        ),
        "--slots": (
            "--slots N",
            f"the count of slots a lock no slot holds has (default 1, at most {_MAX_SLOTS});"
            " while any is held, status shows the count in force",
        )
        if command == "status"
        else (
            "--slots N",
            f"up to N runs hold the lock at once, one slot each (default 1, at most"
            f" {_MAX_SLOTS}); while any slot is held, every call names the same N",
        ),
        "--shared": (
            "--shared",
            "a shared hold: any number of runs hold it shared at once (readers), while"
            " nobody holds it without --shared (a writer, alone); not with --slots",
        ),
        "--part": (
            "--part PATTERN",
            "hold only this part of the lock (repeat for more; a path or a glob such as"
            " src/api or docs/**/*.md, as git reads it): holds conflict only where some"
            " path lies in a part of each; an owner naming other parts changes its hold to"
            " them, when what it adds is free; not with --slots",
        ),
        "--empty-is-stale": (
            "--empty-is-stale",
            "an empty lock file (flock(1) leaves one) is stale at once",
        ),
        "--table": ("--table", "a table for a person instead of JSON"),
        "--null": (
            "--null",
            "with -, the paths on stdin each end with a NUL (git diff -z, find -print0),"
            " not a line break",
        ),
        "--lease": (
            "--lease DURATION",
            "the timeout of the session's holds, renewed every third of it while the"
            " server lives: a killed server's holds lapse within it; 30s, 2m (a bare number"
            " is seconds; default 30s, at least 3s)",
        ),
        "--get": (
            "--get KEY",
            "print only KEY's value, alone on one line (null: an empty line); given more"
            " than once, each KEY's value on a line of its own, in the order given; KEY is"
            f" one of {keys}"
            + (
                ", or fence (its hold's, not in the JSON); a refusal (exit 3) also writes"
                " its JSON on stderr"
                if command == "acquire"
                else ""
            ),
        ),
    }


def _command_help(command: str, options: dict[str, bool | None]) -> str:
    """The text of ``COMMAND --help``: its usage, its own options, an example and what
    its exit codes mean."""
    name = _program_name()
    summary, example = _COMMAND_HELP[command]
    described = _option_lines(command)
    shown = [
        f"{described[option][0]}" if required else f"[{described[option][0]}]"
        for option, required in options.items()
    ]
    if "--get" in options:  # it may be given more than once
        shown[list(options).index("--get")] += "..."
    if command == "run":
        shown.append("-- COMMAND [ARG...]")
    if command == "check":
        shown.append("[PATH... | -]")
    usage = _wrapped(f"usage: {name} {command}", shown)
    lines = [usage, "", f"{summary[0].upper()}{summary[1:]}.", "", "options:"]
    for option in options:
        form, meaning = described[option]
        text, *own_lines = meaning.split("\n")
        first, *rest = [*textwrap.wrap(text, 88 - 24), *own_lines]
        lines.append(f"  {form:<22}{first}" if len(form) < 22 else f"  {form}\n{'':24}{first}")
        lines.extend(f"{'':24}{more}" for more in rest)
    if command == "check":
        lines.append(
            f"  {'PATH':<22}a path as git prints it, from the top of the tree (src/api/x.py);"
            f"\n{'':24}after a bare --, every argument is a path"
        )
        lines.append(f"  {'-':<22}read the paths from stdin, one a line (--null: NUL-ended)")
    lines.append(f"  {'-h, --help':<22}show this help")
    lines += ["", "example:", "  " + example.format(name=name), ""]
    lines.append(
        textwrap.fill(_EXITS[command], 88, initial_indent="exit: ", subsequent_indent="      ")
    )
    if command == "serve":
        lines.append("Speaks MCP on stdin and stdout; an error is one JSON line on stderr.")
    elif command != "run":
        lines.append("Prints one line of JSON on stdout; an error is one JSON line on stderr.")
    return "\n".join(lines) + "\n"


def _wrapped(head: str, parts: list[str]) -> str:
    """``head`` and ``parts`` in lines of at most 88 columns, a part never split, the
    later lines indented under the first part."""
    pad = " " * (len(head) + 1)
    lines = [head]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) > 88 and lines[-1] != head:
            lines.append(pad + part)
        else:
            lines[-1] += " " + part
    return "\n".join(lines)


def _program_name() -> str:
    return "skf-run-lock" if __name__ == "skf_run_lock.usage" else "skf-run-lock.py"


def _help() -> str:
    """The text of ``--help``: every command in a line; each has a help of its own."""
    name = _program_name()
    commands = "".join(
        f"  {command:<10}{summary}\n" for command, (summary, _) in _COMMAND_HELP.items()
    )
    return f"""\
usage: {name} COMMAND [OPTIONS]   ({name} COMMAND --help: its options)
       {name} --version

A run lock kept in a file, etcd or Redis, for workflows made of many separate
processes: one run holds it at a time (or N, with --slots; or any number at once,
with --shared, while nobody holds it alone), a crashed run's hold expires after its
timeout, and waiters are served first come, first served.

commands:
{commands}
Prints one line of JSON (run: nothing on stdout but COMMAND's; --get KEY: that value
alone, a line for each --get). Exit 0 done, 1 bad arguments, 2 the lock could not be
read or written, 3 held by another run, 128+n interrupted by signal n.
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
