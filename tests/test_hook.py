"""The README's pre-commit hook, installed as printed in real git repositories and run
by git under bash and dash: a commit that writes in a part of the lock another live
run holds is refused, naming the holder and the part; one that writes only free paths,
or the committer's own parts, goes in; a rename out of a reserved folder is refused; a
lock that cannot be read refuses the commit; with no lock named the hook says nothing.
Every refusal is one line on stderr, and the commit is not made."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from calls import Run, needs_system_tool, posix_only
from loader import ROOT, SCRIPT
from servers import free_port
from stores import StoreUnderTest

pytestmark = [posix_only("runs git's hooks in a POSIX shell"), pytest.mark.timeout(120)]

SECTION = "### A commit into another run's part is refused"
SHELLS = pytest.mark.parametrize("shell", ["bash", "dash"])


def readme_blocks(after: str) -> list[str]:
    """The README's shell blocks from the heading ``after`` to the next heading of its
    level or above, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split(after + "\n", 1)[1]
    text = text.split("\n## ", 1)[0].split("\n### ", 1)[0]
    return [part.split("```", 1)[0] for part in text.split("```sh\n")[1:]]


def hook_text() -> str:
    """The hook as the README prints it."""
    [hook] = [block for block in readme_blocks(SECTION) if block.startswith("#!/bin/sh\n")]
    return hook


def setup_lines() -> str:
    """The README's lines that name the tree's lock and the command for the hook."""
    return readme_blocks(SECTION)[0]


def shell_path(name: str) -> str:
    if name == "dash":
        return needs_system_tool("dash", "Debian: apt-get install dash")
    found = shutil.which(name)
    assert found is not None
    return found


