"""Redis's gateway, as every Redis (or Valkey) lock speaks to it: one connection to a
node (authenticated, TLS with ``rediss``), commands pipelined on it within the step's
deadline, a Redis Cluster's redirects followed to the node that serves the lock's keys,
and Redis's refusals as errors a person can act on. Compiled only for a Redis lock."""

from __future__ import annotations

import errno
import os
import re
import time

from .inputs import _PLAIN_DECIMAL
from .kept_connections import _KEPT, _UNPROVEN_ANSWER_SEC
from .public_surface import _MAX_WAIT_SEC
from .quoting import _quoted
from .resp import _errors_in, _RedisError, _RespConnection
from .seams import _SEAMS
from .server_gateway import _TLS_FAILURE, _ServerGateway

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .resp import _Command

# A Redis Cluster's answers that send a call to another node, followed this often at
# most per call (a slot moves once; more means the cluster is being reconfigured).
_REDIRECTS_MAX = 5
_REDIRECT_PAUSE_SEC = 0.05
# Errors after which nothing ran and the server serves soon (loading, promoting, busy,
# or a Cluster slot in mid-migration: TRYAGAIN).
_REDIS_BUSY = ("LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")


def _redis_timeout(text: str) -> float:
    """Seconds of SKF_REDIS_TIMEOUT, a plain number (at most a day)."""
    if not _PLAIN_DECIMAL.fullmatch(text) or not 0 < float(text) <= _MAX_WAIT_SEC:
        raise ValueError(
            f"SKF_REDIS_TIMEOUT must be a number of seconds from 0 to 86400, like 5 or 0.5,"
            f" not {text!r}"
        )
    return float(text)


def _with_asking(commands: tuple[_Command, ...]) -> list[_Command]:
    """``commands`` for a node an ASK sent them to: ASKING before each one outside a
    transaction, and before its MULTI (inside one, the node keeps it until EXEC)."""
    sending: list[_Command] = []
    inside = False
    for command in commands:
        if not inside:
            sending.append(("ASKING",))
        sending.append(command)
        if command[0] == "MULTI":
            inside = True
        elif command[0] in ("EXEC", "DISCARD"):
            inside = False
    return sending


