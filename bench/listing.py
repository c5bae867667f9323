"""How long ``list`` takes as the locks grow, on every store, side by side in one run.

Run from the repository root:

    uv run --group bench python bench/listing.py [--quick]

For 100, 1,000 and 10,000 locks (``--quick``: up to 1,000): a folder where they lie
among 20,000 other files (in ten subfolders), an etcd prefix and a Redis keyspace
(each lock with its record and its last holder's key, as ``acquire`` leaves them, the
etcd prefix beside as many keys of another prefix, the Redis one beside as many other
keys). Each is listed in-process (``list_locks``) and by the CLI (``python3
skf-run-lock.py list --under ...``); medians of three, the time per lock, and the
growth against 100 locks. Prints Markdown.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import PYTHON, SCRIPT, load_script, start_etcd, start_redis, table

OTHER_FILES = 20_000
ROUNDS = 3


def record(owner: str) -> bytes:
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    content = {"owner": owner, "acquired_at": since, "stale_after_seconds": 3600}
    return (json.dumps({**content, "tool": "skf-run-lock"}) + "\n").encode()


def fill_folder(folder: Path, locks: int) -> str:
    """``locks`` lock files and OTHER_FILES other files, across ten subfolders."""
    for i in range(10):
        (folder / f"sub{i}").mkdir(parents=True)
    for i in range(OTHER_FILES):
        (folder / f"sub{i % 10}" / f"other-{i}.txt").write_text("not a lock\n")
    for i in range(locks):
        (folder / f"sub{i % 10}" / f"lock-{i}.lock").write_bytes(record(f"wf:bench:{i}"))
    return str(folder)


def etcd_post(client: str, path: str, body: dict[str, object]) -> object:
    import urllib.request

    request = urllib.request.Request(f"http://{client}{path}", json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def fill_etcd(client: str, prefix: str, locks: int) -> str:
    """``locks`` locks (record and last holder) under ``prefix``, and as many keys of
    another prefix beside it; in transactions of 64 puts."""

    def put(key: bytes, value: bytes) -> dict[str, object]:
        encoded = {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}
        return {"request_put": encoded}

    puts = []
    for i in range(locks):
        key = f"{prefix}lock-{i}".encode()
        puts += [put(key, record(f"wf:bench:{i}")), put(key + b"\0last", record(f"wf:bench:{i}"))]
        puts.append(put(f"other/{prefix}{i}".encode(), b"not a lock"))
    for at in range(0, len(puts), 64):
        etcd_post(client, "/v3/kv/txn", {"success": puts[at : at + 64]})
    return f"etcd://{client}/{prefix}"


def fill_redis(where: str, prefix: str, locks: int) -> str:
    """``locks`` locks (record, expiring, and last holder) under ``prefix``, and as many
    other keys; pipelined."""
    import redis

    client = redis.Redis(port=int(where.rpartition(":")[2]))
    pipe = client.pipeline(transaction=False)
    for i in range(locks):
        key = f"{prefix}lock-{i}"
        pipe.set(key, record(f"wf:bench:{i}"), px=3_600_000)
        pipe.set("{" + key + "}\0last", record(f"wf:bench:{i}"))
        pipe.set(f"other/{prefix}{i}", b"not a lock")
    pipe.execute()
    return f"redis://{where}/{prefix}"


def median_time(call: Callable[[], object]) -> float:
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def cli_list(under: str, expected: int) -> None:
    done = subprocess.run(
        [PYTHON, str(SCRIPT), "list", "--under", under], capture_output=True, check=True
    )
    assert len(json.loads(done.stdout)["locks"]) == expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 1,000 locks")
    args = parser.parse_args()
    counts = [100, 1000] if args.quick else [100, 1000, 10_000]
    skf = load_script()
    rows = []
    with tempfile.TemporaryDirectory(prefix="skf-bench-list-") as tmp:
        folder = Path(tmp)
        etcd, client = start_etcd(folder)
        redis_server, where = start_redis(folder)
        try:
            for kind in ("file", "etcd", "redis"):
                base: dict[str, float] = {}
                for count in counts:
                    if kind == "file":
                        under = fill_folder(folder / f"locks-{count}", count)
                    elif kind == "etcd":
                        under = fill_etcd(client, f"bench-{count}/", count)
                    else:
                        under = fill_redis(where, f"bench-{count}/", count)
                    found = len(skf.list_locks(under)["locks"])
                    assert found == count, (kind, count, found)
                    inside = median_time(partial(skf.list_locks, under))
                    cli = median_time(partial(cli_list, under, count))
                    base.setdefault("inside", inside)
                    base.setdefault("cli", cli)
                    rows.append(
                        (
                            kind,
                            f"{count:,}",
                            f"{inside * 1000:.0f} ms",
                            f"{cli * 1000:.0f} ms",
                            f"{inside / count * 1e6:.0f} us",
                            f"{inside / base['inside']:.1f}x",
                            f"{cli / base['cli']:.1f}x",
                        )
                    )
        finally:
            etcd.kill()
            redis_server.kill()
    print("## list at scale\n")
    print(
        f"Folders: the locks among {OTHER_FILES:,} other files in ten subfolders; etcd and"
        " Redis: each lock's record and last holder's key, beside as many other keys."
        f" Medians of {ROUNDS}; growth against 100 locks.\n"
    )
    header = ("store", "locks", "list_locks", "CLI list", "per lock", "growth", "CLI growth")
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
