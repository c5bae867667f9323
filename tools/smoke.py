"""Smoke-test an installed wheel: its command and its module (CI runs this).

    ENV/bin/python tools/smoke.py ENV/bin/skf-run-lock

Run with the Python of the environment the wheel went into: the module must come
from there, not from this checkout. The command takes a file lock, a second call waits
for it in line and gets it once the first releases, and ``--version`` names the
module's version; the module does the same through its library API. ``serve``: without
the ``mcp`` extra it says how to bring it (exit 1); with it, it answers a client line by
line, takes a session hold and releases it when its stdin closes.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _call(
    command: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [command, *args], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    if done.stderr:
        raise SystemExit(f"smoke: {args[0]} wrote to stderr: {done.stderr.strip()}")
    answer: dict[str, object] = json.loads(done.stdout)
    return done.returncode, answer


def _check(what: str, ok: bool) -> None:
    if not ok:
        raise SystemExit(f"smoke: failed: {what}")
    print(f"smoke: ok: {what}")


def main(command: str) -> None:
    import skf_run_lock

    module_file = Path(skf_run_lock.__file__).resolve()
    _check("the module is the installed one", ROOT not in module_file.parents)
    code, answer = _call(command, "--version")
    _check("--version", (code, answer) == (0, {"version": skf_run_lock.__version__}))
    with tempfile.TemporaryDirectory() as folder:
        lock = str(Path(folder) / "demo.lock")
        code, answer = _call(command, "acquire", "--lock", lock, "--owner", "smoke:first:1")
        _check("the command takes a free lock", code == 0 and answer["acquired"] is True)
        waiter = subprocess.Popen(
            [command, "acquire", "--lock", lock, "--owner", "smoke:second:1", "--wait", "30"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not _call(command, "status", "--lock", lock)[1]["waiting"]:
            if time.monotonic() > deadline:
                waiter.kill()
                raise SystemExit("smoke: failed: the waiter never got into line")
            time.sleep(0.05)
        code, answer = _call(command, "release", "--lock", lock, "--owner", "smoke:first:1")
        _check("the holder releases", code == 0 and answer["released"] is True)
        out, _ = waiter.communicate(timeout=60)
        taken = json.loads(out)
        _check("the waiter gets the lock", waiter.returncode == 0 and taken["acquired"] is True)
        code, answer = _call(command, "release", "--lock", lock, "--owner", "smoke:second:1")
        _check("the waiter releases", code == 0 and answer["released"] is True)
        expected = {"acquire", "acquire_within", "release", "status", "held", "LockBusy"}
        _check("the module's __all__", expected <= set(skf_run_lock.__all__))
        with skf_run_lock.held(lock, "smoke:library:1", 60.0, wait=5.0):
            _check("held() holds it", skf_run_lock.status(lock, 60.0)["state"] == "held")
        _check("held() released it", skf_run_lock.status(lock, 60.0)["state"] == "free")
        _check("nothing is left beside the lock", list(Path(folder).iterdir()) == [])
        # Called by its name, the command's advice names it, and runs as printed.
        on_path = {**os.environ, "PATH": f"{Path(command).parent}{os.pathsep}{os.environ['PATH']}"}
        _call("skf-run-lock", "acquire", "--lock", lock, "--owner", "smoke:gone:1", env=on_path)
        code, answer = _call(
            "skf-run-lock", "acquire", "--lock", lock, "--owner", "smoke:next:1", env=on_path
        )
        advice = str(answer["message"]).split("clear it with: ", 1)[1]
        _check("the advice names the command", advice.startswith("skf-run-lock release "))
        code, answer = _call(*shlex.split(advice), env=on_path)
        _check("the advice runs as printed", code == 0 and answer["released"] is True)
    _smoke_serve(command)
    metadata = importlib.metadata.metadata("skf-run-lock")
    licensed = (metadata["License-Expression"], metadata.get_all("Classifier") or [])
    _check("the license is an SPDX expression", licensed[0] == "MIT")
    _check("no license classifier", not any(c.startswith("License ::") for c in licensed[1]))


def _smoke_serve(command: str) -> None:
    """serve without the extra, or with it: one session, as a client drives it."""
    try:
        importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        done = subprocess.run(
            [command, "serve"], capture_output=True, text=True, timeout=60, check=False
        )
        says = json.loads(done.stderr)["message"]
        _check("serve without the extra names it", done.returncode == 1 and "[mcp]" in says)
        return
    with tempfile.TemporaryDirectory() as folder:
        lock = str(Path(folder) / "session.lock")
        server = subprocess.Popen(
            [command, "serve", "--lease", "5s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert server.stdin is not None and server.stdout is not None
        calls = [
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "smoke", "version": "1"},
                },
            },
            {
                "method": "tools/call",
                "params": {
                    "name": "acquire",
                    "arguments": {"lock": lock, "owner": "smoke:session:1"},
                },
            },
        ]
        answers = []
        for at, call in enumerate(calls, 1):
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": at, **call}).encode() + b"\n")
            server.stdin.flush()
            answers.append(json.loads(server.stdout.readline()))
            if at == 1:
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                server.stdin.write(json.dumps(initialized).encode() + b"\n")
        taken = answers[1]["result"]["structuredContent"]
        _check("serve takes a session hold", taken["acquired"] is True)
        server.stdin.close()
        _check("serve exits 0 when its stdin closes", server.wait(timeout=30) == 0)
        _check("and its hold is released", not Path(lock).exists())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
