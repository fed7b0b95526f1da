"""arq: create_pool / enqueue_job and the arq command (one process, max_jobs 10 and poll_delay 0.5s, its defaults)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, ClassVar

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings

from bench.adapters.base import AsyncAdapter, ceil_to, console_script, payload, record, redis_url


async def noop(ctx: Any, p: dict[str, Any]) -> None:
    start = time.time()
    record(p, start)


class WorkerSettings:
    functions: ClassVar[list[Any]] = [noop]
    redis_settings = RedisSettings.from_dsn(redis_url())


class ArqAdapter(AsyncAdapter):
    name = "arq"
    package = "arq"
    settings = "arq WorkerSettings with defaults: max_jobs=10, poll_delay=0.5s, keep_result=3600s"
    batch_how = "100 enqueue_job calls in flight with asyncio.gather (arq has no batch enqueue)"
    queue_key = "arq:queue"
    drain_cap = 5000  # ~200 tasks/s: 20,000 would take 100 s

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.pool: ArqRedis = self.run(create_pool(RedisSettings.from_dsn(url)))

    def worker_argv(self) -> list[str]:
        return [console_script("arq"), "bench.adapters.arq_adapter.WorkerSettings"]

    async def aenqueue(self, p: dict[str, Any]) -> None:
        await self.pool.enqueue_job("noop", p)

    async def aenqueue_at(self, due: float) -> None:
        at = ceil_to(due, 0.001)  # arq stores whole milliseconds
        await self.pool.enqueue_job("noop", payload("l", at), _defer_until=datetime.fromtimestamp(at, tz=UTC))

    async def aclose(self) -> None:
        await self.pool.aclose()


ADAPTER = ArqAdapter
