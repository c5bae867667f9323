"""What each kind of etcd request costs, through the gateway the script speaks to.

    uv run --group bench python bench/etcd_requests.py
    uv run --group bench python bench/etcd_requests.py --rounds 2000 --line 64
    uv run --group bench --with grpcio python bench/etcd_requests.py --grpc
    uv run --group bench python bench/etcd_requests.py --own

Each kind of request a lock sends (a read of the record alone, a read of the record
with a line of ``--line`` places, a transaction, a lease granted, kept alive and
revoked, a watch made on a new connection) is sent ``--rounds`` times in a row, one
at a time, to an etcd started here on loopback (and stopped by its process id). For
each kind the table gives, per request: the CPU etcd spent (read from
``/proc/PID/stat``), the CPU of the sending process, and the wall time. Summed over
the requests of a take (``bench/slots.py --count``), the first two columns are what
a take costs the machine.

With ``--grpc``, each kind is also sent to the same etcd by gRPC, as etcdctl speaks
to it (``grpcio``, which only this option needs, through ``uv run --with grpcio``;
the messages are encoded here by hand, a few fields each), and the table gives both
side by side: what etcd's JSON gateway costs etcd on each request, which is what a
transport of the script's own that spoke gRPC could save. A watch by gRPC is a new
stream on the one connection, not a new connection. (grpcio's sender CPU includes
its own threads; a client in Python would spend its CPU otherwise.)

With ``--own``, each kind is also sent by gRPC through ``bench/h2grpc.py``, a client on
the standard library alone (HTTP/2, HPACK and protocol buffers written here), each
answer taken apart as a look would need it: what a transport of the script's own
would cost etcd and the process that sends, beside the gateway.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import queue
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from h2grpc import Channel, message_fields, pb_field  # noqa: E402  (bench/h2grpc.py)
from proc import cpu_of, load_script, own_cpu  # noqa: E402  (bench/proc.py, beside this file)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def integer_field(message: bytes, number: int) -> int:
    """The integer field ``number`` of a protobuf ``message`` (its top level)."""
    for found, value in message_fields(message):
        if found == number and isinstance(value, int):
            return value
    raise KeyError(number)


def grpc_requests(key: bytes) -> tuple[bytes, bytes, bytes]:
    """The messages both gRPC clients send, as the gateway's: a RangeRequest of the
    record alone (key 1), one of the whole lock (range_end 2), and a TxnRequest of
    one put (success 2: RequestOp, whose request_put is 2: key 1, value 2)."""
    record = pb_field(1, key)
    whole = pb_field(1, key) + pb_field(2, key + b"\1")
    put = pb_field(2, pb_field(2, pb_field(1, b"other") + pb_field(2, b"v")))
    return record, whole, put


def grpc_kinds(target: str, key: bytes) -> tuple[list[Callable[[int], Any]], Any]:
    """The same kinds of request as the gateway's, sent by gRPC to ``target``
    (HOST:PORT) by grpcio, in the same order; and the channel, to close. Messages of
    etcd's rpc.proto beside grpc_requests': LeaseGrantRequest (TTL 1; the answer's ID
    is field 2), LeaseKeepAliveRequest and LeaseRevokeRequest (ID 1), WatchRequest
    (create_request 1: key 1)."""
    grpc = importlib.import_module("grpc")  # --grpc only (uv run --with grpcio)
    channel = grpc.insecure_channel(target)
    raw: dict[str, Any] = {"request_serializer": None, "response_deserializer": None}
    range_call = channel.unary_unary("/etcdserverpb.KV/Range", **raw)
    txn_call = channel.unary_unary("/etcdserverpb.KV/Txn", **raw)
    grant_call = channel.unary_unary("/etcdserverpb.Lease/LeaseGrant", **raw)
    revoke_call = channel.unary_unary("/etcdserverpb.Lease/LeaseRevoke", **raw)
    keepalive_call = channel.stream_stream("/etcdserverpb.Lease/LeaseKeepAlive", **raw)
    watch_call = channel.stream_stream("/etcdserverpb.Watch/Watch", **raw)
    leases: list[int] = []
    # One keep-alive stream for all its requests, as a client keeps one open.
    asks: queue.Queue[bytes] = queue.Queue()

    def asked() -> Iterator[bytes]:
        while True:
            yield asks.get()

    answers = keepalive_call(asked())

    def keepalive(n: int) -> None:
        asks.put(pb_field(1, leases[n]))
        next(answers)

    def watch(_: int) -> None:
        stream = watch_call(iter([pb_field(1, pb_field(1, key))]))
        next(stream)  # the answer that says the watch was made
        stream.cancel()

    record, whole, put = grpc_requests(key)
    sends: list[Callable[[int], Any]] = [
        lambda _: range_call(record),
        lambda _: range_call(whole),
        lambda _: txn_call(put),
        lambda _: leases.append(integer_field(grant_call(pb_field(1, 60)), 2)),
        keepalive,
        lambda n: revoke_call(pb_field(1, leases[n])),
        watch,
    ]
    return sends, channel


def kvs_of(range_answer: bytes) -> list[tuple[bytes, bytes, int, int]]:
    """The keys a RangeResponse carries (kvs, field 2), each as a look would need it:
    key (1), value (5), lease (6) and mod_revision (3) of etcd's KeyValue."""
    kvs = []
    for number, kv in message_fields(range_answer):
        if number == 2 and isinstance(kv, bytes):
            got = dict(message_fields(kv))
            key, value, lease, revision = (
                got.get(1, b""),
                got.get(5, b""),
                got.get(6, 0),
                got.get(3, 0),
            )
            assert isinstance(key, bytes) and isinstance(value, bytes)
            assert isinstance(lease, int) and isinstance(revision, int)
            kvs.append((key, value, lease, revision))
    return kvs


