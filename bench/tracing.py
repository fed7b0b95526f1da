"""What OpenTelemetry tracing costs: enqueue and drain throughput with asynqpy.otel off and on.

    python bench/tracing.py [--tasks 3000] [--rounds 3] [--redis-url URL]

"off" is the default state (nothing installed: one global read per enqueue and per handler run). "on" is
asynqpy.otel.instrument() with the OpenTelemetry SDK's TracerProvider and a BatchSpanProcessor feeding an
exporter that drops the spans, so the figure is the cost of making, propagating and ending spans, not of
shipping them. enqueue: Client.enqueue in a loop (one round trip each). drain: a Server (concurrency 10,
async no-op handler) works off that many pending tasks, timed from start to an empty queue. The modes take
turns round by round after a warm-up round; best of --rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

import redis  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

from asynqpy import Client, ReceivedTask, ServeMux, Task, otel  # noqa: E402
from asynqpy.testing import TestWorker  # noqa: E402
from bench.common import bench_redis  # noqa: E402


class Drop(SpanExporter):
    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def enqueue_rate(url: str, n: int) -> float:
    with Client(url) as c:
        task = Task("bench:noop", b"{}")
        t0 = time.perf_counter()
        for _ in range(n):
            c.enqueue(task)
        return n / (time.perf_counter() - t0)


def drain_rate(url: str, n: int) -> float:
    with Client(url) as c:
        c.enqueue_many([Task("bench:noop", b"{}")] * n)
    mux = ServeMux()

    @mux.handler("bench:noop")
    async def noop(task: ReceivedTask) -> None:
        pass
    t0 = time.perf_counter()
    worker = TestWorker(url, mux, concurrency=10)
    try:
        worker.drain(timeout=600)
        return n / (time.perf_counter() - t0)
    finally:
        worker.stop()


def measure(url: str, tasks: int, rounds: int) -> tuple[Drop, dict[str, dict[str, float]]]:
    """The best enqueue and drain rates of rounds rounds with tracing off and on, taking turns; the exporter."""
    r = redis.Redis.from_url(url)
    exporter = Drop()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1_000_000))
    results = {mode: {"enqueue": 0.0, "drain": 0.0} for mode in ("off", "on")}
    try:
        for i in range(rounds + 1):  # the modes take turns, so the machine's moods hit both; round 0 warms up
            for mode in ("off", "on"):
                if mode == "on":
                    otel.instrument(tracer_provider=provider)
                r.flushdb()
                enq = enqueue_rate(url, tasks)
                r.flushdb()
                drained = drain_rate(url, tasks)
                otel.uninstrument()
                if i:
                    best = results[mode]
                    best["enqueue"], best["drain"] = max(best["enqueue"], enq), max(best["drain"], drained)
    finally:
        provider.shutdown()
        r.flushdb()
        r.close()
    return exporter, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--redis-url", help="an empty database to use (default: a private embedded Valkey)")
    args = ap.parse_args()
    with bench_redis(args.redis_url) as url:
        exporter, results = measure(url, args.tasks, args.rounds)
    print(f"{args.tasks} tasks, best of {args.rounds}; spans exported while on: {exporter.spans}")
    print(f"{'':8}{'enqueue/s':>12}{'drain/s':>12}")
    for mode, best in results.items():
        print(f"{mode:8}{best['enqueue']:>12,.0f}{best['drain']:>12,.0f}")
    off, on = results["off"], results["on"]
    print(f"{'on/off':8}{on['enqueue'] / off['enqueue']:>12.2f}{on['drain'] / off['drain']:>12.2f}")


if __name__ == "__main__":
    main()
