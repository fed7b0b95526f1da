"""Backpressure benchmark (not a test): what a queue's size limit costs each enqueue on the server.

    .venv/bin/python -m bench.backpressure_bench               # a private Valkey, under a minute
    .venv/bin/python -m bench.backpressure_bench --calls 3000 --rounds 7

The enqueue script's server-side time (INFO commandstats, usec per EVALSHA call) for one plain task at a
time, in a queue with no limit, with a max_size limit, and with a max_size limit and G groups of aggregating
tasks (the size counts them: one SMEMBERS and one ZCARD per group, at most once a second per queue, the count
kept in between: see asynqpy/rdb/lua/_room.lua); "uncached" is the call that counts them (the first of each
second). The cases alternate within each round; medians of the rounds.
"""

from __future__ import annotations

import argparse
import statistics

import redis

from asynqpy import Client, Task
from asynqpy.embedded import EmbeddedServer
from asynqpy.rdb.flow import set_queue_limit


def evalsha_usec(r: redis.Redis) -> tuple[int, float]:
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), float(stats.get("usec", 0))


def enqueue_cost(url: str, calls: int, limited: bool, groups: int, uncached: bool = False) -> float:
    r = redis.Redis.from_url(url)
    r.flushdb()
    c = Client(url)
    for g in range(groups):
        c.enqueue(Task("item", b""), group=f"g{g}")
    if limited:
        set_queue_limit(r, "default", max_size=10_000_000)
    c.enqueue(Task("noop", b""))  # loads the script
    c0, u0 = evalsha_usec(r)
    for _ in range(calls if not uncached else calls // 10):
        if uncached:  # every call counts the groups, as the first one of each second does
            r.delete("asynqpy:{default}:aggn")
        c.enqueue(Task("noop", b'{"n": 1}'))
    c1, u1 = evalsha_usec(r)
    return (u1 - u0) / max(1, c1 - c0)


CASES = {"no limit": (False, 0, False), "max_size, 0 groups": (True, 0, False),
         "max_size, 10 groups": (True, 10, False), "max_size, 1000 groups": (True, 1000, False),
         "1000 groups, uncached": (True, 1000, True), "10000 groups, uncached": (True, 10000, True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with EmbeddedServer() as srv:
        got: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.rounds):
            for name, (limited, groups, uncached) in CASES.items():
                got[name].append(enqueue_cost(srv.url, args.calls, limited, groups, uncached))
    print(f"enqueue script, server usec per call (median of {args.rounds} alternating rounds, {args.calls} calls)")
    for name, values in got.items():
        print(f"  {name:24} {statistics.median(values):7.1f}   (rounds: {', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
