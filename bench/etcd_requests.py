"""What each kind of etcd request costs, through the gateway the script speaks to.

    uv run --group bench python bench/etcd_requests.py
    uv run --group bench python bench/etcd_requests.py --rounds 2000 --line 64

Each kind of request a lock sends (a read of the record alone, a read of the record
with a line of ``--line`` places, a transaction, a lease granted, kept alive and
revoked, a watch made on a new connection) is sent ``--rounds`` times in a row, one
at a time, to an etcd started here on loopback (and stopped by its process id). For
each kind the table gives, per request: the CPU etcd spent (read from
``/proc/PID/stat``), the CPU of the sending process, and the wall time. Summed over
the requests of a take (``bench/slots.py --count``), the first two columns are what
a take costs the machine.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from proc import cpu_of, load_script  # noqa: E402  (bench/proc.py, beside this file)


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="requests of each kind")
    parser.add_argument("--line", type=int, default=64, help="places in the line read")
    options = parser.parse_args()

    from servers import start_etcd

    skf = load_script()
    skf._compile_carried("etcd_store")

    etcd = start_etcd(Path(tempfile.mkdtemp(prefix="skf-etcd-requests-")) / "etcd")
    try:
        address = etcd.url("bench")
        store = skf._EtcdStore(address)
        key = b"bench"
        # A record of one holder and a line of places, as a lock in use has.
        store.post("/v3/kv/put", {"key": b64(key), "value": b64(b'{"owner": "wf:sk:1"}')})
        for n in range(options.line):
            place = b'{"owner": "wf:sk:%d", "since": "2026-12-03T00:00:00Z"}' % n
            store.post("/v3/kv/put", {"key": b64(key + b"\0wait\0%d" % n), "value": b64(place)})
        leases: list[str] = []

        def grant(_: int) -> None:
            leases.append(store.post("/v3/lease/grant", {"TTL": "60"})["ID"])

        def watch(_: int) -> None:
            watcher = skf._EtcdStore(address)
            watcher._watch(time.monotonic() + 5, (key, None))
            watcher.close()

        whole = {"key": b64(key), "range_end": b64(key + b"\1")}
        put = {"request_put": {"key": b64(b"other"), "value": b64(b"v")}}
        kinds: list[tuple[str, Callable[[int], Any]]] = [
            ("range: the record", lambda _: store.post("/v3/kv/range", {"key": b64(key)})),
            (f"range: and {options.line} places", lambda _: store.post("/v3/kv/range", whole)),
            ("txn: one put", lambda _: store.post("/v3/kv/txn", {"success": [put]})),
            ("lease grant", grant),
            ("lease keepalive", lambda n: store.post("/v3/lease/keepalive", {"ID": leases[n]})),
            ("lease revoke", lambda n: store.post("/v3/lease/revoke", {"ID": leases[n]})),
            ("watch, on a new connection", watch),
        ]
        print(f"# etcd through its gateway, {options.rounds} requests of each kind, one at a time")
        print("| request | etcd CPU | sender CPU | wall |")
        print("|---|---|---|---|")
        for name, send in kinds:
            etcd_before, own_before = cpu_of(etcd.proc.pid), own_cpu()
            started = time.perf_counter()
            for n in range(options.rounds):
                send(n)
            wall = time.perf_counter() - started
            etcd_spent = cpu_of(etcd.proc.pid) - etcd_before
            own_spent = own_cpu() - own_before
            each = 1000 / options.rounds
            print(
                f"| {name} | {etcd_spent * each:.2f} ms | {own_spent * each:.2f} ms"
                f" | {wall * each:.2f} ms |",
                flush=True,
            )
        store.close()
    finally:
        etcd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
