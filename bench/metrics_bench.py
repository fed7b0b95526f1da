"""Metrics benchmark (not a test): scrape time and Redis cost of the queue-state exporter for 100 and 1,000
queues, and one worker draining 20,000 no-op tasks with worker metrics on and off.

    .venv/bin/python -m bench.metrics_bench                     # a private Valkey, about a minute
    .venv/bin/python -m bench.metrics_bench --queues 100,1000 --tasks 20000 --rounds 3

The Redis cost of a scrape is read from the server itself (INFO commandstats and stats): commands, server
CPU time in those commands, and bytes in and out.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import redis

from asynqpy import Client, ReceivedTask, ServeMux, Task
from asynqpy.embedded import EmbeddedServer, free_port
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire import decode_task_message
from exporter.cli import make_server
from inspector import Inspector

REPO = Path(__file__).resolve().parents[1]

mux = ServeMux()  # the drained worker's: `asynqpy worker bench.metrics_bench:mux`


@mux.handler("noop")
async def noop(task: ReceivedTask) -> None:
    return None
ASYNQPY = os.path.join(os.path.dirname(sys.executable), "asynqpy")


def fill(url: str, queues: int) -> None:
    """Each queue: 6 pending, 2 scheduled, 2 retry, 2 archived (10 enqueued + 2 scheduled, 4 taken, 2 failed, 2
    archived), through the Client and the worker's own scripts."""
    r = redis.Redis.from_url(url)
    run = SyncRunner(r)
    with Client(url) as c:
        for i in range(queues):
            q = f"queue-{i:04d}"
            res = c.enqueue_many([Task("bench:task", b'{"n": %d}' % n) for n in range(10)], queue=q)
            assert not any(isinstance(x, Exception) for x in res)
            c.enqueue_many([Task("bench:later", b"")] * 2, queue=q, process_in=3600)
            now = time.time()
            taken = run.run(broker.dequeue(q, lease_expiry=now + 60, count=4))
            for k, (tid, data) in enumerate(taken):
                msg = decode_task_message(data)
                msg.error_msg, msg.last_failed_at = "boom", int(now)
                if k < 2:
                    msg.retried += 1
                    run.run(broker.retry(q, tid, msg.SerializeToString(), retry_at=now + 3600, now=now,
                                         is_failure=True))
                else:
                    run.run(broker.archive(q, tid, msg.SerializeToString(), now=now))
    r.close()


def redis_counters(r: redis.Redis) -> tuple[int, int, int, int]:
    """(commands, server µs in commands, bytes in, bytes out) so far."""
    stats = r.info("commandstats")
    net = r.info("stats")
    calls = sum(int(v["calls"]) for v in stats.values())
    usec = sum(int(v["usec"]) for v in stats.values())
    return calls, usec, int(net["total_net_input_bytes"]), int(net["total_net_output_bytes"])


def scrape_cost(url: str, queues: int, rounds: int) -> dict[str, Any]:
    r = redis.Redis.from_url(url)
    r.flushdb()
    fill(url, queues)
    insp = Inspector(url)
    srv = make_server(insp, "127.0.0.1", 0, max_age=2.0).start()
    metrics = f"http://127.0.0.1:{srv.port}/metrics"

    def one(cold: bool) -> tuple[float, tuple[int, int, int, int], int]:
        if cold:
            r.delete(keys.SNAPSHOT)
        before = redis_counters(r)
        t0 = time.perf_counter()
        with urllib.request.urlopen(metrics, timeout=60) as resp:
            body = resp.read()
        took = time.perf_counter() - t0
        after = redis_counters(r)
        # the INFO calls themselves: 2 commands before and 2 after are ours; subtract them
        d = tuple(a - b for a, b in zip(after, before, strict=True))
        return took, (d[0] - 2, d[1], d[2], d[3]), len(body)

    try:
        one(True)  # load the scripts
        cold = [one(True) for _ in range(rounds)]
        warm = [one(False) for _ in range(rounds)]
    finally:
        srv.stop()
        insp.close()
    r.flushdb()
    r.close()

    def summary(rows: list[tuple[float, tuple[int, int, int, int], int]]) -> dict[str, float]:
        return {"ms": statistics.median(x[0] for x in rows) * 1000,
                "commands": statistics.median(x[1][0] for x in rows),
                "redis_cpu_ms": statistics.median(x[1][1] for x in rows) / 1000,
                "kb_out": statistics.median(x[1][3] for x in rows) / 1024,
                "exposition_kb": statistics.median(x[2] for x in rows) / 1024}

    return {"queues": queues, "cold": summary(cold), "cached": summary(warm)}


