"""Mutation testing: plant named bugs in the modules, one at a time; the suite must fail.

    uv run python tools/mutate.py            # every mutant, 2 at a time (2 h 15 min, 2 cores)
    uv run python tools/mutate.py --list     # the mutants and the rule each breaks
    uv run python tools/mutate.py NAME ...   # only these
    uv run python tools/mutate.py NAME --tests tests/test_etcd.py::test_x   # against one test

Each verdict is printed on stderr as it lands; the table comes once all are done.

Each mutant replaces one exact piece of the modules of src/skf_run_lock/ (which must
occur exactly once in all of them, so a mutant that no longer applies fails loudly
instead of passing silently) in a temporary copy of them, which tools/bundle.py builds
into a temporary skf-run-lock.py; the whole suite runs against that file (the tests
load the script named by SKF_RUN_LOCK_UNDER_TEST). A mutant is killed when
the suite fails. Survivors are listed; the exit code is 1 if any survivor is not
in EQUIVALENT with the reason it cannot be told apart from the real script.

Why not mutmut or cosmic-ray: mutmut 3 runs mutants through trampolines that make
the script import mutmut, which breaks the tests that run the script alone
(``python -I -S``, copied elsewhere) and the stdlib-only rule they protect.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "skf_run_lock"
sys.path.insert(0, str(ROOT / "tools"))
import bundle  # noqa: E402  (tools/bundle.py, beside this file)

# name -> (the rule it breaks, exact text in the script, its replacement)
MUTANTS: dict[str, tuple[str, str, str]] = {
    "stale-boundary": (
        "exactly at the timeout counts as stale",
        "    return now - record.since >= _deciding_timeout(",
        "    return now - record.since > _deciding_timeout(",
    ),
    "caller-timeout-decides": (
        "the holder's timeout decides",
        "    return stale_after if record.stale_after is None else record.stale_after",
        "    return stale_after",
    ),
    "holder-timeout-unchecked": (
        "an invalid holder timeout falls back to the caller's",
        "    return float(value) if 0 < value <= _MAX_STALE_AFTER_SEC else None",
        "    return float(value)",
    ),
    "record-without-timeout": (
        "the record carries the holder's timeout",
        """        f' "stale_after_seconds": {_json_seconds(stale_after)!r},"""
        """ "tool": {_TOOL_JSON}'""",
        """        f' "tool": {_TOOL_JSON}'""",
    ),
    "empty-never-stale": (
        "empty_is_stale makes an empty file stale",
        "    if empty_is_stale and record.empty:",
        "    if False:",
    ),
    "release-any-owner": (
        "only the owner releases",
        "    mine = next((h for h in holders if h.owner == owner), None)",
        "    mine = next((h for h in holders if h.owner == owner), holders[0])",
    ),
    "renew-as-replace": (
        "a renewal reports refreshed",
        "                    renewed=take.renewed is not None,",
        "                    renewed=False,",
    ),
    "no-fsync": (
        "the record is on disk before the rename",
        "            if durable:\n                os.fsync(fd)\n",
        "",
    ),
    "write-in-place": (
        "a record is replaced whole by a rename",
        "        _despite_sharing(lambda: os.replace(temp, lock), lock)",
        "        _despite_sharing(lambda: os.replace(temp, lock + '.x'), lock)",
    ),
    "temp-left-on-failure": (
        "a failed write leaves no temp file",
        "    except BaseException:\n        _remove_quietly(temp)\n        raise",
        "    except BaseException:\n        raise",
    ),
    "temp-not-exclusive": (
        "temp files are created exclusively",
        "_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _COMMON_FLAGS",
        "_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | _COMMON_FLAGS",
    ),
    "no-identity-check": (
        "a waiter re-checks the guard it locked",
        "    if _names_same_file(fd, guard):\n        return True",
        "    if True:\n        return True",
    ),
    "identity-follows-links": (
        "the identity check uses lstat",
        "        here = os.lstat(path)",
        "        here = os.stat(path)",
    ),
    "guard-not-removed": (
        "the guard is removed when dropped",
        "            _close_guard(fd, self.guard, remove=True)\n        self.fd = -1",
        "            _close_guard(fd, self.guard, remove=False)\n        self.fd = -1",
    ),
    "guard-removed-after-close": (
        "POSIX removes the guard while still holding it",
        "    remove_guard_while_held = True\n",
        "    remove_guard_while_held = False\n",
    ),
    "guard-blocks-forever": (
        "the guard is waited for at most GUARD_WAIT_SEC",
        "        if _SEAMS.clock() >= deadline:\n            if refused is not None:",
        "        if False:\n            if refused is not None:",
    ),
    "windows-lock-errno-read": (
        "a refused Windows lock is busy whatever its errno (Wine sets none)",
        "            os.fstat(fd)\n            return False",
        "            raise",
    ),
    "read-refused-by-sharing": (
        "a record Windows will not open while it is replaced is read once it opens",
        "        fd = _despite_sharing(lambda: os.open(lock, _READ_FLAGS), lock)",
        "        fd = os.open(lock, _READ_FLAGS)",
    ),
    "windows-release-renames-first": (
        "a release on Windows renames the lock file away before deleting it",
        "    if not _SEAMS.platform.delete_keeps_the_name:",
        "    if True:",
    ),
    "fence-not-kept-on-renewal": (
        "a renewal keeps its hold's fence",
        "    if kept is not None and all(fence < kept for fence in others):",
        "    if False:",
    ),
    "fence-without-floor": (
        "a take's fence is no less than the store's floor, across deleted records",
        "    fence = max(highest + 1, look.fence_floor)",
        "    fence = highest + 1",
    ),
    "run-command-outlives-killed-run": (
        "run's command gets SIGTERM when run dies",
        "preexec_fn=dies_with_run)",
        "preexec_fn=None)",
    ),
    "sharing-not-waited": (
        "a file another program has open is waited for, 5 s",
        "        self.sharing_retry_sec = 5.0",
        "        self.sharing_retry_sec = 0.0",
    ),
    "no-read-only-guard": (
        "a guard of another user is locked read-only",
        "        return os.open(guard, _GUARD_READ_ONLY_FLAGS)\n\n\ndef _create_guard",
        "        raise\n\n\ndef _create_guard",
    ),
    "guard-follows-links": (
        "the guard is opened without following links",
        '_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)',
        "_NOFOLLOW = 0",
    ),
    "fifo-blocks": (
        "a FIFO at the lock path never blocks",
        '_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _COMMON_FLAGS',
        "_READ_FLAGS = os.O_RDONLY | _COMMON_FLAGS",
    ),
    "unbounded-read": (
        "a lock file is read at most 64 KiB + 1",
        "    if len(data) > _RECORD_MAX_BYTES:\n        record = _Record(None, mtime)",
        "    if False:\n        record = _Record(None, mtime)",
    ),
    "orphans-kept": (
        "orphaned temp files are removed",
        "        if name.startswith(base) and _TEMP_NAME.fullmatch(name, len(base)):",
        "        if False:",
    ),
    "orphans-of-other-locks-removed": (
        "only this lock's orphans are removed",
        "        if name.startswith(base) and _TEMP_NAME.fullmatch(name, len(base)):",
        "        if _TEMP_NAME.fullmatch(name[-17:]):",
    ),
    "reserved-names-allowed": (
        "reserved lock names are refused",
        "    if name.endswith((_GUARD_SUFFIX, _LINE_SUFFIX)) or _TEMP_NAME.fullmatch(name[-17:]):",
        "    if False:",
    ),
    "trailing-separator-allowed": (
        "a lock path ending with a separator is refused",
        "    if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)):",
        "    if False:",
    ),
    "owner-whitespace-allowed": (
        "owners have no whitespace",
        '    if " " in owner or not owner.isprintable():',
        "    if not owner.isprintable():",
    ),
    "owner-length-unchecked": (
        "owners are at most 200 characters",
        '    if len(owner) > OWNER_MAX_LEN:\n        raise ValueError(f"owner is',
        '    if False:\n        raise ValueError(f"owner is',
    ),
    "release-without-run-id": (
        "release needs the run id",
        "    if not _has_run_id(owner):",
        "    if False:",
    ),
    "new-run-id-per-try": (
        "acquire_within keeps one owner",
        "            result = _take_in(store, request, place)",
        "            result = _take_in(store, _request(request.lock,"
        " request.owner.rsplit(':', 1)[0], request.stale_after, wait=request.wait,"
        " slots=request.slots, shared=request.shared), place)",
    ),
    "no-jitter": (
        "waiters jitter their pauses",
        "        time.sleep(min(left, self.next * random.uniform(0.5, 1.0)))",
        "        time.sleep(min(left, self.next))",
    ),
    "timeout-too-small-allowed": (
        "a timeout below 0.0001 minutes is refused",
        "    if seconds < _MIN_STALE_AFTER_SEC:",
        "    if False:",
    ),
    "stale-at-not-capped": (
        "stale_at is capped at year 9999",
        "min(max(int(seconds // 1), _MIN_TIME), _MAX_TIME)",
        "max(int(seconds // 1), _MIN_TIME)",
    ),
    "held-exit-0": (
        "a refusal exits 3",
        "    code = _EXIT_HELD if hold is None else _EXIT_OK",
        "    code = _EXIT_OK",
    ),
    "os-error-exit-1": (
        "an OS error exits 2",
        "    except OSError as exc:\n        code = _EXIT_OS_ERROR",
        "    except OSError as exc:\n        code = _EXIT_BAD_ARGS",
    ),
    "repeated-option-allowed": (
        "an option given twice is a usage error",
        "        if name in options and name not in _REPEATED:",
        "        if False:",
    ),
    "numbers-any-float": (
        "numbers are plain decimals",
        "    if _PLAIN_DECIMAL.fullmatch(text):\n        return float(text) * _UNIT_SECONDS[unit]",
        "    if True:\n        return float(text) * _UNIT_SECONDS[unit]",
    ),
    "signals-not-deferred": (
        "a signal waits while the guard is held",
        "        if not cls.shield:\n            cls.raise_pending()",
        "        cls.raise_pending()",
    ),
    "no-signal-handlers": (
        "the CLI turns signals into a clean exit",
        "    _Interrupts.install()\n",
        "",
    ),
    "ignore-unmasked": (
        "a signal caught while the CLI switches to ignoring is never printed",
        '        if not hasattr(signal, "pthread_sigmask"):  # Windows',
        "        if True:",
    ),
    "interrupt-after-commit": (
        "a call that changed the lock finishes normally",
        "                _clock_past(look.fence_floor)\n        _Interrupts.disarm()",
        "                _clock_past(look.fence_floor)",
    ),
    "lost-guard-kept": (
        "an interrupt after the guard's open leaves no guard",
        "                _abandon_guard_at(guard)",
        "                pass",
    ),
    "advice-always-release": (
        "the clearing command is printed only when it can work",
        "    if holder is not None and _releasable(holder):",
        "    if holder is not None:",
    ),
    "advice-not-quoted": (
        "the clearing command is shell-quoted",
        "--lock {_quoted(lock)} --owner {_quoted(holder)}",
        "--lock {lock} --owner {holder}",
    ),
    "etcd-no-compare": (
        "every etcd change compares what the call read",
        '        txn = {"compare": compare, "success": ops, "failure": failure}',
        '        txn = {"compare": [], "success": ops, "failure": failure}',
    ),
    "etcd-no-lease": (
        "an etcd record lives on a lease of its holder's timeout",
        '                        "lease": lease or "0",\n',
        "",
    ),
    "etcd-no-last-holder": (
        "etcd remembers the last holder for stale_replaced",
        '                {"request_put": {"key": _b64(self.last_key), "value": _b64(puts)}},\n',
        "",
    ),
    "etcd-lease-ignored": (
        "a record kept by a live lease is never stale",
        '    if record.lease is not None:\n        return record.lease == "expired"',
        '    if record.lease == "expired":\n        return True',
    ),
    "etcd-no-failover": (
        "a call moves to the next endpoint",
        "                    refusing[endpoint] = isinstance(exc, ConnectionRefusedError)\n"
        "                    continue",
        "                    refusing[endpoint] = isinstance(exc, ConnectionRefusedError)\n"
        "                    raise",
    ),
    "etcd-no-second-round": (
        "a call goes round the endpoints again until its deadline",
        "                break\n            time.sleep(min(0.05, left))\n",
        "                break\n            break\n",
    ),
    "etcd-unknown-outcome-silent": (
        "a write whose answer is lost says who may hold the lock",
        "        if lost is not None and outcome is not None:\n"
        "            return self.lost_answer(",
        "        if False:\n            return self.lost_answer(",
    ),
    "redis-unknown-outcome-silent": (
        "a change whose answer is lost says who may hold the lock (Redis)",
        "        if outcome is not None:\n            return self.lost_answer(",
        "        if False:\n            return self.lost_answer(",
    ),
    "etcd-user-in-url": (
        "credentials never go in the address",
        '        if ":" in user or (at and not self.users):',
        '        if ":" in user:',
    ),
    "etcd-change-interruptible": (
        "a signal while an etcd change is sent lets it finish and answer",
        "place, gone=gone)\n            if applied:\n                _Interrupts.disarm()",
        "place, gone=gone)\n            if False:\n                _Interrupts.disarm()",
    ),
    "etcd-change-not-held": (
        "signals wait while an etcd change is on its way",
        "        with _SIGNALS_HELD:\n            applied = self._swap(",
        "        if True:\n            applied = self._swap(",
    ),
    "etcd-watch-from-now": (
        "a watch made after something changed since the look sends the waiter to look again",
        "                if watch.watched > seen:\n                    return True",
        "                if False:\n                    return True",
    ),
    "etcd-told-read-ignored": (
        "the first in line's take reads what its watch told, not etcd again",
        "        found = self._fresh(line) if told is None else told",
        "        found = self._fresh(line)",
    ),
    "change-tries-twenty": (
        "a change lost to other writers is tried up to 100 times in a row",
        "_CHANGE_TRIES = 100\n",
        "_CHANGE_TRIES = 20\n",
    ),
    "etcd-seen-delete-wakes": (
        "a watch kept from an earlier wait passes over what the look already saw",
        "                if revision <= seen:\n                    continue\n",
        "",
    ),
    "file-join-rewrites-line": (
        "a file's join appends its place to the line file, not writing the line anew",
        "            if unchanged and _appended(",
        "            if False and _appended(",
    ),
    "file-append-to-any-line": (
        "a join appends only to a line file that holds nothing but the places read",
        "        if not stat.S_ISREG(info.st_mode) or info.st_size != size:",
        "        if not stat.S_ISREG(info.st_mode):",
    ),
    "resp-loose-length": (
        "an array's loop reads a bulk string only of a length in plain digits",
        "            if header.isdigit() and len(header) <= 18:",
        "            if header and len(header) <= 18:",
    ),
    "etcd-never-vouches": (
        "a wait that ended for its beat goes on from the look its watch vouches for",
        "self.watched <= seen and self.streamed <= seen",
        "False and self.streamed <= seen",
    ),
    "vouched-without-end": (
        "a waiter looks every fifth beat, even while its store vouches for the look",
        "        trusted = not woken and vouched < _VOUCHED_WAITS and _SEAMS.clock() < stale_at",
        "        trusted = not woken and _SEAMS.clock() < stale_at",
    ),
    "etcd-join-reads-nothing": (
        "a waiter's first look in line is what its join's transaction read",
        '        self._found(self.gateway.post("/v3/kv/txn", {"success": ops}), 1, line=True)',
        '        self.gateway.post("/v3/kv/txn", {"success": ops})',
    ),
    "etcd-lost-change-reads-again": (
        "a change that lost its race read the lock in its transaction, for the next try",
        "        self._found(answer, 0, self.line_read)\n",
        "",
    ),
    "etcd-lineless-read-looked": (
        "a look never takes the line from what a release's lost transaction read",
        "        if fresh is None or (line and not fresh[1]):",
        "        if fresh is None:",
    ),
    "etcd-no-lease-ahead": (
        "the first in line has the lease of its take granted ahead",
        "        ttl = _whole_seconds(stale_after) + 1\n        if not any(",
        "        ttl = _whole_seconds(stale_after) + 1\n        if False and not any(",
    ),
    "etcd-lease-ahead-past-its-time": (
        "a lease granted ahead serves a take only while a whole timeout is left of it",
        " and spare_ttl - (now - sent) >= ttl:",
        ":",
    ),
    "etcd-beat-forgets-lease-ahead": (
        "a beat keeps the lease granted ahead alive with the place",
        "            if ahead:\n                self.spares.remove(spare)",
        "            if False:\n                self.spares.remove(spare)",
    ),
    "etcd-ended-watch-no-pause": (
        "a watch that ends sends the waiter to its pause, not round again",
        "            watch.stop()\n            self.pause.sleep(max(0.0, until - _SEAMS.clock()))",
        "            watch.stop()",
    ),
    "http-no-keep-alive": (
        "one connection serves every request of a call",
        " or connection.endpoint != endpoint or not connection.reusable:",
        " or True:",
    ),
    "http-chunk-end-unchecked": (
        "a chunk must end with CRLF",
        '        if self.received[end + 2 + size : end + 4 + size] != b"\\r\\n":\n'
        '            raise ValueError("the answer was not HTTP (a bad chunk)")',
        '        if False:\n            raise ValueError("the answer was not HTTP (a bad chunk)")',
    ),
    "http-header-line-break": (
        "no header value can split a request's head",
        '        if any("\\r" in value or "\\n" in value for value in headers.values()):',
        "        if False:",
    ),
    "time-any-digits": (
        "times are ASCII digits only",
        '_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z")',
        '_TIME = re.compile(r"(\\d{4})-(\\d{2})-(\\d{2})T(\\d{2}):(\\d{2}):(\\d{2})Z")',
    ),
    "orphans-kept-after-a-crash": (
        "a guard left behind has its orphans removed",
        "        if not self.guard.created:\n            _remove_orphan_temps(self.lock)",
        "        if False:\n            _remove_orphan_temps(self.lock)",
    ),
    "orphans-listed-on-every-call": (
        "a call lists the lock's folder only after a crash",
        "        if not self.guard.created:\n            _remove_orphan_temps(self.lock)",
        "        if True:\n            _remove_orphan_temps(self.lock)",
    ),
    "own-temp-orphan-kept": (
        "this version's orphan is freed at its temp name",
        "            try:\n                os.unlink(path)\n            except OSError:",
        "            try:\n                raise OSError\n            except OSError:",
    ),
    "guard-always-inherited": (
        "a guard this call created is not taken for a leftover",
        "            return _create_guard(guard, make_parents), True",
        "            return _create_guard(guard, make_parents), False",
    ),
    "renewals-skipped": (
        "run and held() renew the lock while work runs",
        "        if self.lost is not None:\n            return self.lost\n        started",
        "        if True:\n            return self.lost\n        started",
    ),
    "renewal-retakes-a-lost-lock": (
        "a renewal never takes back a lock that was lost",
        "    if request.renew_only and not _still_holds(",
        "    if False and not _still_holds(",
    ),
    "run-lost-lock-not-stopped": (
        "a lost lock stops the command",
        "            _stop_command(child, waiter, renewer.grace_left())\n            break",
        "            waiter.join()\n            break",
    ),
    "sleep-waits-past-a-wake": (
        "no wait of a holder lasts over a second on a clock that stops while the machine sleeps",
        "        return _blind_wait(self.due_in())",
        "        return self.due_in()",
    ),
    "serve-cancel-frees-a-renewal-under-way": (
        "a cancel never frees a hold another take of its owner is renewing",
        "            if self.taking.get(took.renewer.hold.owner, set()) - {call}:\n",
        "            if False:\n",
    ),
    "redis-beat-on-a-spent-step": (
        "a kept place's beats each have a deadline of their own (Redis)",
        "        self.gateway.next_step()  # each beat a step of its own, with its own deadline\n"
        "        ms = self._place_ms()",
        "        ms = self._place_ms()",
    ),
    "marked-json-a-lock": (
        "JSON behind a byte-order mark is another program's document",
        "        if marked is not None and _json_document(marked):\n",
        "        if False:\n",
    ),
    "late-renewal-kept": (
        "a renewal written after the work was told lost is let go",
        "                    self.let_go(renewed)\n",
        "                    pass\n",
    ),
    "sleep-socket-waits-past-a-wake": (
        "no wait on a socket lasts over a second on a clock that stops while the machine sleeps",
        "        wait = _blind_wait(_seconds_left(deadline))\n",
        "        wait = _seconds_left(deadline)\n",
    ),
    "sleep-uncounted": (
        "every deadline of a hold counts on a clock that counts the machine's sleep",
        '        if sys.platform not in ("linux", "darwin") or clock_id is None:',
        "        if True:",
    ),
    "renewal-waits-out-the-network": (
        "a renewal waits on the network no longer than its holder may go on",
        "    store.call_deadline = request.deadline\n    store.patient",
        '    store.call_deadline = float("inf")\n    store.patient',
    ),
    "renewal-counted-from-the-answer": (
        "a hold is counted from when the try that renewed it began",
        "                self.renewed = self.renewal.try_began",
        "                self.renewed = time.monotonic()",
    ),
    "name-lookup-waited-out": (
        "a call waits for its host's name lookup no longer than its deadline",
        "            if _SEAMS.clock() >= deadline:\n                waited = _SEAMS",
        "            if False:\n                waited = _SEAMS",
    ),
    "held-exit-waits-for-renewal": (
        "leaving held()'s block waits for a renewal no later than the stop point",
        "            self.thread.join(renewer.stop_in())",
        "            self.thread.join()",
    ),
    "late-renewal-writes": (
        "a renewal read past its holder's stop point writes nothing",
        "            if read_at >= request.deadline:",
        "            if False:",
    ),
    "work-stopped-at-the-lease-end": (
        "a hold that cannot be renewed stops its work a grace and a margin before it ends",
        "        return self.renewed + self.lasts - self.grace - self.margin",
        "        return self.renewed + self.lasts",
    ),
    "run-signals-not-forwarded": (
        "signals sent to run go to the command",
        "    _Interrupts.handle(lambda signum, _: _signal_child(child, signum))",
        "    pass",
    ),
    "held-loss-silent-on-exit": (
        "a block that ends normally after losing the lock raises LockLost",
        "        if (lost := renewer.lost_by_now()) is not None and exc_type is None:",
        "        if False:",
    ),
    "line-ignored": (
        "a call that does not wait never jumps the line",
        "    for place in before:\n        if clash := _conflict(",
        "    for place in []:\n        if clash := _conflict(",
    ),
    "slots-line-ignored": (
        "a call for a slot that does not wait never jumps the line",
        '        take.outcome = "held" if free <= 0 else "take" if len(before) < free else "line"',
        '        take.outcome = "held" if free <= 0 else "take"',
    ),
    "renewal-held-up-by-line": (
        "renewing one's own lock is never held up by the line",
        "    if mine and (any(h in live for h in mine) or not _in_parts(record, request, None)):\n",
        "    if False:\n",
    ),
    "place-never-lapses": (
        "a place lapses once its waiter stops showing it is alive",
        "    return [p for p in line if p.beat is None or abs(now - p.beat) < ttl]",
        "    return list(line)",
    ),
    "waiter-never-beats": (
        "a waiter keeps its place alive while it waits",
        "            if not store.beat(place):\n                return",
        "            if False:\n                return",
    ),
    "beat-looks-again": (
        "a beat changes nothing a look saw: a waiter does not look again for it",
        "            last_shown = 0  # shown again after a beat\n",
        # Since a wait goes on from one look (1.5.7), a bare ``continue`` here changed
        # nothing: the look is dropped too, so the waiter reads the lock again at once.
        "            last_shown = 0  # shown again after a beat\n"
        "            found = None\n"
        "            continue\n",
    ),
    "look-stops-before-own-place": (
        "a waiter's look at a file lock reads the line up to its own place, included",
        "            places.append(\n"
        "                _Place(ticket, owner, since, stale_after, beat,"
        " shared=shared, parts=parts)\n"
        "            )\n"
        "            if fields[0] == upto:\n"
        "                break",
        "            if fields[0] == upto:\n"
        "                break\n"
        "            places.append(\n"
        "                _Place(ticket, owner, since, stale_after, beat,"
        " shared=shared, parts=parts)\n"
        "            )",
    ),
    "look-reads-the-whole-line": (
        "a waiter's look at a file lock leaves out the places behind it",
        "            if fields[0] == upto:\n                break",
        "            if False:\n                break",
    ),
    "redis-look-reads-every-place": (
        "a waiter's look at a Redis lock fetches no place behind its own",
        "        if upto in tickets:\n",
        "        if False:\n",
    ),
    "redis-look-stops-before-own-place": (
        "a waiter's look at a Redis lock fetches every place up to its own, included",
        "            tickets = tickets[: tickets.index(upto) + 1]",
        "            tickets = tickets[: tickets.index(upto)]",
    ),
    "line-memo-ignores-beat": (
        "a place whose beat changed is written with its new beat (file)",
        "        beat = round(p.beat or 0.0, 3)\n",
        "        beat = 0.0\n",
    ),
    "memo-keeps-long-texts": (
        "a memo of the line keeps no text longer than a place's",
        "    return not isinstance(text, bytes) or len(text) <= _REMEMBERED_LONGEST",
        "    return True",
    ),
    "time-memo-keeps-any-text": (
        "the memo of times keeps only texts of a time's length",
        "    if isinstance(text, str) and len(text) == _TIME_LENGTH:",
        "    if isinstance(text, str):",
    ),
    "time-memo-wrong-key": (
        "a time read again gives what it gave the first time",
        "        return _remembered(_TIMES_READ, text, _parse_time)",
        '        return _remembered(_TIMES_READ, text[:10] + "T00:00:00Z", _parse_time)',
    ),
    "redis-joined-after-the-answer": (
        "a place the server took is left however the join is cut short (Redis)",
        "        place.joined = True\n        ms = self._place_ms()\n",
        "        ms = self._place_ms()\n",
    ),
    "etcd-joined-after-the-answer": (
        "a place the server took is left however the join is cut short (etcd)",
        "        place.joined = True\n        value = _place_value(place)\n",
        "        value = _place_value(place)\n",
    ),
    "place-order-ignored": (
        "a waiter knows its place in line",
        "            return line[:at]",
        "            return []",
    ),
    "no-leave-on-exit": (
        "a waiter that gives up or is interrupted leaves the line at once",
        "            _leave_line(store, place)",
        "            pass",
    ),
    "taker-stays-in-line": (
        "taking the lock leaves the line in the same change (file)",
        "        leaving = None if place is None else place.ticket\n        if place is not None:",
        "        leaving = None\n        if place is not None:",
    ),
    "etcd-taker-stays-in-line": (
        "taking the lock leaves the line in the same transaction (etcd)",
        '            ops.append({"request_delete_range": {"key": key}})',
        "            pass",
    ),
    "unknown-scheme-is-a-file": (
        "an address of an unknown scheme is refused, never taken for a file path",
        "    if isinstance(lock, str) and _ADDRESS.match(lock):",
        "    if isinstance(lock, str) and lock.startswith(_ETCD_SCHEMES):",
    ),
    "port-unchecked": (
        "a port out of range is a bad argument",
        "            if not 0 < port < 65536:",
        "            if False:",
    ),
    "wait-line-on-any-stderr": (
        "the waiting line is written only to a terminal",
        "    if request.wait and _is_terminal(sys.stderr):",
        "    if request.wait:",
    ),
    "redis-change-unwatched": (
        "every Redis change applies only if the lock is as the call read it",
        '                answers = gateway.call(("MULTI",), *ops,',
        '                answers = gateway.call(("UNWATCH",), ("MULTI",), *ops,',
    ),
    "redis-exec-sent-again-unwatched": (
        "a transaction whose send failed is never sent again without its WATCH",
        "                if watched and not sent:\n",
        "                if False:\n",
    ),
    "connections-never-kept": (
        "a process keeps its connection from call to call",
        "            if len(idle) < _IDLE_MAX:\n",
        "            if False:\n",
    ),
    "connections-lent-twice": (
        "a kept connection is lent to one call at a time",
        "                since, connection = idle.pop()\n",
        "                since, connection = idle[-1]\n",
    ),
    "connections-forked-child-uses-parents": (
        "a forked child never uses its parent's connections",
        "    os.register_at_fork(after_in_child=_KEPT.forget)\n",
        "    pass\n",
    ),
    "connections-kept-for-any-secret": (
        "a kept connection serves only calls made with its user's secret",
        "(scheme, endpoint, self.user, _KEPT.secret_number(self.password), *files)",
        "(scheme, endpoint, self.user, *files)",
    ),
    "connections-kept-for-any-tls-files": (
        "a kept TLS connection serves only calls made with its certificate files",
        '            for name in ("CACERT", "CERT", "KEY"):\n',
        '            for name in ("CACERT",):\n',
    ),
    "connections-stray-bytes-read": (
        "a kept connection on which something came while it was idle is not lent",
        "        return not self.idle.poll(0)\n",
        "        return True\n",
    ),
    "connections-idle-forever": (
        "a connection idle a minute is not lent",
        "            fresh = now - since < _SEAMS.kept_idle_sec\n",
        "            fresh = True\n",
    ),
    "connections-watch-left-on": (
        "a WATCH a call left on its kept connection is undone before the next call's",
        "            connection.watching = self.watched is connection\n",
        "            connection.watching = False\n",
    ),
    "redis-no-expiry": (
        "a Redis record expires after its holder's timeout",
        '("SET", self.key, data, "PX", ms), ("SET", self.last_key, data)',
        '("SET", self.key, data), ("SET", self.last_key, data)',
    ),
    "redis-dead-places-kept": (
        "a dead waiter's place is gone after the next call that reads the line",
        "        if dead:\n            self.gateway.call(*dead, write=True)\n",
        "",
    ),
    "file-dead-places-kept": (
        "a dead waiter's place is gone after the next call that reads the line",
        "    def prune(self, look: _Look, now: float) -> None:\n"
        "        self._keep_line(look, _live(look.line, now))",
        "    def prune(self, look: _Look, now: float) -> None:\n        pass",
    ),
    "list-foreign-values": (
        "a listing shows only locks: records naming an owner, or a line",
        "    return record.owner is not None or lock.endswith(_LOCK_NAME_SUFFIX) or bool(line)",
        "    return True",
    ),
    "lockfile-name-a-lock": (
        "a file named as a package manager's lockfile is another program's, there or not",
        "    if _named_as_a_package_lockfile(look.file_name):\n        return _BY_ITS_NAME\n",
        "",
    ),
    "json-document-a-lock": (
        "a JSON object that is no record is another program's, whatever its size",
        '        record.form = _FORM_RECORD if "owner" in content or "tool" in content else',
        "        record.form = _FORM_RECORD if True else",
    ),
    "toml-document-a-lock": (
        "a TOML document with a key is another program's, whatever its size",
        '        return bool(tomllib.loads(data.decode("utf-8")))',
        "        return False",
    ),
    "list-follows-links": (
        "a listing never follows a link to a folder",
        "                if entry.is_dir(follow_symlinks=False):",
        "                if entry.is_dir():",
    ),
    "list-glob-unescaped": (
        "a Redis prefix is matched literally",
        '    return re.sub(rb"([*?\\[\\]\\\\])", rb"\\\\\\1", data)',
        "    return data",
    ),
    "list-etcd-page-repeats": (
        "an etcd page starts after the last key of the one before",
        '            start = name + b"\\0"',
        "            start = name",
    ),
    "cluster-watched-resent": (
        "a redirected transaction is never sent on without its WATCH",
        "            self._redirect(error)\n"
        "            if watched:\n"
        "                raise _NotApplied\n",
        "            self._redirect(error)\n",
    ),
    "cluster-no-asking": (
        "a node an ASK sent a call to is sent ASKING first",
        "        return _with_asking(asked) if self.asking else list(asked)",
        "        return list(asked)",
    ),
    "slots-one-too-many": (
        "a lock of N slots has at most N live holders",
        "    free = request.slots - len(live)",
        "    free = request.slots + 1 - len(live)",
    ),
    "slots-release-frees-another": (
        "a release frees the caller's slot only",
        "    rest = [h for h in holders if h is not mine]",
        "    rest = [h for h in holders if h is not mine][1:]",
    ),
    "slots-stale-replaces-live": (
        "only a stale slot is replaced",
        "        stale = [h for h in kept if _is_stale(h, stale_after, now, False)]",
        "        stale = kept",
    ),
    "slots-count-not-in-force": (
        "while a slot is held, a call naming another count is refused",
        "    return in_force != slots",
        "    return False",
    ),
    "slots-redis-clock-ignored": (
        "on Redis each slot ends on the server's clock",
        "        live = left > 0",
        "        live = True",
    ),
    "slots-etcd-lease-ignored": (
        "on etcd each slot ends with its own lease's key",
        '        holder.lease = "live" if holder.mark in live_slots else "expired"',
        '        holder.lease = "live"',
    ),
    "slots-redis-rings-one": (
        "a change rings every waiter it leaves a slot for (Redis)",
        "        return line[: max(0, slots - len(live))]",
        "        return line[: min(1, max(0, slots - len(live)))]",
    ),
    "run-releases-a-kept-hold": (
        "run never releases a hold its owner had before it started",
        "    kept = hold.renewed",
        "    kept = False",
    ),
    "held-shortens-a-kept-hold": (
        "held() and run never shorten a hold their owner had",
        "    return (longest if request.keep_longer else stale_after), False\n",
        "    return stale_after, False\n",
    ),
    "get-key-unchecked": (
        "--get refuses a key the command does not print, before it runs",
        "    if got:\n        _check_get(command, options, got)",
        "    pass",
    ),
    "duration-unit-ignored": (
        "a duration's unit says what its number counts",
        "                seconds += float(number) * _UNIT_SECONDS[named]",
        "                seconds += float(number) * _UNIT_SECONDS[unit]",
    ),
    "faults-proc-retried": (
        "a folder where no file can be made is exit 2 at once",
        "        if not os.path.isdir(folder):\n            raise  # removed since it was made",
        "        if True:\n            raise  # removed since it was made",
    ),
    "shared-writer-beside-readers": (
        "an exclusive hold is never taken beside a live shared hold",
        "    free = request.slots - len(live)",
        "    free = 1 if record is not None and record.shared else request.slots - len(live)",
    ),
    "shared-reader-beside-writer": (
        "a shared hold is never taken beside a live exclusive hold",
        "    if shared and other_shared:\n        return None\n",
        "    if shared or other_shared:\n        return None\n",
    ),
    "shared-passes-a-waiting-writer": (
        "a shared call never passes an exclusive waiter ahead of it in line",
        "    for place in before:\n        if clash := _conflict(",
        "    for place in [p for p in before if not shared]:\n        if clash := _conflict(",
    ),
    "shared-kinds-mix": (
        "an owner holding one kind that asks for the other is refused",
        '        if own.shared != shared:\n            take.outcome = "kind"',
        '        if False:\n            take.outcome = "kind"',
    ),
    "shared-place-forgotten": (
        "a server keeps a shared waiter's place as shared",
        '    if place.shared:\n        entry["shared"] = True\n',
        "",
    ),
    "fence-etcd-from-read-revision": (
        "an etcd take that creates the lock's key gets the revision that creates it",
        "                _raise_fences(record, committed)",
        "                pass",
    ),
    "fence-renewal-kept-beside-larger": (
        "a renewal keeps its fence only while no other holder shows a larger one",
        "    if kept is not None and all(fence < kept for fence in others):",
        "    if kept is not None:",
    ),
    "fence-wild-read": (
        "a record's fence outside 1 to 2**52 counts as none",
        "    if isinstance(value, int) and not isinstance(value, bool)"
        " and 1 <= value <= _MAX_FENCE:",
        "    if isinstance(value, int) and not isinstance(value, bool) and value > 0:",
    ),
    "fence-clock-not-passed": (
        "a file take lets its clock pass the fence it gave",
        "    while floor_us is not None and time.time_ns() // 1000 <= floor_us:",
        "    while False:",
    ),
    "redis-take-keeps-dead-places": (
        "a take on Redis drops the places of waiters that died",
        "            if dead not in live and dead.ticket != leaving:\n",
        "            if False:\n",
    ),
    "serve-holds-not-renewed": (
        "a session renews its holds while it lives",
        "        if one.renewer.due_in() <= 0:  # else a second passed on the system's clock\n",
        "        if False:\n",
    ),
    "serve-end-frees-nothing": (
        "a session's end releases what it took",
        "    session.release_all(_SEAMS.clock() + _RELEASES_WITHIN_SEC)\n",
        "    pass\n",
    ),
    "serve-deaf-to-sigterm-sigint-sighup": (
        "SIGTERM, SIGINT and SIGHUP end the session",
        "    _Interrupts.handle(lambda signum, frame: session.ending.set())\n",
        "    pass\n",
    ),
    "serve-closed-stdin-unseen": (
        "a closed stdin ends the session",
        "            session.ending.set()  # stdin closed",
        "            pass  # stdin closed",
    ),
    "serve-parent-unwatched": (
        "a session ends once the process that started the server is gone",
        "    while os.getppid() == session.parent:\n",
        "    while True:\n",
    ),
    "serve-parent-looked-at-rarely": (
        "the parent gone is seen within a fraction of the 2 s a session's end may take",
        "_PARENT_LOOK_SEC = 0.2\n",
        "_PARENT_LOOK_SEC = 5.0\n",
    ),
    "serve-lease-not-the-timeout": (
        "a session hold's timeout is the server's lease",
        "        lease,\n        wait=min(wait, longest),\n",
        "        3600.0,\n        wait=min(wait, longest),\n",
    ),
    "serve-hold-not-marked": (
        "a session hold is marked as the session's in its record",
        "        keep_longer=True,\n        session=True,\n",
        "        keep_longer=True,\n        session=False,\n",
    ),
    "serve-session-lease-outlived-by-a-renewal": (
        "a CLI renewal, run or held() under a session hold's owner keeps the lease",
        "    if sessions:\n        return min(sessions), True\n",
        "    if sessions and request.session:\n        return min(sessions), True\n",
    ),
    "serve-kept-hold-shortened": (
        "a hold its owner had keeps its timeout when a session takes it",
        "        return (longest, False) if live else (stale_after, True)\n",
        "        return stale_after, True\n",
    ),
    "serve-kept-hold-released": (
        "a session never releases a hold its owner had before it",
        "        self.kept = hold.renewed and not hold.session\n",
        "        self.kept = False\n",
    ),
    "serve-lost-holds-untold": (
        "each answer tells the holds the session lost since the last",
        '    answer["lost_holds"] = session.told()\n',
        '    answer["lost_holds"] = []\n',
    ),
    "serve-lost-told-as-released": (
        "a hold another run took is told lost, not released",
        '        one.state = "released" if free else "lost"\n',
        '        one.state = "released"\n',
    ),
    "serve-released-told-as-lost": (
        "a hold the CLI released is told released, not lost",
        '        one.state = "released" if free else "lost"\n',
        '        one.state = "lost"\n',
    ),
    "serve-ended-hold-taken-back": (
        "a hold released or lost is never taken back by the session on its own",
        "        free = lost.held_by is None and not one.renewer.ran_out\n",
        "        one.renewer = _Renewer(one.renewer.renewal, one.renewer.hold)\n"
        "        one.renewer.renewal.renew_only = False\n"
        "        one.renewer.renewed = one.renewer.next = time.monotonic()\n"
        "        return\n",
    ),
    "serve-cancel-unheard": (
        "a cancelled acquire leaves the line",
        "        return not self.cancelled.is_set() and not self.session.ending.is_set()\n",
        "        return not self.session.ending.is_set()\n",
    ),
    "serve-calls-on-a-pool": (
        "every call is answered however many acquires wait",
        "    session.aside(work)\n    try:\n        return await answered\n",
        "    try:\n        return await asyncio.to_thread(_call, session, name, arguments, call)\n",
    ),
    "serve-wait-untold": (
        "a waiting acquire tells its place each beat",
        "    hold, result = _take_waiting(request, refused, place, keep_place=cut)\n",
        "    hold, result = _take_waiting(request, None, place, keep_place=cut)\n",
    ),
    "serve-wait-uncut": (
        "a call waits 50 s at most",
        "        wait=min(wait, longest),\n",
        "        wait=wait,\n",
    ),
    "serve-relative-path-taken": (
        "a lock path the server would resolve in its own folder is refused",
        "    if _ADDRESS.match(text) or os.path.isabs(os.path.expanduser(text)):\n",
        "    if True:\n",
    ),
    "serve-unknown-argument-passed": (
        "an argument a tool does not take is refused",
        "    if unknown:\n        takes",
        "    if False:\n        takes",
    ),
    "parts-stale-own-retaken": (
        "an owner's stale part is taken like any other, never by its old owner's right",
        "    if mine and (any(h in live for h in mine) or not _in_parts(record, request, None)):\n",
        "    if mine:\n",
    ),
    "parts-every-waiter-in-the-way": (
        "a waiter waits only behind those its parts conflict with",
        "        waits_on = [p for p in ahead if _conflict(place.shared, place.parts,",
        "        waits_on = [p for p in ahead if (place.shared, place.parts,",
    ),
    "parts-line-by-any-waiter": (
        "a take yields only to waiters its parts conflict with",
        "        if clash := _conflict(shared, parts, place.shared, place.parts):\n",
        "        if clash := (None, None):\n",
    ),
    "parts-grow-unchecked": (
        "an owner's added parts must conflict with no other's hold",
        "    if added:\n        for holder in take.live:",
        "    if False:\n        for holder in take.live:",
    ),
    "parts-grow-waits": (
        "a change of parts that conflicts is refused at once, never waited out",
        '                if take.outcome in ("grow", "full"):\n',
        "                if False:\n",
    ),
    "parts-kept-changed": (
        "run, held() and a session never change an owner's parts",
        "    if request.keep_longer:\n        return\n",
        "",
    ),
    "parts-renewal-new-fence": (
        "a live hold of parts renewed as it stands keeps its fence",
        "        fence = renewed.fence\n",
        "        pass\n",
    ),
    "parts-record-unbounded": (
        "a record never passes what a reader reads",
        "    return len(_bytes_of(record)) + marks > _RECORD_MAX_BYTES\n",
        "    return False\n",
    ),
    "parts-overlap-by-text": (
        "two holds conflict when some path lies in a part of each, decided exactly",
        "    return _first_overlap(parts, other_parts)\n",
        "    return next(((p, p) for p in parts if p in other_parts), None)\n",
    ),
    "parts-globstar-as-star": (
        "a segment of stars alone is any number of segments",
        '        if len(written) > 1 and written.strip("*") == "":\n',
        "        if False:\n",
    ),
    "parts-overlap-nothing-under": (
        "a part holds all under what it matches (overlap)",
        "    return True  # one part is used up\n",
        "    return len(a) == len(b)\n",
    ),
    "parts-covers-nothing-under": (
        "a part holds all under what it matches (covers)",
        "        if end in reached:\n            return True\n",
        "",
    ),
    "parts-covers-literal-nothing-under": (
        "a part holds all under the path it names",
        '        return path.startswith(part) and path[len(part) : len(part) + 1] in ("", "/")\n',
        "        return path == part\n",
    ),
    "parts-covers-prefix-past-globstar": (
        "a ** after the literal start may take no segment",
        '    if not (path + "/").startswith(part[: ready.first]):\n',
        "    if not path.startswith(part[: ready.first]):\n",
    ),
    "parts-case-kept": (
        "ASCII case is folded",
        "    if text.isascii():\n        return text.lower()\n",
        "    if True:\n        return text\n",
    ),
    "parts-unicode-folded": (
        "only ASCII case is folded",
        '    return "".join(c.lower() if c.isascii() else c for c in text)\n',
        "    return text.lower()\n",
    ),
    "parts-question-takes-nothing": (
        "? is one character, never none (overlap)",
        '        if x == "*":\n            # Along the row:',
        '        if x in ("*", "?"):\n            # Along the row:',
    ),
    "parts-question-takes-nothing-covers": (
        "? is one character, never none (covers)",
        '        if token == "*":\n            star, resume = at, read\n',
        '        if token == "?" and glob[at + 1 :].startswith(text[read]):\n'
        "            at += 1\n"
        '        elif token == "*":\n'
        "            star, resume = at, read\n",
    ),
    "parts-dot-segments-shared": (
        "no path holds a . or .. segment",
        "    return bool(s >> end & 1)\n",
        "    return bool((e | d1 | d2 | s) >> end & 1)\n",
    ),
    "parts-star-one-way": (
        "a star meeting a star reads more characters",
        "            s |= after & stars | (after & characters & ~dots) << 1 | (d2 & dots) << 1\n",
        "            s |= (after & characters & ~dots) << 1 | (d2 & dots) << 1\n",
    ),
    "parts-dots-run-on": (
        "three dots are a segment",
        "            s |= after & stars | (after & characters & ~dots) << 1 | (d2 & dots) << 1\n",
        "            s |= after & stars | (after & characters & ~dots) << 1\n",
    ),
    "parts-leads-under-ours-missed": (
        "a part under another's literal folders meets it (theirs longer)",
        "            found += folder.here\n",
        "            pass\n",
    ),
    "parts-leads-over-ours-missed": (
        "a part over another's literal folders meets it (ours longer)",
        "        return found + folder.under_or_here\n",
        "        return found + folder.here\n",
    ),
    "parts-leads-first-pair-by-theirs": (
        "the pair named is the first in our parts' order, then theirs",
        "    tried = sorted((mine, at) for at, shape in enumerate(shapes) for mine in",
        "    tried = list((mine, at) for at, shape in enumerate(shapes) for mine in",
    ),
    "serve-cancel-after-answer-unheard": (
        "a cancel of an acquire already answered releases what it took",
        "        session.cancel(_call_key(params.request_id))\n",
        "        pass\n",
    ),
    "serve-cancelled-take-kept": (
        "a take whose call was cancelled before it was kept is released, never kept",
        "            if call.cancelled.is_set() or self.ending.is_set():\n"
        "                return False\n"
        "            before",
        "            if self.ending.is_set():\n                return False\n            before",
    ),
    "serve-cancel-releases-what-its-owner-had": (
        "a cancelled renewal leaves the hold its owner had as it was",
        "                call.took, call.took_new = one, not hold.renewed\n",
        "                call.took, call.took_new = one, True\n",
    ),
    "serve-holds-judged-by-last-renewal": (
        "holds and lost_holds judge each hold by the renewer's clock",
        '            if one.state == "held" and (lost := one.renewer.lost_by_now()) is not None:\n',
        "            if False:\n",
    ),
    "serve-place-not-kept": (
        "a waiting acquire cut at the call limit keeps its place",
        "    hold, result = _take_waiting(request, refused, place, keep_place=cut)\n",
        "    hold, result = _take_waiting(request, refused, place, keep_place=False)\n",
    ),
    "serve-kept-place-unbeaten": (
        "a kept place is beaten while kept",
        "                if not store.beat(kept.place):\n",
        "                if False:\n",
    ),
    "serve-kept-place-kept-forever": (
        "a kept place is dropped 10 s after its call",
        "            if _SEAMS.clock() >= kept.until:\n                break\n",
        "            if False:\n                break\n",
    ),
    "serve-release-keeps-the-place": (
        "the owner's release drops its kept place",
        "            kept = self.places.get((identity, owner))\n            if kept is not None:\n",
        "            kept = self.places.get((identity, owner))\n            if False:\n",
    ),
    "serve-identity-by-spelling": (
        "two spellings of one lock are one lock",
        "        return store.identity()\n",
        "        return (store.lock,)\n",
    ),
    "serve-file-identity-by-path": (
        "a file lock is named by its folder's device and inode and its name",
        '        return ("file", found.st_dev, found.st_ino, name)\n',
        '        return ("path", self.lock)\n',
    ),
    "serve-server-identity-by-address": (
        "a server lock is named by its scheme, its set of endpoints and its key",
        '        return ("server", scheme, endpoints, gateway.key_text)\n',
        '        return ("server", gateway.lock)\n',
    ),
    "serve-stdout-unwatched": (
        "a closed stdout ends the session, even idle",
        "            if event & (select.POLLERR | select.POLLHUP):\n",
        "            if False:\n",
    ),
    "check-owner-parts-counted": (
        "check leaves out the parts of the owner it names",
        "    others = sorted((h for h in live if owner is None or h.owner != owner), key=",
        "    others = sorted((h for h in live), key=",
    ),
    "check-shared-parts-free": (
        "a shared part reserves a path as any part does",
        "    others = sorted((h for h in live if owner is None or h.owner != owner), key=",
        "    others = sorted((h for h in live if not h.shared and h.owner != owner), key=",
    ),
    "check-stale-holds-reserve": (
        "a stale hold reserves nothing",
        "    live = _live_holders(record, query.stale_after, now, query.empty_is_stale)\n",
        "    live = _holders(record)\n",
    ),
    "check-whole-hold-reserves-nothing": (
        "a hold of the whole lock reserves every path",
        "    held = [(h, part) for h in others for part in (h.parts or (None,))]\n",
        "    held = [(h, part) for h in others for part in (h.parts or ())]\n",
    ),
    "check-index-first-segment-unfolded": (
        "the index looks a path's folders up folded",
        '        segments = folded.split("/")\n',
        '        segments = path.split("/")\n',
    ),
    "check-index-glob-first-by-first-segment": (
        "a glob segment names no folder of the index",
        '                if "*" in segment or "?" in segment:\n                    break\n',
        '                if "*" in segment:\n                    break\n',
    ),
    "check-index-path-own-folder-skipped": (
        "a part filed under a path's own folders is asked about it (src/** covers src)",
        '        for segment in [*segments, ""]:',
        "        for segment in segments:",
    ),
    "check-index-later-literal-at-top-only": (
        "a part is asked by its last literal segment in whatever folder it is filed",
        "            if folder.by_any:\n",
        "            if folder.by_any and folder is self.top:\n",
    ),
    "check-index-pieces-unfolded": (
        "the runs of characters a path must hold are folded",
        "        self.pieces = [_pieces(ready.folded) for ready in self.ready]\n",
        "        self.pieces = [_pieces(parts[same[0]]) for same in self.at]\n",
    ),
    "check-index-one-holder-a-part": (
        "a part that several hold reserves a path for each of them",
        "        return sorted(at for same in found for at in same)  # in the parts' order\n",
        "        return sorted(same[0] for same in found)\n",
    ),
    "check-null-split-on-lines": (
        "--null: each path on stdin ends with a NUL",
        '        return [path for path in text.split("\\0") if path]\n',
        '        return [path for path in text.split("\\n") if path]\n',
    ),
    "check-crlf-kept": (
        "a line on stdin may end in CRLF",
        '    return [line.removesuffix("\\r") for line in text.split("\\n")'
        ' if line.removesuffix("\\r")]\n',
        '    return [line for line in text.split("\\n") if line]\n',
    ),
    "check-separator-read-as-option": (
        "after a bare --, every argument is a path",
        "        paths, rest, tail = [], own, rest[len(own) + 1 :]\n",
        "        paths, tail = [], []\n",
    ),
    "check-owner-without-run-id": (
        "check's owner is whole, with its run id",
        "        if owner is not None and not _has_run_id(owner):\n",
        "        if False:\n",
    ),
    "check-reserved-exit-0": (
        "check exits 3 when a path is reserved",
        '    return result, _EXIT_OK if result["free"] else _EXIT_HELD\n',
        "    return result, _EXIT_OK\n",
    ),
    "serve-kept-place-any-parts": (
        "a kept place is resumed only by the same set of parts",
        "        return ours and same and _part_keys(request.parts) == _part_keys(asked.parts)\n",
        "        return ours and same\n",
    ),
    "serve-kept-place-parts-by-spelling": (
        "a kept place compares parts by their keys, as a set",
        "        return ours and same and _part_keys(request.parts) == _part_keys(asked.parts)\n",
        "        return ours and same and request.parts == asked.parts\n",
    ),
    "serve-check-paths-unbounded": (
        "the check tool takes at most 10,000 paths",
        "    if isinstance(paths, list) and len(paths) > _CHECK_PATHS_MAX:\n",
        "    if False:\n",
    ),
    "serve-holds-without-parts": (
        "holds and lost_holds show each hold's parts",
        '            "parts": None if hold.parts is None else list(hold.parts),\n',
        '            "parts": None,\n',
    ),
    "list-table-parts-hidden": (
        "the table shows a holder's parts, or how many",
        '        holder = _shown_name(_holder_text(longest["owner"]))'
        ' + _parts_cell(longest["parts"])\n',
        '        holder = _shown_name(_holder_text(longest["owner"]))\n',
    ),
    "list-table-parted-one-holder": (
        "the table counts the holders of a lock held in parts",
        '    parted = any(h["parts"] is not None for h in live)\n',
        "    parted = False\n",
    ),
    "remembered-last-not-compared": (
        "a change on a remembered etcd lock compares its last holder's key too",
        '            compare.append({**compare[0], "key": _b64(self.last_key)})\n',
        "            pass\n",
    ),
    "remembered-line-not-compared": (
        "a take on a remembered etcd lock compares that nobody joined the line",
        "            if self.line_read:\n                compare.append(\n",
        "            if False:\n                compare.append(\n",
    ),
    "remembered-refusal-not-read-again": (
        "a take that the remembered lock would refuse reads the lock itself",
        '            if look.remembered and take.outcome != "take":\n',
        "            if False:\n",
    ),
    "remembered-absent-not-read-again": (
        "a release that the remembered lock would answer absent reads the lock itself",
        "                    if look.remembered:\n                        continue",
        "                    if False:\n                        continue",
    ),
    "resent-lost-write-left-unknown": (
        "an etcd transaction whose answer is lost is sent again",
        '        answer = self.gateway.post("/v3/kv/txn", txn, outcome=outcome, resendable=True)\n',
        '        answer = self.gateway.post("/v3/kv/txn", txn, outcome=outcome)\n',
    ),
    "resent-landed-unseen": (
        "a transaction sent again that finds its first sending landed counts as applied",
        "        landed = self.gateway.resent and self._landed(answer, record, puts)\n",
        "        landed = 0\n",
    ),
    "resent-after-the-deadline-only": (
        "a transaction unanswered for a second is sent again (a dead leader)",
        "                    until = min(until, _SEAMS.clock() + _RESEND_AFTER_SEC)\n",
        "                    pass\n",
    ),
    "free-lease-left-at-exit": (
        "a lease a release left free is revoked when its process ends",
        "atexit.register(_revoke_free_leases)\n",
        "pass\n",
    ),
    "free-lease-of-any-timeout": (
        "a free lease serves only a take of its timeout",
        "            if ttl <= (left := self._ttl_kept(free[0])) <= ttl + 1:\n",
        "            if (left := self._ttl_kept(free[0])):\n",
    ),
    "free-lease-lost-on-a-lost-race": (
        "a free lease a lost change used is free again",
        "            _FREE_LEASES[self.left_as] = self.freed",
        "            pass",
    ),
    "etcd-renewal-keeps-a-lease-of-any-timeout": (
        "a renewal keeps its lease only for the same timeout",
        "        if mine and ttl <= self._ttl_kept(mine) <= ttl + 1:\n",
        "        if mine and self._ttl_kept(mine):\n",
    ),
    "free-lease-revoked-past-exit": (
        "a process's exit waits at most a second on revoking the leases left free",
        "            gateway.call_deadline = stop\n",
        "            pass\n",
    ),
}

