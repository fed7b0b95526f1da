"""The adapter interface each library implements, the measurements run on it, and the worker-side recorder.

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


# ---------------------------------------------------------------- the measurements


class Bench:
    """Runs the measurements of one adapter on one Redis database, which it empties before each."""

    def __init__(self, adapter: Adapter, url: str, log_dir: Path, say: Any = print) -> None:
        self.ad, self.url, self.log_dir, self.say = adapter, url, log_dir, say
        self.r = redis.Redis.from_url(url)

    def flush(self) -> None:
        self.r.flushdb()

    def worker(self, step: str, n: int = 0) -> WorkerProcess:
        env = {ENV_URL: self.url, ENV_N: str(n), ENV_SHARED: "1" if self.ad.shared_count else "0"}
        return WorkerProcess(self.ad.worker_argv(), env, self.log_dir / f"{self.ad.name}-{step}.log").start()

    def enqueue_single(self, n: int) -> dict[str, Any]:
        self.flush()
        secs = self.ad.timed_single(n)
        self.flush()
        return {"rate": n / secs, "n": n, "seconds": secs}

    def enqueue_batch(self, n: int) -> dict[str, Any]:
        self.flush()
        secs = self.ad.timed_batch(n)
        self.flush()
        return {"rate": n / secs, "n": n, "seconds": secs, "how": self.ad.batch_how}

    def drain(self, n: int, timeout: float, stall: float = 20.0) -> dict[str, Any]:
        if self.ad.drain_cap:
            n = min(n, self.ad.drain_cap)
        self.flush()
        self.ad.fill(n)
        w = self.worker("drain", n)
        spawned = time.time()
        last_change, last_c, partial = spawned, 0, False
        c, t_last, left = 0, 0.0, None
        try:
            while True:
                top: list[bytes] = self.r.zrange(KEY_PROGRESS, -1, -1)  # type: ignore[assignment]
                if top:
                    cs, ts = top[0].decode().split()
                    c, t_last = int(cs), float(ts)
                if c >= n:
                    left = self._left_queued()
                    break
                now = time.time()
                if not w.alive():
                    raise StepError(f"worker exited after {c} tasks: {w.log_tail()}")
                if c != last_c:
                    last_c, last_change = c, now
                if now - spawned > timeout or now - last_change > stall:
                    partial = True
                    break
                time.sleep(0.02)
        finally:
            w.stop()
        first = self.r.get(KEY_FIRST)
        self.flush()
        if c == 0 or first is None:
            raise StepError(f"no task finished in {time.time() - spawned:.0f}s: {w.log_tail()}")
        secs = t_last - float(first)
        return {"rate": c / secs if secs > 0 else float("inf"), "n": c, "asked": n, "seconds": secs,
                "wall_from_spawn": t_last - spawned, "partial": partial, "left_queued": left}

    def _left_queued(self, settle: float = 2.0) -> int | None:
        """Tasks still waiting once n were counted: above 0 means some task ran twice."""
        key = self.ad.queue_key
        if not key:
            return None
        deadline = time.time() + settle
        while True:
            left = int(self.r.zcard(key) if self.r.type(key) == b"zset" else self.r.llen(key))
            if left == 0 or time.time() > deadline:
                return left
            time.sleep(0.05)

    def latency(self, pickup_samples: int, delayed_samples: int, delay: float, spread: float,
                grace: float = 10.0) -> dict[str, dict[str, Any]]:
        """Pickup then delayed lateness, on one idle worker. Returns {"pickup": .., "delayed": ..}."""
        self.flush()
        out: dict[str, dict[str, Any]] = {}
        w = self.worker("latency")
        try:
            self._warm_up(w)
            time.sleep(1.0)  # let every loop of the worker settle into idle
            try:
                self.ad.produce_pickup(pickup_samples)
                out["pickup"] = self._collect(KEY_PICKUP, pickup_samples, time.time() + grace, w)
            except Exception as exc:
                out["pickup"] = {"error": reason(exc)}
            try:
                rng = random.Random(2)
                t0 = time.time() + delay
                step = spread / delayed_samples
                dues = [t0 + i * step + rng.uniform(0, step) for i in range(delayed_samples)]
                self.ad.produce_delayed(dues)
                out["delayed"] = self._collect(KEY_LATE, delayed_samples, max(dues) + grace, w)
                out["delayed"]["delay"] = delay
                out["delayed"]["spread"] = spread
            except Exception as exc:
                out["delayed"] = {"error": reason(exc)}
        finally:
            w.stop()
            self.flush()
        return out

    def _warm_up(self, w: WorkerProcess, timeout: float = 60.0) -> None:
        self.ad.warm()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.r.blpop([KEY_WARM], timeout=0.5):
                return
            if not w.alive():
                raise StepError(f"worker exited: {w.log_tail()}")
        raise StepError(f"worker ran no task within {timeout:.0f}s: {w.log_tail()}")

    def _collect(self, key: str, expected: int, deadline: float, w: WorkerProcess) -> dict[str, Any]:
        while self.r.llen(key) < expected and time.time() < deadline and w.alive():
            time.sleep(0.05)
        values = [float(v) * 1000.0 for v in self.r.lrange(key, 0, -1)]  # ms
        if not values:
            raise StepError(f"no sample arrived: {w.log_tail()}")
        return {"ms": values, "lost": expected - len(values)}


def reason(exc: BaseException) -> str:
    """One line for the table: the message of a StepError, else the exception's type and message."""
    text = " ".join(str(exc).split())
    if not isinstance(exc, StepError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text[:300]
