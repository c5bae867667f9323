"""What the server stores share: a gateway's lock address parsed, a deadline for each
step, TLS, patience and when to give up, a connection that never waits past its deadline
(its host's name lookup included), kept between calls, the wording of failures, a store
that has its gateway, and a waiter's place kept as a value on the server. Compiled only
for a server's lock."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
import time

from .kept_connections import _KEPT
from .public_surface import _OutcomeUnknown
from .quoting import _shown_address
from .records import _holder_timeout, _parts_read, _Place, _remembered, _time_of
from .seams import _SEAMS, _blind_wait
from .times import _format_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import select
    import socket
    import ssl
    from collections.abc import Callable
    from typing import Self, TypeVar

    _T = TypeVar("_T")
    _C = TypeVar("_C", bound="_Connection")

    # An address as the system gives it: its family, and (host, port[, flow, scope]).
    _Address = tuple[int, tuple[object, ...]]

_ANSWER_MAX_BYTES = 8 * 1024 * 1024
_TLS_FAILURE = "TLS failure"
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?"


def _seconds_left(deadline: float) -> float:
    left = deadline - _SEAMS.clock()
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
    if place.parts is not None:
        entry["parts"] = list(place.parts)
    return json.dumps(entry).encode()


# A place's fields as a server's value keeps them: owner, since, timeout, whether it
# waits for a shared hold, and for which parts (None: the lock whole).
_ValueFields = tuple[str, int, float, bool, tuple[str, ...] | None]
# What each place's value gave (None: not a place).
_PLACES_READ: dict[bytes, _ValueFields | None] = {}


def _place_of(ticket: str, value: bytes) -> _Place | None:
    """The place a server's value gives; None if it is not one."""
    fields = _remembered(_PLACES_READ, value, _value_fields)
    if fields is None:
        return None
    owner, since, timeout, shared, parts = fields
    return _Place(ticket, owner, since, timeout, None, shared=shared, parts=parts)


def _value_fields(value: bytes) -> _ValueFields | None:
    try:
        entry = json.loads(value)
        owner = entry["owner"]
        since = _time_of(entry["since"])
        timeout = _holder_timeout(entry["stale_after_seconds"])
        shared = entry.get("shared") is True
        parts = _parts_read(entry.get("parts"))
    except (ValueError, RecursionError, TypeError, KeyError, AttributeError):
        return None
    if not (isinstance(owner, str) and owner) or since is None or timeout is None:
        return None
    return owner, since, timeout, shared, parts