@dataclass
class Tree:
    """A git repository with the README's hook installed, run by ``shell``; ``home`` is
    the user's home folder, ``bin`` a folder on PATH (a python3 that runs the tests'
    Python, and what a test puts there)."""

    repo: Path
    home: Path
    bin: Path
    shell: str
    env: dict[str, str]

    def run(self, argv: list[str], **more_env: str) -> Run:
        done = subprocess.run(
            argv,
            cwd=self.repo,
            env={**self.env, **more_env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    def git(self, *args: str, **more_env: str) -> Run:
        return self.run(["git", *args], **more_env)

    def sh(self, script: str, **more_env: str) -> Run:
        """``script`` in the tree's shell, in the repository."""
        return self.run([self.shell, "-c", script], **more_env)

    def write(self, path: str, text: str) -> None:
        file = self.repo / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")

    def commit(self, *paths: str, **more_env: str) -> Run:
        """Change each of ``paths``, stage them and commit: git's outcome."""
        for path in paths:
            file = self.repo / path
            before = file.read_text(encoding="utf-8") if file.exists() else ""
            self.write(path, before + "one more line\n")
        added = self.git("add", "--", *paths)
        assert added.code == 0, added
        return self.git("commit", "-q", "-m", "a change", **more_env)

    def commits(self) -> int:
        return int(self.git("rev-list", "--count", "HEAD").out)

    def install_command(self) -> None:
        """The command skf-run-lock on PATH, as uv tool install gives it."""
        installed = self.bin / "skf-run-lock"
        installed.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SCRIPT}" "$@"\n')
        installed.chmod(0o755)

    def set_up_as_the_readme_says(self) -> str:
        """The README's set-up lines run as printed (a copy of the file in ~/bin); the
        lock they name."""
        (self.home / "bin").mkdir(exist_ok=True)
        shutil.copy(SCRIPT, self.home / "bin" / "skf-run-lock.py")
        done = self.sh(setup_lines())
        assert done.code == 0 and done.err == "", done
        return self.git("config", "skf-run-lock.lock").out.strip()


@pytest.fixture(params=["bash", "dash"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Tree:
    return make_tree(tmp_path, request.param)


def make_tree(tmp_path: Path, shell: str) -> Tree:
    """A repository with a first commit (src/api/x.py, lib/y.py) and the hook installed,
    its first line naming ``shell``. Nothing of the user's git set-up or of a run's
    variables reaches it."""
    git = needs_system_tool("git", "Debian: apt-get install git")
    path = shell_path(shell)
    home, repo, bin_ = tmp_path / "home", tmp_path / "repo", tmp_path / "bin"
    for folder in (home, repo, bin_):
        folder.mkdir()
    python3 = bin_ / "python3"
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    places = [str(bin_), os.path.dirname(git), os.path.dirname(path), "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(dict.fromkeys(places)),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "A Run",
        "GIT_AUTHOR_EMAIL": "run@example.com",
        "GIT_COMMITTER_NAME": "A Run",
        "GIT_COMMITTER_EMAIL": "run@example.com",
        "LC_ALL": "C.UTF-8",
    }
    made = Tree(repo, home, bin_, path, env)
    assert made.git("init", "-q").code == 0
    hooks = Path(made.git("rev-parse", "--git-path", "hooks").out.strip())
    for name in ("pre-commit", "pre-merge-commit"):  # the same hook, as the README says
        hook = (repo / hooks / name) if not hooks.is_absolute() else hooks / name
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text(hook_text().replace("#!/bin/sh\n", f"#!{path}\n", 1), encoding="utf-8")
        hook.chmod(0o755)
    made.write("src/api/x.py", "x\n")
    made.write("lib/y.py", "y\n")
    first = made.commit("src/api/x.py", "lib/y.py")
    assert first.code == 0, first  # no lock named yet: nothing checked
    return made


def refusal(done: Run) -> str:
    """The one line a refused commit wrote on stderr."""
    assert done.code != 0 and done.out == "", done
    assert done.err.startswith("commit refused: ") and done.err.count("\n") == 1, done.err
    return done.err


def passed(done: Run) -> None:
    assert (done.code, done.out, done.err) == (0, "", ""), done


def take(
    cli: Callable[..., Run], lock: str, owner: str, *parts: str, more: tuple[str, ...] = ()
) -> str:
    """Another run's hold of ``parts``: its whole owner."""
    args = [arg for part in parts for arg in ("--part", part)]
    taken = cli("acquire", "--lock", lock, "--owner", owner, *args, *more, "--get", "owner")
    assert taken.code == 0, taken
    return taken.out.strip()


def test_the_readme_prints_the_hook_and_its_set_up() -> None:
    hook = hook_text()
    assert "--no-renames -z" in hook and "--null" in hook
    assert "git config skf-run-lock.lock" in setup_lines()


def test_a_commit_into_another_runs_part_is_refused_naming_the_holder_and_the_part(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    lock = tree.set_up_as_the_readme_says()
    other = take(cli, lock, "fix:api", "src/api", "docs/**/*.md")
    before = tree.commits()
    said = refusal(tree.commit("src/api/x.py", "lib/y.py"))
    assert f"src/api/x.py in {other}'s part src/api" in said
    assert "lib/y.py" not in said.split(": ", 2)[2]  # free, not named
    refused_md = refusal(tree.commit("docs/guide/a.md"))
    assert f"docs/guide/a.md in {other}'s part 'docs/**/*.md'" in refused_md
    tree.git("reset", "-q", "--hard")
    assert tree.commits() == before
    passed(tree.commit("lib/y.py", "docs/guide.txt"))
    assert tree.commits() == before + 1


def test_the_committers_own_parts_pass_under_its_owner_and_count_without_it(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    lock = tree.set_up_as_the_readme_says()
    mine = take(cli, lock, "fix:api", "src/api")
    other = take(cli, lock, "fix:lib", "lib")
    said = refusal(tree.commit("src/api/x.py"))  # no owner: every holder's parts count
    assert f"in {mine}'s part src/api" in said
    passed(tree.git("commit", "-q", "-m", "mine", SKF_RUN_LOCK_OWNER=mine))
    said = refusal(tree.commit("lib/y.py", SKF_RUN_LOCK_OWNER=mine))
    assert f"lib/y.py in {other}'s part lib" in said


def test_a_run_of_parts_commits_into_its_own_parts_and_not_into_anothers(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    """The README's run of parts, its command a commit: run sets SKF_RUN_LOCK and
    SKF_RUN_LOCK_OWNER, so the hook leaves its own parts out."""
    lock = tree.set_up_as_the_readme_says()
    [example] = readme_blocks("## Parts: runs side by side in one tree")
    assert example.endswith(" -- make api\n")
    other = take(cli, lock, "fix:lib", "lib")
    tree.write("src/api/x.py", "changed by the run\n")
    tree.write("lib/y.py", "changed by the run\n")
    assert tree.git("add", "src/api/x.py").code == 0
    uv = f'uv() {{ shift 2; python3 "{SCRIPT}" "$@"; }}\n'  # uv run skf-run-lock.py: this file
    ran = tree.sh(uv + example.replace("make api", "git commit -q -m 'in its own parts'"))
    assert (ran.code, ran.err) == (0, ""), ran
    assert tree.git("log", "-1", "--format=%s").out == "in its own parts\n"
    assert tree.git("add", "lib/y.py").code == 0
    ran = tree.sh(uv + example.replace("make api", "git commit -q -m 'into another part'"))
    assert ran.code == 1 and f"lib/y.py in {other}'s part lib" in refusal(ran)
    assert tree.git("log", "-1", "--format=%s").out == "in its own parts\n"


def test_a_part_gone_stale_refuses_nothing(tree: Tree, cli: Callable[..., Run]) -> None:
    """Refused while the other run's part is live; once its holder renewed it with a
    timeout of a second and let it go stale (its run gone, its hold still in the
    record), the same commit goes in."""
    lock = tree.set_up_as_the_readme_says()
    other = take(cli, lock, "fix:api", "src/api")
    assert f"in {other}'s part src/api" in refusal(tree.commit("src/api/x.py"))
    take(cli, lock, other, "src/api", more=("--stale-after", "1s"))
    deadline = time.monotonic() + 30
    while cli("check", "--lock", lock, "src/api/x.py").code != 0:
        assert time.monotonic() < deadline, "the part never went stale"
        time.sleep(0.1)
    seen = cli("status", "--lock", lock, "--get", "state", "--get", "held_by")
    assert seen.out == f"stale\n{other}\n", seen
    passed(tree.git("commit", "-q", "-m", "after it went stale"))


def test_a_rename_out_of_a_reserved_folder_is_refused(tree: Tree, cli: Callable[..., Run]) -> None:
    """git would list only the new name of a rename it detects; the hook lists both."""
    lock = tree.set_up_as_the_readme_says()
    other = take(cli, lock, "fix:api", "src/api")
    assert tree.git("mv", "src/api/x.py", "lib/x.py").code == 0
    detected = tree.git("diff", "--cached", "--name-only")
    assert detected.out == "lib/x.py\n"  # what the hook would see without --no-renames
    said = refusal(tree.git("commit", "-q", "-m", "move it out"))
    assert f"src/api/x.py in {other}'s part src/api" in said and "1 of the 2 paths" in said


def test_names_with_spaces_quotes_and_other_letters_are_checked(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    lock = tree.set_up_as_the_readme_says()
    other = take(cli, lock, "fix:docs", "données/été")
    name = 'données/été/a "quoted" name\'s ü.md'
    said = refusal(tree.commit(name))
    # Named whole, quoted as a POSIX shell reads it.
    assert f"{shlex.quote(name)} in {other}'s part {shlex.quote('données/été')}" in said
    tree.git("reset", "-q", "--hard")
    passed(tree.commit('données/autre/a "quoted" name\'s ü.md', "lib/x y.py"))


def test_a_lock_that_cannot_be_read_refuses_the_commit_saying_to_retry(tree: Tree) -> None:
    tree.set_up_as_the_readme_says()
    where = f"127.0.0.1:{free_port()}"  # nothing listens there: the connection is refused
    assert tree.git("config", "skf-run-lock.lock", f"redis://{where}/locks/site").code == 0
    before = tree.commits()
    said = refusal(tree.commit("lib/y.py"))
    assert said.startswith(
        f"commit refused: the lock could not be read or written: Redis at {where} refused"
    )
    assert said.endswith(
        "; commit again once the lock can be read (git commit --no-verify skips this"
        " check: only where no other run works in this tree)\n"
    )
    assert tree.commits() == before


def test_with_no_lock_named_the_hook_passes_silently(tree: Tree, cli: Callable[..., Run]) -> None:
    take(cli, str(tree.home / ".locks" / "site.lock"), "fix:api", "src/api")
    before = tree.commits()
    passed(tree.commit("src/api/x.py"))  # no git config, no SKF_RUN_LOCK
    assert tree.commits() == before + 1


def test_the_installed_command_is_used_and_a_missing_one_refuses(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    lock = tree.set_up_as_the_readme_says()
    assert tree.git("config", "--unset", "skf-run-lock.command").code == 0
    said = refusal(tree.commit("lib/y.py"))
    assert said.startswith("commit refused: skf-run-lock check ended with exit 127 (")
    assert said.endswith(
        "): is it installed, or git config skf-run-lock.command set to a command that runs it?\n"
    )
    tree.install_command()
    passed(tree.git("commit", "-q", "-m", "through the installed command"))
    other = take(cli, lock, "fix:api", "src/api")
    assert f"in {other}'s part src/api" in refusal(tree.commit("src/api/x.py"))


def test_an_owner_without_its_run_id_refuses_naming_where_it_comes_from(tree: Tree) -> None:
    tree.set_up_as_the_readme_says()
    said = refusal(tree.commit("lib/y.py", SKF_RUN_LOCK_OWNER="fix:api"))
    assert said.startswith("commit refused: check needs the whole owner with its run id")
    assert said.endswith(
        " (lock: git config skf-run-lock.lock, else SKF_RUN_LOCK; owner: SKF_RUN_LOCK_OWNER)\n"
    )


@SHELLS
def test_an_agent_exports_its_lock_and_owner_as_the_readme_says(
    shell: str, tmp_path: Path, cli: Callable[..., Run], store: StoreUnderTest
) -> None:
    """No lock named in git: the README's export line names it (the agent's lock and
    the owner its acquire answered), on every store."""
    tree = make_tree(tmp_path, shell)
    tree.install_command()
    mine = take(cli, store.lock, "fix:api", "src/api")
    other = take(cli, store.lock, "fix:lib", "lib")
    [export] = [b for b in readme_blocks(SECTION) if b.startswith("export SKF_RUN_LOCK=")]
    export = export.replace("/home/you/.locks/site.lock", store.lock)
    export = export.replace("fix:api:20261206T101500Z-3f9a1c2e", mine)
    tree.write("src/api/x.py", "by the agent\n")
    assert tree.git("add", "src/api/x.py").code == 0
    passed(tree.sh(export + "git commit -q -m 'its own part'\n"))
    tree.write("lib/y.py", "by the agent\n")
    assert tree.git("add", "lib/y.py").code == 0
    said = refusal(tree.sh(export + "git commit -q -m 'another part'\n"))
    assert f"lib/y.py in {other}'s part lib" in said
    assert tree.git("log", "-1", "--format=%s").out == "its own part\n"


def test_a_merge_commit_into_another_runs_part_is_refused(
    tree: Tree, cli: Callable[..., Run]
) -> None:
    """git merge runs no pre-commit hook (it runs pre-merge-commit): a merge that brings
    a change into another run's part is a commit into it all the same, and must be
    refused as the README's set-up installs the hook."""
    lock = tree.set_up_as_the_readme_says()
    main = tree.git("branch", "--show-current").out.strip()
    assert tree.git("checkout", "-q", "-b", "side").code == 0
    passed(tree.commit("src/api/x.py"))  # made before anyone held src/api
    assert tree.git("checkout", "-q", main).code == 0
    passed(tree.commit("lib/y.py"))  # so that the merge is a commit of its own
    other = take(cli, lock, "fix:api", "src/api")
    before = tree.commits()
    merged = tree.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert tree.commits() == before, "the merge commit went into another run's part"
    assert f"src/api/x.py in {other}'s part src/api" in merged.err, merged
