"""asynqpy: Client / Client.enqueue_many for producing, one `Server` process (concurrency 10) for working."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from asynqpy import AsyncClient, Client, ReceivedTask, ServeMux, Task
from asynqpy.client import message
from asynqpy.options import DEFAULT_OPTIONS
from asynqpy.rdb import broker, keys
from asynqpy.rdb.scripts import Call
from bench.adapters.base import TASK_TYPE, Adapter, console_script, payload, record, redis_url
from inspector import Inspector

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
        # ASYNQPY_BENCH_CLI=1: the command users run (`asynqpy worker ...:mux`), so the cold drain counts the
        # command line's start-up too; by default the same Server without the command line.
        if os.environ.get("ASYNQPY_BENCH_CLI", "") not in ("", "0"):
            return [console_script("asynqpy"), "worker", "bench.adapters.asynqpy_adapter:mux", "--redis-url",
                    self.url, "--concurrency", str(CONCURRENCY), "--queues", "default=1"]
        return [sys.executable, "-m", "bench.adapters.asynqpy_adapter"]

    def worker_argv_processes(self, processes: int) -> list[str] | None:
        """`asynqpy worker ... --processes N`: a supervisor and N spawned worker processes, each its own Server."""
        return [console_script("asynqpy"), "worker", "bench.adapters.asynqpy_adapter:mux", "--redis-url", self.url,
                "--concurrency", str(CONCURRENCY), "--queues", "default=1", "--processes", str(processes)]

    def hold_queue(self) -> bool:
        """Pause the queue (the Inspector's pause: workers leave it alone)."""
        Inspector(connection=self.client.redis).pause("default")
        return True

    def workers_up(self) -> int:
        """Servers registered by their heartbeat (the database was flushed before the step)."""
        return int(self.client.redis.zcard(keys.SERVERS))

    def release_queue(self) -> None:
        """Unpause (the Inspector's unpause wakes the idle workers at once, rather than at their poll)."""
        Inspector(connection=self.client.redis).unpause("default")

    def enqueue(self, p: dict[str, Any]) -> None:
        self.client.enqueue(_task(p))

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        for res in self.client.enqueue_many([_task(p) for p in ps]):
            if isinstance(res, Exception):
                raise res

    def extra_producers(self) -> list[tuple[str, Any]]:
        return [("async", self.timed_async), ("async_queue", self.timed_async_queue),
                ("async_semaphore_queue", self.timed_async_semaphore_queue), ("wire_single", self.timed_wire_single),
                ("wire_batch", self.timed_wire_batch)]

    def timed_async(self, n: int, coroutines: int = 100) -> float:
        """n tasks enqueued by `coroutines` coroutines through one AsyncClient."""
        tasks = [_task(payload("x")) for _ in range(n)]

        async def run() -> float:
            async with AsyncClient(self.url) as c:
                await c.enqueue(_task(payload("w")))  # connect first

                async def worker(mine: list[Task]) -> None:
                    for t in mine:
                        await c.enqueue(t)
                t0 = time.perf_counter()
                await asyncio.gather(*(worker(tasks[i::coroutines]) for i in range(coroutines)))
                return time.perf_counter() - t0
        return asyncio.run(run())

    def _timed_pattern(self, n: int, pattern: str, fields: dict[str, Any]) -> float:
        """n tasks enqueued through one AsyncClient the way bench.async_bench's pattern does it."""
        from bench.async_bench import PATTERNS

        tasks = [_task(payload("x")) for _ in range(n)]

        async def run() -> float:
            async with AsyncClient(self.url) as c:
                await c.enqueue(_task(payload("w")), **fields)  # connect first
                t0 = time.perf_counter()
                await PATTERNS[pattern](c, tasks, fields)
                return time.perf_counter() - t0
        return asyncio.run(run())

    def timed_async_queue(self, n: int) -> float:
        """timed_async with a per-call option, as real code writes it: `await c.enqueue(t, queue="emails")`."""
        return self._timed_pattern(n, "loop", {"queue": "emails"})

    def timed_async_semaphore_queue(self, n: int) -> float:
        """n coroutines gathered behind asyncio.Semaphore(100), each `await c.enqueue(t, queue="emails")`."""
        return self._timed_pattern(n, "semaphore", {"queue": "emails"})

    def _prebuilt(self, n: int) -> list[Call[None]]:
        """The enqueue script's calls for n tasks, built before the clock starts (the wire limit's input)."""
        now = time.time()
        out = []
        for _ in range(n):
            opts = DEFAULT_OPTIONS.resolve(now)
            out.append(broker.enqueue(message(_task(payload("x")), opts), opts, now=now))
        self.client.redis.script_load(out[0].script.text)
        return out

    def timed_wire_single(self, n: int) -> float:
        """A bare redis-py EVALSHA round trip of the enqueue script per task, arguments pre-built."""
        r, calls = self.client.redis, self._prebuilt(n)
        t0 = time.perf_counter()
        for c in calls:
            r.evalsha(c.script.sha, len(c.keys), *c.keys, *c.args)
        return time.perf_counter() - t0

    def timed_wire_batch(self, n: int) -> float:
        """Pipelined redis-py EVALSHA of the enqueue script (chunks of 1000), arguments pre-built."""
        r, calls = self.client.redis, self._prebuilt(n)
        t0 = time.perf_counter()
        for start in range(0, n, 1000):
            pipe = r.pipeline(transaction=False)
            for c in calls[start:start + 1000]:
                pipe.evalsha(c.script.sha, len(c.keys), *c.keys, *c.args)
            pipe.execute()
        return time.perf_counter() - t0

    def enqueue_at(self, due: float) -> None:
        self.client.enqueue(_task(payload("l", due)), process_at=datetime.fromtimestamp(due, tz=UTC))

    def close(self) -> None:
        self.client.close()


ADAPTER = AsynqpyAdapter


mux = ServeMux()  # the worker's: `asynqpy worker bench.adapters.asynqpy_adapter:mux`


@mux.handler(TASK_TYPE)
async def noop(task: ReceivedTask) -> None:
    start = time.time()
    record(json.loads(task.payload), start)


def main() -> None:
    """The worker process without the command line: one asynqpy Server, run in the foreground until SIGTERM."""
    from asynqpy import Server

    Server(redis_url(), concurrency=CONCURRENCY, queues={"default": 1}).run(mux)


if __name__ == "__main__":
    main()
