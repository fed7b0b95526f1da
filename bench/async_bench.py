"""AsyncClient.enqueue under concurrency, the two ways real code writes it, with and without per-call options.

    python -m bench.async_bench [--tasks 20000] [--redis-url URL]

Patterns: `loop` is 100 coroutines each enqueueing its share in a loop; `semaphore` gathers one coroutine per
task behind asyncio.Semaphore(100). Each runs with default options and with `queue="emails"` given per call
(a new TaskOptions every call, as `await ac.enqueue(task, queue="emails")` makes). Prints tasks/s per line,
then what each pattern costs asyncio alone (an enqueue that a batcher answers at the next loop pass, no Redis):
the Semaphore pattern's task per coroutine, its wait and its wake-up are that much dearer than a loop's step.
Without --redis-url a private embedded server is started and stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from asynqpy import AsyncClient, Task
from bench.common import bench_redis

COROUTINES = 100


async def looping(ac: AsyncClient, tasks: list[Task], fields: dict[str, Any]) -> None:
    async def worker(mine: list[Task]) -> None:
        for t in mine:
            await ac.enqueue(t, **fields)

    await asyncio.gather(*(worker(tasks[i::COROUTINES]) for i in range(COROUTINES)))


async def semaphored(ac: AsyncClient, tasks: list[Task], fields: dict[str, Any]) -> None:
    sem = asyncio.Semaphore(COROUTINES)

    async def one(t: Task) -> None:
        async with sem:
            await ac.enqueue(t, **fields)

    await asyncio.gather(*(one(t) for t in tasks))


PATTERNS: dict[str, Callable[[AsyncClient, list[Task], dict[str, Any]], Awaitable[None]]] = {
    "loop": looping, "semaphore": semaphored,
}
OPTIONS: dict[str, dict[str, Any]] = {"default options": {}, 'queue="emails"': {"queue": "emails"}}


def timed(url: str, pattern: str, fields: dict[str, Any], n: int) -> float:
    tasks = [Task("bench:noop", b'{"i": %d}' % i) for i in range(n)]

    async def run() -> float:
        async with AsyncClient(url) as ac:
            await ac.enqueue(Task("bench:warm", b""), **fields)
            start = time.perf_counter()
            await PATTERNS[pattern](ac, tasks, fields)
            return n / (time.perf_counter() - start)

    return asyncio.run(run())


class Batcher:
    """Stands in for AsyncClient: every enqueue waits for a flusher that answers all waiting at its next pass."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []
        self.flusher: asyncio.Task[None] | None = None

    async def enqueue(self, task: Task, **fields: Any) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        if self.flusher is None:
            self.flusher = asyncio.create_task(self.flush())
        await fut

    async def flush(self) -> None:
        await asyncio.sleep(0)
        while self.waiting:
            batch, self.waiting = self.waiting, []
            for fut in batch:
                fut.set_result(None)
            await asyncio.sleep(0)
        self.flusher = None


def asyncio_cost(pattern: str, n: int) -> float:
    """Microseconds per task the pattern costs asyncio itself (no Redis, no packing)."""
    tasks = [Task("bench:noop", b"") for _ in range(n)]

    async def run() -> float:
        start = time.perf_counter()
        await PATTERNS[pattern](Batcher(), tasks, {})  # type: ignore[arg-type]
        return (time.perf_counter() - start) / n * 1e6

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--redis-url", default=None, help="an empty database (it is flushed between lines)")
    args = ap.parse_args(argv)
    with bench_redis(args.redis_url) as url:
        r = redis.Redis.from_url(url)
        for pattern in PATTERNS:
            for label, fields in OPTIONS.items():
                r.flushdb()
                rate = timed(url, pattern, fields, args.tasks)
                print(f"AsyncClient {COROUTINES} coroutines, {pattern:9} {label:16} {rate:>9,.0f} tasks/s",
                      flush=True)
        r.flushdb()
        for pattern in PATTERNS:
            print(f"asyncio alone, {pattern:9} {asyncio_cost(pattern, args.tasks):6.1f} us/task", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