# Survivors that no test can kill because they do not change behaviour, with why.
EQUIVALENT: dict[str, str] = {
    "parts-every-waiter-in-the-way": "a waiter that also waits on places it does not"
    " conflict with only wakes later: it looks again every few beats, and its verdict"
    " (by conflict) then lets it take; latency, no outcome, which no test may time",
    "parts-stale-own-retaken": "a stale hold of parts stays in its record only until the"
    " next take rewrites it, which drops it; until then no live hold can conflict with"
    " its owner's retake, and a conflicting waiter would have taken it first",
}


# Words of a mutant's name that name no test file but say where its bug shows.
_SHOWS_IN = {
    "http": "etcd",
    "resp": "redis",
    "signals": "interrupts",
    "connections": "kept_connections",
    "exec": "kept_connections",
    "remembered": "etcd_round_trips",
    "free": "etcd_round_trips",
    "resent": "etcd_round_trips",
}
# Mutants whose names lead to no test that kills them, with the file that did in the
# run of 2026-12-05 (each took 7 to 10 minutes, its killer running near the end).
_KILLED_IN = {
    "fence-etcd-from-read-revision": "test_fence_holes",
    "fence-renewal-kept-beside-larger": "test_fence_holes",
    "fence-wild-read": "test_fence_holes",
    "fence-clock-not-passed": "test_fence_holes",
    "no-read-only-guard": "test_shared_folder",
    "windows-release-renames-first": "test_faults",
    "interrupt-after-commit": "test_interrupts",
    "lost-guard-kept": "test_interrupts",
    "etcd-change-interruptible": "test_interrupts",
    "etcd-change-not-held": "test_interrupts",
    "resp-loose-length": "test_fuzz",
    "etcd-never-vouches": "test_waking",
    "vouched-without-end": "test_waking",
    "renewal-waits-out-the-network": "test_lease_end",  # these two: killed by hand, 2026-12-06
    "work-stopped-at-the-lease-end": "test_lease_end",
    "lockfile-name-a-lock": "test_other_programs_files",
    "json-document-a-lock": "test_other_programs_files",
    "toml-document-a-lock": "test_other_programs_files",
    "renewal-counted-from-the-answer": "test_lease_end",
    "name-lookup-waited-out": "test_name_lookup",
    "held-exit-waits-for-renewal": "test_held",
    "late-renewal-writes": "test_held",
    "sleep-waits-past-a-wake": "test_machine_sleep",
    "sleep-socket-waits-past-a-wake": "test_machine_sleep",
    "sleep-uncounted": "test_machine_sleep",
    "redis-beat-on-a-spent-step": "test_serve",
    "marked-json-a-lock": "test_other_programs_files",
    "late-renewal-kept": "test_held",
    "serve-holds-judged-by-last-renewal": "test_serve",
    "parts-stale-own-retaken": "test_parts_holds",
    "parts-every-waiter-in-the-way": "test_parts_holds",
    "parts-line-by-any-waiter": "test_parts_holds",
    "parts-grow-unchecked": "test_parts_holds",
    "parts-grow-waits": "test_parts_holds",
    "parts-kept-changed": "test_parts_holds",
    "parts-renewal-new-fence": "test_parts_holds",
    "parts-record-unbounded": "test_parts_holds",
    "parts-overlap-by-text": "test_parts_holds",
    "serve-kept-place-any-parts": "test_serve_parts",
    "serve-kept-place-parts-by-spelling": "test_serve_parts",
    "serve-check-paths-unbounded": "test_serve_parts",
    "serve-holds-without-parts": "test_serve_parts",
}


