"""Turns redis-py's "cannot reach the server" errors into asynqpy's RedisUnavailableError, naming the server."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from redis.exceptions import ClusterDownError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asynqpy.connection import is_cluster
from asynqpy.errors import RedisUnavailableError

# A Redis Cluster that is resharding or electing a new primary answers CLUSTERDOWN or TRYAGAIN for a moment:
# unavailable too, as a server that cannot be reached.
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError)


def url_of(client: Any) -> str:
    """A redis:// (or unix://) URL naming the server a redis-py client (sync or asyncio) talks to; for a cluster
    client, redis+cluster:// with its startup nodes."""
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


@contextlib.contextmanager
def reaching(url: str) -> Iterator[None]:
    """Raise RedisUnavailableError(url, reason) for a connection or timeout error inside the block.

    Works around awaits too: `with reaching(url): await client.ping()`.
    """
    try:
        yield
    except UNREACHABLE as exc:
        raise RedisUnavailableError(url, exc) from exc
