"""etcd with TLS (a CA and client certificates) and with users limited to a key prefix.

Certificates are made by the tests (conftest.py's ``pki``); each test starts its
own etcd, since TLS and authentication are settings of the whole server.
"""

from __future__ import annotations

import base64
import re
import ssl
import threading
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
from calls import Run
from pki import Pki
from servers import Etcd, etcd_post, free_port, start_etcd
from waiters import handed_over_to_a_waiter, served_after_a_release
from wire import connections_to


@pytest.fixture(scope="module")
def tls_etcd(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    context = ssl.create_default_context(cafile=pki.path("ca.pem"))
    context.load_cert_chain(pki.path("client.pem"), pki.path("client.key"))
    flags = [
        "--cert-file",
        pki.path("server.pem"),
        "--key-file",
        pki.path("server.key"),
        "--client-cert-auth",
        "--trusted-ca-file",
        pki.path("ca.pem"),
    ]
    server = start_etcd(tmp_path_factory.mktemp("tls-etcd"), tls=flags, context=context)
    yield server
    server.stop()


def test_tls_with_a_ca_and_a_client_certificate(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, pki: Pki, tls_etcd: Etcd
) -> None:
    monkeypatch.setenv("ETCDCTL_CACERT", pki.path("ca.pem"))
    monkeypatch.setenv("ETCDCTL_CERT", pki.path("client.pem"))
    monkeypatch.setenv("ETCDCTL_KEY", pki.path("client.key"))
    lock = f"etcd+https://{tls_etcd.client}/locks/tls"
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert taken.code == 0 and taken.json["lock"] == lock
    owner = taken.json["owner"]
    assert cli("acquire", "--lock", lock, "--owner", "wf:sk:other").code == 3
    assert cli("release", "--lock", lock, "--owner", owner).json["released"] is True


def test_a_process_over_tls_takes_and_releases_on_one_handshake_without_reads(
    skf: ModuleType, monkeypatch: pytest.MonkeyPatch, pki: Pki, tls_etcd: Etcd
) -> None:
    """Over TLS with a client certificate, a process's takes and releases go over one
    kept connection (one handshake) and, after the first, read nothing and grant no
    lease (the release's is the next take's, kept alive): each acquire
    and release answers as on a connection of its own, and the lock is left free."""
    monkeypatch.setenv("ETCDCTL_CACERT", pki.path("ca.pem"))
    monkeypatch.setenv("ETCDCTL_CERT", pki.path("client.pem"))
    monkeypatch.setenv("ETCDCTL_KEY", pki.path("client.key"))
    port = int(tls_etcd.client.rpartition(":")[2])
    opened = connections_to(monkeypatch, port)
    lock = f"etcd+https://{tls_etcd.client}/locks/tls-kept"
    assert skf.acquire(lock, "wf:tls:r1", 60.0)["acquired"]
    assert skf.release(lock, "wf:tls:r1")["released"]
    paths: list[str] = []
    sendall = ssl.SSLSocket.sendall

    def sent(sock: ssl.SSLSocket, data: bytes, *args: int) -> None:
        paths.append(bytes(data).split(b" ", 2)[1].decode().rpartition("/")[2])
        sendall(sock, data, *args)

    monkeypatch.setattr(ssl.SSLSocket, "sendall", sent)
    for _ in range(3):
        taken = skf.acquire(lock, "wf:tls:r1", 60.0)
        assert (taken["acquired"], taken["refreshed"], taken["lock"]) == (True, False, lock)
        released = skf.release(lock, "wf:tls:r1")
        assert (released["released"], released["reason"]) == (True, None)
    assert len(opened) == 1 and paths == ["keepalive", "txn", "txn"] * 3
    assert skf.status(lock, 60.0)["state"] == "free"


@pytest.mark.usefixtures("no_beats")
def test_a_waiter_over_tls_wakes_on_the_release(
    skf: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    pki: Pki,
    tls_etcd: Etcd,
    watching: threading.Event,
) -> None:
    """The watch stream, read through TLS with timeouts, carries the release."""
    monkeypatch.setenv("ETCDCTL_CACERT", pki.path("ca.pem"))
    monkeypatch.setenv("ETCDCTL_CERT", pki.path("client.pem"))
    monkeypatch.setenv("ETCDCTL_KEY", pki.path("client.key"))
    lock = f"etcd+https://{tls_etcd.client}/locks/tls-waiter"
    handed_over_to_a_waiter(skf, lock, watching.is_set)


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"ETCDCTL_CACERT": "stranger-ca.pem"}, "certificate verify failed"),
        ({"ETCDCTL_CACERT": "ca.pem"}, "TLS failure"),  # no client certificate
    ],
)
def test_a_tls_failure_is_exit_2_saying_so(  # noqa: PLR0917
    cli: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
    pki: Pki,
    tls_etcd: Etcd,
    settings: dict[str, str],
    words: str,
) -> None:
    for name in ("ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, file in settings.items():
        monkeypatch.setenv(name, pki.path(file))
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "3s")
    run = cli("acquire", "--lock", f"etcd+https://{tls_etcd.client}/locks/x", "--owner", "a:b:c")
    assert run.code == 2 and "TLS failure" in run.error and words in run.error


