"""huey: RedisHuey (blocking BRPOP reads, the default) and its consumer with 10 worker threads."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from huey import RedisHuey

from bench.adapters.base import Adapter, console_script, payload, record, redis_url

WORKERS = 10

huey = RedisHuey("bench", url=redis_url())


@huey.task()
def noop(p: dict[str, Any]) -> None:
    start = time.time()
    record(p, start)


class HueyAdapter(Adapter):
    name = "huey"
    package = "huey"
    settings = f"huey_consumer -w {WORKERS} -k thread (RedisHuey defaults: blocking reads, scheduler every 1s)"
    batch_how = "10 threads calling the task (huey has no batch enqueue)"
    queue_key = "huey.redis.bench"

    def worker_argv(self) -> list[str]:
        return [console_script("huey_consumer"), "bench.adapters.huey_adapter.huey", "-w", str(WORKERS),
                "-k", "thread"]

    def enqueue(self, p: dict[str, Any]) -> None:
        noop(p)

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        with ThreadPoolExecutor(10) as pool:
            list(pool.map(noop, ps, chunksize=100))

    def enqueue_at(self, due: float) -> None:
        noop.schedule(args=(payload("l", due),), eta=datetime.fromtimestamp(due, tz=UTC))


ADAPTER = HueyAdapter
