"""etcd's HTTP/JSON gateway, as every etcd lock speaks to it: the endpoints tried in
turn within the call's deadline, the user's token, a connection kept from call to call, and
etcd's refusals as errors that say what to do. Compiled only for an etcd lock."""

from __future__ import annotations

import binascii
import errno
import json
import os
import re
import time

from .http1 import _HttpConnection
from .kept_connections import _KEPT, _UNPROVEN_ANSWER_SEC
from .public_surface import _OutcomeUnknown
from .seams import _SEAMS
from .server_gateway import _TLS_FAILURE, _ServerGateway

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_DURATION = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)"
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# gRPC's status codes, as etcd's gateway answers them.
_GRPC_UNAVAILABLE = 14
_GRPC_PERMISSION_DENIED = 7
_GRPC_UNAUTHENTICATED = 16
# How long a write that may be sent again waits for its answer before it is (to the
# next member): a member whose leader died unseen forwards it into the void, and it
# would wait out the call; sent again, it lands once a leader serves, or its compare
# finds the first sending landed.
_RESEND_AFTER_SEC = 1.0


def _etcd_duration(text: str) -> float:
    """Seconds of an etcdctl duration (Go's format: ``5s``, ``500ms``, ``1m30s``)."""
    parts = re.findall(_DURATION, text)
    seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    if "".join(number + unit for number, unit in parts) != text or not seconds > 0:
        raise ValueError(
            f"ETCDCTL_COMMAND_TIMEOUT must be a duration like 5s or 500ms, not {text!r}"
        )
    return seconds


def _answer_field(answer: dict[str, Any], name: str, request: str, digits: bool = False) -> str:
    """The text field ``name`` of etcd's answer; OSError if it has none."""
    value = answer.get(name)
    if isinstance(value, str) and value and (value.isdigit() or not digits):
        return value
    raise _not_etcd(request, name)


def _not_etcd(request: str, name: str) -> OSError:
    return OSError(
        errno.EPROTO,
        f"the answer to {request} had no valid {name!r}: is this etcd's client port?",
    )


def _b64(data: bytes) -> str:
    """``data`` as etcd's JSON carries bytes: base64, as text."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes etcd's JSON carries as base64 ``text``: as base64.b64decode reads it
    (ValueError if it is not base64 text, TypeError if not text), in one C call: a
    look at a line of 64 decodes some 140 keys and values."""
    return binascii.a2b_base64(text)