# --- Users limited to a key prefix ------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(scope="module")
def auth_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    """etcd with authentication on: user "agent" may read and write keys under locks/."""
    server = start_etcd(tmp_path_factory.mktemp("auth-etcd"))
    etcd_post(server.client, "/v3/auth/user/add", {"name": "root", "password": "root-pw"})
    etcd_post(server.client, "/v3/auth/user/grant", {"user": "root", "role": "root"})
    etcd_post(server.client, "/v3/auth/user/add", {"name": "agent", "password": "agent-pw"})
    etcd_post(server.client, "/v3/auth/role/add", {"name": "lockers"})
    permission = {"permType": "READWRITE", "key": _b64("locks/"), "range_end": _b64("locks0")}
    etcd_post(server.client, "/v3/auth/role/grant", {"name": "lockers", "perm": permission})
    etcd_post(server.client, "/v3/auth/user/grant", {"user": "agent", "role": "lockers"})
    etcd_post(server.client, "/v3/auth/enable", {})
    yield server
    server.stop()


@pytest.mark.parametrize("how", ["name:password", "separate password"])
def test_a_user_limited_to_a_prefix_takes_and_releases(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd, how: str
) -> None:
    if how == "name:password":
        monkeypatch.setenv("ETCDCTL_USER", "agent:agent-pw")
    else:
        monkeypatch.setenv("ETCDCTL_USER", "agent")
        monkeypatch.setenv("ETCDCTL_PASSWORD", "agent-pw")
    lock = auth_etcd.url(f"locks/{how.replace(' ', '-').replace(':', '-')}")
    taken = cli("acquire", "--lock", lock, "--owner", "wf:sk")
    assert taken.code == 0, taken.err
    assert cli("status", "--lock", lock).json["held_by"] == taken.json["owner"]
    assert cli("release", "--lock", lock, "--owner", taken.json["owner"]).json["released"]


def test_a_user_limited_to_a_prefix_waits_in_line(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd
) -> None:
    """A waiter's place (a key beside the record, on a lease it keeps alive) and its
    watch need nothing beyond the lock's prefix."""
    monkeypatch.setenv("ETCDCTL_USER", "agent:agent-pw")
    lock = auth_etcd.url("locks/line")
    assert served_after_a_release(cli, lock)["owner"] == "wf:waiter:1"
    assert cli("release", "--lock", lock, "--owner", "wf:waiter:1").json["released"]


def test_a_key_outside_the_users_prefix_is_permission_denied(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd
) -> None:
    monkeypatch.setenv("ETCDCTL_USER", "agent:agent-pw")
    run = cli("acquire", "--lock", auth_etcd.url("elsewhere/x"), "--owner", "wf:sk:r")
    assert run.code == 2
    assert "etcd denied user 'agent' access to the key elsewhere/x" in run.error


