"""asynqpy: Client / Client.enqueue_many for producing, one `Server` process (concurrency 10) for working."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from asynqpy import Client, Task
from bench.adapters.base import TASK_TYPE, Adapter, payload, record, redis_url

CONCURRENCY = 10


def _task(p: dict[str, Any]) -> Task:
    return Task(TASK_TYPE, json.dumps(p).encode())


class AsynqpyAdapter(Adapter):
    name = "asynqpy"
    package = "asynqpy"
    settings = f"Server(concurrency={CONCURRENCY}, queues={{'default': 1}}), async no-op handler, one process"
    batch_how = "Client.enqueue_many (pipelined, chunks of 1000)"
    queue_key = "asynq:{default}:pending"

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.client = Client(url)

    def unavailable(self) -> str | None:
        try:
            from asynqpy import ServeMux, Server  # noqa: F401
        except ImportError as exc:
            return f"asynqpy has no worker yet ({exc})"
        return None

    def worker_argv(self) -> list[str]:
        return [sys.executable, "-m", "bench.adapters.asynqpy_adapter"]

    def enqueue(self, p: dict[str, Any]) -> None:
        self.client.enqueue(_task(p))

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        for res in self.client.enqueue_many([_task(p) for p in ps]):
            if isinstance(res, Exception):
                raise res

    def enqueue_at(self, due: float) -> None:
        self.client.enqueue(_task(payload("l", due)), process_at=datetime.fromtimestamp(due, tz=UTC))

    def close(self) -> None:
        self.client.close()


ADAPTER = AsynqpyAdapter


def main() -> None:
    """The worker process: one asynqpy Server, run in the foreground until SIGTERM."""
    from asynqpy import ReceivedTask, ServeMux, Server

    mux = ServeMux()

    @mux.handler(TASK_TYPE)
    async def noop(task: ReceivedTask) -> None:
        start = time.time()
        record(json.loads(task.payload), start)

    Server(redis_url(), concurrency=CONCURRENCY, queues={"default": 1}).run(mux)


if __name__ == "__main__":
    main()
