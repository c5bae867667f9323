"""Feed the script what it reads, in a process that imports nothing the CLI does not.

Run as ``python fuzz_driver.py SCRIPT MODE CASES``. The script's source is executed
in a fresh namespace (no importlib, no pytest: nothing that would import a module
the CLI's own call never imports, which once hid a crash). This file itself imports
only ``sys`` and ``os``, which every interpreter has loaded before it runs a line.

- ``file``: each file in CASES is put at a lock path, then ``acquire``, ``status``
  and ``release`` run through ``main()``; each must end 0 or 3 with one JSON line, or
  (acquire, status) 1 with one that names another program's file (a JSON or TOML
  document, too many bytes).
- ``line``: each file in CASES is put at a free lock's line of waiters
  (``<lock>.skf-line``), then ``acquire``, ``status``, ``acquire --wait`` and
  ``release``; each must end 0 or 3 with one JSON line, and a change leaves at
  most the lock file.
- ``etcd``: each file in CASES names the request it replaces (first line) and holds
  the raw HTTP answer to give it; a scripted etcd answers every other request with
  the well-formed answer in CASES-good.
  ``acquire``, ``acquire --wait``, ``status`` and ``release`` must end 0, 2 or 3 with
  one JSON line (on stdout, or an error on stderr), within the call's deadline.

Prints ``ok N`` after N cases, or the first case that failed and why; exit 1 then.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    # A call to make: its arguments, the exit codes it may end with, its most seconds.
    Call = tuple[list[str], tuple[int, ...], float]

SCRIPT, MODE, CASES = sys.argv[1:4]
DEADLINE_SLACK = 3.0  # seconds past ETCDCTL_COMMAND_TIMEOUT (or --wait) that a call may take


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as source:
        code = compile(source.read(), path, "exec")
    namespace: dict[str, Any] = {"__name__": "skf_fuzz", "__file__": path}
    exec(code, namespace)
    return namespace


SKF = load(SCRIPT)
TIME = SKF["time"]
LINES: list[str] = []  # every JSON line the calls printed, parsed once all cases ran


class Capture:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def call(argv: list[str]) -> tuple[int, str, str, float]:
    """main(argv): (code, stdout, stderr, seconds); an escaping exception is a failure."""
    out, err = Capture(), Capture()
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    started = TIME.monotonic()
    try:
        code = SKF["main"](argv)
    finally:
        sys.stdout, sys.stderr = real
    return code, out.text, err.text, TIME.monotonic() - started


def check(argv: list[str], codes: tuple[int, ...], limit: float) -> str | None:
    """Why the call failed its contract, or None."""
    code, out, err, seconds = call(argv)
    if code not in codes:
        return f"exit {code}, not one of {codes}: {out}{err}"
    if code == 1 and "another program's" not in err:
        return f"exit 1 for another cause than another program's file: {err}"
    text = out if code in (0, 3) and out else err
    if not text.endswith("}\n") or text.count("\n") != 1 or (out and err):
        return f"not one JSON line: {out!r} {err!r}"
    LINES.append(text)
    if seconds > limit:
        return f"took {seconds:.2f} s, past its limit of {limit:.2f} s"
    return None


# --- A scripted etcd: one socket per connection, answers chosen by request path ------


def good_answers() -> dict[str, bytes]:
    """The well-formed answer to each request, from CASES-good (the file name is the
    request's path with its slashes as dashes)."""
    folder = CASES + "-good"
    answers = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as answer:
            answers["/" + name.replace("-", "/")] = answer.read()
    return answers


class ScriptedSocket:
    """Answers each request it is sent with ANSWERS[path]; b"" (closed) after that."""

    answers: ClassVar[dict[str, bytes]] = {}

    def __init__(self) -> None:
        self.pending = b""

    def settimeout(self, seconds: float | None) -> None:
        pass

    def setsockopt(self, *args: object) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        path = data.split(b" ", 2)[1].decode()
        self.pending += self.answers.get(path, b"HTTP/1.1 404 Not Found\r\n\r\n")

    def recv(self, size: int) -> bytes:
        piece, self.pending = self.pending[:size], self.pending[size:]
        return piece

    def close(self) -> None:
        pass


def run_etcd_cases(names: list[str]) -> str | None:
    import socket  # the etcd CLI imports it too

    socket.create_connection = lambda *args, **kwargs: ScriptedSocket()  # type: ignore[assignment]
    os.environ["ETCDCTL_COMMAND_TIMEOUT"] = "50ms"
    os.environ["ETCDCTL_USER"] = "fz:pw"
    lock = "etcd://127.0.0.1:2379/fz/lock"
    limit = 0.05 + DEADLINE_SLACK
    holder = "fz:other:r1"  # the scripted record's owner: it renews and releases
    calls: list[Call] = [
        (["acquire", "--lock", lock, "--owner", holder], (0, 2, 3), limit),
        (["status", "--lock", lock], (0, 2, 3), limit),
        (["release", "--lock", lock, "--owner", holder], (0, 2), limit),
    ]
    # The only call that joins the line, watches and beats; then it gives up.
    waiting: list[Call] = [
        (["acquire", "--lock", lock, "--owner", "fz:me", "--wait", "0.2"], (0, 2, 3), limit + 0.2),
    ]
    waiters_only = (b"/v3/watch", b"/v3/lease/keepalive", b"/v3/kv/put")
    good = good_answers()
    for name in names:
        with open(os.path.join(CASES, name), "rb") as case:
            path, _, answer = case.read().partition(b"\n")
        ScriptedSocket.answers = {**good, path.decode(): answer}
        for argv, codes, most in waiting if path in waiters_only else calls + waiting:
            why = check(argv, codes, most)
            if why:
                return f"case {name} ({path.decode()}: {answer[:120]!r}), {argv[0]}: {why}"
    return None


def run_file_cases(names: list[str]) -> str | None:
    lock = os.path.join(CASES + "-locks", "fz.lock")
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    calls = [
        (["acquire", "--lock", lock, "--owner", "fz:me"], (0, 1, 3)),
        (["status", "--lock", lock], (0, 1, 3)),
        (["release", "--lock", lock, "--owner", "fz:me:r1"], (0,)),
    ]
    for name in names:
        with open(os.path.join(CASES, name), "rb") as case:
            data = case.read()
        for argv, codes in calls:
            with open(lock, "wb") as target:
                target.write(data)
            why = check(argv, codes, 30.0)
            if why:
                return f"case {name} ({data[:120]!r}), {argv[0]}: {why}"
            leftovers = sorted(os.listdir(os.path.dirname(lock)))
            if leftovers not in ([], ["fz.lock"]):
                return f"case {name} ({data[:120]!r}), {argv[0]}: left {leftovers}"
    return None


def run_line_cases(names: list[str]) -> str | None:
    folder = CASES + "-locks"
    lock = os.path.join(folder, "fz.lock")
    os.makedirs(folder, exist_ok=True)
    calls = [
        (["acquire", "--lock", lock, "--owner", "fz:me:r1"], (0, 3)),
        (["status", "--lock", lock], (0, 3)),
        (["acquire", "--lock", lock, "--owner", "fz:me:r1", "--wait", "0.05"], (0, 3)),
        (["release", "--lock", lock, "--owner", "fz:me:r1"], (0,)),
    ]
    for name in names:
        with open(os.path.join(CASES, name), "rb") as case:
            data = case.read()
        for argv, codes in calls:
            for left in os.listdir(folder):
                os.unlink(os.path.join(folder, left))
            with open(lock + ".skf-line", "wb") as target:
                target.write(data)
            why = check(argv, codes, 30.0)
            if why:
                return f"case {name} ({data[:120]!r}), {argv[0]}: {why}"
            leftovers = sorted(os.listdir(folder))
            if argv[0] != "status" and leftovers not in ([], ["fz.lock"]):
                return f"case {name} ({data[:120]!r}), {argv[0]}: left {leftovers}"
    return None


def main() -> int:
    names = sorted(os.listdir(CASES))
    runs = {"etcd": run_etcd_cases, "file": run_file_cases, "line": run_line_cases}
    failure = runs[MODE](names)
    if not failure:
        import json  # only now: importing it first could hide what the CLI meets

        bad = [line for line in LINES if not isinstance(json.loads(line), dict)]
        failure = f"not a JSON object: {bad[0]!r}" if bad else None
    if failure:
        print(failure)
        return 1
    print(f"ok {len(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
