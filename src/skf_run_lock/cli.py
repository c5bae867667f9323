"""The command line: each command parsed by hand (argparse would print plain-text usage
and exit 2, where the contract wants one JSON line and exit 1), run, and answered with
one JSON line on stdout, or one JSON error line on stderr, and the contract's exit code."""

from __future__ import annotations

import json
import sys
import time

from .held_and_run import _run_holding
from .hold import _Hold
from .inputs import (
    _checked_parts_of,
    _checked_slots,
    _duration_seconds,
    _owner_with_run_id,
    _Request,
    _stale_after_within,
    _wait_within,
    new_run_id,
)
from .interrupts import _Interrupted, _interrupted, _Interrupts
from .listing import _list_table, list_locks
from .lock_calls import _take_waiting, check, release, status
from .outputs import _describe_os_error, _fail
from .public_surface import (
    _BESIDE_KEYS,
    _EXIT_BAD_ARGS,
    _EXIT_HELD,
    _EXIT_OK,
    _EXIT_OS_ERROR,
    _MAX_WAIT_SEC,
    _OUTPUT_KEYS,
    DEFAULT_STALE_AFTER_MIN,
    MAX_SLOTS,
    __version__,
    _UsageError,
)
from .quoting import _quoted
from .renewer import _checked_renewable
from .seams import _SEAMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .public_surface import (
        AcquireResult,
        CheckResult,
        ListResult,
        Output,
        ReleaseResult,
        StatusResult,
    )

__all__ = ["main"]


# Each command's options: True a required value, False an optional one, None a flag.
_OPTIONS: dict[str, dict[str, bool | None]] = {
    "acquire": {
        "--lock": True,
        "--owner": True,
        "--stale-after": False,
        "--wait": False,
        "--slots": False,
        "--shared": None,
        "--part": False,
        "--empty-is-stale": None,
        "--get": False,
    },
    "release": {"--lock": True, "--owner": True, "--get": False},
    "status": {
        "--lock": True,
        "--stale-after": False,
        "--slots": False,
        "--empty-is-stale": None,
        "--get": False,
    },
    "check": {"--lock": True, "--owner": False, "--null": None, "--get": False},
    "list": {"--under": True, "--stale-after": False, "--table": None, "--get": False},
    "serve": {"--lease": False},
    "run-id": {"--get": False},
}
# run takes acquire's options but --get: it prints nothing of its own on stdout.
_OPTIONS["run"] = {name: kind for name, kind in _OPTIONS["acquire"].items() if name != "--get"}
_COMMAND_NAMES = "acquire, release, status, check, run, list, serve or run-id"
# check takes paths as arguments (after a bare --, whatever they are), or "-" for
# stdin, which its options keep under this name.
_STDIN = "-"
_HELP_HINT = "--help shows how to use each"


# The words that ask about the tool rather than a lock, as people type them.
_ABOUT_THE_TOOL = ("-h", "--help", "help", "--version", "-V", "version")


def _about_the_tool(
    command: str, rest: list[str]
) -> tuple[str, dict[str, str], list[str], list[str]]:
    """The help (``help COMMAND``: that command's) or the version."""
    if command not in ("--version", "-V", "version"):
        if command != "help" or not rest:
            return "help", {}, [], []
        if len(rest) > 1 or rest[0] not in _OPTIONS:
            raise _UsageError(f"help takes one command of {_COMMAND_NAMES}, not {' '.join(rest)!r}")
        return "help", {"command": rest[0]}, [], []
    if rest:
        raise _UsageError(f"{command} takes nothing more, not {rest[0]!r}")
    return "version", {}, [], []


