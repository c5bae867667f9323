"""bench/h2grpc.py, the gRPC client on the standard library that the bench measures
etcd's requests with (``bench/etcd_requests.py --own``): HPACK against RFC 7541's own
examples, protocol buffers' varints, calls to a real etcd, and the frames a server
may send, from a scripted peer (tests/h2peer.py)."""

from __future__ import annotations

import struct
import time

import pytest
from h2grpc import (  # bench/h2grpc.py: conftest.py puts bench/ on the path
    Channel,
    GrpcError,
    HpackDecoder,
    huffman_decoded,
    message_fields,
    pb_field,
    read_varint,
    varint,
)
from h2peer import ScriptedPeer, frame, frames_in, literal

# --- HPACK: RFC 7541, Appendix C ----------------------------------------------------


@pytest.mark.parametrize(
    ("coded", "text"),
    [
        ("f1e3c2e5f23a6ba0ab90f4ff", b"www.example.com"),  # C.4.1
        ("a8eb10649cbf", b"no-cache"),  # C.4.2
        ("25a849e95ba97d7f", b"custom-key"),  # C.4.3
        ("25a849e95bb8e8b4bf", b"custom-value"),
        ("6402", b"302"),  # C.6.1
        ("aec3771a4b", b"private"),
        ("d07abe941054d444a8200595040b8166e082a62d1bff", b"Mon, 21 Oct 2013 20:13:21 GMT"),
        ("9d29ad171863c78f0b97c8e9ae82ae43d3", b"https://www.example.com"),
        ("", b""),
    ],
)
def test_huffman_strings_decode_as_the_rfc_gives_them(coded: str, text: bytes) -> None:
    assert huffman_decoded(bytes.fromhex(coded)) == text