def own_kinds(target: str, key: bytes) -> tuple[list[Callable[[int], Any]], Channel]:
    """The same kinds of request as the gateway's, by gRPC through bench/h2grpc.py, a
    client on the standard library alone; each answer taken apart as a look would
    (a range's keys, a grant's ID). One connection; a watch is a new stream on it,
    cancelled once made; the keep-alives share one stream."""
    host, port = target.rsplit(":", 1)
    channel = Channel(host, int(port))
    leases: list[int] = []
    keepalive_stream: list[int] = []

    def keepalive(n: int) -> None:
        ask = pb_field(1, leases[n])
        if keepalive_stream:
            channel.send(keepalive_stream[0], ask)
        else:
            keepalive_stream.append(channel.open("/etcdserverpb.Lease/LeaseKeepAlive", ask))
        integer_field(channel.receive(keepalive_stream[0], 5.0), 3)  # the TTL

    def watch(_: int) -> None:
        stream = channel.open("/etcdserverpb.Watch/Watch", pb_field(1, pb_field(1, key)))
        channel.receive(stream, 5.0)  # the answer that says the watch was made
        channel.cancel(stream)

    def grant(_: int) -> None:
        answer = channel.call("/etcdserverpb.Lease/LeaseGrant", pb_field(1, 60))
        leases.append(integer_field(answer, 2))

    record, whole, put = grpc_requests(key)
    sends: list[Callable[[int], Any]] = [
        lambda _: kvs_of(channel.call("/etcdserverpb.KV/Range", record)),
        lambda _: kvs_of(channel.call("/etcdserverpb.KV/Range", whole)),
        lambda _: channel.call("/etcdserverpb.KV/Txn", put),
        grant,
        keepalive,
        lambda n: channel.call("/etcdserverpb.Lease/LeaseRevoke", pb_field(1, leases[n])),
        watch,
    ]
    return sends, channel