def _parse_args(argv: list[str]) -> tuple[str, dict[str, str], list[str], list[str]]:
    """The command, its ``{option: value}``, run's COMMAND and the keys of its --get
    options, in the order given."""
    if not argv:
        raise _UsageError(f"a command is required: {_COMMAND_NAMES}; {_HELP_HINT}")
    command, *rest = argv
    if command in _ABOUT_THE_TOOL:
        return _about_the_tool(command, rest)
    # run's own options stand before --; what follows is COMMAND's, --help included;
    # after check's, paths.
    own = rest[: rest.index("--")] if command in ("run", "check") and "--" in rest else rest
    if command in _OPTIONS and ("-h" in own or "--help" in own):
        return "help", {"command": command}, [], []
    tail: list[str] = []
    if command == "run":
        if "--" not in rest:
            raise _UsageError("run needs -- and the command to run after its options")
        rest, tail = own, rest[len(own) + 1 :]
    allowed = _OPTIONS.get(command)
    if allowed is None:
        raise _UsageError(_not_a_command(command))
    paths: list[str] | None = None
    if command == "check":
        paths, rest, tail = [], own, rest[len(own) + 1 :]
    options, got = _parse_options(command, allowed, rest, paths)
    if paths is not None:
        tail = _check_paths_given(options, paths, tail)
    missing = [name for name, required in allowed.items() if required and name not in options]
    if missing:
        raise _UsageError(f"{command} needs {' and '.join(missing)}")
    if command == "run" and not tail:
        raise _UsageError("run needs a command after --")
    if got:
        _check_get(command, options, got)
    return command, options, tail, got


def _check_get(command: str, options: dict[str, str], got: list[str]) -> None:
    """Each ``--get KEY``: a key the command prints, checked before it runs."""
    keys = _OUTPUT_KEYS[command]
    beside = _BESIDE_KEYS.get(command, ())
    if "--table" in options:
        raise _UsageError("--get prints keys of the JSON, which --table does not print")
    for key in got:
        if key not in keys + beside:
            also = f"; and, not in its JSON, {', '.join(beside)}" if beside else ""
            raise _UsageError(
                f"{command} prints no key {key!r}; its keys are {', '.join(keys)}" + also
            )


def _got_lines(result: Output, got: list[str]) -> str:
    """What ``--get`` prints: each key's value on a line of its own, in the order given
    (a key of the JSON, else what the output carries beside its keys: None where it
    carries nothing, a refusal's fence). With more than one key, a string that holds a
    line break (a path may) is written as JSON, so that each value stays on its own line
    for ``read``."""
    lines = []
    for key in got:
        keys = dict(result)
        value = keys[key] if key in keys else getattr(result, key, None)
        text = _value_text(value)
        if len(got) > 1 and ("\n" in text or "\r" in text):
            text = json.dumps(value)
        lines.append(text + "\n")
    return "".join(lines)


def _value_text(value: object) -> str:
    """One value of an output as --get prints it: a string as it is, null as nothing
    (so that ``[ -n "$value" ]`` tests it), anything else as JSON writes it (as ``jq
    -r`` does). A string stdout cannot encode (a console of a narrower code page) is
    written as JSON too, escaped, never a traceback."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value.encode(sys.stdout.encoding or "utf-8")
        except (UnicodeEncodeError, LookupError):
            return json.dumps(value)
        return value
    return json.dumps(value)


# Options that may be given more than once, each value kept: their values stand in
# the options joined by a NUL, which no argument can hold.
_REPEATED = ("--part",)
_JOINED = "\0"


def _repeated(options: dict[str, str], name: str) -> list[str] | None:
    """The values of an option given once or more (None: not given)."""
    return options[name].split(_JOINED) if name in options else None


def _parse_options(
    command: str, allowed: dict[str, bool | None], rest: list[str], paths: list[str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Each option given once, with its value (but those that repeat, _REPEATED); and
    --get's keys, which it may repeat. ``paths``: a command that takes arguments
    (check) gets each one that is no option (and "-") added to it."""
    options: dict[str, str] = {}
    got: list[str] = []
    args = iter(rest)
    for arg in args:
        if paths is not None and (arg == _STDIN or not arg.startswith("-")):
            paths.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        if name not in allowed:
            raise _UsageError(_not_taken(command, allowed, arg))
        if name in options and name not in _REPEATED:
            raise _UsageError(f"{name} is given more than once")
        if allowed[name] is None:
            if has_value:
                raise _UsageError(f"{name} takes no value")
            options[name] = ""
            continue
        if not has_value:
            value = next(args, "")
        if not value or value.startswith("--"):
            raise _UsageError(f"{name} needs a value")
        if name == "--get":
            got.append(value)
        elif name in options:  # one that repeats
            options[name] += _JOINED + value
        else:
            options[name] = value
    return options, got