def drain(url: str, tasks: int, metrics: bool) -> float:
    """Seconds for one worker process (concurrency 10) to process `tasks` no-op tasks, from its first one."""
    r = redis.Redis.from_url(url)
    r.flushdb()
    with Client(url) as c:
        for i in range(0, tasks, 1000):
            res = c.enqueue_many([Task("noop", b"")] * min(1000, tasks - i))
            assert not any(isinstance(x, Exception) for x in res)
    argv = [ASYNQPY, "worker", "bench.metrics_bench:mux", "--redis-url", url, "--concurrency", "10"]
    if metrics:
        argv += ["--metrics-port", str(free_port()), "--metrics-host", "127.0.0.1"]
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=log)
        try:
            key = keys.processed_total("default")
            while not r.get(key):
                time.sleep(0.002)
            t0 = time.perf_counter()
            while int(r.get(key) or 0) < tasks:
                time.sleep(0.005)
            took = time.perf_counter() - t0
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(30)
    r.flushdb()
    r.close()
    return took


def hook_cost(n: int = 100_000) -> float:
    """Microseconds one outcome hook call of the worker metrics costs (the per-task overhead, free of noise)."""
    from prometheus_client import CollectorRegistry

    from asynqpy.metrics.worker import WorkerMetrics
    from asynqpy.outcome import TaskOutcome

    m = WorkerMetrics(CollectorRegistry())
    o = TaskOutcome("default", "noop", "id", "success", time.time(), 0.001, 0.5)
    t0 = time.perf_counter()
    for _ in range(n):
        m.observe(o)
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queues", default="100,1000", help="queue counts to scrape (default 100,1000)")
    ap.add_argument("--rounds", type=int, default=5, help="scrapes per measurement (default 5)")
    ap.add_argument("--tasks", type=int, default=20000, help="tasks drained (default 20000)")
    ap.add_argument("--drains", type=int, default=3, help="drains with metrics on and off each (default 3)")
    args = ap.parse_args()
    with EmbeddedServer() as server:
        url = server.url
        print("scrape of the exporter's /metrics over HTTP (median); Redis cost measured on the server")
        print(f"{'queues':>7} {'kind':>7} {'ms':>9} {'commands':>9} {'redis CPU ms':>13} {'KB from Redis':>14} "
              f"{'exposition KB':>14}")
        for n in (int(x) for x in args.queues.split(",")):
            res = scrape_cost(url, n, args.rounds)
            for kind in ("cold", "cached"):
                s = res[kind]
                print(f"{n:>7} {kind:>7} {s['ms']:>9.1f} {s['commands']:>9.0f} {s['redis_cpu_ms']:>13.2f} "
                      f"{s['kb_out']:>14.1f} {s['exposition_kb']:>14.1f}")
        print(f"\none worker (concurrency 10) draining {args.tasks} no-op tasks (seconds, each run)")
        on: list[float] = []
        off: list[float] = []
        for _ in range(args.drains):  # alternate, so drift of the machine hits both alike
            off.append(drain(url, args.tasks, metrics=False))
            on.append(drain(url, args.tasks, metrics=True))
        m_off, m_on = statistics.median(off), statistics.median(on)
        print(f"metrics off: {', '.join(f'{x:.2f}' for x in off)}  median {m_off:.2f} s = {args.tasks / m_off:,.0f}/s")
        print(f"metrics on:  {', '.join(f'{x:.2f}' for x in on)}  median {m_on:.2f} s = {args.tasks / m_on:,.0f}/s")
        print(f"overhead: {100 * (m_on - m_off) / m_off:+.1f}%")
        us = hook_cost()
        print(f"one outcome-hook call of the worker metrics: {us:.1f} µs per task "
              f"({100 * us * 1e-6 * args.tasks / m_off:.1f}% of the metrics-off drain time)")


if __name__ == "__main__":
    main()