# Each lock address parsed, by gateway and prefix: a process's calls name a few locks.
_ADDRESSES_PARSED: dict[tuple[type, str, bool], tuple[tuple[str, ...], str, str]] = {}
_ADDRESSES_PARSED_MAX = 256


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
    password: str | None = None  # the user's secret, if any (its store's variable)

    def __init__(self, address: str, timeout: float, prefix: bool = False) -> None:
        """Parse ``address`` (ValueError unless it is of ``form``); ``prefix``: its KEY
        is where the locks to list start, and may be empty."""
        known = _ADDRESSES_PARSED.get((type(self), address, prefix))
        parsed = known or self._parsed(address, prefix)
        self.endpoints = list(parsed[0])
        self.lock = address
        self.user = parsed[1]
        self.key_text = parsed[2]
        self.timeout = timeout
        self.tls = address.startswith(self.secure + "://")
        self.context: ssl.SSLContext | None = None
        self.next_step()

    def _parsed(self, address: str, prefix: bool) -> tuple[tuple[str, ...], str, str]:
        """``address``'s endpoints, user and key, kept for the next call on it."""
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
        endpoints = []
        for host in filter(None, found):
            port = int(host[2] or self.default_port)
            if not 0 < port < 65536:
                raise ValueError(f"the port of {host[0]} in {address} is not from 1 to 65535")
            endpoints.append(f"{host[1]}:{port}")
        if "\0" in key:
            raise ValueError(f"the lock key in {address} must not contain a NUL character")
        if "?" in key or "#" in key:
            # The path is the key as it stands: no query, no fragment, no database.
            raise ValueError(
                f"the lock key in {shown} must not contain ? or #: all that follows the"
                " first / after the host is the key itself, taken as it stands (no"
                " options, no database number); give a key without them"
            )
        parsed = (tuple(endpoints), user, key)
        if len(_ADDRESSES_PARSED) >= _ADDRESSES_PARSED_MAX:
            _ADDRESSES_PARSED.clear()  # a long-lived process keeps it small
        _ADDRESSES_PARSED[type(self), address, prefix] = parsed
        return parsed

    def address_of(self, key: bytes, errors: str = "surrogateescape") -> str:
        """The address of the lock at ``key`` on the same servers (a listing's names;
        ``errors``: how bytes that are not UTF-8 are shown)."""
        where = self.lock[: len(self.lock) - len(self.key_text)]
        return where + key.decode("utf-8", errors)

    @property
    def deadline(self) -> float:
        """The moment (``_SEAMS.clock``) no request waits past: the step's, cut to the
        call's. Every connect, send and receive gets what is left of it as its
        timeout, so a server that swallows every byte holds a renewal no longer than
        its holder may wait."""
        return min(self.step_deadline, self.call_deadline)

    @deadline.setter
    def deadline(self, moment: float) -> None:
        self.step_deadline = moment

    def next_step(self) -> None:
        self.step_began = _SEAMS.clock()
        self.deadline = self.step_began + self.timeout

    def tls_context(self) -> ssl.SSLContext | None:
        if self.tls and self.context is None:
            import ssl

            env = os.environ
            cert = env.get(self.env + "CERT")
            self.context = ssl.create_default_context(cafile=env.get(self.env + "CACERT") or None)
            if cert:
                self.context.load_cert_chain(cert, env.get(self.env + "KEY") or None)
        return self.context

    def connection_to(self, endpoint: str, kind: type[_C], opened: Callable[[], _C]) -> _C:
        """A connection to ``endpoint``: one kept from an earlier call made with the same
        user, secret and TLS files if one is sound, else a new one (``opened()``)."""
        key = self.kept_key(endpoint)
        connection = _KEPT.lend(key, kind) or opened()
        connection.kept_as = key
        return connection

    def kept_key(self, endpoint: str) -> tuple[object, ...]:
        """What a connection to ``endpoint`` is kept for: the scheme, the endpoint, the
        user, the secret's number and, with TLS, its files as they stand (one replaced
        is a new key)."""
        files: list[object] = []
        if self.tls:
            for name in ("CACERT", "CERT", "KEY"):
                path = os.environ.get(self.env + name) or ""
                try:
                    found = os.stat(path) if path else None
                except OSError:
                    found = None
                shown = found and (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
                files.append((path, shown))
        scheme = self.lock.partition("://")[0]
        return (scheme, endpoint, self.user, _KEPT.secret_number(self.password), *files)

    def unreachable(self, where: str, why: str | None) -> OSError:
        within = f"within {self.timeout:g} s ({self.timeout_var})"
        if self.call_deadline < self.step_deadline:  # a renewal's, cut to its hold
            waited = _SEAMS.clock() - self.step_began
            within = f"within {waited:.1f} s, all the time the call had left,"
        return OSError(
            errno.EHOSTUNREACH,
            f"{self.name} could not be reached {within} at {where}: {why or 'no time left'}",
        )

    def refused_for_good(self, since: float) -> bool:
        """True once a call that does not wait has seen its server refuse connections
        since ``since`` for the grace period."""
        return not self.patient and _SEAMS.clock() - since >= _REFUSED_GRACE_SEC

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


# --- A connection, its host's name looked up within its deadline


class _Lookup:
    """One lookup of a host name's addresses, in a thread of its own so that a call can
    stop waiting for it at its deadline: ``done`` once it found ``addresses`` or failed
    (``failure``). The system's resolver cannot be stopped: a lookup a call gave up on
    goes on, and its answer serves the next call."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.done = threading.Event()
        self.addresses: list[_Address] = []
        self.failure: OSError | None = None

    def run(self) -> None:
        import socket

        try:
            found = socket.getaddrinfo(self.host, None, type=socket.SOCK_STREAM)
            self.addresses = [(family, address) for family, _, _, _, address in found]
        except (OSError, UnicodeError) as exc:  # gaierror; a name IDNA cannot encode
            why = getattr(exc, "strerror", None) or str(exc)
            self.failure = OSError(errno.EHOSTUNREACH, f"the name {self.host} was not found: {why}")
        finally:
            _NAMES.answered(self)
            self.done.set()


class _Names:
    """The host names looked up: each one's last answer (``known``: when it came, and
    the addresses), used again for ``_SEAMS.name_kept_sec`` (the standard library tells
    no lifetime), and the lookups under way (``running``), one per name at most: every
    call that needs a name meanwhile waits for that one, and a resolver that hangs holds
    one thread, not one per try."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.known: dict[str, tuple[float, list[_Address]]] = {}
        self.running: dict[str, _Lookup] = {}

    def addresses(self, host: str, deadline: float) -> list[_Address]:
        """``host``'s addresses (an IP address's: itself), waiting for a lookup no later
        than ``deadline``: TimeoutError, saying how long it waited, if none came."""
        import socket

        for family, form in ((socket.AF_INET, (host, 0)), (socket.AF_INET6, (host, 0, 0, 0))):
            try:
                socket.inet_pton(family, host)
            except OSError:
                continue
            return [(family, form)]  # an IP address: nothing to look up
        lookup = self._lookup(host)
        if isinstance(lookup, list):
            return lookup
        asked = _SEAMS.clock()
        # A second at most on the system's clock, then the deadline is read again.
        while not lookup.done.wait(_blind_wait(deadline - _SEAMS.clock())):
            if _SEAMS.clock() >= deadline:
                waited = _SEAMS.clock() - asked
                why = f"no answer to the name lookup of {host} in {waited:.1f} s"
                raise TimeoutError(errno.ETIMEDOUT, why)
        if lookup.failure is not None:
            raise OSError(*lookup.failure.args)  # each call its own, raised in its thread
        return lookup.addresses

    def _lookup(self, host: str) -> list[_Address] | _Lookup:
        """``host``'s last answer while it is used again, else its lookup under way (one
        started now if none is)."""
        with self.guard:
            known = self.known.get(host)
            if known is not None and _SEAMS.clock() - known[0] < _SEAMS.name_kept_sec:
                return known[1]
            lookup = self.running.get(host)
            if lookup is None:
                lookup = self.running[host] = _Lookup(host)
                thread = threading.Thread(target=lookup.run, name="skf-run-lock lookup")
                thread.daemon = True  # a resolver that hangs keeps no process alive
                try:
                    thread.start()
                except RuntimeError as exc:  # no thread to be had
                    del self.running[host]
                    raise OSError(errno.EAGAIN, f"{host} could not be looked up: {exc}") from None
            return lookup

    def answered(self, lookup: _Lookup) -> None:
        with self.guard:
            if self.running.get(lookup.host) is lookup:
                del self.running[lookup.host]
            if lookup.failure is None:
                self.known[lookup.host] = (_SEAMS.clock(), lookup.addresses)

    def forget(self, host: str) -> None:
        """Look ``host`` up anew next time: none of its addresses could be reached (it may
        have moved)."""
        with self.guard:
            self.known.pop(host, None)

    def forget_lookups(self) -> None:
        """In a forked child: the lookups under way run in the parent's threads, which
        the child has not, so none would ever answer it; it looks its names up itself.
        A new guard: a thread of the parent may have held this one when it forked."""
        self.guard = threading.Lock()
        self.running = {}


