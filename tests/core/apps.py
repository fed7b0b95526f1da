"""Handlers and an entry point for tests that run workers in separate processes.

python -m tests.core.apps REDIS_URL MUX_NAME '{"concurrency": 4, ...}'  runs a Server until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import redis

from asynqpy import ServeMux, Server
from asynqpy.connection import connect

SEEN = "asynqpy:test:seen"      # hash: task id -> times handled
STARTS = "asynqpy:test:starts"  # list: "<pid>:<task id>:<retry count>" per handler start

counting = ServeMux()
_conn: redis.Redis | None = None


def conn() -> redis.Redis:
    global _conn
    if _conn is None:
        _conn = connect(os.environ["TEST_REDIS_URL"])  # any URL form, a cluster's too
    return _conn


@counting.handler("count")
def count(task) -> None:  # type: ignore[no-untyped-def]
    conn().hincrby(SEEN, task.id, 1)


slow = ServeMux()


@slow.handler("slow")
def hang(task) -> None:  # type: ignore[no-untyped-def]
    conn().rpush(STARTS, f"{os.getpid()}:{task.id}:{task.retry_count}")
    if os.environ.get("HANG") == "1":
        time.sleep(120)


lingering = ServeMux()
MARKER = "asynqpy:test:finished"  # hash: task id -> pid of the process whose handler ran to its end


@lingering.handler("linger")
def linger(task) -> None:  # type: ignore[no-untyped-def]
    conn().rpush(STARTS, f"{os.getpid()}:{task.id}:{task.retry_count}")
    time.sleep(float(os.environ.get("LINGER", "3")))  # ignores task.cancelled, as a blocking call would
    conn().hset(MARKER, task.id, os.getpid())  # e.g. a charge made


limited = ServeMux()
RUNNING = "asynqpy:test:running:"  # + partition: how many handlers of it run now
PEAKS = "asynqpy:test:peaks"      # list: "<partition>:<running>" sampled at each handler start
BEGUN = "asynqpy:test:begun"      # list: "<task type>:<Unix s>" at each handler start


def limited_task(task) -> None:  # type: ignore[no-untyped-def]
    part = task.headers.get("tenant", "-")
    now = conn().incr(RUNNING + part)
    conn().rpush(PEAKS, f"{part}:{now}")
    conn().rpush(BEGUN, f"{task.type}:{time.time()}")
    try:
        time.sleep(float(task.headers.get("sleep", "0.2")))
        if os.environ.get("HANG") == "1":
            time.sleep(120)
    finally:
        conn().decr(RUNNING + part)


for _prefix in ("email", "sync", "free"):
    limited.handle(_prefix, limited_task)


sleepy = ServeMux()
EVENTS = "EVENTS_FILE"  # where the sleepy handler notes "<event> <task id> <Unix s>" lines: it writes no Redis


@sleepy.handler("sleepy")
async def sleep_long(task) -> None:  # type: ignore[no-untyped-def]
    def note(event: str) -> None:
        with open(os.environ[EVENTS], "a") as f:
            f.write(f"{event} {task.id} {time.time()}\n")

    note("start")
    try:
        await asyncio.sleep(float(task.payload or b"60"))
    except asyncio.CancelledError:
        note("cancelled")
        raise
    note("done")


def main(argv: list[str]) -> None:
    url, mux_name, settings = argv[0], argv[1], json.loads(argv[2])
    os.environ["TEST_REDIS_URL"] = url
    Server(url, **settings).run({"counting": counting, "slow": slow, "lingering": lingering,
                                     "limited": limited, "sleepy": sleepy}[mux_name])


if __name__ == "__main__":
    main(sys.argv[1:])


stuck = ServeMux()


@stuck.handler("stuck")
def never_returns(task) -> None:  # type: ignore[no-untyped-def]
    conn().rpush(STARTS, task.id)
    time.sleep(120)  # ignores task.cancelled
