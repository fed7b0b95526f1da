"""The server's cost of one queue step of the fetch and acknowledgement scripts (not a test): dequeue_queues and
done_queues calls of the shapes a busy worker of many queues sends, timed by the server itself.

    python bench/queue_step_bench.py [--calls 2000] [--batch 50] [--rounds 2] [--redis-url URL]

A private Valkey holds the pending tasks. Each shape sends `batch` dequeue calls in a row (each takes 5 tasks, as
a lane of a busy worker asks), then one done_queues (or done) call per dequeue acknowledges its tasks; the shapes
in turn, reversed every other batch, `calls` calls of each in all. Per shape: the server's time per call, from
EVALSHA's usec in INFO commandstats (what the server counts running the script, its redis.call()s included),
read before and after each batch. "5 of 100 queues, 1 each" is the fetch of a busy worker of 100 equal queues.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

import redis  # noqa: E402

from asynqpy import Client, Task  # noqa: E402
from asynqpy.rdb import broker  # noqa: E402
from asynqpy.rdb.sync_runner import SyncRunner  # noqa: E402

QUEUES = [f"q{i:03d}" for i in range(100)]
SERVER_ID = "bench-host:1:abc"


# name -> (the dequeue call's (queue, share) pairs, or a queue for dequeue.lua's one-queue call)
SHAPES: dict[str, list[tuple[str, int]] | str] = {
    "1 queue, 5 (dequeue.lua, done.lua)": QUEUES[0],
    "1 queue, 5": [(QUEUES[0], 5)],
    "1 queue named 5 times, 1 each": [(QUEUES[0], 1)] * 5,
    "5 of 100 queues, 1 each": [(q, 1) for q in QUEUES[1:6]],
}
TAKES = 5  # tasks per dequeue call


def evalsha_usec(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {"usec": 0})["usec"])


def fill(url: str, calls: int) -> None:
    """Enough pending tasks for every call: q000 serves three shapes, q001..q005 one task a call each."""
    c = Client(url)
    for q in QUEUES[:6]:
        n = (3 if q == QUEUES[0] else 1) * TAKES * calls + 100
        for res in c.enqueue_many([Task("bench:noop", b"{}") for _ in range(n)], queue=q, chunk=1000):
            if isinstance(res, Exception):
                raise res


def dequeue_call(shape: list[tuple[str, int]] | str) -> Any:
    expiry = time.time() + 60
    if isinstance(shape, str):
        return broker.dequeue_waited(shape, lease_expiry=expiry, count=TAKES, server_id=SERVER_ID)
    return broker.dequeue_queues(shape, lease_expiry=expiry, count=TAKES, server_id=SERVER_ID)


def done_call(shape: list[tuple[str, int]] | str, got: list[Any]) -> Any:
    if isinstance(shape, str):
        return broker.done(shape, [(row[0], "") for row in got], now=time.time())
    by_q: dict[str, list[tuple[str, str]]] = {}
    for q, tid, *_ in got:
        by_q.setdefault(q, []).append((tid, ""))
    return broker.done_queues(list(by_q.items()), now=time.time())


def run(url: str, calls: int, batch: int) -> dict[str, tuple[float, float]]:
    """Each shape's server us per dequeue call and per done call: batches of `batch` dequeue calls, then their
    done calls, the shapes in turn (reversed every other batch), each batch timed by EVALSHA's usec."""
    r = redis.Redis.from_url(url)
    runner = SyncRunner(r)
    spent = {name: [0, 0, 0] for name in SHAPES}  # calls, dequeue usec, done usec
    for b in range(calls // batch):
        for name in (list(SHAPES) if b % 2 == 0 else list(reversed(SHAPES))):
            shape = SHAPES[name]
            u0 = evalsha_usec(r)
            gots = [runner.run(dequeue_call(shape)) for _ in range(batch)]
            u1 = evalsha_usec(r)
            for got in gots:
                if len(got) != TAKES:
                    raise RuntimeError(f"{name}: a call got {len(got)} tasks")
                runner.run(done_call(shape, got))
            u2 = evalsha_usec(r)
            s = spent[name]
            s[0] += batch
            s[1] += u1 - u0
            s[2] += u2 - u1
    return {name: (s[1] / s[0], s[2] / s[0]) for name, s in spent.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/queue_step_bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls of each shape (2000)")
    ap.add_argument("--batch", type=int, default=50, help="calls of one shape in a row (50)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--redis-url")
    args = ap.parse_args(argv)
    server = None
    url = args.redis_url
    if url is None:
        from asynqpy.embedded import EmbeddedServer
        server = EmbeddedServer().start()
        url = server.url
    try:
        results: dict[str, list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            redis.Redis.from_url(url).flushall()
            # every call takes 5 tasks: the shapes naming q000 only take 5 * calls from it
            fill(url, args.calls)
            for name, v in run(url, args.calls, args.batch).items():
                results.setdefault(name, []).append(v)
        print(f"{'call (5 tasks)':44s} {'dequeue us/call':>16s} {'done us/call':>13s}   (server, EVALSHA usec_per_call;"
              f" median of {args.rounds} rounds)")
        for name, vs in results.items():
            print(f"{name:44s} {statistics.median(v[0] for v in vs):16.1f} {statistics.median(v[1] for v in vs):13.1f}")
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
