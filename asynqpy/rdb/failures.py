"""The one classification of Redis trouble, the one translator into asynqpy's errors, and the one log of it.

Transient trouble passes by itself: the server cannot be reached (refused, reset, timed out), or it answers an
error reply that says "not now" (BUSY, LOADING, OOM, READONLY, MASTERDOWN, NOREPLICAS, TRYAGAIN, CLUSTERDOWN,
MISCONF). Every background loop logs it once per kind per interval, backs off with jitter and tries again; a
public call raises RedisUnavailableError (or the subclass of its kind) naming the server, password masked.

Anything else Redis answers is a bug of ours or of the data (a script error, WRONGTYPE, an unknown command):
RedisCommandError at a public boundary, logged with its trace (rate limited) by a loop, which goes on too.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    MasterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asynqpy.connection import SOCKET_TIMEOUT, cluster_unreachable, is_cluster
from asynqpy.errors import AsynqError, RedisCommandError, RedisUnavailableError, unavailable_error

log = logging.getLogger("asynqpy")

# redis-py's errors: its cluster client raises RedisClusterException (e.g. RedisClusterUnreachableError, no node
# answering a refresh), which is no RedisError. With socket errors: what may come from Redis or the way to it, for
# the `except` clauses that translate.
REDIS_PY_ERRORS: tuple[type[BaseException], ...] = (RedisError, RedisClusterException)
REDIS_ERRORS: tuple[type[BaseException], ...] = (*REDIS_PY_ERRORS, OSError)

# Error-reply codes that mean "not now": the command may succeed when asked again later.
TRANSIENT_CODES = ("BUSY", "LOADING", "OOM", "READONLY", "MASTERDOWN", "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN",
                   "MISCONF")
# redis-py strips the code from the message of the replies it maps to a class of its own: the class says it.
_CLASS_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (BusyLoadingError, "LOADING"),  # before ConnectionError: redis-py files LOADING under it
    (AuthenticationError, "auth"),
    (OutOfMemoryError, "OOM"),
    (ReadOnlyError, "READONLY"),
    (MasterDownError, "MASTERDOWN"),
    (TryAgainError, "TRYAGAIN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (RedisTimeoutError, "timeout"),
    (TimeoutError, "timeout"),
    (RedisConnectionError, "connection"),
    (ConnectionError, "connection"),
    (OSError, "connection"),
)


def kind_of(exc: BaseException) -> str | None:
    """The kind of transient trouble exc is ("connection", "timeout", "auth", or a reply code such as "BUSY"),
    None when it is no Redis trouble that passes by itself (a bug, or not from Redis at all).

    Works on redis-py's exceptions (sync, asyncio, cluster), on raw error replies read by our own parser and
    on our RedisUnavailableError. A reply raised inside a script ("... OOM command not allowed ...") counts as
    its code.
    """
    if isinstance(exc, RedisUnavailableError):
        return exc.kind
    for cls, kind in _CLASS_KINDS:
        if isinstance(exc, cls):
            return kind
    if isinstance(exc, ResponseError):  # a plain reply (ours are parsed raw): its code says what it is
        return _reply_kind(str(exc))
    if isinstance(exc, RedisClusterException):  # no node answered: as one server down; else slots not covered...
        return "connection" if cluster_unreachable(exc) else "CLUSTERDOWN"
    return None


def _reply_kind(message: str) -> str | None:
    head = message.split(" ", 1)[0].lstrip("-")
    if head in TRANSIENT_CODES:
        return head
    # Inside a script Redis words them as "ERR Error running script ...: OOM command not allowed ..." or
    # "... -BUSY ...": the code still says what it was.
    for code in TRANSIENT_CODES:
        if f" {code} " in message or f"-{code} " in message or f": {code} " in message:
            return code
    if message.startswith("ERR max number of clients"):
        return "connection"
    return None


def is_transient(exc: BaseException) -> bool:
    """True for Redis trouble that passes by itself (see kind_of)."""
    return kind_of(exc) is not None


def is_redis_error(exc: BaseException) -> bool:
    """True for anything that came from Redis or the way to it: redis-py's errors, socket errors, ours."""
    return isinstance(exc, (*REDIS_ERRORS, RedisUnavailableError, RedisCommandError))


def translate(exc: BaseException, url: str) -> AsynqError:
    """exc (redis-py's, or a socket error) as asynqpy's error: RedisUnavailableError (the subclass of its kind)
    for transient trouble, RedisCommandError for any other error reply. Our own errors pass unchanged."""
    if isinstance(exc, AsynqError):
        return exc
    kind = kind_of(exc)
    if kind is not None:
        return unavailable_error(url, exc, kind)
    return RedisCommandError(url, exc)


@contextlib.contextmanager
def reaching(url: str) -> Iterator[None]:
    """Raise asynqpy's error (translate()) for any Redis error inside the block; ours pass unchanged.

    Works around awaits too: `with reaching(url): await client.ping()`.
    """
    try:
        yield
    except AsynqError:
        raise
    except REDIS_ERRORS as exc:
        raise translate(exc, url) from exc


