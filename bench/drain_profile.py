"""Where a drained task's CPU goes: one worker Server drains N no-op tasks in this process, under cProfile.

    python bench/drain_profile.py [--tasks 20000] [--queues 1] [--redis-url URL] [--cli-hooks] [--no-profile] [--top 25]

It fills the queue with N tasks (Client.enqueue_many), serves them with one Server (concurrency 10, the bench's
settings), and counts the CPU of this process (user+sys) from the first handler call to the last one. With the
profiler on, each function's own time is put in one of the buckets of the table in bench/README.md ("Where a
drained task's CPU goes") by the file it is defined in; --top prints the heaviest functions too. --cli-hooks adds
the outcome hook that `asynqpy worker` installs (FailureLog). The profiler slows everything down (about 2x): its
shares are what to read, the rate and CPU figures without it (--no-profile) are the real ones.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

from asynqpy import Client, ReceivedTask, ServeMux, Server, Task  # noqa: E402

# (bucket, substrings of the defining file or function name), first match wins
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    ("protobuf decode/encode", ("asynqpy/wire", "google/protobuf", "ParseFromString", "SerializeToString")),
    ("handler call (mux, task object, the no-op)", ("asynqpy/mux.py", "asynqpy/task.py", "drain_profile.py",
                                                   "json/")),
    ("acknowledgement (acker)", ("asynqpy/acker.py",)),
    ("outcome hooks (type stats, failure log)", ("asynqpy/outcome.py", "asynqpy/typestats.py",
                                                 "asynqpy/failurelog.py", "dataclasses.py", "bisect")),
    ("processor (start, execute, finish)", ("asynqpy/processor.py", "asynqpy/finisher.py", "asynqpy/runtime.py",
                                            "asynqpy/fetch.py", "asynqpy/handoff.py")),
    ("socket writes (the send system call)", ("streams.py:writelines", "<method 'send", "transports")),
    ("scripts: packing, pool, reply parsing", ("asynqpy/rdb/", "redis/", "hiredis", "socket", "selector",
                                               "<method 'recv")),
    ("asyncio scheduling (tasks, events, timeouts)", ("asyncio/", "uvloop", "<method 'run_until_complete",
                                                      "contextvars", "timeouts.py", "<built-in method _asyncio")),
]


def bucket_of(path: str, func: str) -> str:
    where = f"{path}:{func}"
    for name, marks in BUCKETS:
        if any(m in where for m in marks):
            return name
    return "other"


def queue_names(n: int) -> list[str]:
    return ["default"] if n == 1 else [f"q{i:03d}" for i in range(n)]


def fill(url: str, n: int, queues: int = 1) -> None:
    """n tasks, the i-th in queue i mod queues (as bench/scale_bench.py fills them)."""
    names = queue_names(queues)
    with Client(url) as c:
        for qi, q in enumerate(names):
            count = len(range(qi, n, len(names)))
            for start in range(0, count, 5000):
                for res in c.enqueue_many([Task("bench:noop", json.dumps({"k": "d", "t": 0.0}).encode())
                                           for _ in range(min(5000, count - start))], queue=q):
                    if isinstance(res, Exception):
                        raise res


def drain(url: str, n: int, *, cli_hooks: bool, profile: cProfile.Profile | None, queues: int = 1) -> dict[str, Any]:
    mux = ServeMux()
    seen = {"count": 0, "cpu0": 0.0, "t0": 0.0, "cpu1": 0.0, "t1": 0.0}
    done = asyncio.Event()

    @mux.handler("bench:noop")
    async def noop(task: ReceivedTask) -> None:
        json.loads(task.payload)  # what the bench's handler does before it counts
        c = seen["count"] = seen["count"] + 1
        if c == 1:
            seen["cpu0"], seen["t0"] = time.process_time(), time.perf_counter()
            if profile is not None:
                profile.enable()
        if c == n:
            if profile is not None:
                profile.disable()
            seen["cpu1"], seen["t1"] = time.process_time(), time.perf_counter()
            done.set()

    hooks: tuple[Any, ...] = ()
    if cli_hooks:
        from asynqpy.failurelog import FailureLog
        hooks = (FailureLog(),)
    server = Server(url, concurrency=10, queues={q: 1 for q in queue_names(queues)}, outcome_hooks=hooks)

    async def main() -> None:
        serving = asyncio.create_task(server.serve(mux))
        await done.wait()
        server.stop()
        await serving

    try:
        import uvloop
        uvloop.run(main())
    except ImportError:
        asyncio.run(main())
    secs = seen["t1"] - seen["t0"]
    tasks = n - 1  # the clock and the CPU count start at the first task's handler
    return {"tasks": n, "rate": tasks / secs, "cpu_us_per_task": (seen["cpu1"] - seen["cpu0"]) / tasks * 1e6}


def breakdown(profile: cProfile.Profile, tasks: int, top: int) -> None:
    st = pstats.Stats(profile)
    raw: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    rows = []
    for (path, _line, func), (_cc, _nc, tt, _ct, _callers) in raw.items():
        b = bucket_of(path, func)
        totals[b] = totals.get(b, 0.0) + tt
        rows.append((tt, f"{Path(path).name}:{func}", b))
    whole = sum(totals.values())
    print(f"\nprofiled own time: {whole / tasks * 1e6:.1f} us per task (the profiler's overhead included)")
    for b, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {b:<46} {t / tasks * 1e6:6.1f} us  {100 * t / whole:4.1f} %")
    if top:
        print(f"\nthe {top} heaviest functions (own time per task):")
        for tt, name, b in sorted(rows, reverse=True)[:top]:
            print(f"  {tt / tasks * 1e6:6.2f} us  {name:<60} [{b}]")


def redis_work(r: Any) -> tuple[float, dict[str, int], dict[str, int]]:
    """The server's CPU so far (user+sys, s), and each command's calls and usec (INFO commandstats: the commands
    that scripts run are counted too, and EVALSHA's usec includes theirs)."""
    cpu = r.info("cpu")
    stats = r.info("commandstats")
    calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    usec = {k.removeprefix("cmdstat_"): int(v["usec"]) for k, v in stats.items()}
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls, usec


def print_redis_work(before: tuple[float, dict[str, int], dict[str, int]],
                     after: tuple[float, dict[str, int], dict[str, int]], tasks: int) -> None:
    """What the drain cost Redis per task (the worker's start and stop included, and the INFO calls' own): its CPU,
    the scripts' time (EVALSHA's usec) split into the commands they ran and the scripts' own (Lua) time, and each
    command's calls and usec per task."""
    calls = {k: n - before[1].get(k, 0) for k, n in after[1].items() if n - before[1].get(k, 0) > 0}
    usec = {k: n - before[2].get(k, 0) for k, n in after[2].items()}
    scripts = usec.get("evalsha", 0) + usec.get("eval", 0)
    inner = sum(u for k, u in usec.items() if k not in ("evalsha", "eval", "info"))
    print(f"Redis: {(after[0] - before[0]) / tasks * 1e6:.1f} us CPU per task ({scripts / tasks:.1f} in scripts: "
          f"{inner / tasks:.1f} their commands, {(scripts - inner) / tasks:.1f} their own), "
          f"{sum(calls.values()) / tasks:.2f} commands per task (calls, us per task): "
          + ", ".join(f"{k} {n / tasks:.3f} {usec.get(k, 0) / tasks:.2f}"
                      for k, n in sorted(calls.items(), key=lambda kv: -usec.get(kv[0], 0))), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/drain_profile.py", description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--redis-url", help="an empty database to use (it gets flushed); default: a private Valkey")
    ap.add_argument("--cli-hooks", action="store_true", help="add the FailureLog hook `asynqpy worker` installs")
    ap.add_argument("--no-profile", action="store_true", help="only the rate and the CPU per task")
    ap.add_argument("--rounds", type=int, default=1, help="drains in a row (each figure printed)")
    ap.add_argument("--redis-stats", action="store_true",
                    help="also the Redis server's work per task during the drain: its CPU and each command's calls "
                         "(INFO commandstats, commands run by scripts included)")
    ap.add_argument("--queues", type=int, default=1,
                    help="queues of equal weight, the tasks spread over them in turn (as bench/scale_bench.py's)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--lanes", type=int, choices=(1, 2), default=None,
                    help="fetch lanes of the processor (default: asynqpy.processor.FETCH_LANES)")
    args = ap.parse_args(argv)
    if args.lanes is not None:
        from asynqpy import processor
        processor.FETCH_LANES = args.lanes
    server = None
    url = args.redis_url
    if url is None:
        from asynqpy.embedded import EmbeddedServer
        server = EmbeddedServer().start()
        url = server.url
    import redis
    r = redis.Redis.from_url(url)
    try:
        for _ in range(args.rounds):
            r.flushdb()
            fill(url, args.tasks, args.queues)
            profile = None if args.no_profile else cProfile.Profile()
            before = redis_work(r) if args.redis_stats else None
            res = drain(url, args.tasks, cli_hooks=args.cli_hooks, profile=profile, queues=args.queues)
            print(f"drained {res['tasks']:,} tasks: {res['rate']:,.0f}/s, {res['cpu_us_per_task']:.1f} us CPU per task"
                  + (" (under the profiler)" if profile is not None else ""), flush=True)
            if before is not None:
                print_redis_work(before, redis_work(r), args.tasks)
            if profile is not None:
                breakdown(profile, res["tasks"], args.top)
    finally:
        r.flushdb()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