def _ordered(name: str) -> list[str]:
    """The test files, the slow ones (real processes, servers) last, so that -x stops
    sooner; first of all, those the mutant's name names (``etcd-...``: test_etcd.py),
    where its bug is likeliest to show: an etcd mutant took 7 to 9 minutes when its
    store's tests ran near the end. A mutant of ``_KILLED_IN`` runs its killer first
    too."""
    slow = (
        "test_etcd",
        "test_interrupts",
        "test_processes",
        "test_shared_folder",
        "test_run",
        "test_held",
        "test_fuzz",
    )
    named = {"test_" + _SHOWS_IN.get(word, word) for word in name.split("-")}
    if name in _KILLED_IN:
        named.add(_KILLED_IN[name])
    files = sorted((ROOT / "tests").glob("test_*.py"))
    return [
        str(f) for f in sorted(files, key=lambda f: (f.stem not in named, f.stem.startswith(slow)))
    ]


def _applied(old: str, new: str, package: Path) -> str | None:
    """Plant the mutant in the copy of the modules at ``package``: None once done, else
    why it does not apply (its text must stand exactly once in all the modules)."""
    found = [p for p in sorted(package.glob("*.py")) if old in p.read_text(encoding="utf-8")]
    count = sum(p.read_text(encoding="utf-8").count(old) for p in found)
    if count != 1:
        return f"does not apply ({count} places; update tools/mutate.py)"
    (path,) = found
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return None


