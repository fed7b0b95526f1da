"""The fault suite's handlers, run by a real `asynqpy worker tests.faults.app:mux` process.

Every finished run is written to the ledger, a private server that no fault touches (LEDGER_URL): one line
"<type> <task id> <start> <end>" per run in the list RUNS, so the tests can tell a lost task from one run twice.
"""

from __future__ import annotations

import os
import time

import redis

from asynqpy import ServeMux
from asynqpy.task import ReceivedTask

RUNS = "faults:runs"
WORK = "fault:work"  # payload: milliseconds to take
CRON = "fault:cron"  # the scheduler's entry

mux = ServeMux()
_ledger: redis.Redis | None = None


def ledger() -> redis.Redis:
    global _ledger
    if _ledger is None:
        _ledger = redis.Redis.from_url(os.environ["LEDGER_URL"])
    return _ledger


def _record(task: ReceivedTask, start: float) -> None:
    ledger().rpush(RUNS, f"{task.type} {task.id} {start:.3f} {time.time():.3f}")


@mux.handler(WORK)
def work(task: ReceivedTask) -> None:
    start = time.time()
    time.sleep(int(task.payload or b"0") / 1000)
    _record(task, start)


@mux.handler(CRON)
def tick(task: ReceivedTask) -> None:
    _record(task, time.time())
