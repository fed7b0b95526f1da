"""saq: a Redis Queue and the saq command with one worker process (concurrency 10, its default)."""

from __future__ import annotations

import math
import time
from typing import Any

from saq import Queue

from bench.adapters.base import AsyncAdapter, console_script, payload, record, redis_url

CONCURRENCY = 10


async def noop(ctx: Any, *, p: dict[str, Any]) -> None:
    start = time.time()
    record(p, start)


def settings() -> dict[str, Any]:
    return {"queue": Queue.from_url(redis_url()), "functions": [noop], "concurrency": CONCURRENCY}


class SaqAdapter(AsyncAdapter):
    name = "saq"
    package = "saq"
    settings = f"saq settings --workers 1, concurrency={CONCURRENCY}, default timers (schedule poll every 1s)"
    batch_how = "100 enqueues in flight with asyncio.gather (saq has no batch enqueue)"
    queue_key = "saq:default:queued"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue.from_url(url)
        self.run(self.queue.connect())

    def worker_argv(self) -> list[str]:
        return [console_script("saq"), "bench.adapters.saq_adapter.settings", "--workers", "1"]

    async def aenqueue(self, p: dict[str, Any]) -> None:
        await self.queue.enqueue("noop", p=p)

    async def aenqueue_at(self, due: float) -> None:
        at = math.ceil(due)  # saq schedules in whole epoch seconds
        await self.queue.enqueue("noop", p=payload("l", float(at)), scheduled=at)

    async def aclose(self) -> None:
        await self.queue.disconnect()


ADAPTER = SaqAdapter