def _killed_by(proc: subprocess.CompletedProcess[str]) -> str:
    """The verdict "killed by" the first test that failed, as pytest's summary names it:
    which test proves the rule tells whether the mutant still tests what its name says."""
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("FAILED", "ERROR") and rest:
            test = rest.split(" - ", 1)[0]
            return f"killed by {test.removeprefix(str(ROOT) + os.sep)}"
    return f"killed (pytest exit {proc.returncode})"


def _run(name: str, timeout: float, tests: list[str] | None) -> tuple[str, str, float]:
    _, old, new = MUTANTS[name]
    with tempfile.TemporaryDirectory(prefix=f"skf-mutant-{name}-") as folder:
        package = Path(folder) / "skf_run_lock"
        shutil.copytree(PACKAGE, package)
        why = _applied(old, new, package)
        if why is not None:
            return name, why, 0.0
        try:
            text = bundle.built_text(package)
            # The carried modules too: they are text in the built file.
            for module in package.glob("*.py"):
                compile(module.read_text(encoding="utf-8"), str(module), "exec")
        except (SyntaxError, bundle.BuildError):
            return name, "does not compile (update tools/mutate.py)", 0.0
        mutant = Path(folder) / "skf-run-lock.py"
        mutant.write_text(text, encoding="utf-8")
        started = time.monotonic()
        env = {
            **os.environ,
            "SKF_RUN_LOCK_UNDER_TEST": str(mutant),
            "SKF_RUN_LOCK_PACKAGE_UNDER_TEST": str(package),
        }
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-x",
            "-q",
            "-n",
            "0",  # one process, in the order given: the likely killer first
            "-p",
            "no:cacheprovider",
            *(tests or _ordered(name)),
        ]
        try:
            proc = subprocess.run(
                argv,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            verdict = "survived" if proc.returncode == 0 else _killed_by(proc)
        except subprocess.TimeoutExpired:
            # A mutant that makes a test hang is killed by that test's own time limit
            # (pytest-timeout); a suite cut off as a whole proved nothing either way.
            verdict = "not told (the suite outran --timeout)"
    return name, verdict, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="suites run at once (default 2)")
    # The whole suite takes about 9 minutes alone, longer beside another: a survivor
    # runs all of it, and must be let finish to be told from a kill.
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per suite run")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    # A new test is checked against its mutant in seconds, not the suite's minutes; only
    # the whole suite's verdict counts for the score.
    parser.add_argument(
        "--tests", nargs="+", metavar="TEST", help="run only these tests (default: the suite)"
    )
    args = parser.parse_args()
    if args.list:
        for name, (rule, _, _) in MUTANTS.items():
            print(f"{name:32} {rule}")
        return 0
    names = args.names or list(MUTANTS)
    unknown = [name for name in names if name not in MUTANTS]
    if unknown:
        parser.error(f"unknown mutants: {', '.join(unknown)}")
    # Each verdict is told as it lands, so that a run stopped early keeps what it found.
    with ThreadPoolExecutor(args.jobs) as pool:
        running = [pool.submit(_run, name, args.timeout, args.tests) for name in names]
        for done, future in enumerate(as_completed(running), 1):
            name, verdict, seconds = future.result()
            print(f"{done}/{len(names)} {name}: {verdict} ({seconds:.0f} s)", file=sys.stderr)
        results = [future.result() for future in running]
    killed = [r for r in results if r[1].startswith("killed")]
    print("| mutant | rule it breaks | verdict | seconds |\n|---|---|---|---|")
    for name, verdict, seconds in results:
        print(f"| {name} | {MUTANTS[name][0]} | {verdict} | {seconds:.0f} |")
    survivors = [r[0] for r in results if not r[1].startswith("killed")]
    print(f"\nscore: {len(killed)}/{len(results)} killed")
    unexplained = [name for name in survivors if name not in EQUIVALENT]
    for name in survivors:
        print(f"survivor {name}: {EQUIVALENT.get(name, 'NOT ACCOUNTED FOR')}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