@pytest.mark.parametrize("user", ["agent:wrong", "nobody:agent-pw"])
def test_refused_credentials_are_exit_2_saying_so(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd, user: str
) -> None:
    monkeypatch.setenv("ETCDCTL_USER", user)
    run = cli("acquire", "--lock", auth_etcd.url("locks/x"), "--owner", "wf:sk:r")
    assert run.code == 2 and "etcd refused authentication" in run.error


def test_no_credentials_on_a_server_that_wants_them_is_exit_2(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd
) -> None:
    monkeypatch.delenv("ETCDCTL_USER", raising=False)
    run = cli("acquire", "--lock", auth_etcd.url("locks/x"), "--owner", "wf:sk:r")
    assert run.code == 2
    assert "etcd wants a user name: set ETCDCTL_USER (and ETCDCTL_PASSWORD)" in run.error


# --- No secret in any message -----------------------------------------------------------

SECRET = "Sup3r-s3cret/pw"  # a "/" too: an address that holds it splits there
# etcd's simple auth tokens: 16 letters, a dot, a number.
TOKEN = re.compile(r"[A-Za-z]{16}\.[0-9]+")


def _failing_calls(auth_etcd: Etcd, tls_etcd: Etcd) -> Iterator[tuple[str, dict[str, str], str]]:
    """(what fails, the ETCDCTL_* settings, the lock address) for each way to fail."""
    good = auth_etcd.url("locks/secrets")
    host = auth_etcd.client
    yield "credentials in the address", {}, f"etcd://agent:{SECRET}@{host}/locks/x"
    yield "credentials with a slash", {}, f"etcd://agent:{SECRET}@{host}"
    yield "wrong password", {"ETCDCTL_USER": f"agent:{SECRET}"}, good
    yield "unknown user", {"ETCDCTL_USER": "nobody", "ETCDCTL_PASSWORD": SECRET}, good
    yield "unreachable", {"ETCDCTL_USER": f"agent:{SECRET}"}, f"etcd://127.0.0.1:{free_port()}/k"
    yield (
        "tls failure",
        {"ETCDCTL_PASSWORD": SECRET, "ETCDCTL_USER": "agent"},
        (f"etcd+https://{tls_etcd.client}/locks/x"),
    )


def test_no_failing_call_shows_a_secret(
    main: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd, tls_etcd: Etcd
) -> None:
    monkeypatch.setenv("ETCDCTL_COMMAND_TIMEOUT", "2s")
    for what, settings, lock in _failing_calls(auth_etcd, tls_etcd):
        for name in ("ETCDCTL_USER", "ETCDCTL_PASSWORD", "ETCDCTL_CACERT"):
            monkeypatch.delenv(name, raising=False)
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
            run = main(argv[0], "--lock", lock, *argv[1:])
            assert run.code in (1, 2), (what, argv, run)
            assert run.error  # one JSON error line, and nothing on stdout
            for secret in (SECRET, SECRET.split("/", maxsplit=1)[0], SECRET.split("/")[1]):
                assert secret not in run.out + run.err, (what, argv, run.err)


def test_a_call_denied_after_authenticating_shows_neither_password_nor_token(
    cli: Callable[..., Run], monkeypatch: pytest.MonkeyPatch, auth_etcd: Etcd
) -> None:
    monkeypatch.setenv("ETCDCTL_USER", "agent:agent-pw")
    for argv in (["acquire", "--owner", "wf:sk"], ["status"], ["release", "--owner", "a:b:c"]):
        run = cli(argv[0], "--lock", auth_etcd.url("elsewhere/x"), *argv[1:])
        assert run.code == 2 and "denied user 'agent'" in run.error, run
        assert "agent-pw" not in run.out + run.err
        assert not TOKEN.search(run.out + run.err), run.err