class _EtcdGateway(_ServerGateway):
    """What an etcd lock asks of the gateway, for an address
    ``etcd[+https]://HOST:PORT[,HOST:PORT...]/KEY``: ``post`` a request and read its
    answer. Its settings are etcdctl's: ``ETCDCTL_COMMAND_TIMEOUT``, ``ETCDCTL_USER``
    and ``ETCDCTL_PASSWORD`` (TLS: the server gateway's)."""

    name = "etcd"
    env = "ETCDCTL_"
    port = "etcd's client"
    timeout_var = "ETCDCTL_COMMAND_TIMEOUT"
    form = "{0}://HOST:PORT[,HOST:PORT...]/KEY"
    many = True
    secure = "etcd+https"
    credentials = (
        "names a user: credentials never go in the address; set ETCDCTL_USER (and"
        " ETCDCTL_PASSWORD) instead"
    )

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        env = os.environ
        timeout = _etcd_duration(env.get("ETCDCTL_COMMAND_TIMEOUT") or "5s")
        super().__init__(address, timeout, prefix)
        user, _, password = (env.get("ETCDCTL_USER") or "").partition(":")
        self.user = user
        self.password = password or env.get("ETCDCTL_PASSWORD", "")
        self.headers = {"Content-Type": "application/json"}
        self.connection: _HttpConnection | None = None
        # The last post's change was sent again, on a new connection: the kept one it
        # went on first failed before its first answer (see ``post``'s ``resendable``).
        self.resent = False

    def _connect(self, endpoint: str) -> _HttpConnection:
        """A connection to ``endpoint``: one kept from an earlier call if one is sound."""
        self._give_back()
        self.connection = self.connection_to(
            endpoint, _HttpConnection, lambda: self._open(endpoint)
        )
        return self.connection

    def _open(self, endpoint: str) -> _HttpConnection:
        return _HttpConnection(endpoint, self.tls_context(), self.deadline)

    def post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        outcome: str | None = None,
        resendable: bool = False,
    ) -> Any:
        """POST ``body`` to the first endpoint that answers. ``outcome``: a write's.
        ``resendable``: a write whose caller can tell from the answer to the same write
        sent again whether the first landed (a transaction that compares): one whose
        answer is lost (a kept connection that failed before its first answer, or none
        within _RESEND_AFTER_SEC) is sent again (``resent``) until the deadline, rather
        than left unknown at once."""
        self.resent = False
        if path != "/v3/auth/authenticate":
            self._authorize()
        payload = json.dumps(body).encode()
        # Each endpoint's first reason (later ones are often the deadline).
        failures: dict[str, str] = {}
        broken: set[str] = set()  # TLS failed: trying again cannot help
        refusing: dict[str, bool] = {}  # nothing listened there, as last tried
        started = _SEAMS.clock()
        lost: Exception | None = None  # why the answer to a write sent was lost
        while True:
            for endpoint in self.endpoints:
                left = self.deadline - _SEAMS.clock()
                if left <= 0:
                    break
                if endpoint in broken:
                    continue
                try:
                    status, answer = self._exchange(endpoint, path, payload, outcome, resendable)
                except _OutcomeUnknown:
                    raise
                except (OSError, ValueError) as exc:
                    lost = exc if self.resent else lost
                    reason = failures.setdefault(endpoint, self.describe(exc))
                    if reason.startswith(_TLS_FAILURE):
                        broken.add(endpoint)
                    refusing[endpoint] = isinstance(exc, ConnectionRefusedError)
                    continue
                refusing[endpoint] = False
                if status == 200:
                    return answer
                code = answer.get("code")
                message = answer.get("message") or answer.get("error")
                if code == _GRPC_UNAVAILABLE or status in (502, 503, 504):
                    failures.setdefault(endpoint, message or f"HTTP status {status}")
                    continue
                raise self._refusal(code, message or f"HTTP status {status}")
            # No member answered (down, electing): nothing applied, unless a write lost.
            if lost is None:
                self._give_up_if_all_refuse(refusing, started, failures)
            left = self.deadline - _SEAMS.clock()
            if left <= 0 or broken.issuperset(self.endpoints):
                break
            time.sleep(min(0.05, left))
        raise self._unanswered(failures, lost, outcome)

    def _unanswered(
        self, failures: dict[str, str], lost: Exception | None, outcome: str | None
    ) -> OSError:
        """What a post that got no answer in time raises: a write sent whose answer was
        lost (``lost``) may have been applied; else nothing was."""
        if lost is not None and outcome is not None:
            return self.lost_answer(", ".join(self.endpoints), lost, outcome)
        reasons = "; ".join(f"{endpoint}: {why}" for endpoint, why in failures.items())
        return self.unreachable(", ".join(self.endpoints), reasons)

    def _give_up_if_all_refuse(
        self, refusing: dict[str, bool], started: float, failures: dict[str, str]
    ) -> None:
        """Raise the refusal once every endpoint refused connections for the grace."""
        every_one_refused = all(refusing.get(each) for each in self.endpoints)
        if every_one_refused and self.refused_for_good(started):
            raise self.refused(", ".join(self.endpoints), failures[self.endpoints[0]])

    def _authorize(self) -> None:
        if self.user and "Authorization" not in self.headers:
            credentials = {"name": self.user, "password": self.password}
            answer = self.post("/v3/auth/authenticate", credentials)
            self.headers["Authorization"] = _answer_field(answer, "token", "authenticate")

    def _exchange(
        self, endpoint: str, path: str, payload: bytes, outcome: str | None, resendable: bool
    ) -> tuple[int, dict[str, Any]]:
        """One request to ``endpoint``: (status, answer). A kept connection that fails
        before its first answer (closed or reset while it was idle) is replaced at once
        where that is safe: a request not sent, one that changes nothing, or one whose
        caller tells from its resending whether it landed."""
        while True:
            sent = False
            connection = self.connection
            try:
                if connection is None or connection.endpoint != endpoint or not connection.reusable:
                    connection = self._connect(endpoint)
                connection.send(path, payload, self.headers, self.deadline)
                sent = True
                until = self.deadline
                if resendable:
                    until = min(until, _SEAMS.clock() + _RESEND_AFTER_SEC)
                elif connection.unproven and outcome is None:
                    # Sent again on a new one if no answer comes (see _UNPROVEN_ANSWER_SEC).
                    until = min(until, _SEAMS.clock() + _UNPROVEN_ANSWER_SEC)
                status = connection.start_answer(until)
                body = connection.rest(until)
                try:
                    answer = json.loads(body.decode("utf-8") or "{}")
                except ValueError:
                    raise ValueError("the answer was not JSON") from None
            except (OSError, ValueError) as exc:
                self._hang_up()  # cut short: never read it out of step
                if connection is not None and connection.unproven:
                    _KEPT.discard(connection.kept_as)  # its siblings likely went too
                    if not sent or outcome is None:
                        continue  # a new connection (never unproven: once a request)
                    if resendable:
                        self.resent = True
                        continue
                if sent and outcome is not None:
                    if not resendable:
                        raise self.lost_answer(endpoint, exc, outcome) from None
                    self.resent = True
                    raise  # sent again until the deadline: the next member, each in turn
                raise
            except BaseException:
                self._hang_up()  # an interrupt: never read its answer out of step
                raise
            return status, answer if isinstance(answer, dict) else {}

    def _give_back(self) -> None:
        """Keep the connection, its answer read whole, for the next call."""
        connection = self.connection
        self.connection = None
        if connection is not None and connection.reusable:
            _KEPT.keep(connection)
        elif connection is not None:
            connection.close()

    def _hang_up(self) -> None:
        """Close the connection: one cut short could be read out of step."""
        if self.connection is not None:
            self.connection.close()
        self.connection = None

    def _refusal(self, code: object, message: str) -> OSError:
        if code == _GRPC_PERMISSION_DENIED:
            who = f"user {self.user!r}" if self.user else "an anonymous user"
            return PermissionError(
                errno.EACCES, f"etcd denied {who} access to the key {self.key_text}: {message}"
            )
        if "user name is empty" in message:
            return PermissionError(
                errno.EACCES, "etcd wants a user name: set ETCDCTL_USER (and ETCDCTL_PASSWORD)"
            )
        if code == _GRPC_UNAUTHENTICATED or "authentication failed" in message:
            return PermissionError(
                errno.EACCES,
                f"etcd refused authentication ({message}); check ETCDCTL_USER and ETCDCTL_PASSWORD",
            )
        return OSError(errno.EIO, f"etcd refused the request: {message} (code {code})")
