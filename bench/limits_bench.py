"""Flow-control benchmark (not a test): what limits cost a queue that is not limited.

    .venv/bin/python -m bench.limits_bench                   # a private Valkey, about a minute
    .venv/bin/python -m bench.limits_bench --pairs 60 --tasks 1000 --url redis://127.0.0.1:6379/15

1. The dequeue script's cost on the server (INFO commandstats, usec per call of EVALSHA: nothing else runs
   meanwhile), taking one task per call, with 0, 10 and 100 limits none of which matches the task, and 100 of
   which one matches (concurrency, with room). The settings take turns, round after round (--script-rounds),
   and each figure is the median of its rounds.
2. Drain rate of one in-process worker (concurrency 10) on an unlimited type, without and with limits on other
   types (--drain-limits, 100 by default), in many short rounds (--pairs, --tasks tasks each) that alternate on
   one server and one worker process (ABBA order, the machine's load drifts). Each round's rate is taken from
   the first to the last handler call (not the wake-up); what is reported is the median of the per-pair ratios
   (with limits / without) and their quartiles, PASS when the median is under 5 % slower, and the server's
   script time per task of each round (all EVALSHA usec / tasks), which the machine's load hardly moves.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from asynqpy import Client, Limit, ReceivedTask, ServeMux, Server, Task
from asynqpy.embedded import EmbeddedServer
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import limits, remove_limit, set_limit
from asynqpy.rdb.scripts import SyncRunner

GOAL = 0.05  # the goal: an unlimited queue drains under 5 % slower with limits defined
mux = ServeMux()
calls: list[float] = []  # perf_counter of each handler call of the current drain round


@mux.handler("noop")
async def noop(task: ReceivedTask) -> None:
    calls.append(time.perf_counter())


def evalsha_usec(r: redis.Redis) -> tuple[int, float]:
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def define_limits(r: redis.Redis, n: int, *, matching: bool = False) -> None:
    """Exactly n limits on the default queue: other types' patterns (the first one 'noop' when matching)."""
    want = {("noop" if matching and i == 0 else f"other{i}:*") for i in range(n)}
    for lim in limits(r):
        if lim.pattern not in want:
            remove_limit(r, lim.pattern)
    have = {lim.pattern for lim in limits(r)}
    for pattern in sorted(want - have):
        set_limit(r, Limit(pattern, concurrency=1_000_000 if pattern == "noop" else 5, rate=0 if pattern == "noop"
                           else 100), queues=["default"])


def script_cost(r: redis.Redis, client: Client, n: int, limits_n: int, matching: bool) -> float:
    """usec per dequeue call (one task each) with limits_n limits defined."""
    r.flushdb()
    define_limits(r, limits_n, matching=matching)
    client.enqueue_many([Task("noop", b'{"n": 1}') for _ in range(n + 1)])
    run = SyncRunner(r)
    run.run(broker.dequeue_timed("default", lease_expiry=time.time() + 600, count=1))  # loads the script
    c0, u0 = evalsha_usec(r)
    for _ in range(n):
        run.run(broker.dequeue_timed("default", lease_expiry=time.time() + 600, count=1))
    c1, u1 = evalsha_usec(r)
    return (u1 - u0) / max(1, c1 - c0)


@contextmanager
def worker(url: str) -> Iterator[None]:
    srv = Server(url, concurrency=10, heartbeat_interval=1, idle_poll_interval=0.05)
    srv.start(mux)
    try:
        yield
    finally:
        srv.shutdown()


def drain_round(r: redis.Redis, client: Client, tasks: int, limits_n: int) -> tuple[float, float]:
    """One round on the running worker: (tasks per second, server script usec per task)."""
    define_limits(r, limits_n)
    done0 = int(r.get(keys.processed_total("default")) or 0)
    calls.clear()
    _, u0 = evalsha_usec(r)
    client.enqueue_many([Task("noop", b"") for _ in range(tasks)])
    deadline = time.time() + 120
    while int(r.get(keys.processed_total("default")) or 0) < done0 + tasks:
        if time.time() > deadline:
            raise SystemExit("the worker did not drain the queue in 120 s")
        time.sleep(0.005)
    _, u1 = evalsha_usec(r)
    rate = (len(calls) - 1) / max(1e-9, calls[-1] - calls[0])
    return rate, (u1 - u0) / tasks


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], statistics.median(xs), q[2]