class _CommandDenied(PermissionError):
    """Redis refused the user a ``command`` (NOPERM), not a key."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(errno.EACCES, message)
        self.command = command


def _denied_command(text: str) -> str | None:
    """The command a NOPERM refusal names (Redis and Valkey: "... no permissions to run
    the 'time' command"), lowercase; None where it names a key or a channel."""
    _, quote, rest = text.partition(" the '")
    name, closing, after = rest.partition("'")
    if quote and closing and after.startswith(" command"):
        return name.lower()
    return None


class _NotApplied(Exception):
    """A transaction under WATCH did not run (redirected, or the node was busy)."""


class _RedisGateway(_ServerGateway):
    """The conversation with Redis or Valkey for one lock's address
    (``redis[s]://[USER@]HOST[:PORT]/KEY``): a connection (authenticated, TLS with
    ``rediss``), commands pipelined on it within the step's deadline, a Redis Cluster's
    redirects followed to the node that serves the lock's keys, and Redis's refusals as
    errors a person can act on. A waiter's ``bell`` is its connection too: a redirect
    ends it."""

    name = "Redis"
    env = "SKF_REDIS_"
    port = "Redis's"
    timeout_var = "SKF_REDIS_TIMEOUT"
    form = "{0}://HOST[:PORT]/KEY or {0}://USER@HOST[:PORT]/KEY"
    default_port = 6379
    users = True
    secure = "rediss"
    credentials = "holds a password: a password never goes in the address; set REDISCLI_AUTH"

    def __init__(self, address: str, prefix: bool = False) -> None:
        """``prefix``: the address's KEY is a prefix of the locks to list (may be empty)."""
        env = os.environ
        super().__init__(address, _redis_timeout(env.get("SKF_REDIS_TIMEOUT") or "5"), prefix)
        (self.endpoint,) = self.endpoints
        # Bytes as given: an argument may hold any (surrogate-escaped).
        self.key = self.key_text.encode("utf-8", "surrogateescape")
        self.password = env.get("REDISCLI_AUTH")
        self.connection: _RespConnection | None = None
        self.watched: _RespConnection | None = None  # the one whose WATCH is on KEY
        self.bell: _RespConnection | None = None  # a waiter's, blocked on its bell
        # True once a Cluster's ASK sent the lock's keys to the node importing their
        # slot: each command there goes after an ASKING (harmless once it owns it).
        self.asking = False

    def _open(self) -> _RespConnection:
        connection = _RespConnection(self.endpoint, self.tls_context(), self.deadline)
        if self.password is not None or self.user:
            who = (self.user,) if self.user else ()
            try:
                connection.send([("AUTH", *who, self.password or "")], self.deadline)
                answer = connection.answer(self.deadline)
            except BaseException:
                connection.close()
                raise
            if isinstance(answer, _RedisError):
                connection.close()
                raise self._refusal(answer)
        return connection

    def call(
        self,
        *commands: _Command,
        outcome: str | None = None,
        write: bool = False,
        watched: bool = False,
        raw: bool = False,
    ) -> list[Any]:
        """The answers to ``commands``, followed to the node a Redis Cluster redirects
        them to; a ``write`` that was sent is not tried again. ``watched``: a
        transaction under an earlier call's WATCH, which a redirect or a busy node ends
        in _NotApplied: sent again it would run without its WATCH. ``raw``: the answers
        as they came, error answers among them (nothing redirected)."""
        failure = None
        redirects = 0
        started = _SEAMS.clock()
        while True:
            connection = self.connection
            sent = False
            try:
                if connection is None:
                    connection = self.connection_to(self.endpoint, _RespConnection, self._open)
                    self.connection = connection
                sending = self._sending(connection, commands)
                deadline = self.deadline
                if connection.unproven and not (write or watched or outcome is not None):
                    # Sent again on a new one if no answer comes (see _UNPROVEN_ANSWER_SEC).
                    deadline = min(deadline, _SEAMS.clock() + _UNPROVEN_ANSWER_SEC)
                connection.send(sending, deadline)
                sent = True
                answers = self._answers(connection, sending, deadline)
            except (OSError, ValueError) as exc:
                self._drop()
                if watched and not sent:
                    # EXEC, the transaction's last bytes, never left: it did not run. Sent
                    # on a new connection it would run without its WATCH: read again.
                    raise _NotApplied from None
                if sent and (outcome is not None or write):
                    raise self._lost(exc, outcome) from None
                if connection is not None and connection.unproven:
                    # A kept connection closed or reset while it was idle (a restart, a
                    # proxy) before it said a word: the others kept with it likely were
                    # too. A new one at once (never unproven: this happens once a call).
                    _KEPT.discard(connection.kept_as)
                    continue
                reason = self._passing(exc, started)
                failure = failure or reason
            except BaseException:
                self._drop()  # an interrupt: never read its answers out of step
                raise
            else:
                errors = _errors_in(answers)
                if raw or not errors:
                    return answers
                if self._redirected(errors[0], redirects, watched):
                    redirects += 1
                    continue
                failure = errors[0].text
            left = self.deadline - _SEAMS.clock()
            if left <= 0:
                raise self.unreachable(self.endpoint, failure)
            time.sleep(min(0.05, left))

    def _sending(
        self, connection: _RespConnection, commands: tuple[_Command, ...]
    ) -> list[_Command]:
        """``commands`` as sent on ``connection``: after an UNWATCH where an earlier call
        left a WATCH on it, with ASKING where an ASK sent them."""
        asked = (("UNWATCH",), *commands) if connection.watching else commands
        return _with_asking(asked) if self.asking else list(asked)

    def _answers(
        self, connection: _RespConnection, sending: list[_Command], deadline: float
    ) -> list[Any]:
        """The answers to what _sending sent, without ASKING's and UNWATCH's."""
        answers = connection.answers(len(sending), deadline)
        if self.asking:
            answers = [a for c, a in zip(sending, answers, strict=True) if c[0] != "ASKING"]
        if connection.watching:
            connection.watching = False
            del answers[0]  # UNWATCH's
        return answers

    def _lost(self, exc: Exception, outcome: str | None) -> OSError:
        """The failure of a change that was sent (``outcome``: what it may have done)."""
        if outcome is not None:
            return self.lost_answer(self.endpoint, exc, outcome)
        return OSError(errno.EIO, f"Redis at {self.endpoint}: {self.describe(exc)}")

    def _passing(self, exc: Exception, since: float) -> str:
        """Why a request that changed nothing failed, if trying again may help (else the
        error it means is raised): a refusal, after ``since``, is given up on in time."""
        reason = self.describe(exc)
        if isinstance(exc, PermissionError):
            raise exc  # trying again cannot help
        if reason.startswith(_TLS_FAILURE):
            raise OSError(errno.EPROTO, f"Redis at {self.endpoint}: {reason}") from None
        self.give_up_if_refused(exc, since, self.endpoint, reason)
        return reason

    def _redirected(self, error: _RedisError, redirects: int, watched: bool) -> bool:
        """True if ``error`` sent the call to another node; False if the node is busy
        (try again soon); else the refusal ``error`` means."""
        if error.code in ("MOVED", "ASK") and redirects < _REDIRECTS_MAX:
            # Nothing of a redirected command ran; the node it names serves it. Sent on
            # again, the nodes are still telling each other of a slot's move (slow on a
            # busy machine): each further redirect waits a little longer (0.75 s in all).
            if redirects:
                pause = _REDIRECT_PAUSE_SEC * 2 ** (redirects - 1)
                time.sleep(min(pause, max(0.0, self.deadline - _SEAMS.clock())))
            self._redirect(error)
            if watched:
                raise _NotApplied
            return True
        if error.code not in _REDIS_BUSY:
            raise self._refusal(error)
        if watched:
            # The lock call reads again and retries; a slot's keys finish moving within
            # moments, so its tries (20 of them) span about 2 s.
            time.sleep(min(0.1, max(0.0, self.deadline - _SEAMS.clock())))
            raise _NotApplied
        return False

    def _redirect(self, error: _RedisError) -> None:
        """Go to the node a MOVED or ASK answer names (ASK: with ASKING, for now)."""
        found = re.fullmatch(r"(MOVED|ASK) [0-9]+ (.*:[0-9]{1,5})", error.text)
        if found is None:
            raise self._refusal(error)
        self._stop_listening()
        self._go(self._node_address(found[2]), asking=found[1] == "ASK")

    def _node_address(self, where: str) -> str:
        """The endpoint of a node a Cluster names as ``HOST:PORT``."""
        host, _, port = where.rpartition(":")
        if not host or host == "?":  # the node does not know its name: the same host
            host = self.endpoint.rpartition(":")[0]
        elif ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address
        return f"{host}:{port}"

    def _go(self, endpoint: str, asking: bool = False) -> None:
        """Send what follows to the node at ``endpoint`` (``asking``: after ASKING)."""
        if endpoint != self.endpoint:
            self._give_back()
            self.endpoint = endpoint
        self.asking = asking

    def _stop_listening(self) -> None:
        if self.bell is not None:
            self.bell.close()
            self.bell = None

    def _drop(self) -> None:
        """Close the connection: one cut short could be read out of step."""
        if self.connection is not None:
            self.connection.close()
        self.connection = None
        self.watched = None

    def _give_back(self) -> None:
        """Keep the connection, every answer read, for the next call (which first undoes
        a WATCH this one left on it)."""
        connection = self.connection
        if connection is not None:
            connection.watching = self.watched is connection
            _KEPT.keep(connection)
        self.connection = None
        self.watched = None

    def _refusal(self, error: _RedisError) -> OSError:
        code = error.code
        text = error.text
        who = f"user {self.user!r}" if self.user else "the default user"
        if code == "ERR" and "AUTH" in text.upper():
            code = "WRONGPASS"  # before ACLs, or no password set
        key = self.key.decode("utf-8", "replace")
        denied = {
            "NOAUTH": f"Redis wants a password ({text}): set REDISCLI_AUTH",
            "WRONGPASS": f"Redis refused {who} ({text}); check the user in the address"
            " and REDISCLI_AUTH",
            "NOPERM": f"Redis denied {who} access to the lock's keys ({key}): {text}",
        }
        command = _denied_command(text) if code == "NOPERM" else None
        if command is not None:
            return _CommandDenied(
                command,
                f"Redis denied {who} the command {command.upper()} ({text}): give the user"
                f" +{command} (the commands a user needs: docs/redis.md, Permissions)",
            )
        if code in denied:
            return PermissionError(errno.EACCES, denied[code])
        advice = {
            "WRONGTYPE": f"a key of the lock {self.lock} holds another type of value, not"
            f" this tool's ({text}); {self.by_hand()} if it is no longer needed",
            "MOVED": f"a Redis Cluster sent the lock's keys from node to node more than"
            f" {_REDIRECTS_MAX} times ({text}): its slots are being moved; try again once"
            " the cluster is stable",
            "READONLY": f"{self.endpoint} is a replica ({text}): give the primary's address",
        }
        advice["ASK"] = advice["MOVED"]
        return OSError(errno.EIO, advice.get(code, f"Redis refused the request: {text}"))

    def by_hand(self) -> str:
        # The address's own node; -c follows a Cluster's redirect, as this store does.
        host, _, port = self.endpoints[0].rpartition(":")
        key = self.key.decode("utf-8", "surrogateescape")
        return f"delete its key (redis-cli -c -h {host.strip('[]')} -p {port} DEL {_quoted(key)})"