@pytest.mark.parametrize(
    ("coded", "why"),
    [
        ("f1e3c2e5f23a6ba0ab90f4fe", "padding"),  # the last bit of padding is 0
        ("f1e3c2e5f23a6ba0ab90f4ffff", "padding"),  # 8 bits or more of padding
        ("ffffffff", "EOS"),  # EOS, 30 bits of ones, inside the string
    ],
)
def test_huffman_strings_that_break_the_rules_are_refused(coded: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        huffman_decoded(bytes.fromhex(coded))


def test_a_connections_header_blocks_share_one_dynamic_table() -> None:
    """C.3 (literals) and C.4 (the same requests, Huffman-coded): each block refers to
    what the blocks before it added, and the table's size is as the RFC gives it."""
    for blocks in (
        [
            "828684410f7777772e6578616d706c652e636f6d",
            "828684be58086e6f2d6361636865",
            "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
        ],
        [
            "828684418cf1e3c2e5f23a6ba0ab90f4ff",
            "828684be5886a8eb10649cbf",
            "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
        ],
    ):
        decoder = HpackDecoder()
        first = decoder.decode(bytes.fromhex(blocks[0]))
        assert first == [
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", b"/"),
            (b":authority", b"www.example.com"),
        ]
        assert decoder.size == 57
        assert decoder.decode(bytes.fromhex(blocks[1]))[-1] == (b"cache-control", b"no-cache")
        assert decoder.size == 110
        third = decoder.decode(bytes.fromhex(blocks[2]))
        assert third == [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/index.html"),
            (b":authority", b"www.example.com"),
            (b"custom-key", b"custom-value"),
        ]
        assert list(decoder.table) == [
            (b"custom-key", b"custom-value"),
            (b"cache-control", b"no-cache"),
            (b":authority", b"www.example.com"),
        ]
        assert decoder.size == 164


def test_a_smaller_table_evicts_the_oldest_entries_first() -> None:
    decoder = HpackDecoder()
    decoder.decode(bytes.fromhex("828684410f7777772e6578616d706c652e636f6d"))
    decoder.decode(bytes.fromhex("828684be58086e6f2d6361636865"))
    # A size update to 60 bytes (5-bit prefix: 31, then 29) keeps the newest entry.
    decoder.decode(bytes.fromhex("3f1d"))
    assert list(decoder.table) == [(b"cache-control", b"no-cache")]
    assert decoder.size == 53
    with pytest.raises(ValueError, match="in no table"):
        decoder.decode(bytes.fromhex("bf"))  # index 63: evicted


# --- protocol buffers ---------------------------------------------------------------


@pytest.mark.parametrize("number", [0, 1, 127, 128, 300, 2**31, 2**63 - 1])
def test_varints_read_back_what_was_written(number: int) -> None:
    data = varint(number) + b"\x01"
    assert read_varint(data, 0) == (number, len(data) - 1)


def test_a_negative_int64_is_ten_bytes_of_twos_complement() -> None:
    assert varint(-1) == b"\xff" * 9 + b"\x01"
    assert read_varint(varint(-1), 0)[0] == 2**64 - 1


def test_a_messages_fields_come_in_order_and_fixed_width_ones_are_passed_over() -> None:
    fixed64 = bytes([3 << 3 | 1]) + bytes(8)
    message = pb_field(1, b"key") + fixed64 + pb_field(2, 300) + pb_field(1, b"")
    assert message_fields(message) == [(1, b"key"), (2, 300), (1, b"")]


@pytest.mark.parametrize("message", [b"\x0a\x05abc", b"\x11\x00\x00", b"\x0b"])
def test_a_truncated_or_unknown_field_is_refused(message: bytes) -> None:
    with pytest.raises((ValueError, IndexError)):
        message_fields(message)


# --- calls to a real etcd -----------------------------------------------------------


def test_a_put_by_txn_is_read_back_by_range(grpc_channel: Channel) -> None:
    key = b"skf-tests/h2grpc/put-%d" % time.monotonic_ns()
    put = pb_field(2, pb_field(2, pb_field(1, key) + pb_field(2, b"value")))
    answer = grpc_channel.call("/etcdserverpb.KV/Txn", put)
    assert dict(message_fields(answer))[2] == 1  # succeeded
    ranged = message_fields(grpc_channel.call("/etcdserverpb.KV/Range", pb_field(1, key)))
    kvs = [dict(message_fields(kv)) for number, kv in ranged if number == 2]  # type: ignore[arg-type]
    assert [(kv[1], kv[5]) for kv in kvs] == [(key, b"value")]


def test_a_lease_is_granted_kept_alive_on_one_stream_and_revoked(grpc_channel: Channel) -> None:
    answer = grpc_channel.call("/etcdserverpb.Lease/LeaseGrant", pb_field(1, 30))
    granted = dict(message_fields(answer))
    lease = granted[2]
    assert isinstance(lease, int) and lease > 0 and granted[3] == 30
    stream = grpc_channel.open("/etcdserverpb.Lease/LeaseKeepAlive", pb_field(1, lease))
    for _ in range(3):
        kept = dict(message_fields(grpc_channel.receive(stream, 5.0)))
        assert (kept[2], kept[3]) == (lease, 30)
        grpc_channel.send(stream, pb_field(1, lease))
    grpc_channel.receive(stream, 5.0)
    grpc_channel.cancel(stream)
    grpc_channel.call("/etcdserverpb.Lease/LeaseRevoke", pb_field(1, lease))
    # A keep-alive of the revoked lease: etcd answers a TTL of 0 (field 3 absent).
    again = grpc_channel.open("/etcdserverpb.Lease/LeaseKeepAlive", pb_field(1, lease))
    assert 3 not in dict(message_fields(grpc_channel.receive(again, 5.0)))
    grpc_channel.cancel(again)


def test_a_watch_on_the_same_connection_streams_a_delete_made_by_a_call(
    grpc_channel: Channel,
) -> None:
    key = b"skf-tests/h2grpc/watched-%d" % time.monotonic_ns()
    grpc_channel.call("/etcdserverpb.KV/Txn", pb_field(2, pb_field(2, pb_field(1, key))))
    watch = grpc_channel.open("/etcdserverpb.Watch/Watch", pb_field(1, pb_field(1, key)))
    assert dict(message_fields(grpc_channel.receive(watch, 5.0)))[3] == 1  # created
    grpc_channel.call("/etcdserverpb.KV/Txn", pb_field(2, pb_field(3, pb_field(1, key))))
    event = dict(message_fields(dict(message_fields(grpc_channel.receive(watch, 5.0)))[11]))  # type: ignore[arg-type]
    assert event[1] == 1  # DELETE
    assert dict(message_fields(event[2]))[1] == key  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        grpc_channel.receive(watch, 0.2)  # nothing more changed
    grpc_channel.cancel(watch)


def test_a_call_etcd_refuses_raises_its_grpc_status(grpc_channel: Channel) -> None:
    with pytest.raises(GrpcError) as unknown:
        grpc_channel.call("/etcdserverpb.KV/NoSuchCall", b"")
    assert unknown.value.status == 12  # UNIMPLEMENTED
    with pytest.raises(GrpcError) as missing:
        grpc_channel.call("/etcdserverpb.Lease/LeaseRevoke", pb_field(1, 12345))
    assert missing.value.status == 5  # NOT_FOUND: no such lease
    assert "lease not found" in str(missing.value)
    # The connection serves on after both.
    assert grpc_channel.call("/etcdserverpb.KV/Range", pb_field(1, b"skf-tests/none"))


# --- frames a server may send, from a scripted peer ---------------------------------

OK_TRAILERS = literal(b"grpc-status", b"0")


def _call_scripted(script: bytes) -> tuple[bytes | Exception, list[tuple[int, int, int, bytes]]]:
    """A unary call to a peer that answers with ``script``: the answer (or what the
    call raised) and the frames the client sent."""
    peer = ScriptedPeer(script)
    channel = Channel("127.0.0.1", peer.port)
    try:
        outcome: bytes | Exception = channel.call("/test.Service/Call", b"ask", timeout=2.0)
    except (OSError, ValueError) as exc:
        outcome = exc
    channel.close()
    return outcome, peer.stop()


def test_a_header_block_in_pieces_padded_data_pings_and_settings_are_all_read() -> None:
    status = b"\x88"  # :status 200, the static table's 8th entry
    padded = b"\x03" + b"\0\0\0\0\x05hello" + b"pad"  # 3 bytes of padding
    script = (
        frame(4, 0, 0, struct.pack(">HI", 0x4, 1 << 20))  # SETTINGS: a larger window
        + frame(6, 0, 0, b"12345678")  # PING
        + frame(1, 4, 1, status + literal(b"content-type", b"application/grpc"))
        + frame(0, 0x8, 1, padded)  # DATA, PADDED
        # The trailers in two pieces: HEADERS (END_STREAM), then CONTINUATION (END_HEADERS).
        + frame(1, 1, 1, literal(b"grpc-message", b""))
        + frame(9, 4, 1, OK_TRAILERS)
    )
    outcome, sent = _call_scripted(script)
    assert outcome == b"hello"
    kinds = [(kind, flags, payload) for kind, flags, _, payload in sent]
    assert (4, 1, b"") in kinds  # the server's settings acknowledged
    assert (6, 1, b"12345678") in kinds  # the ping answered with its own payload
    headers = [payload for kind, _, stream, payload in sent if kind == 1 and stream == 1]
    assert headers and b"/test.Service/Call" in headers[0]
    (data,) = [payload for kind, _, stream, payload in sent if kind == 0 and stream == 1]
    assert data == b"\0\0\0\0\x03ask"


def test_a_stream_ended_by_its_data_with_no_status_is_an_error() -> None:
    outcome, _ = _call_scripted(frame(1, 4, 1, b"\x88") + frame(0, 1, 1, b"\0\0\0\0\x02hi"))
    assert isinstance(outcome, GrpcError) and "no grpc-status" in str(outcome)


def test_a_unary_answer_of_more_than_one_message_is_an_error() -> None:
    two = b"\0\0\0\0\x01a" + b"\0\0\0\0\x01b"
    outcome, _ = _call_scripted(
        frame(1, 4, 1, b"\x88") + frame(0, 0, 1, two) + frame(1, 5, 1, OK_TRAILERS)
    )
    assert isinstance(outcome, GrpcError) and "more than one message" in str(outcome)


def test_a_status_other_than_ok_is_raised_with_its_message() -> None:
    refused = literal(b"grpc-status", b"9") + literal(b"grpc-message", b"not now")
    outcome, _ = _call_scripted(frame(1, 4 | 1, 1, b"\x88" + refused))
    assert isinstance(outcome, GrpcError)
    assert (outcome.status, str(outcome)) == (9, "gRPC status 9: not now")


def test_a_reset_stream_and_a_goaway_end_the_call() -> None:
    reset, _ = _call_scripted(frame(3, 0, 1, struct.pack(">I", 2)))
    assert isinstance(reset, GrpcError) and "reset the stream (code 2)" in str(reset)
    away, _ = _call_scripted(frame(7, 0, 0, struct.pack(">II", 1, 0)))
    assert isinstance(away, OSError) and "going away" in str(away)


def _data_of(sent: list[tuple[int, int, int, bytes]], stream_id: int) -> bytes:
    """The DATA the client sent on ``stream_id``, joined."""
    return b"".join(payload for kind, _, got, payload in sent if kind == 0 and got == stream_id)


def test_a_message_larger_than_the_window_is_sent_as_window_updates_give_room() -> None:
    message = bytes(70_000)  # and 5 bytes of gRPC's prefix: more than 65,535
    room = frame(8, 0, 0, struct.pack(">I", 10_000)) + frame(8, 0, 1, struct.pack(">I", 10_000))
    answer = frame(1, 4, 1, b"\x88") + frame(0, 0, 1, b"\0\0\0\0\x02ok")
    answer += frame(1, 5, 1, OK_TRAILERS)
    peer = ScriptedPeer(b"", more=[(65_535, room + answer)])
    channel = Channel("127.0.0.1", peer.port)
    try:
        assert channel.call("/test.Service/Call", message, timeout=5.0) == b"ok"
    finally:
        channel.close()
    sent = peer.stop()
    # Until the server gave room, the client sent all its windows allowed and no more.
    before = frames_in(peer.received[: peer.read_before[0]])
    assert len(_data_of(before, 1)) == 65_535
    assert not any(kind == 0 and flags & 1 for kind, flags, _, _ in before)
    assert _data_of(sent, 1) == b"\0\0\x01\x11\x70" + message


def test_a_servers_smaller_stream_window_holds_back_the_next_calls_data() -> None:
    # The first call's answer comes after SETTINGS that make each stream's window 100.
    settings = frame(4, 0, 0, struct.pack(">HI", 0x4, 100))
    first = frame(1, 4, 1, b"\x88") + frame(0, 0, 1, b"\0\0\0\0\x01a")
    first += frame(1, 5, 1, OK_TRAILERS)
    asked = len(b"\0\0\0\0\x03ask")
    room = frame(8, 0, 3, struct.pack(">I", 1_000))
    second = frame(1, 4, 3, b"\x88") + frame(0, 0, 3, b"\0\0\0\0\x01b")
    second += frame(1, 5, 3, OK_TRAILERS)
    peer = ScriptedPeer(settings + first, more=[(asked + 100, room + second)])
    channel = Channel("127.0.0.1", peer.port)
    try:
        assert channel.call("/test.Service/Call", b"ask", timeout=5.0) == b"a"
        assert channel.call("/test.Service/Call", bytes(300), timeout=5.0) == b"b"
    finally:
        channel.close()
    sent = peer.stop()
    before = frames_in(peer.received[: peer.read_before[0]])
    assert len(_data_of(before, 3)) == 100
    assert len(_data_of(sent, 3)) == 305
