"""A process whose resolver goes silent, run by tests/test_name_lookup.py: it loads the
built file by path, makes ``socket.getaddrinfo`` answer NAME with 127.0.0.1, and, once
the file TRIGGER exists, take STALL_SEC to answer each lookup of NAME (a resolver that
answers nothing for that long), then runs ``run``, ``held()`` or ``serve``. Each
lookup of NAME is a JSON line in the file LOG: when it began, whether it stalled, and
when it answered.

    python stalled_names.py NAME TRIGGER LOG run ARGS...     main(["run", *ARGS])
    python stalled_names.py NAME TRIGGER LOG held LOCK FOLDER
    python stalled_names.py NAME TRIGGER LOG serve ARGS...   main(["serve", *ARGS])

``held`` holds LOCK (owner wf:held, HELD_FOR s) for a block that checks the lease and
writes the time to FOLDER/marker every 100 ms until it is told LockLost; then
FOLDER/ended.json says when it was told, what, and when the ``with`` statement ended.
A name looked up is looked up again at every connection, as it is a minute later, and
every call connects anew, as a call does once its kept connection is gone.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loader import load_script

STALL_SEC = 30.0
HELD_FOR = 12.0
ANSWER = "127.0.0.1"


def stalling(name: str, trigger: Path, log: Path) -> None:
    """Patch ``socket.getaddrinfo``: NAME is ANSWER, after STALL_SEC once ``trigger``
    exists; each lookup of it logged."""
    real = socket.getaddrinfo
    written = threading.Lock()

    def logged(**entry: Any) -> None:
        with written, log.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != name:
            return real(host, port, *args, **kwargs)
        began = time.time()
        stalls = trigger.exists()
        logged(began=began, stalls=stalls)
        if stalls:
            time.sleep(STALL_SEC)
        found = real(ANSWER, port, *args, **kwargs)
        logged(began=began, answered=time.time())
        return found

    socket.getaddrinfo = getaddrinfo


def hold(skf: Any, lock: str, folder: Path) -> None:
    """held()'s block, until it is told LockLost: see the module's docstring."""

    def write(file: str, text: str) -> None:
        (folder / f"{file}.part").write_text(text)
        os.replace(folder / f"{file}.part", folder / file)

    ended: dict[str, Any] = {}
    try:
        with skf.held(lock, "wf:held", HELD_FOR) as lease:
            while True:
                try:
                    lease.check()
                except skf.LockLost:
                    ended["told"] = time.time()
                    raise
                write("marker", repr(time.time()))
                time.sleep(0.1)
    except skf.LockLost as lost:
        ended["lost"] = str(lost)
        ended["notes"] = getattr(lost, "__notes__", [])
    ended["left"] = time.time()  # the with statement ended: held()'s exit is done
    write("ended.json", json.dumps(ended))


def main(argv: list[str]) -> int:
    name, trigger, log, mode, *rest = argv
    stalling(name, Path(trigger), Path(log))
    skf = load_script()
    skf._SEAMS.name_kept_sec = 0.0  # every connection asks the resolver
    skf._SEAMS.kept_idle_sec = 0.0  # and every call connects anew
    if mode == "held":
        hold(skf, rest[0], Path(rest[1]))
        return 0
    code: int = skf.main([mode, *rest])
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
