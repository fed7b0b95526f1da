"""RQ: Queue.enqueue / enqueue_many and one `rq worker --with-scheduler` (the default Worker forks per job)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from redis import Redis
from rq import Queue

from bench.adapters.base import Adapter, console_script, payload, record


def noop(p: dict[str, Any]) -> None:
    start = time.time()
    record(p, start)


class RqAdapter(Adapter):
    name = "rq"
    package = "rq"
    settings = "rq worker --with-scheduler default (Worker: a fork per job; scheduler polls every 1s)"
    batch_how = "Queue.enqueue_many (one pipeline)"
    queue_key = "rq:queue:default"
    drain_cap = 500  # a fork per job: ~30 tasks/s
    shared_count = True

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue = Queue("default", connection=Redis.from_url(url))

    def worker_argv(self) -> list[str]:
        return [console_script("rq"), "worker", "--url", self.url, "--with-scheduler", "--quiet", "default"]

    def enqueue(self, p: dict[str, Any]) -> None:
        self.queue.enqueue(noop, p)

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        self.queue.enqueue_many([Queue.prepare_data(noop, (p,)) for p in ps])

    def enqueue_at(self, due: float) -> None:
        self.queue.enqueue_at(datetime.fromtimestamp(due, tz=UTC), noop, payload("l", due))


ADAPTER = RqAdapter
