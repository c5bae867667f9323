"""A look at a file lock's line: what reading and writing the line of waiters costs
one waiter, by the number of places in it; this build beside another, in one run.

    uv run --group bench python bench/line.py
    uv run --group bench python bench/line.py --against /tmp/old/skf-run-lock.py

A waiter reads the line (up to its own place) at every look, and at 64 waiters its
looks are the largest part of what waiting costs (docs/performance.md). Four cases
over a whole line, each in microseconds per line: a look at a line whose every place
the process has read before (most looks), a look at a line in which one place has
changed (a beat), a read of a line whose every place is new to the process (as a
change under the guard reads it after a wait: the places behind the waiter joined
while it waited), and writing the line (a change under the guard). A fifth case is
Redis's: a look's answers read off its connection (the record, its expiry, the last
holder's, the line's tickets and the server's time, then the values of the places),
as every look and read of a Redis lock reads them; and etcd's: the keys of a range of
the whole lock (the record, the last holder's, 4 slots' keys and the places, in
etcd's JSON, base64) taken apart into a look. A last row reads a record of 4 slots,
as every look and change does. The builds take turns,
``--rounds`` times, and the table gives each one's median and the ratio of this build
to the other.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import time
from pathlib import Path
from typing import Any

from proc import SCRIPT, load_script


def places_of(skf: Any, count: int) -> list[Any]:
    now = time.time()
    return [
        skf._Place(os.urandom(4).hex(), f"bench:p{n}:{n}", int(now), 60.0, now + n / 1000)
        for n in range(count)
    ]


def costs(skf: Any, places: list[Any], repeat: int) -> dict[str, float]:
    """One round: each case ``repeat`` times, in microseconds per line."""
    data = skf._line_bytes(places)
    skf._parse_line(data)  # every place seen once, as by an earlier look
    started = time.perf_counter()
    for _ in range(repeat):
        skf._parse_line(data)
    seen = (time.perf_counter() - started) / repeat * 1e6
    changed = 0.0
    for n in range(repeat):
        places[n % len(places)].beat += 0.001  # one beat since the last look
        beaten = skf._line_bytes(places)
        started = time.perf_counter()
        skf._parse_line(beaten)
        changed += time.perf_counter() - started
    fresh = [skf._line_bytes(places_of(skf, len(places))) for _ in range(repeat)]
    started = time.perf_counter()
    for data in fresh:
        skf._parse_line(data)
    new = (time.perf_counter() - started) / repeat * 1e6
    started = time.perf_counter()
    for _ in range(repeat):
        skf._line_bytes(places)
    written = (time.perf_counter() - started) / repeat * 1e6
    return {"seen": seen, "one changed": changed / repeat * 1e6, "all new": new, "written": written}


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(data), data)


def redis_cost(skf: Any, places: list[Any], repeat: int) -> float:
    """A Redis look's answers read off the connection, in microseconds per look."""
    skf._compile_carried("redis_store")  # and the modules it needs: resp, server_store
    connection_class = skf._RespConnection
    record = _bulk(skf._bytes_of(four_slots(skf)))
    tickets = b"".join(_bulk(place.ticket.encode()) for place in places)
    place_value = skf._place_value
    values = b"".join(_bulk(place_value(place)) for place in places)
    reads = record + b":59000\r\n" + record + b"*%d\r\n%b" % (len(places), tickets)
    reads += b"*2\r\n" + _bulk(b"1764878400") + _bulk(b"123456")
    values = b"*%d\r\n%b" % (len(places), values)
    connection = object.__new__(connection_class)
    started = time.perf_counter()
    for _ in range(repeat):
        connection.received = bytearray(reads)
        for _ in range(5):
            connection.answer(0.0)
        connection.received = bytearray(values)
        connection.answer(0.0)
    return (time.perf_counter() - started) / repeat * 1e6


def four_slots(skf: Any) -> Any:
    """A record of 4 slots, all held."""
    now = int(time.time())
    record = skf._Record("4 slots", now)
    record.slots = 4
    record.holders = [skf._Record(f"bench:p{n}:{n}", now - n, 60.0) for n in range(4)]
    return record


def etcd_cost(skf: Any, places: list[Any], repeat: int) -> float:
    """A range of a whole etcd lock taken apart into a look, in microseconds."""
    skf._compile_carried("etcd_store")
    looked = skf._looked
    place_value = skf._place_value
    key = b"locks/bench"
    record = four_slots(skf)
    for n, holder in enumerate(record.holders):
        holder.mark = str(7000 + n)
    data = skf._bytes_of(record)

    def kv(name: bytes, value: bytes, lease: str | None, revision: int) -> dict[str, Any]:
        entry = {"key": _b64(name), "value": _b64(value), "mod_revision": str(revision)}
        entry["create_revision"] = str(revision)
        if lease is not None:
            entry["lease"] = lease
        return entry

    kvs = [kv(key, data, "999", 1), kv(key + b"\0last", data, None, 1)]
    kvs += [kv(key + b"\0slot\0" + h.mark.encode(), b"x", h.mark, 2) for h in record.holders]
    for n, place in enumerate(places):
        lease = str(8000 + n)
        value = place_value(place)
        kvs.append(kv(key + b"\0wait\0" + lease.encode(), value, lease, 100 + n))
    started = time.perf_counter()
    for _ in range(repeat):
        looked(key, kvs, "1400")
    return (time.perf_counter() - started) / repeat * 1e6


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def record_cost(skf: Any, repeat: int) -> float:
    """A record of 4 slots read from its bytes, in microseconds."""
    now = int(time.time())
    data = skf._bytes_of(four_slots(skf))
    started = time.perf_counter()
    for _ in range(repeat):
        skf._parse_record(data, now)
    return (time.perf_counter() - started) / repeat * 1e6


def compared(median: dict[str, float]) -> tuple[str, str, str]:
    """This build's median, the other's, and their ratio, as table cells."""
    other = median.get("other")
    shown = "-" if other is None else f"{other:.1f} us"
    ratio = "-" if other is None else f"{median['this'] / other:.2f}x"
    return f"{median['this']:.1f} us", shown, ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, help="another build of skf-run-lock.py")
    parser.add_argument("--places", default="16,64,256")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=300)
    options = parser.parse_args()
    builds = {"this": load_script("skf_line_this")}
    if options.against is not None:
        builds["other"] = load_script("skf_line_other", options.against.resolve())
    print(f"# this: {SCRIPT.name}; other: {options.against or '-'}")
    print("| places | case | this | other | this / other |")
    print("|---|---|---|---|---|")
    for count in map(int, options.places.split(",")):
        lines = {name: places_of(skf, count) for name, skf in builds.items()}
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
        for _ in range(options.rounds):
            for name, skf in builds.items():
                cost = costs(skf, lines[name], options.repeat)
                cost["Redis: a look's answers read"] = redis_cost(skf, lines[name], options.repeat)
                cost["etcd: a range taken apart"] = etcd_cost(skf, lines[name], options.repeat)
                rounds[name].append(cost)
        for case in (
            "seen",
            "one changed",
            "all new",
            "written",
            "Redis: a look's answers read",
            "etcd: a range taken apart",
        ):
            median = {name: statistics.median(r[case] for r in rounds[name]) for name in builds}
            this, other, ratio = compared(median)
            print(f"| {count} | {case} | {this} | {other} | {ratio} |")
    records: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(options.rounds):
        for name, skf in builds.items():
            records[name].append(record_cost(skf, options.repeat))
    this, other, ratio = compared({name: statistics.median(records[name]) for name in builds})
    print(f"| - | a record of 4 slots | {this} | {other} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
