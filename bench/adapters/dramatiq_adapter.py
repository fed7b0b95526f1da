"""dramatiq: RedisBroker and the dramatiq command with one process of 8 threads (its default thread count)."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.adapters.base import Adapter, console_script, payload, record, redis_url

THREADS = 8

broker = RedisBroker(url=redis_url())
dramatiq.set_broker(broker)


@dramatiq.actor
def noop(p: dict[str, Any]) -> None:
    start = time.time()
    record(p, start)


class DramatiqAdapter(Adapter):
    name = "dramatiq"
    package = "dramatiq"
    settings = f"dramatiq --processes 1 --threads {THREADS}, RedisBroker and default middleware"
    batch_how = "10 threads calling actor.send (dramatiq has no batch enqueue)"
    queue_key = "dramatiq:default"

    def worker_argv(self) -> list[str]:
        return [console_script("dramatiq"), "bench.adapters.dramatiq_adapter", "--processes", "1",
                "--threads", str(THREADS)]

    def enqueue(self, p: dict[str, Any]) -> None:
        noop.send(p)

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        with ThreadPoolExecutor(10) as pool:
            list(pool.map(noop.send, ps, chunksize=100))

    def enqueue_at(self, due: float) -> None:
        # dramatiq takes a delay in ms from its own int(time()*1000); state the due time from a `now`
        # that is never later than the one it reads, so the due time we record is never after its own
        now_ms = math.floor(time.time() * 1000)
        delay_ms = max(0, math.ceil(due * 1000) - now_ms)
        noop.send_with_options(args=(payload("l", (now_ms + delay_ms) / 1000),), delay=delay_ms)


ADAPTER = DramatiqAdapter
