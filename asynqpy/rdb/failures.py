"""Turns redis-py's "cannot reach the server" errors into asynqpy's RedisUnavailableError, naming the server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asynqpy.errors import RedisUnavailableError

UNREACHABLE = (RedisConnectionError, RedisTimeoutError)


def url_of(client: Any) -> str:
    """A redis:// (or unix://) URL naming the server a redis-py client (sync or asyncio) talks to."""
    kw = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    if kw.get("path"):
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    auth = f"{kw.get('username') or ''}:***@" if kw.get("password") else ""
    tls = "SSL" in getattr(getattr(client, "connection_pool", None), "connection_class", type).__name__
    where = f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
    return f"{'rediss' if tls else 'redis'}://{auth}{where}"


@contextlib.contextmanager
def reaching(url: str) -> Iterator[None]:
    """Raise RedisUnavailableError(url, reason) for a connection or timeout error inside the block.

    Works around awaits too: `with reaching(url): await client.ping()`.
    """
    try:
        yield
    except UNREACHABLE as exc:
        raise RedisUnavailableError(url, exc) from exc
