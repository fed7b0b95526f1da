"""Which clients are plain (no cluster, no Sentinel): the runners send pre-packed commands on their pools."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aredis

from asynqpy.connection import is_cluster


def plain_pool(client: Any) -> Any:
    """The connection pool of a plain (sync or asyncio) Redis client, else None (cluster and Sentinel clients
    keep redis-py's own command path)."""
    if isinstance(client, (redis.Redis, aredis.Redis)) and not is_cluster(client):
        pool = getattr(client, "connection_pool", None)
        # Sentinel pools find the primary anew on failover through redis-py's retries: they keep its path.
        if type(pool) in PLAIN_POOLS:
            return pool
    return None


PLAIN_POOLS = (redis.ConnectionPool, redis.BlockingConnectionPool, aredis.ConnectionPool,
               aredis.BlockingConnectionPool)
