"""Bytes per task type per day of the per-type aggregates (asynqpy.typestats), measured with MEMORY USAGE on a
private embedded Valkey: a day of minutes written as workers write them, for a quiet and a busy type.

    python -m bench.typestats_memory
"""

from __future__ import annotations

import random
import time

import redis

from asynqpy.embedded import EmbeddedServer
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb import keys
from asynqpy.rdb.state import record_type_stats
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.typestats import TypeStats

QUEUE = "default"  # the aggregates are per (queue, type): a type run in k queues costs k times this


def day_of(r: redis.Redis, ttype: str, per_minute: int, start: float) -> int:
    """Write 1440 minutes of one type in one queue (per_minute runs each, run times spread over a few buckets);
    return the bytes its minute and hour hashes take."""
    rnd = random.Random(1)
    runner = SyncRunner(r)
    for m in range(1440):
        stats = TypeStats()
        at = start + m * 60
        for _ in range(per_minute):
            d = rnd.lognormvariate(-2, 1)
            stats.observe(TaskOutcome(QUEUE, ttype, "x", "retry" if rnd.random() < .02 else "success", at, d,
                                      rnd.lognormvariate(-4, 1.5)))
        groups = stats.take()
        runner.run(record_type_stats([(q, t, mm, f) for (q, t, mm), f in groups.items()]))
    first = int(start // 60)
    total = sum(int(r.memory_usage(keys.type_queue_minute(QUEUE, ttype, first + m)) or 0) for m in range(1440))
    hours = [keys.type_queue_hour(QUEUE, ttype, h) for h in range(first // 60, (first + 1440) // 60 + 1)]
    total += sum(int(r.memory_usage(k) or 0) for k in hours if r.exists(k))
    return total


def main() -> None:
    with EmbeddedServer() as srv:
        r = redis.Redis.from_url(srv.url)
        start = (time.time() // 86400 - 1) * 86400
        for name, rate in (("quiet", 1), ("busy", 600)):
            b = day_of(r, name, rate, start)
            print(f"{name:6s} ({rate} runs/min): {b:,} bytes per type per day "
                  f"({b / 1440:.0f} per minute, its hour hash included)")


if __name__ == "__main__":
    main()
