"""The handler of bench/chaos.py's Python workers (`asynqpy worker bench.chaos_app:mux`): every finished run adds
one to the task's count in a ledger on a private server that no fault touches (CHAOS_LEDGER_URL)."""

from __future__ import annotations

import os

import redis

from asynqpy import ServeMux
from asynqpy.task import ReceivedTask

TYPE = "ok:chaos"    # "ok:" so that the Go interop peer's worker handles it too
RUNS = "chaos:runs"  # hash: task id -> finished runs (Python workers)

mux = ServeMux()
_ledger: redis.Redis | None = None


@mux.handler(TYPE)
def run(task: ReceivedTask) -> None:
    global _ledger
    if _ledger is None:
        _ledger = redis.Redis.from_url(os.environ["CHAOS_LEDGER_URL"])
    _ledger.hincrby(RUNS, task.id, 1)
