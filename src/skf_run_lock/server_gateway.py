"""What the server stores share: a gateway's lock address parsed, a deadline for each
step, TLS, patience and when to give up, a connection that never waits past its deadline,
the wording of failures, a store that has its gateway, and a waiter's place kept as a
value on the server. Compiled only for a server's lock."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import time

from .public_surface import _OutcomeUnknown
from .quoting import _shown_address
from .records import _holder_timeout, _Place, _remembered, _time_of
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import ssl
    from typing import Self

_ANSWER_MAX_BYTES = 8 * 1024 * 1024
_TLS_FAILURE = "TLS failure"
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?"


def _seconds_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(errno.ETIMEDOUT, "timed out")
    return left


def _unknown_outcome(owner: str, taking: bool) -> str:
    if taking:
        return f"the lock may have been taken by {owner}: acquire again to renew it"
    return f"the lock of {owner} may have been released: release again to be sure"


def _place_value(place: _Place) -> bytes:
    """A waiter's place as the value a server keeps (a shared waiter's says so)."""
    entry: dict[str, object] = {
        "owner": place.owner,
        "since": _format_time(place.since),
        "stale_after_seconds": place.stale_after,
    }
    if place.shared:
        entry["shared"] = True
    return json.dumps(entry).encode()


# What each place's value gave (owner, since, timeout, shared; None: not a place).
_PLACES_READ: dict[bytes, tuple[str, int, float, bool] | None] = {}


def _place_of(ticket: str, value: bytes) -> _Place | None:
    """The place a server's value gives; None if it is not one."""
    fields = _remembered(_PLACES_READ, value, _value_fields)
    if fields is None:
        return None
    owner, since, timeout, shared = fields
    return _Place(ticket, owner, since, timeout, None, shared=shared)


def _value_fields(value: bytes) -> tuple[str, int, float, bool] | None:
    try:
        entry = json.loads(value)
        owner = entry["owner"]
        since = _time_of(entry["since"])
        timeout = _holder_timeout(entry["stale_after_seconds"])
        shared = entry.get("shared") is True
    except (ValueError, RecursionError, TypeError, KeyError):
        return None
    if not (isinstance(owner, str) and owner) or since is None or timeout is None:
        return None
    return owner, since, timeout, shared


# A call that does not wait gives up on a server that refuses every connection after
# this long: nothing listens there, and the step's whole deadline (5 s by default)
# would only put off saying so. A server restarting in place is back well within it.
_REFUSED_GRACE_SEC = 1.5


