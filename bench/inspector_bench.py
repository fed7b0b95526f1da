"""Inspector benchmark: asynqpy's Inspector beside Go asynq v0.26.0's Inspector on one private Valkey.

    python bench/inspector_bench.py                    # about 2 minutes on 2 cores
    python bench/inspector_bench.py --scale 0.05       # a quick check (seconds)
    python bench/inspector_bench.py --json bench/results/inspector.json

Measures (see bench/README_inspector.md for what each number means):
  1. queue_infos() for 100 queues vs Go Queues() + GetQueueInfo per queue (one metrics-exporter scrape);
  2. list_tasks at page 1 and at the far end of a 1,000,000-task pending list and archived set vs Go
     ListPendingTasks / ListArchivedTasks with the same Page and PageSize;
  3. search over 100,000 tasks (text in the payload): time per call, tasks scanned per second;
  4. run_all(q, "archived") over 100,000 tasks vs Go RunAllArchivedTasks: total time and the longest
     single Redis call.
The longest single Redis call of every measurement comes from SLOWLOG (slowlog-log-slower-than 0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/inspector_bench.py` from anywhere
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from asynqpy.embedded import EmbeddedServer  # noqa: E402
from asynqpy.rdb import keys  # noqa: E402
from bench.inspector_data import NEEDLE, NEEDLE_EVERY, PER_QUEUE, Loader, task_id  # noqa: E402
from bench.inspector_go import GoSide  # noqa: E402
from bench.inspector_probe import BLOCK_WARN_MS, Calls, Probe  # noqa: E402
from inspector import Inspector  # noqa: E402

# -- measuring ---------------------------------------------------------------------------------------------

def timed(fn: Callable[[], Any], reps: int, warmup: int = 1) -> tuple[list[float], Any]:
    out = None
    for _ in range(warmup):
        out = fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples, out


@dataclass
class Row:
    op: str
    py_ms: float | None
    go_ms: float | None = None
    go_missing: str = ""  # why there is no Go number
    notes: list[str] = field(default_factory=list)
    py_samples: list[float] = field(default_factory=list)
    go_samples: list[float] = field(default_factory=list)
    py_calls: dict[str, Any] | None = None
    go_calls: dict[str, Any] | None = None

    @property
    def ratio(self) -> float | None:
        """Go time / asynqpy time: above 1 means asynqpy is faster."""
        if self.py_ms and self.go_ms is not None:
            return self.go_ms / self.py_ms
        return None


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs)


class Bench:
    def __init__(self, args: argparse.Namespace, url: str) -> None:
        self.args = args
        self.admin = redis.Redis.from_url(url)
        self.slow = Probe(self.admin, args.slowlog_us)
        self.insp = Inspector(url)
        self.go = GoSide(not args.no_go, url)
        self.loader = Loader(self.admin, time.time())
        self.rows: list[Row] = []
        s = args.scale
        self.n_queues = max(2, round(100 * s))
        self.big = max(100, round(1_000_000 * s / 10) * 10)
        self.search_n = max(100, round(100_000 * s))
        self.replay_n = max(100, round(100_000 * s))
        self.page_size = args.page_size
        self.far_page = (self.big - 30) // self.page_size + 1

    # each measurement: SLOWLOG reset, the Python (or Go) side, SLOWLOG read
    def py(self, fn: Callable[[], Any], reps: int, warmup: int = 1) -> tuple[list[float], Any, Calls]:
        self.slow.reset()
        samples, out = timed(fn, reps, warmup)
        return samples, out, self.slow.read()

    def gorun(self, row: Row, *args: Any) -> dict[str, Any] | None:
        if not self.go.binary:
            row.go_missing = self.go.reason
            return None
        self.slow.reset()
        out = self.go.run(*args)
        calls = self.slow.read()
        row.go_samples = out["ms"]
        row.go_ms = med(out["ms"])
        row.go_calls = asdict(calls)
        out["calls"] = calls
        return out

    def add(self, row: Row, calls: Calls | None) -> Row:
        if calls is not None:
            row.py_calls = asdict(calls)
        self.rows.append(row)
        print(f"  {row.op}: asynqpy {fmt_ms(row.py_ms, '')} ms, Go {fmt_ms(row.go_ms, row.go_missing)} ms",
              flush=True)
        return row

    # -- 1. queue infos ------------------------------------------------------------------------------------
    def queue_infos(self) -> None:
        t0 = time.perf_counter()
        for qn in range(self.n_queues):
            q = f"q{qn:03d}"
            for state, count in PER_QUEUE.items():
                self.loader.add(q, qn, state, count)
            day = self.loader.now
            self.admin.mset({keys.processed_daily(q, day): 120 + qn, keys.failed_daily(q, day): 7,
                             keys.processed_total(q): 50_000 + qn, keys.failed_total(q): 900})
        self.loader.check("q000", 0, "pending", 0)
        per_queue = sum(PER_QUEUE.values())
        print(f"[1] {self.n_queues} queues x {per_queue} tasks loaded in {time.perf_counter() - t0:.1f} s",
              flush=True)
        reps = self.args.reps
        samples, infos, calls = self.py(lambda: self.insp.queue_infos(), reps)
        assert len(infos) == self.n_queues
        py_tasks = sum(i.size for i in infos)
        row = Row(f"queue_infos, {self.n_queues} queues x {per_queue} tasks (one scrape)", med(samples),
                  py_samples=samples, py_calls=asdict(calls))
        scripts = f"scripts/scrape: asynqpy {calls.scripts // (reps + 1)}"
        out = self.gorun(row, "queueinfo", "-reps", reps, "-warmup", 1)
        if out:
            scripts += f", Go {out['calls'].scripts // (reps + 1)}"
            if out["tasks"] != py_tasks or out["queues"] != self.n_queues:
                row.notes.append(f"MISMATCH: Go saw {out['queues']} queues / {out['tasks']} tasks, "
                                 f"asynqpy {self.n_queues} / {py_tasks}")
            else:
                row.notes.append("same sizes as Go")
        scripts += f"; Redis busy/scrape: asynqpy {calls.script_ms / (reps + 1):.1f} ms"
        if out:
            scripts += f", Go {out['calls'].script_ms / (reps + 1):.1f} ms"
        row.notes += [scripts, self.max_note(row)]
        self.add(row, None)

    def max_note(self, row: Row) -> str:
        """The longest single call of each side, from the SLOWLOG."""
        th = self.slow.threshold_us
        py = Calls(**row.py_calls) if row.py_calls else None
        go = Calls(**row.go_calls) if row.go_calls else None
        parts = [f"asynqpy {py.note(th)}" if py else "", f"Go {go.note(th)}" if go else ""]
        return ", ".join(p for p in parts if p)

    # -- 2. paging a million tasks ---------------------------------------------------------------------------
    def lists(self) -> None:
        t0 = time.perf_counter()
        self.loader.add("big-pending", 1001, "pending", self.big)
        t1 = time.perf_counter()
        self.loader.add("big-archived", 1002, "archived", self.big)
        t2 = time.perf_counter()
        for st in ("pending", "archived"):
            self.loader.check(f"big-{st}", 1001 if st == "pending" else 1002, st, self.big - 1)
        print(f"[2] {self.big:,} pending tasks loaded in {t1 - t0:.1f} s ({self.big / (t1 - t0):,.0f}/s), "
              f"{self.big:,} archived in {t2 - t1:.1f} s", flush=True)
        size = self.page_size
        for st in ("pending", "archived"):
            q = f"big-{st}"
            qno = 1001 if st == "pending" else 1002
            for page in (1, self.far_page):
                offset = (page - 1) * size
                samples, tp, calls = self.py(
                    partial(self.insp.list_tasks, q, st, page=page, size=size), self.args.list_reps)
                ids = [t.id for t in tp.tasks]
                want = [task_id(qno, st, i) for i in range(offset, min(offset + size, self.big))]
                row = Row(f"list_tasks {st} of {self.big:,}, page {page:,} (offset {offset:,}, size {size})",
                          med(samples), py_samples=samples)
                if ids != want:
                    row.notes.append("WRONG PAGE from asynqpy")
                row.py_calls = asdict(calls)
                out = self.gorun(row, "list", "-queue", q, "-state", st, "-page", page, "-size", size,
                                 "-reps", self.args.list_reps, "-warmup", 1)
                if out:
                    row.notes.append("same IDs as Go" if out["ids"] == ids else "IDs DIFFER from Go")
                row.notes.append(self.max_note(row))
                self.add(row, calls)

    # -- 3. search -----------------------------------------------------------------------------------------
    def search(self) -> None:
        n = self.search_n
        t0 = time.perf_counter()
        self.loader.add("search-pending", 2001, "pending", n, needle_every=NEEDLE_EVERY)
        self.loader.add("search-archived", 2002, "archived", n, needle_every=NEEDLE_EVERY)
        print(f"[3] 2 x {n:,} tasks for search loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        want = len(range(0, n, NEEDLE_EVERY))
        reps = self.args.reps
        for st in ("pending", "archived"):
            q = f"search-{st}"
            samples, res, calls = self.py(
                partial(self.insp.search, q, st, text=NEEDLE, limit=n, max_scan=n), reps)
            assert res.scanned == n, (res.scanned, res.next_cursor)
            row = Row(f"search {st} of {n:,}, text in payload (per call)", med(samples), py_samples=samples,
                      go_missing="n/a (Go has no search)", py_calls=asdict(calls))
            rate = res.scanned / (med(samples) / 1e3)
            row.notes.append(f"{res.scanned:,} scanned, {rate:,.0f} tasks/s, {len(res.tasks)} matches"
                             + ("" if len(res.tasks) == want else f" (WANTED {want})"))
            row.notes.append(f"{calls.scripts // (reps + 1)} script calls/search, Redis busy "
                             f"{calls.script_ms / (reps + 1):.0f} ms/search")
            row.notes.append(self.max_note(row))
            self.add(row, calls)

    # -- 4. replaying archived tasks -------------------------------------------------------------------------
    def replay(self) -> None:
        n, reps = self.replay_n, self.args.replay_reps
        t0 = time.perf_counter()
        sides = ["py"] + (["go"] if self.go.binary else [])
        for side in sides:
            for r in range(reps):
                self.loader.add(f"replay-{side}-{r}", 3000 + r + (100 if side == "go" else 0), "archived", n)
        print(f"[4] {len(sides) * reps} x {n:,} archived tasks loaded in {time.perf_counter() - t0:.1f} s",
              flush=True)
        self.replay_rows(n, [f"replay-py-{r}" for r in range(reps)], [f"replay-go-{r}" for r in range(reps)])

    def million_replay(self) -> None:
        """run_all over the million-task archived set (asynqpy) and a copy of it (Go): one run each."""
        n = self.big
        if self.go.binary:
            t0 = time.perf_counter()
            self.loader.add("big-archived-go", 1003, "archived", n)
            print(f"[5] a second {n:,}-task archived set loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        self.replay_rows(n, ["big-archived"], ["big-archived-go"])

    def replay_rows(self, n: int, py_queues: list[str], go_queues: list[str]) -> None:
        """Two rows: run_all's total time and its longest single Redis call, each queue replayed once."""
        py_ms: list[float] = []
        py_calls: list[Calls] = []
        for q in py_queues:
            samples, moved, calls = self.py(partial(self.insp.run_all, q, "archived"), 1, warmup=0)
            assert moved == n and self.admin.llen(keys.pending(q)) == n, moved
            py_ms += samples
            py_calls.append(calls)
        runs = len(py_queues)
        worst_py = max(py_calls, key=lambda c: c.max_ms)
        label = f"run_all archived, {n:,} tasks" + (" (1 run)" if runs == 1 else "")
        total = Row(f"{label}: total", med(py_ms), py_samples=py_ms, py_calls=asdict(worst_py))
        block = Row(f"{label}: longest Redis call", med([c.max_ms for c in py_calls]),
                    py_samples=[c.max_ms for c in py_calls], py_calls=asdict(worst_py))
        busy = f"Redis busy: asynqpy {med([c.script_ms for c in py_calls]):.0f} ms"
        total.notes.append(f"asynqpy {py_calls[0].scripts} script calls (chunks of {self.insp.chunk})")
        if self.go.binary:
            go_ms, go_calls, reported = [], [], []
            for q in go_queues:
                self.slow.reset()
                out = self.go.run("runall", "-queue", q)
                go_calls.append(self.slow.read())
                go_ms += out["ms"]
                reported.append(out["moved"])
                if self.admin.llen(keys.pending(q)) != n:
                    total.notes.append(f"Go LEFT {q} with {self.admin.llen(keys.pending(q))} pending")
            worst_go = max(go_calls, key=lambda c: c.max_ms)
            total.go_samples, total.go_ms = go_ms, med(go_ms)
            block.go_samples = [c.max_ms for c in go_calls]
            block.go_ms = med(block.go_samples)
            total.go_calls = block.go_calls = asdict(worst_go)
            total.notes[0] += f", Go {go_calls[0].scripts} (one script does everything)"
            busy += f", Go {med([c.script_ms for c in go_calls]):.0f} ms"
            if any(m != n for m in reported):
                total.notes.append(f"Go REPORTED {', '.join(map(str, reported))} tasks run although all {n:,} "
                                   f"were moved (go-redis timed out after 3 s and sent the script again)")
        else:
            total.go_missing = block.go_missing = self.go.reason
        total.notes.append(busy)
        block.notes.append((f"median over {runs} runs of each run's longest call; " if runs > 1 else "")
                           + self.max_note(block).replace("max call", "worst"))
        if worst_py.over_warn:
            block.notes.append(f"asynqpy had {worst_py.over_warn} calls over {BLOCK_WARN_MS:g} ms")
        self.add(total, None)
        self.add(block, None)

    def run(self) -> None:
        self.queue_infos()
        self.lists()
        self.search()
        self.replay()
        if not self.args.no_million_replay:
            self.million_replay()