def _check_paths_given(options: dict[str, str], paths: list[str], after: list[str]) -> list[str]:
    """check's paths: those given before a bare -- (where "-" says to read them from
    stdin, kept in ``options``), then all ``after`` it, as given; refused when "-" comes
    with others, twice, or --null comes without it."""
    if _STDIN in paths:
        if paths.count(_STDIN) > 1 or len(paths) > 1 or after:
            raise _UsageError(
                "check reads its paths from stdin (-) or takes them as arguments, not both:"
                " give - alone, or the paths (a path named - after --)"
            )
        options[_STDIN] = ""
        return []
    if "--null" in options:
        raise _UsageError("--null says how stdin separates paths: give - to read them from stdin")
    return [*paths, *after]


def _not_a_command(word: str) -> str:
    """Why ``word`` is no command: an option put first, or the closest command to it."""
    if word.startswith("-"):
        if any(word.partition("=")[0] in options for options in _OPTIONS.values()):
            return f"put the command first ({_COMMAND_NAMES}), then {word}"
        guess = _did_you_mean(word, ["--help", "--version"])
        return f"unknown option {word!r}{guess}; {_HELP_HINT}"
    guess = _did_you_mean(word, list(_OPTIONS))
    return f"unknown command {word!r}{guess}; use {_COMMAND_NAMES}; {_HELP_HINT}"


def _not_taken(command: str, allowed: dict[str, bool | None], arg: str) -> str:
    """Why ``command`` refuses ``arg``, and what it may have meant: the closest option,
    or, for a bare value, the option that takes it."""
    see = f"{command} --help shows its options"
    if arg.startswith("-"):
        guess = _did_you_mean(arg.partition("=")[0], list(allowed))
        return f"{command} does not take {arg!r}{guess}; {see}"
    place = next((name for name in ("--lock", "--under") if name in allowed), None)
    if place is None:
        return f"{command} takes no value such as {arg!r}; {see}"
    return (
        f"{command} does not take {arg!r} on its own: options come as --name value;"
        f" give it as {place} {_quoted(arg)}; {see}"
    )