def cost(pid: int, send: Callable[[int], Any], rounds: int) -> tuple[float, float, float]:
    """Milliseconds per request of ``send``, sent ``rounds`` times: the CPU etcd (process
    ``pid``) spent, this process's CPU, and the wall time."""
    etcd_before, own_before = cpu_of(pid), own_cpu()
    started = time.perf_counter()
    for n in range(rounds):
        send(n)
    wall = time.perf_counter() - started
    each = 1000 / rounds
    return (cpu_of(pid) - etcd_before) * each, (own_cpu() - own_before) * each, wall * each


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1000, help="requests of each kind")
    parser.add_argument("--line", type=int, default=64, help="places in the line read")
    parser.add_argument("--grpc", action="store_true", help="each kind by gRPC too (needs grpcio)")
    parser.add_argument(
        "--own", action="store_true", help="each kind by bench/h2grpc.py's gRPC too (stdlib only)"
    )
    options = parser.parse_args()

    from servers import start_etcd

    skf = load_script()
    skf._compile_carried("etcd_store")

    etcd = start_etcd(Path(tempfile.mkdtemp(prefix="skf-etcd-requests-")) / "etcd")
    try:
        address = etcd.url("bench")
        gateway = skf._EtcdStore(address)

        def post(path: str, body: dict[str, Any]) -> Any:
            """One request, with the time a call's step gives it (as each call has)."""
            gateway.next_step()
            return gateway.post(path, body)

        key = b"bench"
        # A record of one holder and a line of places, as a lock in use has.
        post("/v3/kv/put", {"key": b64(key), "value": b64(b'{"owner": "wf:sk:1"}')})
        for n in range(options.line):
            place = b'{"owner": "wf:sk:%d", "since": "2026-12-03T00:00:00Z"}' % n
            post("/v3/kv/put", {"key": b64(key + b"\0wait\0%d" % n), "value": b64(place)})
        leases: list[str] = []

        def grant(_: int) -> None:
            leases.append(post("/v3/lease/grant", {"TTL": "60"})["ID"])

        def watch(_: int) -> None:
            watcher = skf._EtcdStore(address)
            watcher._watch(time.monotonic() + 5, (key, None))
            watcher.close()

        whole = {"key": b64(key), "range_end": b64(key + b"\1")}
        put = {"request_put": {"key": b64(b"other"), "value": b64(b"v")}}
        kinds: list[tuple[str, Callable[[int], Any]]] = [
            ("range: the record", lambda _: post("/v3/kv/range", {"key": b64(key)})),
            (f"range: and {options.line} places", lambda _: post("/v3/kv/range", whole)),
            ("txn: one put", lambda _: post("/v3/kv/txn", {"success": [put]})),
            ("lease grant", grant),
            ("lease keepalive", lambda n: post("/v3/lease/keepalive", {"ID": leases[n]})),
            ("lease revoke", lambda n: post("/v3/lease/revoke", {"ID": leases[n]})),
            ("watch, on a new connection", watch),
        ]
        # Each transport's sends, the gateway's first, in the order of ``kinds``.
        transports: list[tuple[str, list[Callable[[int], Any]]]] = [
            ("gateway", [send for _, send in kinds])
        ]
        closing: list[Any] = []
        if options.grpc:
            grpc_sends, grpc_channel = grpc_kinds(etcd.client, key)
            transports.append(("gRPC", grpc_sends))
            closing.append(grpc_channel)
        if options.own:
            own_sends, own_channel = own_kinds(etcd.client, key)
            transports.append(("own gRPC", own_sends))
            closing.append(own_channel)
        names = [name for name, _ in transports]
        print(
            f"# etcd, {options.rounds} requests of each kind, one at a time, by:", ", ".join(names)
        )
        if len(transports) == 1:
            print("| request | etcd CPU | sender CPU | wall |")
            print("|---|---|---|---|")
        else:
            figures = ("etcd CPU", "sender CPU", "wall")
            heads = [f"{figure}: {name}" for figure in figures for name in names]
            print("| request | " + " | ".join(heads) + " |")
            print("|---|" + "---|" * len(heads))
        for n, (name, _) in enumerate(kinds):
            spent = [cost(etcd.proc.pid, sends[n], options.rounds) for _, sends in transports]
            # Each figure by every transport side by side: etcd's CPU, the sender's, wall.
            cells = [f"{by[figure]:.2f} ms" for figure in range(3) for by in spent]
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        for channel in closing:
            channel.close()
        gateway.close()
    finally:
        etcd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
