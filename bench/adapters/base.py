"""The adapter interface each library implements, the worker processes it runs, and the worker-side recorder.

The measurements made on an adapter are in bench.adapters.measure.

Every task of every library carries the same small payload {"k": kind, "t": time}; kinds:
  "x" enqueue-only (never run), "d" drain, "p" pickup (t = enqueue time), "l" late (t = due time),
  "w" warm-up. The handler of each library calls record(payload, start), which writes to Redis keys
  under "bench:" that the driver reads. Drain progress is counted in the worker process and written
  every 100 tasks (every task where the library forks per task), so the no-op stays nearly a no-op.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[2]
TASK_TYPE = "bench:noop"
KEY_FIRST = "bench:first"
KEY_PROGRESS = "bench:progress"
KEY_COUNT = "bench:count"
KEY_PICKUP = "bench:pickup"
KEY_LATE = "bench:late"
KEY_WARM = "bench:warm"
ENV_URL = "BENCH_REDIS_URL"
ENV_N = "BENCH_N"
ENV_SHARED = "BENCH_SHARED_COUNT"
ENV_MULTI = "BENCH_MULTI_PROCESS"  # "1": several worker processes drain together, each counts its own
KEY_PROGRESS_BY_PID = "bench:progress:pids"  # hash pid -> "count time of its last task" (ENV_MULTI)
KEY_FIRSTS = "bench:firsts"  # zset pid -> time of its first task (ENV_MULTI)


def redis_url() -> str:
    return os.environ.get(ENV_URL, "redis://127.0.0.1:6379/0")


def payload(kind: str, t: float = 0.0) -> dict[str, Any]:
    return {"k": kind, "t": t}


def console_script(name: str) -> str:
    """The console script `name` of the running interpreter's environment."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


# ---------------------------------------------------------------- worker side


class Recorder:
    """Runs inside a worker process; turns handled tasks into the samples the driver reads."""

    def __init__(self) -> None:
        self.r = redis.Redis.from_url(redis_url())
        self.n = int(os.environ.get(ENV_N, "0") or 0)
        self.shared = os.environ.get(ENV_SHARED) == "1"  # a process per task: count in Redis
        self.count = 0
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.multi = os.environ.get(ENV_MULTI) == "1"
        self.last = 0.0
        if self.multi:  # a thread writes this process's progress (see _report_tail)
            threading.Thread(target=self._report_tail, daemon=True, name="bench-progress").start()

    def handle(self, p: dict[str, Any], start: float) -> None:
        kind = p.get("k")
        if kind == "d":
            self._done(start)
        elif kind == "p":
            self.r.rpush(KEY_PICKUP, repr(start - float(p["t"])))
        elif kind == "l":
            self.r.rpush(KEY_LATE, repr(start - float(p["t"])))
        elif kind == "w":
            self.r.rpush(KEY_WARM, "1")

    def _done(self, start: float) -> None:
        if self.multi:
            self._done_multi(start)
            return
        if self.shared:
            c = int(self.r.incr(KEY_COUNT))
        else:
            with self.lock:
                self.count += 1
                c = self.count
        if c == 1:
            self.r.set(KEY_FIRST, repr(start))
        if self.shared or c % 100 == 0 or c >= self.n:
            # a zset scored by count: a slow writer of an older count never hides a newer one
            self.r.zadd(KEY_PROGRESS, {f"{c} {time.time()!r}": c})


    def _done_multi(self, start: float) -> None:
        with self.lock:
            self.count += 1
            self.last = start
            c = self.count
        if c == 1:
            self.r.zadd(KEY_FIRSTS, {str(self.pid): start})

    def _report_tail(self) -> None:
        """Every 50 ms, this process's count and the time of its last task, when they changed (the only writer
        of its field: no write can overtake a newer one)."""
        written = 0
        r = redis.Redis.from_url(redis_url())
        while True:
            time.sleep(0.05)
            with self.lock:
                c, last = self.count, self.last
            if c != written:
                r.hset(KEY_PROGRESS_BY_PID, str(self.pid), f"{c} {last!r}")
                written = c


_recorder: Recorder | None = None
_recorder_lock = threading.Lock()


def record(p: dict[str, Any], start: float) -> None:
    """Called first thing by every library's no-op handler, with start = time.time() at entry."""
    global _recorder
    if _recorder is None or _recorder.pid != os.getpid():  # a forked child gets its own connection
        with _recorder_lock:
            if _recorder is None or _recorder.pid != os.getpid():
                _recorder = Recorder()
    _recorder.handle(p, start)


# ---------------------------------------------------------------- driver side


class StepError(Exception):
    """A measurement could not be made; the message goes into the table as the reason."""


class WorkerProcess:
    """One worker process of a library, in its own process group so that stop() ends its children too."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.argv, self.env, self.log_path = argv, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        _running.add(self)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The worker's pid, which is also its process group's id (start_new_session)."""
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        _running.discard(self)
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)  # the group this Popen created: the worker and its children
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            # the leader is gone; make sure no child of it is left behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break

    def log_tail(self, lines: int = 6) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])


_running: set[WorkerProcess] = set()


def stop_all_workers() -> None:
    for w in list(_running):
        w.stop(timeout=3.0)


