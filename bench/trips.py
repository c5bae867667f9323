"""Round trips per call on etcd and Redis, this script beside another version of it.

    uv run python bench/trips.py baff3d7        # a git revision of this repository
    uv run python bench/trips.py path/to/other.py

Starts an etcd and a Redis (as the tests do), then counts, for each call of each
version, the requests it sends: etcd's HTTP requests (``_EtcdGateway.post``) and Redis's
round trips (``_RedisGateway.call``, one pipeline each; in a version older than the
gateways, the store's). A take now reads the server's
clock for its fence; this shows whether that costs a round trip.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import start_etcd, start_redis  # noqa: E402


def loaded(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._compile_carried("etcd_store")
    module._compile_carried("redis_store")
    return module


def other_script(spec: str, folder: Path) -> Path:
    if Path(spec).is_file():
        return Path(spec)
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{spec}:skf-run-lock.py"], capture_output=True, check=True
    ).stdout
    path = folder / "other.py"
    path.write_bytes(source)
    return path


def counted(owner: type, name: str, call: Callable[[], object]) -> int:
    """How many times ``call`` calls ``owner.name``."""
    real = getattr(owner, name)
    count = [0]

    def counting(self: object, *args: object, **kwargs: object) -> object:
        count[0] += 1
        return real(self, *args, **kwargs)

    setattr(owner, name, counting)
    try:
        call()
    finally:
        setattr(owner, name, real)
    return count[0]


def sender(skf: ModuleType, names: tuple[str, ...]) -> type:
    """The first of the classes ``names`` that this version of the script defines."""
    found: type = next(getattr(skf, name) for name in names if hasattr(skf, name))
    return found


def trips(skf: ModuleType, lock: str, sends: tuple[type, str]) -> list[int]:
    """Requests sent by: a take, a renewal, a refusal, status, a release."""
    owner, name = sends
    return [
        counted(owner, name, lambda: skf.acquire(lock, "b:t:1", 60.0)),
        counted(owner, name, lambda: skf.acquire(lock, "b:t:1", 60.0)),
        counted(owner, name, lambda: skf.acquire(lock, "b:t:2", 60.0)),
        counted(owner, name, lambda: skf.status(lock, 60.0)),
        counted(owner, name, lambda: skf.release(lock, "b:t:1")),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", help="a git revision, or the path of another copy")
    args = parser.parse_args()
    calls = ["take a free lock", "renew it", "refuse another owner", "status", "release"]
    with tempfile.TemporaryDirectory() as folder:
        versions = {
            args.other: loaded(other_script(args.other, Path(folder)), "other"),
            "this": loaded(ROOT / "skf-run-lock.py", "this"),
        }
        for server in ("etcd", "redis"):
            (Path(folder) / server).mkdir()
        etcd = start_etcd(Path(folder) / "etcd")
        redis = start_redis(Path(folder) / "redis")
        try:
            rows: dict[str, list[str]] = {call: [] for call in calls}
            for label, skf in versions.items():
                etcd_sends = sender(skf, ("_EtcdGateway", "_EtcdStore"))
                redis_sends = sender(skf, ("_RedisGateway", "_RedisStore"))
                on_etcd = trips(skf, etcd.url(f"trips/{label}"), (etcd_sends, "post"))
                on_redis = trips(skf, redis.url(f"trips/{label}"), (redis_sends, "call"))
                for call, e, r in zip(calls, on_etcd, on_redis, strict=True):
                    rows[call].append(f"{e} / {r}")
        finally:
            etcd.stop()
            redis.stop()
    print(f"| call (etcd / Redis) | {args.other} | this |\n|---|---|---|")
    for call, counts in rows.items():
        print(f"| {call} | {' | '.join(counts)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