def run(url: str, args: argparse.Namespace) -> bool:
    r = redis.Redis.from_url(url)
    client = Client(url)
    r.flushdb()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    settings = [(0, False), (10, False), (100, False), (100, True)]
    cost: dict[tuple[int, bool], list[float]] = {s: [] for s in settings}
    for i in range(args.script_rounds):
        for s in (settings if i % 2 == 0 else settings[::-1]):
            cost[s].append(script_cost(r, client, args.calls, *s))
    base = statistics.median(cost[(0, False)])
    print(f"dequeue script, usec per call on the server (1 task per call, {args.calls} calls, median of "
          f"{args.script_rounds} rounds, min-max):")
    for s in settings:
        med = statistics.median(cost[s])
        extra = "" if s == (0, False) else f"  ({med - base:+.1f} vs none)"
        print(f"  {s[0]:3d} limits{' (one matches)' if s[1] else '              '}: {med:6.1f} "
              f"[{min(cost[s]):.1f}-{max(cost[s]):.1f}]{extra}")

    r.flushdb()
    arms = [0, *args.drain_limits]
    rates: dict[int, list[float]] = {a: [] for a in arms}
    usec: dict[int, list[float]] = {a: [] for a in arms}
    with worker(url):
        drain_round(r, client, args.tasks, 0)  # warm-up: scripts loaded, connections made
        for i in range(args.pairs):
            for a in (arms if i % 2 == 0 else arms[::-1]):
                rate, us = drain_round(r, client, args.tasks, a)
                rates[a].append(rate)
                usec[a].append(us)
    ok = True
    print(f"drain of an unlimited type, {args.pairs} alternating rounds of {args.tasks} no-op tasks, "
          f"one worker of concurrency 10:")
    lo, mid, hi = quartiles(rates[0])
    print(f"  no limits: {mid:.0f} tasks/s [quartiles {lo:.0f}-{hi:.0f}], server script time "
          f"{statistics.median(usec[0]):.1f} usec/task")
    for a in args.drain_limits:
        ratios = [w / wo for w, wo in zip(rates[a], rates[0], strict=True)]
        lo, mid, hi = quartiles(ratios)
        slower = 1 - mid
        verdict = "PASS" if slower < GOAL else "FAIL"
        ok = ok and slower < GOAL
        us_ratio = statistics.median([w / wo for w, wo in zip(usec[a], usec[0], strict=True)])
        print(f"  {a} limits on other types: {statistics.median(rates[a]):.0f} tasks/s; per-pair ratio median "
              f"{mid:.3f} [quartiles {lo:.3f}-{hi:.3f}] = {slower * 100:+.1f} % slower: {verdict} (goal under "
              f"{GOAL * 100:.0f} %); server script time {statistics.median(usec[a]):.1f} usec/task "
              f"(x{us_ratio:.3f})")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--url", help="a Redis to use (its database is flushed); default: a private Valkey")
    ap.add_argument("--calls", type=int, default=1000, help="dequeue calls per script-cost round")
    ap.add_argument("--script-rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=30, help="drain rounds of each setting")
    ap.add_argument("--tasks", type=int, default=600, help="tasks per drain round")
    ap.add_argument("--drain-limits", type=lambda s: [int(x) for x in s.split(",")], default=[100],
                    help="limit counts to drain beside none, comma-separated (default 100)")
    args = ap.parse_args()
    if args.url:
        ok = run(args.url, args)
    else:
        with EmbeddedServer() as srv:
            ok = run(srv.url, args)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
