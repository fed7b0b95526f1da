"""The PING a worker or a scheduler sends before it starts: Redis answers, or asynqpy's error says why not."""

from __future__ import annotations

import time
from typing import Any

from asynqpy.rdb.failures import reaching


async def ping(client: Any, url: str) -> float:
    """One PING on an asyncio redis-py client: the round-trip time in seconds. Raises RedisUnavailableError (the
    subclass of its kind) when Redis cannot be reached or answers "not now", RedisCommandError for any other error
    reply, naming url with its password masked."""
    t0 = time.perf_counter()
    with reaching(url):
        await client.ping()
    return time.perf_counter() - t0