def url_of(client: Any) -> str:
    """A redis:// (or unix://) URL naming the server a redis-py client (sync or asyncio) talks to; for a cluster
    client, redis+cluster:// with its startup nodes. Never holds a password."""
    if is_cluster(client):
        seeds = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None) or {}
        return f"redis+cluster://{','.join(seeds) or 'unknown'}/"
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    if kw.get("path"):
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    auth = f"{kw.get('username') or ''}:***@" if kw.get("password") else ""
    tls = "SSL" in getattr(getattr(client, "connection_pool", None), "connection_class", type).__name__
    where = f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
    return f"{'rediss' if tls else 'redis'}://{auth}{where}"


def backoff_delay(attempt: int, *, base: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before try number attempt + 1 (attempt counts from 1): exponential up to cap, with full
    jitter in its upper half so that many workers do not come back in step."""
    top = min(cap, base * (2 ** max(0, attempt - 1)))
    return random.uniform(top / 2, top)


@dataclass
class Degraded:
    """Transient Redis trouble that has lasted since `since` (time.monotonic()), of one kind."""

    kind: str
    since: float
    message: str

    def describe(self, now: float | None = None) -> str:
        """'degraded: Redis answers BUSY since 12 s' (or 'cannot be reached', 'times out')."""
        secs = int((time.monotonic() if now is None else now) - self.since)
        return f"degraded: {describe_kind(self.kind)} since {secs} s"


def describe_kind(kind: str) -> str:
    """A few words on a kind of trouble: 'Redis answers BUSY', 'Redis cannot be reached'."""
    if kind == "connection":
        return "Redis cannot be reached"
    if kind == "timeout":
        return "Redis times out"
    if kind == "auth":
        return "Redis refuses our credentials"
    return f"Redis answers {kind}"


class TroubleLog:
    """What one loop (or client) has met lately: logs transient trouble once per kind per `every` seconds (no
    traceback), a bug with its trace at most as often, and keeps `degraded` set while the trouble lasts.

    note() for each failure, ok() after a call that Redis answered (never after a pass that made none). attempts
    counts failures in a row (for backoff_delay), failures all of them (a pass compares it to see whether it met
    any). The trouble counts from the first failure, or for a timeout from when the call that timed out began (a
    socket timeout earlier, not before the last success): "answers again ... for N s" says how long it lasted.
    """

    def __init__(self, name: str, *, every: float = 10.0, logger: logging.Logger | None = None) -> None:
        self.name = name
        self.every = every
        self.log = logger or log
        self.degraded: Degraded | None = None
        self.attempts = 0
        self.failures = 0
        self._last: dict[str, float] = {}
        self._last_ok = time.monotonic()

    def note(self, exc: BaseException, what: str = "") -> str | None:
        """Record one failure; returns its transient kind (None: a bug). Logs when this kind was not logged in
        the last `every` seconds."""
        self.attempts += 1
        self.failures += 1
        kind = kind_of(exc)
        now = time.monotonic()
        key = kind or f"bug:{type(exc).__name__}"
        if kind is not None and (self.degraded is None or self.degraded.kind != kind):
            began = max(now - SOCKET_TIMEOUT, self._last_ok) if kind == "timeout" else now
            self.degraded = Degraded(kind, began if self.degraded is None else self.degraded.since, str(exc))
        if now - self._last.get(key, -1e18) >= self.every:
            self._last[key] = now
            where = f"{self.name}: {what}: " if what else f"{self.name}: "
            if kind is not None:
                self.log.warning("%s%s (%s); retrying", where, describe_kind(kind), _one_line(exc))
            else:
                self.log.error("%sunexpected error: %s", where, _one_line(exc), exc_info=exc)
        return kind

    def ok(self) -> None:
        """Redis answered a call: the trouble is over (logged once when it was, with how long it lasted)."""
        now = self._last_ok = time.monotonic()
        if self.degraded is not None:
            secs = now - self.degraded.since
            self.log.info("%s: Redis answers again (%s for %s s)", self.name, describe_kind(self.degraded.kind),
                          f"{secs:.1f}" if secs < 10 else f"{secs:.0f}")
        self.degraded = None
        self.attempts = 0

    def delay(self, *, base: float = 0.1, cap: float = 5.0) -> float:
        """The back-off before the next try after self.attempts failures in a row."""
        return backoff_delay(self.attempts, base=base, cap=cap)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# Kinds of transient trouble in which Redis still answers reads but refuses writes (out of memory under
# noeviction, a replica, too few replicas, a failed snapshot): a reader may go on without writing.
WRITE_REFUSALS = ("OOM", "READONLY", "NOREPLICAS", "MISCONF")


def refuses_writes(exc: BaseException) -> bool:
    """True when exc says Redis refuses writes for now but may still answer reads (WRITE_REFUSALS)."""
    return kind_of(exc) in WRITE_REFUSALS
