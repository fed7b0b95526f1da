"""Processes for the clock-skew tests and bench/clock_skew.py, each meant to run under libfaketime.

    python -m tests.core.skewapp worker URL QUEUE      run tasks; each start is recorded by Redis's clock
    python -m tests.core.skewapp produce URL QUEUE N DELAY   enqueue N tasks with process_in=DELAY
    python -m tests.core.skewapp schedule URL QUEUE SECONDS  a scheduler with one "@every 1s" entry

Every time recorded is the Redis server's (TIME), never the process's own clock, which faketime moves: a
test compares the due time (Redis's time at enqueue + DELAY) with the start (Redis's time in the handler).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

import redis

from asynqpy import Client, ReceivedTask, ServeMux, Server, Task
from asynqpy.rdb import keys
from asynqpy.scheduler import Scheduler

RETRY_DELAY = 2.0  # seconds between the failed first attempt of a "skewretry" task and its retry


def started_key(q: str) -> str:
    return f"skewtest:{q}:started"


def enqueued_key(q: str) -> str:
    return f"skewtest:{q}:enqueued"


def redis_now(r: redis.Redis) -> float:
    sec, usec = r.time()
    return sec + usec / 1e6


def worker(url: str, q: str) -> None:
    r = redis.Redis.from_url(url)
    mux = ServeMux()

    def record(task: ReceivedTask) -> None:
        r.rpush(started_key(q), json.dumps({"payload": task.payload.decode(), "at": redis_now(r)}))

    def fail_once(task: ReceivedTask) -> None:
        at = redis_now(r)
        r.rpush(f"{started_key(q)}:retry", json.dumps({"id": task.id, "attempt": task.retry_count, "at": at}))
        if task.retry_count == 0:
            raise RuntimeError("first attempt fails")

    mux.handle("skew", record)
    mux.handle("skewretry", fail_once)
    srv = Server(url, queues={q: 1}, concurrency=4, heartbeat_interval=0.5, retry_delay=lambda n, e, t: RETRY_DELAY)
    srv.start(mux)
    print("worker ready", flush=True)
    try:
        while True:
            time.sleep(1)
    finally:
        srv.shutdown()


def produce(url: str, q: str, n: int, delay: float) -> None:
    r = redis.Redis.from_url(url)
    c = Client(url)
    for i in range(n):
        before = redis_now(r)
        info = c.enqueue(Task("skew", str(i).encode()), queue=q, process_in=delay)
        after = redis_now(r)
        due = r.zscore(keys.exact_due(q), info.id)  # the exact due time the script wrote (None: an older release)
        r.rpush(enqueued_key(q), json.dumps({"payload": str(i), "before": before, "after": after, "delay": delay,
                                             "due": due}))
    print(f"enqueued {n} local={time.time():.3f}", flush=True)


def schedule(url: str, q: str, seconds: float) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the test reads each tick's task id
    s = Scheduler(url, heartbeat_interval=1.0)
    s.register("@every 1s", Task("tick", b""), queue=q)
    end = time.monotonic() + seconds

    async def main() -> None:
        await s.arun(until=lambda: time.monotonic() > end)

    asyncio.run(main())


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    if role == "worker":
        worker(args[0], args[1])
    elif role == "produce":
        produce(args[0], args[1], int(args[2]), float(args[3]))
    elif role == "schedule":
        schedule(args[0], args[1], float(args[2]))
    else:
        raise SystemExit(f"unknown role {role!r}")
