"""Scale of the hot path: a worker's drain rate with 1, 10 and 100 queues and with 1 and 1,000 task types, and its
memory after 10,000 and after 1,000,000 tasks. Each figure is printed with PASS/FAIL.

    python bench/scale_bench.py [--tasks 20000] [--rounds 5] [--memory-tasks 1000000] [--tracemalloc]
    python bench/run.py --scale ...          (the same)

A private Valkey (asynqpy.embedded); each worker is one process running the Server of
bench/adapters/asynqpy_adapter.py (concurrency 10, an async no-op handler registered for the pattern "scale:", so
every type is routed by prefix). Rates: N tasks enqueued first, then a fresh worker drains them; the rate is
(N - 1) over the time from its first to its last task, as bench/run.py times a drain. The configurations of one
round run back to back, in an order reversed every other round, and each is compared with the same round's
baseline (1 queue, 1 type): the verdict is the median of those ratios, so a machine whose load drifts shifts both
sides of each ratio alike. Memory: one worker (10 queues, 1,000 types) fed in chunks, ~50,000 tasks pending at
most, retention 0; it reports its VmRSS (/proc/self/status) at checkpoints.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)  # run as a script: import `bench` from the repository, not bench/ itself

import redis  # noqa: E402

from asynqpy import Client, ReceivedTask, ServeMux, Server, Task  # noqa: E402
from bench.adapters.base import ENV_URL, WorkerProcess, redis_url  # noqa: E402
from bench.common import alternated  # noqa: E402

CONCURRENCY = 10  # as bench/adapters/asynqpy_adapter.py
PATTERN = "scale:"
KEY_PROGRESS = "scale:progress"  # "count time cpu" every REPORT_EVERY tasks (a zset scored by count)
KEY_POINTS = "scale:points"  # JSON per memory checkpoint: tasks, rss_kib, objects
KEY_TRACE = "scale:tracemalloc"  # the top growth, as text, once the last checkpoint is reached
REPORT_EVERY = 1000
RATE_TOLERANCE = 0.10  # 100 queues or 1,000 types may drain at most 10 % slower than 1 queue with 1 type
# RSS may end at most this much above its 10,000-task figure: pymalloc takes memory in 1 MiB arenas and glibc's
# malloc keeps freed chunks of its own, so two runs of the same worker differ by a few MiB. A leak of 8 bytes a
# task is 8 MB at 1,000,000 tasks, well past it.
RSS_TOLERANCE_KIB = 4 * 1024
LOG_DIR = ROOT / "bench" / "results" / "logs"


def type_name(i: int) -> str:
    return f"{PATTERN}t{i:04d}"


def queue_names(n: int) -> list[str]:
    return ["default"] if n == 1 else [f"q{i:03d}" for i in range(n)]


@dataclass(frozen=True)
class Shape:
    """One worker configuration: its queues (equal weights, or strict priority by descending weight) and how many
    distinct task types the tasks it drains carry."""

    name: str
    queues: int
    types: int
    strict: bool = False
    holding: int = 0  # how many of the queues hold the tasks (0: all); the others stay empty

    def weights(self) -> dict[str, int]:
        names = queue_names(self.queues)
        return {q: (len(names) - i if self.strict else 1) for i, q in enumerate(names)}


BASELINE = Shape("1 queue, 1 type", 1, 1)
SHAPES = (BASELINE, Shape("10 queues", 10, 1), Shape("100 queues", 100, 1),
          Shape("10 queues, strict priority", 10, 1, strict=True), Shape("100 queues, 1 holds the tasks", 100, 1,
                                                                         holding=1),
          Shape("1,000 types", 1, 1000))
JUDGED = ("100 queues", "1,000 types")  # the goal's two; the others are printed for reading
MEMORY_SHAPE = Shape("10 queues, 1,000 types", 10, 1000)


# ---------------------------------------------------------------- worker side


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Counter:
    """Counts handled tasks in the worker; writes progress every REPORT_EVERY, and memory at each checkpoint."""

    def __init__(self, r: redis.Redis, checkpoints: list[int], trace: bool) -> None:
        self.r = r
        self.count = 0
        self.checkpoints = sorted(checkpoints)
        self.trace = trace
        self.base: tracemalloc.Snapshot | None = None

    def tick(self) -> None:
        self.count += 1
        c = self.count
        if c == 1 or c % REPORT_EVERY == 0:
            self.r.zadd(KEY_PROGRESS, {f"{c} {time.time()!r} {time.process_time()!r}": c})
        if self.checkpoints and c == self.checkpoints[0]:
            self.checkpoints.pop(0)
            self.r.rpush(KEY_POINTS, json.dumps({"tasks": c, "rss_kib": _rss_kib(), "objects": len(gc.get_objects())}))
            if self.trace:
                self._trace(last=not self.checkpoints)

    def _trace(self, *, last: bool) -> None:
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        if self.base is None:
            self.base = snap
        elif last:
            top = snap.compare_to(self.base, "lineno")[:15]
            self.r.set(KEY_TRACE, "\n".join(str(s) for s in top))


def worker_main(args: argparse.Namespace) -> None:
    """A worker as bench/adapters/asynqpy_adapter.py runs it, with a catch-all pattern and a counting handler."""
    if args.tracemalloc:
        tracemalloc.start(5)
    url = redis_url()
    counter = Counter(redis.Redis.from_url(url), [int(x) for x in args.checkpoints.split(",") if x], args.tracemalloc)
    mux = ServeMux()

    @mux.handler(PATTERN)
    async def noop(task: ReceivedTask) -> None:
        counter.tick()

    shape = Shape("worker", args.queues, 1, args.strict)
    Server(url, concurrency=CONCURRENCY, queues=shape.weights(), strict_priority=args.strict).run(mux)


# ---------------------------------------------------------------- driver side


class Driver:
    def __init__(self, url: str) -> None:
        self.url = url
        self.r = redis.Redis.from_url(url)
        self.client = Client(url)

    def worker(self, shape: Shape, step: str, checkpoints: Sequence[int] = (), trace: bool = False,
               root: Path = ROOT) -> WorkerProcess:
        """A worker process of the asynqpy in root (this checkout, or --before's), running this file's worker."""
        argv = [sys.executable, str(root / "bench" / "scale_bench.py"), "--worker", "--queues", str(shape.queues),
                "--checkpoints", ",".join(map(str, checkpoints))]
        argv += ["--strict"] if shape.strict else []
        argv += ["--tracemalloc"] if trace else []
        return WorkerProcess(argv, {ENV_URL: self.url}, LOG_DIR / f"scale-{step}.log").start()

    def fill(self, shape: Shape, n: int, start: int = 0) -> None:
        """n tasks, the i-th in queue i mod queues (of those holding tasks) with type i mod types (so every queue
        sees every type)."""
        names = queue_names(shape.queues)[:shape.holding or None]
        per_queue: dict[str, list[Task]] = {q: [] for q in names}
        for i in range(start, start + n):
            per_queue[names[i % len(names)]].append(Task(type_name(i % shape.types), b"{}"))
        for q, tasks in per_queue.items():
            for res in self.client.enqueue_many(tasks, queue=q, chunk=1000):
                if isinstance(res, Exception):
                    raise res

    def progress(self) -> tuple[int, float]:
        """(tasks handled, when the last of them was counted) as the worker last reported them."""
        c, t, _ = self._point(-1)
        return c, t

    def _point(self, index: int) -> tuple[int, float, float]:
        got: list[bytes] = self.r.zrange(KEY_PROGRESS, index, index)  # type: ignore[assignment]
        if not got:
            return 0, 0.0, 0.0
        c, t, cpu = got[0].decode().split()
        return int(c), float(t), float(cpu)

    def wait_for(self, w: WorkerProcess, n: int, stall: float = 30.0) -> None:
        last, last_change = -1, time.time()
        while True:
            c, _ = self.progress()
            if c >= n:
                return
            if not w.alive():
                raise RuntimeError(f"worker exited after {c} tasks: {w.log_tail()}")
            if c != last:
                last, last_change = c, time.time()
            elif time.time() - last_change > stall:
                raise RuntimeError(f"no progress for {stall:.0f}s at {c} of {n} tasks: {w.log_tail()}")
            time.sleep(0.02)

    def drain_rate(self, shape: Shape, n: int, root: Path = ROOT) -> tuple[float, float]:
        """(tasks/s, the worker's CPU microseconds per task) of one drain of n tasks by a fresh worker."""
        self.r.flushall()
        self.fill(shape, n)
        w = self.worker(shape, "rate", root=root)
        try:
            self.wait_for(w, n)
        finally:
            w.stop()
        _, t0, cpu0 = self._point(0)
        c, t1, cpu1 = self._point(-1)
        return (c - 1) / (t1 - t0), (cpu1 - cpu0) / (c - 1) * 1e6

    def memory(self, total: int, checkpoints: list[int], trace: bool, pending: int = 50_000,
               chunk: int = 10_000) -> tuple[list[dict[str, Any]], str, float]:
        """Feed one worker `total` tasks, keeping at most `pending` + `chunk` waiting. Returns its checkpoints,
        the tracemalloc growth text (or "") and the drain's seconds."""
        self.r.flushall()
        shape = MEMORY_SHAPE
        fed = min(total, pending)
        self.fill(shape, fed)
        w = self.worker(shape, "memory", checkpoints, trace)
        t0 = time.time()
        try:
            while fed < total:
                done, _ = self.progress()
                if not w.alive():
                    raise RuntimeError(f"worker exited after {done} tasks: {w.log_tail()}")
                if fed - done < pending:
                    n = min(chunk, total - fed)
                    self.fill(shape, n, start=fed)
                    fed += n
                else:
                    time.sleep(0.05)
            self.wait_for(w, total)
            deadline = time.time() + 60
            while self.r.llen(KEY_POINTS) < len(checkpoints) and time.time() < deadline:
                time.sleep(0.1)
            trace_text = ""
            while trace and not trace_text and time.time() < deadline:
                trace_text = (self.r.get(KEY_TRACE) or b"").decode()  # type: ignore[union-attr]
                time.sleep(0.1)
        finally:
            w.stop()
        points = [json.loads(p) for p in self.r.lrange(KEY_POINTS, 0, -1)]  # type: ignore[union-attr]
        return points, trace_text, time.time() - t0


def chosen(names: str | None) -> tuple[Shape, ...]:
    """The configurations to run: the baseline, then those named (all when names is None)."""
    if not names:
        return SHAPES
    want = {n.strip() for n in names.split(";") if n.strip()}
    unknown = want - {s.name for s in SHAPES}
    if unknown:
        raise SystemExit(f"unknown configurations: {sorted(unknown)}; known: {[s.name for s in SHAPES]}")
    return tuple(s for s in SHAPES if s is BASELINE or s.name in want)


def rate_table(label: str, rates: dict[str, list[float]], cpus: dict[str, list[float]],
               ratios: dict[str, list[float]], shapes: Sequence[Shape] = SHAPES) -> tuple[str, bool]:
    """The rates table; ok is False when a judged configuration's median ratio is below 1 - RATE_TOLERANCE."""
    lines = [f"{'configuration':28s} {'tasks/s':>8s} {'min-max':>14s} {'CPU us/task':>12s} {'rate vs base':>13s}  "
             "verdict"]
    ok = True
    for shape in shapes:
        name = label + shape.name
        rs = rates[name]
        spread = f"{min(rs):,.0f}-{max(rs):,.0f}"
        if shape is BASELINE:
            rel, verdict = "1.00", "baseline"
        else:
            r = statistics.median(ratios[name])
            rel = f"{r:.2f}"
            passed = r >= 1 - RATE_TOLERANCE
            judged = shape.name in JUDGED
            ok = ok and (passed or not judged)
            verdict = ("PASS" if passed else "FAIL") + ("" if judged else " (not judged)")
        lines.append(f"{shape.name:28s} {statistics.median(rs):8,.0f} {spread:>14s} "
                     f"{statistics.median(cpus[name]):12.0f} {rel:>13s}  {verdict}")
    return "\n".join(lines), ok


def memory_table(points: list[dict[str, Any]]) -> tuple[str, bool]:
    lines = [f"{'tasks drained':>14s} {'VmRSS MiB':>10s} {'gc objects':>11s}"]
    for p in points:
        lines.append(f"{p['tasks']:14,d} {p['rss_kib'] / 1024:10.1f} {p['objects']:11,d}")
    base = next((p for p in points if p["tasks"] == 10_000), points[0])
    last = points[-1]
    grew = (last["rss_kib"] - base["rss_kib"]) / 1024
    ok = last["rss_kib"] <= base["rss_kib"] + RSS_TOLERANCE_KIB
    lines.append(f"RSS after {last['tasks']:,} tasks - after {base['tasks']:,}: {grew:+.1f} MiB "
                 f"(tolerance {RSS_TOLERANCE_KIB / 1024:.0f} MiB): {'PASS' if ok else 'FAIL'}")
    return "\n".join(lines), ok


def prepare_before(tree: Path) -> Path:
    """tree (a copy of the code before a change, e.g. `git archive`), with this file and bench/adapters put in it
    so that its workers run the same worker on the older asynqpy."""
    import shutil

    bench = tree / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "__init__.py").touch()
    shutil.copy2(Path(__file__), bench / "scale_bench.py")
    shutil.copytree(ROOT / "bench" / "adapters", bench / "adapters", dirs_exist_ok=True)
    return tree.resolve()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python bench/scale_bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=20_000, help="tasks drained per rate measurement (20000)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of every configuration, alternated (5)")
    ap.add_argument("--memory-tasks", type=int, default=1_000_000, help="tasks fed to the memory worker (1000000)")
    ap.add_argument("--tracemalloc", action="store_true", help="the memory worker traces allocations (slower) and "
                    "prints the top growth from 10,000 tasks to the end")
    ap.add_argument("--shapes", help="only these configurations, by name, "
                    "semicolon-separated (e.g. '100 queues;1,000 types'); the baseline always runs")
    ap.add_argument("--skip-rates", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--before", type=Path, help="also measure the asynqpy of this directory (a copy of the code "
                    "before a change: git archive <rev> | tar -x -C DIR), alternated with this checkout's")
    ap.add_argument("--redis-url", help="use this Redis (it is FLUSHALLed) instead of a private Valkey")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    # the worker process (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--queues", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--strict", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoints", default="", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    server = None
    if args.redis_url:
        url = args.redis_url
    else:
        from asynqpy.embedded import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
    os.environ[ENV_URL] = url
    out: dict[str, Any] = {"load_before": os.getloadavg()[0], "tasks": args.tasks, "rounds": args.rounds}
    ok = True
    try:
        d = Driver(url)
        if not args.skip_rates:
            variants = [("", ROOT)] + ([("before: ", prepare_before(args.before))] if args.before else [])
            out["variants"] = [label or "this checkout" for label, _ in variants]
            rates: dict[str, list[float]] = {}
            cpus: dict[str, list[float]] = {}
            ratios: dict[str, list[float]] = {}
            shapes = chosen(args.shapes)
            runs = [(label, root, s) for s in shapes for label, root in variants]
            # a warm-up drain of each variant, not counted: the first drain on a fresh server loads every script
            # (NOSCRIPT, then EVAL of its text), which fell on round 1's first configuration (the baseline)
            for _, root in variants:
                d.drain_rate(BASELINE, min(args.tasks, 2000), root)
            for rnd in range(args.rounds):
                got: dict[str, tuple[float, float]] = {}
                for label, root, s in alternated(runs, rnd):
                    got[label + s.name] = d.drain_rate(s, args.tasks, root)
                for label, _ in variants:
                    for s in shapes:
                        rate, cpu = got[label + s.name]
                        rates.setdefault(label + s.name, []).append(rate)
                        cpus.setdefault(label + s.name, []).append(cpu)
                        ratios.setdefault(label + s.name, []).append(rate / got[label + BASELINE.name][0])
                print(f"round {rnd + 1}: " + ", ".join(f"{k} {v:,.0f}/s {c:.0f}us" for k, (v, c) in got.items()),
                      file=sys.stderr, flush=True)
            print(f"\nDrain rate, {args.tasks:,} tasks, {args.rounds} rounds, concurrency {CONCURRENCY} "
                  f"(judged: {', '.join(JUDGED)} within {RATE_TOLERANCE:.0%} of the baseline)")
            for label, _ in variants:
                table, rates_ok = rate_table(label, rates, cpus, ratios, shapes)
                ok = ok and (rates_ok or bool(label))
                print(f"{label or 'this checkout:'}\n{table}")
            out["rates"], out["cpu_us_per_task"], out["ratios"] = rates, cpus, ratios
        if not args.skip_memory:
            marks = [m for m in (10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000) if m < args.memory_tasks]
            marks.append(args.memory_tasks)
            points, trace_text, secs = d.memory(args.memory_tasks, marks, args.tracemalloc)
            table, mem_ok = memory_table(points)
            ok = ok and mem_ok
            print(f"\nWorker memory ({MEMORY_SHAPE.name}, retention 0, fed in chunks; {args.memory_tasks:,} tasks "
                  f"in {secs:.0f}s{', tracemalloc on' if args.tracemalloc else ''})\n{table}")
            if trace_text:
                print(f"\ntracemalloc, top growth from 10,000 tasks to the end:\n{trace_text}")
            out["memory"], out["tracemalloc"] = points, trace_text
    finally:
        if server is not None:
            server.stop()
    out["load_after"] = os.getloadavg()[0]
    print(f"\nload average (1 min): {out['load_before']:.2f} before, {out['load_after']:.2f} after")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
