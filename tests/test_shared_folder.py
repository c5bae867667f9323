"""Shared folders: two real users (root and nobody, in forked children) share one lock.

The folder is set up as the README says: group-writable, setgid, no sticky bit.
Each user is a forked child that switches its real and effective ids for good
before it touches the lock, and reports back through a pipe.
"""

from __future__ import annotations

import json
import os
import random  # noqa: F401 - imported before the fork: nobody cannot read this Python's lib
import shlex  # noqa: F401 - likewise (a refusal's message imports it)
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from calls import root_only
from lockfiles import beside, read_json
from wrapped import WrappedPlatform, WrappedStore, follow_rules, wrap_stores

NOBODY = 65534
NOGROUP = 65534

# What a forked child runs: fn(say, wait_for_go), its return value sent back as JSON.
Say = Callable[[str], None]
Go = Callable[[], None]
Child = Callable[[Say, Go], Any]

pytestmark = root_only("POSIX users, groups and fork: switching users")


class User:
    """A forked child running as ``uid``/``gid``: ``run(fn)`` starts it, ``result()`` waits."""

    def __init__(self, uid: int, gid: int) -> None:
        self.uid, self.gid = uid, gid
        self.pid = -1
        self.go_write = self.out_read = -1

    def run(self, fn: Child) -> User:
        """Fork; in the child, switch user, then ``fn(say, wait_for_go)``; its return value
        (JSON) is the child's last message."""
        go_read, self.go_write = os.pipe()
        self.out_read, out_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child never returns
            code = 1
            try:
                os.close(self.go_write)
                os.close(self.out_read)
                os.setgroups([])
                os.setgid(self.gid)
                os.setuid(self.uid)
                os.umask(0o002)

                def say(word: str) -> None:
                    os.write(out_write, (word + "\n").encode())

                def wait_for_go() -> None:
                    os.read(go_read, 1)

                say(json.dumps(fn(say, wait_for_go)))
                code = 0
            except BaseException as exc:
                os.write(out_write, f"ERROR {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(code)
        os.close(go_read)
        os.close(out_write)
        self.lines = os.fdopen(self.out_read, "r")
        return self

    def heard(self) -> str:
        return self.lines.readline().rstrip("\n")

    def go(self) -> None:
        os.write(self.go_write, b"g")

    def result(self, skip: str | None = None) -> Any:
        """The child's last message (its return value), after any ``skip`` lines."""
        while (line := self.heard()) == skip:
            pass
        assert not line.startswith("ERROR"), f"uid {self.uid}: {line}"
        _, status = os.waitpid(self.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        self.lines.close()
        os.close(self.go_write)
        return json.loads(line)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder set up for several users: group nogroup, mode 2775 (no sticky bit)."""
    top = Path(tempfile.mkdtemp(prefix="skf-shared-"))
    try:
        top.chmod(0o755)
        folder = top / "locks"
        folder.mkdir()
        os.chown(folder, 0, NOGROUP)
        folder.chmod(0o2775)
        yield folder
    finally:
        shutil.rmtree(top)


def test_a_guard_made_by_another_user_makes_a_call_wait_not_fail(
    skf: ModuleType, shared: Path
) -> None:
    """Root holds the guard it created (mode 0644); nobody waits for it, then takes the lock."""
    lock = shared / "run.lock"

    def hold_guard(say: Say, wait_for_go: Go) -> object:
        os.umask(0o022)  # the first user's guard is not writable by others
        with skf._Guard(lock):
            say("held")
            wait_for_go()
        return "dropped"

    def take(say: Say, wait_for_go: Go) -> object:
        class Told(WrappedPlatform):
            def try_lock(self, fd: int) -> bool:
                locked = bool(self.real.try_lock(fd))
                if not locked:
                    say("blocked")  # it opened root's guard and found it held: it waits
                return locked

        # In this child, never undone.
        follow_rules(skf, pytest.MonkeyPatch(), Told(skf._SEAMS.platform))
        return skf.acquire(lock, "user:nobody:1", 60.0)

    root = User(0, 0).run(hold_guard)
    assert root.heard() == "held"
    assert oct(os.stat(str(lock) + ".skf-guard").st_mode & 0o777) == "0o644"
    nobody = User(NOBODY, NOGROUP).run(take)
    assert nobody.heard() == "blocked"
    root.go()
    assert root.result() == "dropped"
    taken = nobody.result(skip="blocked")  # it may find the guard held more than once
    assert taken["acquired"] is True and taken["owner"] == "user:nobody:1"
    assert read_json(lock)["owner"] == "user:nobody:1"
    assert os.stat(lock).st_uid == NOBODY
    assert beside(lock) == ["run.lock"]


def test_a_lock_is_handed_over_between_two_users_both_ways(skf: ModuleType, shared: Path) -> None:
    lock = shared / "run.lock"

    def hold_then_release(owner: str) -> Child:
        def run(say: Say, wait_for_go: Go) -> object:
            taken = skf.acquire(lock, owner, 600.0)
            say("held" if taken["acquired"] else "refused")
            wait_for_go()
            return skf.release(lock, owner)

        return run

    def wait_for_it(owner: str) -> Child:
        def run(say: Say, wait_for_go: Go) -> object:
            class Told(WrappedStore):
                def join(self, look: Any, place: Any, now: float) -> None:
                    self.real.join(look, place, now)
                    say("refused")  # the other user's lock was read and kept: it waits

            wrap_stores(skf, pytest.MonkeyPatch(), Told)  # in this child, never undone
            return skf.acquire_within(lock, owner, 600.0, 60.0)

        return run

    def release_as(owner: str) -> Child:
        def run(say: Say, wait_for_go: Go) -> object:
            return skf.release(lock, owner)

        return run

    for first, second in [((0, 0), (NOBODY, NOGROUP)), ((NOBODY, NOGROUP), (0, 0))]:
        holder_owner, waiter_owner = f"user:{first[0]}:run", f"user:{second[0]}:run"
        holder = User(*first).run(hold_then_release(holder_owner))
        assert holder.heard() == "held"
        waiter = User(*second).run(wait_for_it(waiter_owner))
        assert waiter.heard() == "refused"
        assert read_json(lock)["owner"] == holder_owner
        holder.go()
        assert holder.result()["released"] is True
        taken = waiter.result(skip="refused")
        assert taken["acquired"] is True and taken["owner"] == waiter_owner
        assert read_json(lock)["owner"] == waiter_owner
        assert os.stat(lock).st_uid == second[0]
        released = User(*second).run(release_as(waiter_owner))
        assert released.result()["released"] is True
        assert beside(lock) == []


def test_a_folder_the_user_cannot_write_is_exit_2_naming_it(skf: ModuleType, shared: Path) -> None:
    folder = shared / "root-only"
    folder.mkdir()
    folder.chmod(0o755)
    os.chown(folder, 0, 0)
    lock = folder / "run.lock"

    def call(say: Say, wait_for_go: Go) -> object:
        import io
        from contextlib import redirect_stderr, redirect_stdout

        err, out = io.StringIO(), io.StringIO()
        with redirect_stderr(err), redirect_stdout(out):
            code = skf.main(["acquire", "--lock", str(lock), "--owner", "user:nobody:1"])
        return [code, out.getvalue(), err.getvalue()]

    code, out, err = User(NOBODY, NOGROUP).run(call).result()
    assert (code, out) == (2, "")
    message = json.loads(err)["message"]
    assert f"the folder {folder} is not writable by this user" in message
    assert beside(lock) == []
