"""What a call sends to a server and reads back, seen on the wire: the standard library's
socket methods watched (or made to fail) for the rest of a test, on plain connections (a
TLS socket's are its own). A request is one ``sendall``: etcd's, an HTTP request with
its body; Redis's, a batch of commands."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest


def after_each_send(
    monkeypatch: pytest.MonkeyPatch, sent: Callable[[socket.socket, bytes], None]
) -> None:
    """``sent(sock, data)`` once ``data`` is sent on ``sock``, in the sending thread
    (after what watched each send before, if anything did)."""
    before = socket.socket.sendall

    def sendall(sock: socket.socket, data: Any, *args: Any) -> None:
        before(sock, data, *args)
        sent(sock, bytes(data))

    monkeypatch.setattr(socket.socket, "sendall", sendall)


def connections_to(monkeypatch: pytest.MonkeyPatch, port: int) -> list[socket.socket]:
    """Every TCP connection this process opens to ``port`` from now on, its socket."""
    before = socket.socket.connect
    opened: list[socket.socket] = []

    def connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and address[1] == port:
            opened.append(sock)
        before(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return opened


def before_each_receive(
    monkeypatch: pytest.MonkeyPatch,
    receiving: Callable[[socket.socket], None],
    received: dict[socket.socket, bytearray],
) -> None:
    """``receiving(sock)`` before each receive on ``sock``, in the receiving thread;
    ``received``: what each socket received so far, kept up to date."""

    before = socket.socket.recv

    def recv(sock: socket.socket, size: int, *args: Any) -> bytes:
        receiving(sock)
        data: bytes = before(sock, size, *args)
        received.setdefault(sock, bytearray()).extend(data)
        return data

    monkeypatch.setattr(socket.socket, "recv", recv)


def http_request(data: bytes) -> tuple[str, Any] | None:
    """The path and JSON body of the product's HTTP POST, sent whole, as it sends each;
    None if ``data`` is not one (a test's own client names itself, urllib's sends the
    body apart)."""
    head, gap, body = data.partition(b"\r\n\r\n")
    if not data.startswith(b"POST ") or not gap or b"\r\nUser-Agent:" in head:
        return None
    return head.split(b" ", 2)[1].decode(), json.loads(body)


def first_command(data: bytes) -> str | None:
    """The first command of a batch of Redis commands; None if ``data`` is not one."""
    if not data.startswith(b"*"):
        return None
    return data.split(b"\r\n", 3)[2].decode()


# Requests sent to etcd, each as (the sending thread's name, path, JSON body).
Sent = list[tuple[str, str, dict[str, Any]]]


def etcd_requests(monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Every request sent to etcd from now on, as (the sending thread's name, path, body)."""
    requests: Sent = []

    def sent(sock: socket.socket, data: bytes) -> None:
        request = http_request(data)
        if request is not None:
            requests.append((threading.current_thread().name, *request))

    after_each_send(monkeypatch, sent)
    return requests


def when_blocked(monkeypatch: pytest.MonkeyPatch, server: str, then: Callable[[], None]) -> None:
    """``then()``, in the waiter's thread, each time a waiter on ``server`` ("etcd" or
    "redis") blocks on it: on etcd, as it reads on a watch etcd said it made; on Redis,
    once it has sent the BLPOP that waits for its bell."""
    if server == "redis":

        def rung(sock: socket.socket, data: bytes) -> None:
            if b"\r\nBLPOP\r\n" in data:
                then()

        after_each_send(monkeypatch, rung)
        return
    watches: set[socket.socket] = set()
    received: dict[socket.socket, bytearray] = {}

    def sent(sock: socket.socket, data: bytes) -> None:
        if data.startswith(b"POST /v3/watch "):
            watches.add(sock)
            received.pop(sock, None)  # what a connection kept said before is past

    def receiving(sock: socket.socket) -> None:
        if sock in watches and b'"created":true' in received.get(sock, b""):
            then()

    after_each_send(monkeypatch, sent)
    before_each_receive(monkeypatch, receiving, received)
