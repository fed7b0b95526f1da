"""The forwarder's cost on the server: a backlog of due scheduled tasks moved to pending by `forward` calls (batches
of 100) with no worker waiting, as when every worker is busy. Prints microseconds per forwarded task per round.

    python bench/forward_probe.py [--tasks 20000] [--rounds 8] [--redis-url URL]

To compare two revisions, run it from each (PYTHONPATH=<a git archive of the other>) alternately."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from asynqpy import Client, Task
from asynqpy.rdb import broker
from asynqpy.rdb.sync_runner import SyncRunner
from bench.common import bench_redis


def one_round(url: str, tasks: int) -> float:
    """us per task to forward `tasks` due tasks of the default queue in batches of 100 (the database is flushed)."""
    r = redis.Redis.from_url(url)
    r.flushdb()
    due = datetime.now(UTC) + timedelta(seconds=1)
    with Client(url) as c:
        c.enqueue_many([Task("t", b"x") for _ in range(tasks)], process_at=due)
    time.sleep(max(0.0, due.timestamp() - time.time()) + 0.2)
    runner = SyncRunner(r)
    moved = 0
    t0 = time.perf_counter()
    while True:
        n, _, _ = runner.run(broker.forward("default", batch=100))
        if not n:
            break
        moved += n
    dt = time.perf_counter() - t0
    r.flushdb()
    r.close()
    return dt / moved * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--redis-url", help="an empty database to use (it gets flushed); default: a private Valkey")
    args = ap.parse_args()
    with bench_redis(args.redis_url) as url:
        per_task = [one_round(url, args.tasks) for _ in range(args.rounds)]
    print(f"forward, {args.tasks:,} due tasks, no worker waiting: us per task by round "
          f"{', '.join(f'{x:.2f}' for x in per_task)}; median {statistics.median(per_task):.2f}")


if __name__ == "__main__":
    main()