_NAMES = _Names()
if hasattr(os, "register_at_fork"):  # Windows has no fork
    os.register_at_fork(after_in_child=_NAMES.forget_lookups)


def _connected(host: str, port: int, deadline: float) -> socket.socket:
    """A TCP connection to ``host`` (a name or an IP address) at ``port``, made by
    ``deadline``: the name's lookup and each of its addresses in turn share that one
    deadline, each address an equal part of what is left (socket.create_connection looks
    a name up with no deadline at all, and gives each address the whole timeout)."""
    import socket

    addresses = _NAMES.addresses(host, deadline)
    failure: OSError | None = None
    for tried, (family, address) in enumerate(addresses):
        until = _SEAMS.clock() + _seconds_left(deadline) / (len(addresses) - tried)
        while True:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                # A second at most on the system's clock, then the deadline is read
                # again (a connection whose every SYN is lost is tried anew meanwhile).
                sock.settimeout(_blind_wait(max(0.001, until - _SEAMS.clock())))
                sock.connect((address[0], port, *address[2:]))
            except TimeoutError as exc:
                sock.close()
                failure = exc
                if _SEAMS.clock() < min(until, deadline):
                    continue
            except OSError as exc:
                sock.close()
                failure = exc
            else:
                return sock
            break
    _NAMES.forget(host)
    raise failure or OSError(errno.EHOSTUNREACH, f"the name {host} has no address")