def _did_you_mean(word: str, names: list[str]) -> str:
    """``; did you mean --owner?`` for the name closest to ``word`` (the one it begins,
    as ``-v`` begins --version, else the nearest spelling); empty if none is close."""
    stem = word.lstrip("-")
    starting = [name for name in names if stem and name.lstrip("-").startswith(stem)]
    if len(starting) == 1:
        return f" (did you mean {starting[0]}?)"
    from difflib import get_close_matches

    close = get_close_matches(word, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _stale_after_given(options: dict[str, str]) -> tuple[float, str, str]:
    """--stale-after: a duration (a bare number is minutes), checked; and the unit and
    text it was given in, for a later check's message."""
    text = options.get("--stale-after", str(DEFAULT_STALE_AFTER_MIN))
    seconds, unit = _duration_seconds(text, "--stale-after", "minutes")
    return _stale_after_within(seconds, "--stale-after", unit, repr(text)), unit, repr(text)


def _stale_after_seconds(options: dict[str, str]) -> float:
    return _stale_after_given(options)[0]


def _wait_seconds(options: dict[str, str]) -> float:
    """--wait: a duration (a bare number is seconds), checked."""
    text = options.get("--wait", "0")
    seconds, unit = _duration_seconds(text, "--wait", "seconds")
    return _wait_within(seconds, "--wait", _MAX_WAIT_SEC, unit, repr(text))


def _slots(options: dict[str, str]) -> int:
    """--slots N: digits only (no sign, point or exponent), from 1 to MAX_SLOTS."""
    text = options.get("--slots", "1")
    if not (text.isascii() and text.isdigit()):
        raise _UsageError(
            f"--slots must be a whole number of slots from 1 to {MAX_SLOTS}, not {text!r}"
        )
    # Digits past five make a count out of range whatever they say (and int() refuses
    # thousands of them); the message quotes the text as given, never a stand-in.
    count = int(text) if len(text) <= 5 else 0
    return _checked_slots(count, "--slots", given=text)


def _shared(options: dict[str, str]) -> bool:
    """--shared: a shared hold, which has no count of slots to give."""
    if "--shared" in options and "--slots" in options:
        raise _UsageError(
            "--shared and --slots cannot be given together: a shared hold is one of any"
            " number, never a slot; give one or the other"
        )
    return "--shared" in options


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _cli_request(
    options: dict[str, str], stale_after: float, *, keep_longer: bool = False
) -> _Request:
    """What acquire or run asks (``keep_longer``: run, which never shortens a hold its
    owner already has), from its options, each checked once, here (``stale_after``:
    checked already), the owner last (a run id added if it has none)."""
    wait = _wait_seconds(options)
    slots = _slots(options)
    shared = _shared(options)
    parts = _checked_parts_of(_repeated(options, "--part"), slots)
    owner, run_id = _owner_with_run_id(options["--owner"])
    return _Request(
        options["--lock"],
        owner,
        run_id,
        stale_after,
        wait=wait,
        empty_is_stale="--empty-is-stale" in options,
        slots=slots,
        shared=shared,
        parts=parts,
        keep_longer=keep_longer,
    )


def _cli_take(request: _Request) -> tuple[_Hold | None, AcquireResult]:
    """acquire's take, waiting in line if the request may, a line on the terminal saying
    its place: the hold (None: refused) and its output."""
    line = None
    if request.wait and _is_terminal(sys.stderr):  # a person sees it on a terminal only
        from .usage import _WaitLine

        line = _WaitLine()
    try:
        return _take_waiting(request, line)
    finally:
        if line is not None:
            line.clear()


def _cli_acquire(options: dict[str, str], tail: list[str]) -> tuple[AcquireResult, int]:
    stale_after = _stale_after_seconds(options)
    hold, result = _cli_take(_cli_request(options, stale_after))
    code = _EXIT_HELD if hold is None else _EXIT_OK
    text = options.get("--stale-after", "")
    bare = text.replace(".", "", 1).isdigit()
    if code == _EXIT_OK and bare and stale_after > _BARE_MINUTES_NOTED_SEC:
        result["message"] += _minutes_meant(text, stale_after)
    return result, code


# A bare --stale-after above a day may be seconds meant as minutes (3600 holds for two
# and a half days): a take says in its message how long it took it to be.
_BARE_MINUTES_NOTED_SEC = 1440 * 60


def _minutes_meant(text: str, seconds: float) -> str:
    """What a take's message says of a bare ``--stale-after`` ``text`` above a day."""
    minutes = int(seconds // 60)
    hours, _ = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days} day{'s' * (days != 1)}"]
    if hours:
        parts.append(f"{hours} hour{'s' * (hours != 1)}")
    return f"; --stale-after {text} is {text} minutes: {' '.join(parts)} (seconds: {text}s)"


def _cli_run(options: dict[str, str], tail: list[str]) -> tuple[None, int]:
    stale_after, unit, shown = _stale_after_given(options)
    _checked_renewable(stale_after, "--stale-after", unit, shown)
    request = _cli_request(options, stale_after, keep_longer=True)
    hold, result = _cli_take(request)
    if hold is None:
        sys.stderr.write(json.dumps(result) + "\n")  # stdout is COMMAND's
        return None, _EXIT_HELD
    return None, _run_holding(request, hold, tail)


def _cli_release(options: dict[str, str], tail: list[str]) -> tuple[ReleaseResult, int]:
    return release(options["--lock"], options["--owner"]), _EXIT_OK


def _cli_status(options: dict[str, str], tail: list[str]) -> tuple[StatusResult, int]:
    empty_is_stale = "--empty-is-stale" in options
    result = status(
        options["--lock"],
        _stale_after_seconds(options),
        empty_is_stale=empty_is_stale,
        slots=_slots(options),
    )
    return result, _EXIT_HELD if result["state"] == "held" else _EXIT_OK


def _cli_check(options: dict[str, str], tail: list[str]) -> tuple[CheckResult, int]:
    """check: the paths given (``tail``), or read from stdin ("-"), each checked."""
    paths = _paths_on_stdin("--null" in options) if _STDIN in options else tail
    result = check(options["--lock"], paths, options.get("--owner"))
    return result, _EXIT_OK if result["free"] else _EXIT_HELD


def _paths_on_stdin(null: bool) -> list[str]:
    """The paths on stdin, one a line (a line may end in CRLF), or each ended by a NUL
    (``null``: as ``git diff -z`` gives them, taken as they are); UTF-8. An empty one
    names no path: a script's printf of no paths writes an empty line."""
    try:
        data = b"" if sys.stdin is None else sys.stdin.buffer.read()
    except (OSError, ValueError) as exc:
        raise ValueError(f"check could not read the paths on stdin: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"the paths on stdin are not UTF-8 (byte {exc.start} is not): give each path"
            " as git prints it"
        ) from None
    if null:
        return [path for path in text.split("\0") if path]
    return [line.removesuffix("\r") for line in text.split("\n") if line.removesuffix("\r")]


def _cli_list(options: dict[str, str], tail: list[str]) -> tuple[ListResult | str, int]:
    result = list_locks(options["--under"], _stale_after_seconds(options))
    if "--table" in options:
        return _list_table(result, time.time()), _EXIT_OK
    return result, _EXIT_OK


# A session hold's timeout: renewed every third of it, so a killed server's holds lapse
# within it; at least run's shortest.
_DEFAULT_LEASE = "30s"


def _cli_serve(options: dict[str, str], tail: list[str]) -> tuple[None, int]:
    """serve: an MCP server over stdio; it exits 0 when the session ends."""
    text = options.get("--lease", _DEFAULT_LEASE)
    seconds, unit = _duration_seconds(text, "--lease", "seconds")
    lease = _stale_after_within(seconds, "--lease", unit, repr(text))
    _checked_renewable(lease, "--lease", unit, repr(text))
    from .serve import _serve

    return None, _serve(lease)


def _cli_help(options: dict[str, str], tail: list[str]) -> tuple[str, int]:
    """--help: the whole tool's, or (``COMMAND --help``) that command's."""
    command = options.get("command")
    from .usage import _command_help, _help

    if command is None:
        return _help(), _EXIT_OK
    return _command_help(command, _OPTIONS[command]), _EXIT_OK


def _cli_run_id(options: dict[str, str], tail: list[str]) -> tuple[dict[str, str], int]:
    return {"run_id": new_run_id()}, _EXIT_OK


def _cli_version(options: dict[str, str], tail: list[str]) -> tuple[dict[str, str], int]:
    return {"version": __version__}, _EXIT_OK


_COMMANDS: dict[str, Callable[[dict[str, str], list[str]], tuple[Output | str | None, int]]] = {
    "help": _cli_help,
    "acquire": _cli_acquire,
    "run": _cli_run,
    "release": _cli_release,
    "status": _cli_status,
    "check": _cli_check,
    "list": _cli_list,
    "serve": _cli_serve,
    "run-id": _cli_run_id,
    "version": _cli_version,
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``): print one JSON line and
    return the exit code (never SystemExit).

    :param argv: the arguments after the program's name.
    :returns: the exit code of the contract.
    """
    try:
        try:
            command, options, tail, got = _parse_args(sys.argv[1:] if argv is None else list(argv))
            result, code = _COMMANDS[command](options, tail)
        finally:
            _Interrupts.disarm()  # the call answers, whatever arrives
    except _Interrupted as stop:
        code = 128 + stop.signum
        error = _interrupted(stop.signum)
    except _UsageError as exc:
        code = _EXIT_BAD_ARGS
        error = f"usage error: {exc}"
    except ValueError as exc:
        code = _EXIT_BAD_ARGS
        error = str(exc)
    except OSError as exc:
        code = _EXIT_OS_ERROR
        error = f"the lock could not be read or written: {_describe_os_error(exc)}"
    else:
        if isinstance(result, dict) and got:
            sys.stdout.write(_got_lines(result, got))
            if command == "acquire" and code == _EXIT_HELD:
                # Why it was refused, and what to do, as run shows it: stdout is the value.
                sys.stderr.write(json.dumps(result) + "\n")
        elif result is not None:  # run leaves stdout to its command
            sys.stdout.write(result if isinstance(result, str) else json.dumps(result) + "\n")
        return code
    _fail(error)
    return code


def _entry() -> None:
    """The program: the copied file run as a script, or the installed command. Signals
    end it cleanly; it exits with main()'s code once its output is out."""
    _SEAMS.platform.end_lines_in_lf()  # Windows: as everywhere else
    try:
        try:
            _Interrupts.install()
            exit_code = main()
        finally:
            _Interrupts.disarm()
    except _Interrupted as stop:  # it came as main() began, before its own try
        exit_code = 128 + stop.signum
        _fail(_interrupted(stop.signum))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: teardown must not try again
        exit_code = exit_code or _EXIT_OS_ERROR
        sys.stdout = sys.stderr = None
    _Interrupts.ignore()
    sys.exit(exit_code)