class Adapter:
    """One library. Subclasses set the class attributes and implement the producer primitives."""

    name = ""
    package = ""  # distribution whose version is reported
    settings = ""  # how the worker runs, for the README and the JSON
    batch_how = ""  # what "batched" enqueue means for this library
    drain_cap: int | None = None  # drain at most this many tasks (slow libraries)
    shared_count = False  # the worker forks per task: count drained tasks in Redis
    queue_key = ""  # the list (or zset) of tasks waiting to run, checked empty after a drain

    def __init__(self, url: str) -> None:
        self.url = url

    def version(self) -> str:
        return importlib.metadata.version(self.package)

    def unavailable(self) -> str | None:
        """A reason the worker cannot run (checked before the worker steps), or None."""
        return None

    def worker_argv(self) -> list[str]:
        raise NotImplementedError

    def worker_argv_processes(self, processes: int) -> list[str] | None:
        """The worker command with `processes` worker processes, or None when the library has no such mode here."""
        return None

    # The start barrier of a multi-process drain: the queue is held (filled, but no worker may take from it) while
    # the processes start, and released once all of them are up, so that the clock, which starts at the first
    # task, does not count one process's start-up while another drains. A library without it returns False.
    def hold_queue(self) -> bool:
        return False

    def workers_up(self) -> int:
        """How many worker processes are up and waiting (used while the queue is held)."""
        return 0

    def release_queue(self) -> None:
        pass

    def close(self) -> None:
        pass

    # producer primitives of a synchronous library
    def enqueue(self, p: dict[str, Any]) -> None:
        raise NotImplementedError

    def enqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def enqueue_at(self, due: float) -> None:
        """Enqueue a task due at `due` (Unix s) whose payload is payload("l", <the due time asked for>)."""
        raise NotImplementedError

    def extra_producers(self) -> list[tuple[str, Any]]:
        """Extra producer measurements: (name, timed(n) -> seconds), reported beside the table."""
        return []

    # the hooks the measurements call; async libraries and Go override these
    def timed_single(self, n: int) -> float:
        ps = [payload("x") for _ in range(n)]
        t0 = time.perf_counter()
        for p in ps:
            self.enqueue(p)
        return time.perf_counter() - t0

    def timed_batch(self, n: int) -> float:
        ps = [payload("x") for _ in range(n)]
        t0 = time.perf_counter()
        self.enqueue_batch(ps)
        return time.perf_counter() - t0

    def fill(self, n: int) -> None:
        ps = [payload("d") for _ in range(n)]
        for start in range(0, n, 5000):
            self.enqueue_batch(ps[start:start + 5000])

    def warm(self) -> None:
        self.enqueue(payload("w"))

    def produce_pickup(self, samples: int) -> None:
        for _ in pickup_schedule(samples):
            self.enqueue(payload("p", time.time()))

    def produce_delayed(self, dues: list[float]) -> None:
        for due in dues:
            self.enqueue_at(due)


def pickup_schedule(samples: int, rng: random.Random | None = None) -> Any:
    """Yields `samples` times, sleeping 25-75 ms (uniform) before each: arrivals that no poll loop can
    phase-lock with, and far enough apart that a no-op worker is idle again before the next."""
    rng = rng or random.Random(1)
    nxt = time.perf_counter()
    for i in range(samples):
        nxt += rng.uniform(0.025, 0.075)
        delay = nxt - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield i


class AsyncAdapter(Adapter):
    """A library whose producer is asyncio: each hook runs one coroutine on a private loop."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    async def aenqueue(self, p: dict[str, Any]) -> None:
        raise NotImplementedError

    async def aenqueue_at(self, due: float) -> None:
        raise NotImplementedError

    async def aenqueue_batch(self, ps: list[dict[str, Any]]) -> None:
        """Without a batch API: 100 enqueues in flight at a time."""
        for start in range(0, len(ps), 100):
            await asyncio.gather(*(self.aenqueue(p) for p in ps[start:start + 100]))

    async def aclose(self) -> None:
        pass

    def close(self) -> None:
        self.run(self.aclose())
        self.loop.close()

    def timed_single(self, n: int) -> float:
        async def go() -> float:
            ps = [payload("x") for _ in range(n)]
            t0 = time.perf_counter()
            for p in ps:
                await self.aenqueue(p)
            return time.perf_counter() - t0
        return float(self.run(go()))

    def timed_batch(self, n: int) -> float:
        async def go() -> float:
            ps = [payload("x") for _ in range(n)]
            t0 = time.perf_counter()
            await self.aenqueue_batch(ps)
            return time.perf_counter() - t0
        return float(self.run(go()))

    def fill(self, n: int) -> None:
        self.run(self.aenqueue_batch([payload("d") for _ in range(n)]))

    def warm(self) -> None:
        self.run(self.aenqueue(payload("w")))

    def produce_pickup(self, samples: int) -> None:
        async def go() -> None:
            rng = random.Random(1)
            nxt = time.perf_counter()
            for _ in range(samples):
                nxt += rng.uniform(0.025, 0.075)
                delay = nxt - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self.aenqueue(payload("p", time.time()))
        self.run(go())

    def produce_delayed(self, dues: list[float]) -> None:
        async def go() -> None:
            for due in dues:
                await self.aenqueue_at(due)
        self.run(go())


def ceil_to(value: float, step: float) -> float:
    """The smallest multiple of step >= value: a due time a coarse API can state without moving it earlier."""
    return math.ceil(round(value / step, 6)) * step