class _Connection:
    """A TCP connection (TLS with a ``context``); nothing waits past its ``deadline``,
    the name lookup included."""

    protocol = "a protocol"  # for messages

    def __init__(self, endpoint: str, context: ssl.SSLContext | None, deadline: float) -> None:
        import socket

        host, _, port = endpoint.rpartition(":")
        host = host.strip("[]")
        self.endpoint = endpoint
        self.sock: socket.socket = _connected(host, int(port), deadline)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if context is not None:
                self.sock = context.wrap_socket(
                    self.sock, server_hostname=host, do_handshake_on_connect=False
                )
                self._wait_for(self.sock.do_handshake, deadline)
        except BaseException:
            self.sock.close()
            raise
        self.received = bytearray()  # not yet taken apart
        self.pid = os.getpid()  # a forked child never uses its parent's (kept_connections)
        self.kept_as: tuple[object, ...] = ()  # the key it is kept under, between calls
        # Lent again from the kept ones, and no answer since: a failure before its first
        # answer may be its age (closed or reset while it was idle), not the server's.
        self.unproven = False
        self.idle: select.poll | None = None  # what sound() asks if anything came

    def close(self) -> None:
        self.sock.close()

    def sound(self) -> bool:
        """Whether this idle connection may carry a request: nothing came on it while it
        was idle (no end, no reset, nothing unasked), seen without waiting."""
        import select

        pending = getattr(self.sock, "pending", None)  # TLS: bytes it decrypted, unread
        if self.received or (pending is not None and pending()):
            return False
        if not hasattr(select, "poll"):  # Windows
            return not select.select([self.sock], [], [], 0)[0]
        if self.idle is None:  # poll, not select: select takes no descriptor past 1023
            self.idle = select.poll()
            self.idle.register(self.sock, select.POLLIN)
        return not self.idle.poll(0)

    def let_go(self) -> None:
        """Close this process's copy of the socket, sending nothing: a forked child's
        copy of its parent's connection, which the parent goes on using."""
        descriptor = self.sock.detach()
        if descriptor >= 0:
            os.close(descriptor)

    def _find(self, marker: bytes, deadline: float, limit: int, start: int = 0) -> int:
        while (found := self.received.find(marker, start)) < 0:
            if len(self.received) > limit:
                raise ValueError(f"the answer was not {self.protocol} (a line too long)")
            self._receive(deadline)
        return found

    def _wait_for(self, step: Callable[..., _T], deadline: float, *args: object) -> _T:
        """``step(*args)`` on the socket, tried again after each second it waits on the
        system's clock (which may stop while the machine sleeps) until ``deadline``."""
        while True:
            self._limit(deadline)
            try:
                return step(*args)
            except TimeoutError:
                continue  # read the deadline again

    def _limit(self, deadline: float) -> None:
        """Let the socket wait no longer than what is left of ``deadline``, and a second
        at most. Each setting is a system call: one is kept while it is no longer than
        that and at most a millisecond shorter (a wait that ends early only reads the
        deadline again), and each is set a thousandth short, so that a deadline a
        moment nearer, as a kept connection's first answer has, keeps it too."""
        wait = _blind_wait(_seconds_left(deadline))
        kept = self.sock.gettimeout()
        if kept is None or kept > wait or kept < wait - 0.001:
            self.sock.settimeout(wait * 0.999)

    def _send(self, data: bytes, deadline: float) -> None:
        """Send all of ``data`` by ``deadline``, and within a second: a request goes
        into the socket's buffer at once unless the server has stopped reading, and
        one cut short cannot be sent again on this connection (TimeoutError)."""
        self._limit(deadline)
        self.sock.sendall(data)

    def _receive(self, deadline: float, end_ok: bool = False) -> bool:
        """Receive more; False if the server closed the connection and ``end_ok``."""
        data = self._wait_for(self.sock.recv, deadline, 65536)
        if not data:
            if not end_ok:
                raise ConnectionResetError(errno.ECONNRESET, "the connection closed mid-answer")
            return False
        self.unproven = False
        self.received += data
        return True


class _Pause:
    """A waiter's pause: 5 ms growing to 100 ms, jittered against lockstep."""

    def __init__(self) -> None:
        self.next = 0.005

    def sleep(self, left: float) -> None:
        import random  # only a waiter needs it

        time.sleep(min(left, self.next * random.uniform(0.5, 1.0)))
        self.next = min(self.next * 1.5, 0.1)