# -- output ------------------------------------------------------------------------------------------------

def fmt_ms(v: float | None, missing: str) -> str:
    if v is None:
        return missing or "n/a"
    return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"


def table(rows: list[Row]) -> str:
    head = ("operation", "asynqpy ms", "Go ms", "Go/py", "notes")
    lines = [(r.op, fmt_ms(r.py_ms, ""), fmt_ms(r.go_ms, r.go_missing),
              f"{r.ratio:.2f}x" if r.ratio is not None else "-", "; ".join(n for n in r.notes if n))
             for r in rows]
    widths = [max(len(head[i]), *(len(line[i]) for line in lines)) for i in range(4)]
    out = [" | ".join(h.ljust(w) for h, w in zip(head[:4], widths, strict=True)) + " | " + head[4]]
    out.append("-+-".join("-" * w for w in widths) + "-+-" + "-" * 5)
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:4], widths[1:], strict=True)]
        out.append(" | ".join(cells) + " | " + line[4])
    return "\n".join(out)


def blocking_report(rows: list[Row]) -> list[str]:
    """One line per measurement in which a single Redis call took longer than BLOCK_WARN_MS."""
    out, seen = [], set()
    for r in rows:
        for side, c in (("asynqpy", r.py_calls), ("Go", r.go_calls)):
            if c and c["max_ms"] > BLOCK_WARN_MS and (side, c["max_ms"]) not in seen:
                seen.add((side, c["max_ms"]))
                out.append(f"{side} {r.op.split(':')[0]}: one {c['max_cmd']} blocked Redis {c['max_ms']:.1f} ms "
                           f"({c['over_warn']} calls over {BLOCK_WARN_MS:g} ms)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0,
                   help="multiply every size (queues, 1M lists, 100k search/replay sets); 0.05 for a quick check")
    p.add_argument("--reps", type=int, default=7, help="repetitions of queue_infos and search (median)")
    p.add_argument("--list-reps", type=int, default=50, help="repetitions of each list_tasks page (median)")
    p.add_argument("--replay-reps", type=int, default=5, help="run_all repetitions, each on a fresh set")
    p.add_argument("--page-size", type=int, default=10,
                   help="list page size; the far page starts at the largest multiple of it <= N-30 (999,970)")
    p.add_argument("--slowlog-us", type=int, default=20,
                   help="slowlog-log-slower-than in microseconds (see Probe: 0 also logs every command a script runs)")
    p.add_argument("--no-go", action="store_true", help="skip the Go side")
    p.add_argument("--no-million-replay", action="store_true",
                   help="skip run_all over the million-task archived set (saves ~25 s)")
    p.add_argument("--json", metavar="PATH", help="also write every sample and the settings as JSON")
    args = p.parse_args(argv)
    if args.scale <= 0 or min(args.reps, args.list_reps, args.replay_reps, args.page_size) < 1:
        p.error("--scale, --reps, --list-reps, --replay-reps and --page-size must be positive")
    if args.slowlog_us < 0:
        p.error("--slowlog-us must be >= 0")

    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    server = EmbeddedServer().start()
    bench = None
    try:
        bench = Bench(args, server.url)
        info = bench.admin.info("server")
        server_name = f"{info.get('server_name', 'redis')} {info.get('valkey_version') or info['redis_version']}"
        print(f"{server_name} at {server.url}; {bench.go.version or bench.go.reason}", flush=True)
        bench.run()
        used = bench.admin.info("memory")["used_memory_human"]
        print()
        print(table(bench.rows))
        print()
        print("Go/py above 1x: asynqpy is faster (for the 'longest Redis call' row: blocks Redis for less).")
        warnings = blocking_report(bench.rows)
        for w in warnings:
            print(f"BLOCKS > {BLOCK_WARN_MS:.0f} ms: {w}")
        elapsed = time.perf_counter() - started
        load = (load_before, os.getloadavg()[0])
        print(f"{bench.loader.loaded:,} tasks loaded in {bench.loader.seconds:.1f} s "
              f"({bench.loader.loaded / bench.loader.seconds:,.0f}/s); server memory {used}; "
              f"whole run {elapsed:.0f} s; load average {load[0]:.2f} before, {load[1]:.2f} after "
              f"({os.cpu_count()} CPUs)")
        if args.json:
            doc = {
                "settings": {k: v for k, v in vars(args).items() if k != "json"} | {
                    "queues": bench.n_queues, "tasks_per_queue": PER_QUEUE, "big": bench.big,
                    "far_page": bench.far_page, "search_tasks": bench.search_n, "replay_tasks": bench.replay_n,
                    "inspector_chunk": bench.insp.chunk},
                "environment": {"server": server_name, "go": bench.go.version or bench.go.reason,
                                "python": platform.python_version(), "cpus": os.cpu_count(),
                                "loadavg_before_after": load,
                                "server_memory": used},
                "load": {"tasks": bench.loader.loaded, "seconds": bench.loader.seconds},
                "rows": [asdict(r) | {"ratio": r.ratio} for r in bench.rows],
                "blocking_over_5ms": warnings,
                "seconds": elapsed,
            }
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
            print(f"wrote {args.json}")
    finally:
        if bench is not None:
            bench.insp.close()
            bench.go.close()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