class _ServerGateway:
    """What each server store's gateway shares: the address, a deadline per step, TLS,
    the call's patience and the rules for giving up, and the wording of failures."""

    patient = False  # a call that waits in line: a refusing server is tried until the deadline
    # The call's own deadline (a renewal's: when its holder must stop), which cuts every
    # step's; see ``deadline``.
    call_deadline = float("inf")

    # Each server store says, for its messages: the server's name, its variables'
    # prefix, what its port is called and the variable that sets the deadline.
    name = ""
    env = ""
    port = ""
    timeout_var = ""
    # The address's form ({0}: the scheme), why credentials in it are refused, and the
    # scheme that means TLS.
    form = ""
    credentials = ""
    secure = ""
    default_port = 0  # 0: each HOST names its PORT
    many = False  # several HOST:PORT may be given
    users = False  # a USER@ may be given

    def __init__(self, address: str, timeout: float, prefix: bool = False) -> None:
        """Parse ``address`` (ValueError unless it is of ``form``); ``prefix``: its KEY
        is where the locks to list start, and may be empty."""
        shown = _shown_address(address)
        scheme, _, rest = address.partition("://")
        where, slash, key = rest.partition("/")
        user, at, hosts = where.rpartition("@")
        if ":" in user or (at and not self.users):
            raise ValueError(f"the lock address {shown} {self.credentials}")
        found = [re.fullmatch(_HOST, host) for host in hosts.split(",")]
        ports_known = all(host and (host[2] or self.default_port) for host in found)
        too_many = len(found) > 1 and not self.many
        if prefix and not slash:
            # A listing prints each lock as this place and its key: without the slash
            # it would print addresses that name no lock.
            form = self.form.format(scheme).replace("/KEY", "/PREFIX")
            raise ValueError(
                f"the place {shown} must be {form}, as a lock's address is;"
                f" give {shown}/ for every lock there"
            )
        if (not key and not prefix) or (at and not user) or too_many or not ports_known:
            raise ValueError(f"the lock address {shown} must be {self.form.format(scheme)}")
        self.endpoints = []
        for host in filter(None, found):
            port = int(host[2] or self.default_port)
            if not 0 < port < 65536:
                raise ValueError(f"the port of {host[0]} in {address} is not from 1 to 65535")
            self.endpoints.append(f"{host[1]}:{port}")
        if "\0" in key:
            raise ValueError(f"the lock key in {address} must not contain a NUL character")
        if "?" in key or "#" in key:
            # The path is the key as it stands: no query, no fragment, no database.
            raise ValueError(
                f"the lock key in {shown} must not contain ? or #: all that follows the"
                " first / after the host is the key itself, taken as it stands (no"
                " options, no database number); give a key without them"
            )
        self.lock = address
        self.user = user
        self.key_text = key
        self.timeout = timeout
        self.tls = scheme == self.secure
        self.context: ssl.SSLContext | None = None
        self.next_step()

    def address_of(self, key: bytes, errors: str = "surrogateescape") -> str:
        """The address of the lock at ``key`` on the same servers (a listing's names;
        ``errors``: how bytes that are not UTF-8 are shown)."""
        where = self.lock[: len(self.lock) - len(self.key_text)]
        return where + key.decode("utf-8", errors)

    @property
    def deadline(self) -> float:
        """The moment (monotonic clock) no request waits past: the step's, cut to the
        call's. Every connect, send and receive gets what is left of it as its
        timeout, so a server that swallows every byte holds a renewal no longer than
        its holder may wait."""
        return min(self.step_deadline, self.call_deadline)

    @deadline.setter
    def deadline(self, moment: float) -> None:
        self.step_deadline = moment

    def next_step(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def tls_context(self) -> ssl.SSLContext | None:
        if self.tls and self.context is None:
            import ssl

            env = os.environ
            cert = env.get(self.env + "CERT")
            self.context = ssl.create_default_context(cafile=env.get(self.env + "CACERT") or None)
            if cert:
                self.context.load_cert_chain(cert, env.get(self.env + "KEY") or None)
        return self.context

    def unreachable(self, where: str, why: str | None) -> OSError:
        within = f"within {self.timeout:g} s ({self.timeout_var})"
        if self.call_deadline < self.step_deadline:
            within = "in the time the call had left"  # a renewal's, cut to its hold
        return OSError(
            errno.EHOSTUNREACH,
            f"{self.name} could not be reached {within} at {where}: {why or 'no time left'}",
        )

    def refused_for_good(self, since: float) -> bool:
        """True once a call that does not wait has seen its server refuse connections
        since ``since`` for the grace period."""
        return not self.patient and time.monotonic() - since >= _REFUSED_GRACE_SEC

    def give_up_if_refused(self, exc: Exception, since: float, where: str, why: str) -> None:
        """Raise the refusal once ``exc`` is a refused connection and a call that does
        not wait has seen them since ``since`` for the grace period."""
        if isinstance(exc, ConnectionRefusedError) and self.refused_for_good(since):
            raise self.refused(where, why) from None

    def refused(self, where: str, why: str) -> OSError:
        return OSError(
            errno.ECONNREFUSED,
            f"{self.name} at {where} refused the connection for {_REFUSED_GRACE_SEC:g} s"
            f" ({why}): is {self.name} running there, listening on that port?",
        )

    def lost_answer(self, where: str, exc: Exception, outcome: str) -> _OutcomeUnknown:
        return _OutcomeUnknown(
            errno.ETIMEDOUT,
            f"{self.name} at {where} failed after the change was sent ({self.describe(exc)}),"
            f" so {outcome}",
        )

    def describe(self, exc: Exception) -> str:
        """Why a request failed, and what to check."""
        # Without ssl imported no error is a TLS one.
        ssl = sys.modules.get("ssl")
        if ssl is not None and isinstance(exc, ssl.SSLError | ssl.CertificateError):
            e = self.env
            return f"{_TLS_FAILURE} ({exc}); check {e}CACERT, {e}CERT and {e}KEY"
        if isinstance(exc, ValueError):
            return f"{exc}: is this {self.port} port?"
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


class _ServerStore:
    """A lock on a server, as a store: it has its ``gateway`` (which keeps the call's
    patience and deadline, set on the store by the lock calls) and no guard to enter."""

    gateway: _ServerGateway
    lock: str
    dated_in_seconds = False  # a hold ends on the server's clock (a lease, an expiry)

    @property
    def patient(self) -> bool:
        return self.gateway.patient

    @patient.setter
    def patient(self, patient: bool) -> None:
        self.gateway.patient = patient

    @property
    def call_deadline(self) -> float:
        return self.gateway.call_deadline

    @call_deadline.setter
    def call_deadline(self, moment: float) -> None:
        self.gateway.call_deadline = moment

    def identity(self) -> tuple[object, ...]:
        """Its scheme, its set of endpoints (a name in one case, the default port
        filled in) and its key: the user and the order of the endpoints aside."""
        gateway = self.gateway
        scheme = gateway.lock.partition("://")[0]
        endpoints = frozenset(endpoint.lower() for endpoint in gateway.endpoints)
        return ("server", scheme, endpoints, gateway.key_text)

    def change(self, create: bool) -> Self:
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


class _Connection:
    """A TCP connection (TLS with a ``context``); nothing waits past its ``deadline``."""

    protocol = "a protocol"  # for messages

    def __init__(self, endpoint: str, context: ssl.SSLContext | None, deadline: float) -> None:
        import socket

        host, _, port = endpoint.rpartition(":")
        host = host.strip("[]")
        self.endpoint = endpoint
        self.sock: socket.socket = socket.create_connection(
            (host, int(port)), _seconds_left(deadline)
        )
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                self.sock = context.wrap_socket(self.sock, server_hostname=host)
        except BaseException:
            self.sock.close()
            raise
        self.received = bytearray()  # not yet taken apart

    def close(self) -> None:
        self.sock.close()

    def _find(self, marker: bytes, deadline: float, limit: int, start: int = 0) -> int:
        while (found := self.received.find(marker, start)) < 0:
            if len(self.received) > limit:
                raise ValueError(f"the answer was not {self.protocol} (a line too long)")
            self._receive(deadline)
        return found

    def _receive(self, deadline: float, end_ok: bool = False) -> bool:
        """Receive more; False if the server closed the connection and ``end_ok``."""
        self.sock.settimeout(_seconds_left(deadline))
        data = self.sock.recv(65536)
        if not data and not end_ok:
            raise ConnectionResetError(errno.ECONNRESET, "the connection closed mid-answer")
        self.received += data
        return bool(data)


class _Pause:
    """A waiter's pause: 5 ms growing to 100 ms, jittered against lockstep."""

    def __init__(self) -> None:
        self.next = 0.005

    def sleep(self, left: float) -> None:
        import random  # only a waiter needs it

        time.sleep(min(left, self.next * random.uniform(0.5, 1.0)))
        self.next = min(self.next * 1.5, 0.1)
