"""Flow-control benchmark (not a test): what limits cost a queue that is not limited.

    .venv/bin/python -m bench.limits_bench                  # a private Valkey, well under a minute
    .venv/bin/python -m bench.limits_bench --tasks 5000 --rounds 3

1. The dequeue script's cost on the server (INFO commandstats, usec per call of EVALSHA), taking one task per
   call, with 0 limits, 100 limits none of which matches the task, and 100 limits one of which matches
   (concurrency, with room).
2. Drain rate of one in-process worker (concurrency 10) on an unlimited type, with no limits configured and with
   10 limits on other types; alternating rounds, medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

import redis

from asynqpy import Client, Limit, ReceivedTask, ServeMux, Task
from asynqpy.embedded import EmbeddedServer
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import set_limit
from asynqpy.rdb.scripts import SyncRunner

mux = ServeMux()


@mux.handler("noop")
async def noop(task: ReceivedTask) -> None:
    return None


def evalsha_usec(r: redis.Redis) -> tuple[int, float]:
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def script_cost(url: str, n: int, limits: int, matching: bool) -> float:
    r = redis.Redis.from_url(url)
    r.flushdb()
    for i in range(limits):
        pattern = "noop" if matching and i == 0 else f"other{i}:*"
        set_limit(r, Limit(pattern, concurrency=1_000_000), queues=["default"])
    Client(url).enqueue_many([Task("noop", b'{"n": 1}') for _ in range(n)])
    run = SyncRunner(r)
    run.run(broker.dequeue_timed("default", lease_expiry=time.time() + 600, count=1))  # loads the script
    c0, u0 = evalsha_usec(r)
    for _ in range(n - 1):
        run.run(broker.dequeue_timed("default", lease_expiry=time.time() + 600, count=1))
    c1, u1 = evalsha_usec(r)
    return (u1 - u0) / max(1, c1 - c0)


def drain(url: str, tasks: int, limits: int) -> float:
    from asynqpy import Server
    r = redis.Redis.from_url(url)
    r.flushdb()
    for i in range(limits):
        set_limit(r, Limit(f"other{i}:*", concurrency=5, rate=100), queues=["default"])
    Client(url).enqueue_many([Task("noop", b"") for _ in range(tasks)])
    srv = Server(url, concurrency=10, heartbeat_interval=1)
    t0 = time.perf_counter()
    srv.start(mux)
    try:
        while r.get(keys.processed_total("default")) != str(tasks).encode():
            time.sleep(0.01)
        return tasks / (time.perf_counter() - t0)
    finally:
        srv.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with EmbeddedServer() as srv:
        url = srv.url
        print("dequeue script, usec per call (server side, 1 task per call):")
        for limits, matching in ((0, False), (10, False), (100, False), (100, True)):
            print(f"  {limits:3d} limits{' (one matches)' if matching else ''}: "
                  f"{script_cost(url, args.calls, limits, matching):.1f}")
        rates: dict[int, list[float]] = {0: [], 10: []}
        for i in range(args.rounds):
            for limits in ((0, 10) if i % 2 == 0 else (10, 0)):  # alternating order: the machine's load drifts
                rates[limits].append(drain(url, args.tasks, limits))
        base, lim = statistics.median(rates[0]), statistics.median(rates[10])
        print(f"drain of an unlimited type, {args.tasks} no-op tasks, median of {args.rounds}: "
              f"no limits {base:.0f}/s, 10 limits on other types {lim:.0f}/s ({(lim - base) / base * 100:+.1f}%)")
        print("  each round, no limits / 10 limits:", ", ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(rates[0], rates[10],
                                                                                                 strict=True)))


if __name__ == "__main__":
    main()
