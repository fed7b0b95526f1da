"""The measurements: enqueue, batched enqueue, drain, pickup and delayed lateness of one adapter, on one Redis db.

Bench starts the adapter's worker processes and reads the samples the worker-side recorder
(bench.adapters.base.record) writes under "bench:"; reason() turns a failed measurement into one line
for the table.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

import redis

from bench.adapters.base import (
    ENV_MULTI,
    ENV_N,
    ENV_SHARED,
    ENV_URL,
    KEY_FIRST,
    KEY_FIRSTS,
    KEY_LATE,
    KEY_PICKUP,
    KEY_PROGRESS,
    KEY_PROGRESS_BY_PID,
    KEY_WARM,
    Adapter,
    StepError,
    WorkerProcess,
)


class Bench:
    """Runs the measurements of one adapter on one Redis database, which it empties before each."""

    def __init__(self, adapter: Adapter, url: str, log_dir: Path, say: Any = print) -> None:
        self.ad, self.url, self.log_dir, self.say = adapter, url, log_dir, say
        self.r = redis.Redis.from_url(url)

    def flush(self) -> None:
        self.r.flushdb()

    def worker(self, step: str, n: int = 0, argv: list[str] | None = None) -> WorkerProcess:
        env = {ENV_URL: self.url, ENV_N: str(n), ENV_SHARED: "1" if self.ad.shared_count else "0",
               ENV_MULTI: "0" if argv is None else "1"}
        return WorkerProcess(argv or self.ad.worker_argv(), env, self.log_dir / f"{self.ad.name}-{step}.log").start()

    def enqueue_single(self, n: int) -> dict[str, Any]:
        self.flush()
        secs = self.ad.timed_single(n)
        self.flush()
        return {"rate": n / secs, "n": n, "seconds": secs}

    def _used_memory(self) -> int:
        return int(self.r.info("memory")["used_memory"])

    def _settled_memory(self, timeout: float = 10.0) -> int:
        """used_memory once earlier flushes have been freed (FLUSHDB frees in the background)."""
        end = time.time() + timeout
        while time.time() < end and int(self.r.info("memory").get("lazyfree_pending_objects", 0)):
            time.sleep(0.05)
        return self._used_memory()

    def producer_extras(self, n: int) -> dict[str, Any]:
        """The adapter's extra producer lines (asynqpy: asyncio producer, wire limits), each on an empty db."""
        out: dict[str, Any] = {}
        for name, timed in self.ad.extra_producers():
            self.flush()
            secs = timed(n)
            out[name] = {"rate": n / secs, "n": n, "seconds": secs}
        self.flush()
        return out

    def enqueue_batch(self, n: int) -> dict[str, Any]:
        self.flush()
        secs = self.ad.timed_batch(n)
        self.flush()
        return {"rate": n / secs, "n": n, "seconds": secs, "how": self.ad.batch_how}

    def drain(self, n: int, timeout: float, stall: float = 20.0, processes: int = 1) -> dict[str, Any]:
        """n tasks drained by the adapter's worker (processes > 1: its command with that many processes, each
        counting its own tasks). cpu_us_per_task: user+sys of the worker's processes (its process group, from
        /proc) from its first progress report to its last task, over the tasks run meanwhile."""
        argv = None
        if processes > 1:
            argv = self.ad.worker_argv_processes(processes)
            if argv is None:
                raise StepError(f"{self.ad.name} has no --processes mode here")
        if self.ad.drain_cap:
            n = min(n, self.ad.drain_cap)
        self.flush()
        mem0 = self._settled_memory()
        self.ad.fill(n)
        per_task = (self._used_memory() - mem0) / n if n else 0.0
        held = argv is not None and self.ad.hold_queue()
        redis0 = self._redis_work()
        w = self.worker("drain" if processes == 1 else f"drain{processes}", n, argv)
        spawned = time.time()
        try:
            released = self._release_when_up(w, processes, timeout) if held else None
        except BaseException:
            w.stop()
            raise
        last_change, last_c, partial = spawned, 0, False
        c, t_last, left = 0, 0.0, None
        cpu0: tuple[int, float] | None = None  # (tasks counted, CPU seconds) at the first progress seen
        cpu1 = 0.0
        redis1 = redis0
        pids0 = pids1 = {}
        mach0 = mach1 = (0.0, 0.0)
        try:
            while True:
                c, t_last = self._progress(argv is not None)
                if c > 0 and cpu0 is None:
                    pids0, mach0 = group_cpu_by_pid(w.pid), machine_cpu()
                    cpu0 = (c, sum(pids0.values()))
                if c >= n:
                    pids1, mach1 = group_cpu_by_pid(w.pid), machine_cpu()
                    cpu1 = sum(pids1.values())
                    redis1 = self._redis_work()
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
        first = self._first(argv is not None)
        per_process = self._per_process() if argv is not None else None
        self.flush()
        if c == 0 or first is None:
            raise StepError(f"no task finished in {time.time() - spawned:.0f}s: {w.log_tail()}")
        secs = t_last - first
        cpu_us = ((cpu1 - cpu0[1]) / (c - cpu0[0]) * 1e6 if cpu0 is not None and cpu1 and c > cpu0[0]
                  else None)
        return {"rate": c / secs if secs > 0 else float("inf"), "n": c, "asked": n, "seconds": secs,
                "bytes_per_pending_task": per_task, "processes": processes, "cpu_us_per_task": cpu_us,
                "wall_from_spawn": t_last - spawned, "first_from_spawn": first - spawned, "partial": partial,
                "released_from_spawn": None if released is None else released - spawned,
                "left_queued": left,
                "redis_cpu_us_per_task": (redis1[0] - redis0[0]) / c * 1e6,
                # the same window as cpu_us_per_task: cores the whole machine kept busy, and each process's CPU
                "machine_busy_cores": ((mach1[0] - mach0[0]) / (mach1[1] - mach0[1]) * (os.cpu_count() or 1)
                                       if mach1[1] > mach0[1] else None),
                "cpu_s_by_pid": {p: round(v - pids0.get(p, 0.0), 3) for p, v in pids1.items()},
                "redis_calls_per_task": {k: round((v - redis0[1].get(k, 0)) / c, 3) for k, v in redis1[1].items()
                                         if v - redis0[1].get(k, 0) > 0},
                **({"per_process": per_process} if per_process is not None else {})}

    def _release_when_up(self, w: WorkerProcess, processes: int, timeout: float) -> float:
        """Wait until all the worker's processes are up (the queue held meanwhile), release it; when it was."""
        end = time.time() + timeout
        try:
            while self.ad.workers_up() < processes:
                if not w.alive():
                    raise StepError(f"worker exited while starting: {w.log_tail()}")
                if time.time() > end:
                    raise StepError(f"only {self.ad.workers_up()} of {processes} worker processes up after "
                                    f"{timeout:.0f}s")
                time.sleep(0.01)
        finally:
            self.ad.release_queue()
        return time.time()

    def _redis_work(self) -> tuple[float, dict[str, int]]:
        """The server's CPU so far (user+sys, s) and each command's calls (INFO commandstats)."""
        cpu = self.r.info("cpu")
        calls = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in self.r.info("commandstats").items()}
        return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls

    def _per_process(self) -> list[dict[str, Any]]:
        """Each worker process's tasks and the times of its first and last one, relative to the earliest first."""
        firsts = {k.decode(): float(v) for k, v in self.r.zrange(KEY_FIRSTS, 0, -1, withscores=True)}  # type: ignore[union-attr]
        rows: dict[bytes, bytes] = self.r.hgetall(KEY_PROGRESS_BY_PID)  # type: ignore[assignment]
        t0 = min(firsts.values(), default=0.0)
        out = []
        for pid, v in sorted(rows.items()):
            c, last = v.decode().split()
            first = firsts.get(pid.decode())
            out.append({"pid": int(pid), "tasks": int(c), "first": None if first is None else first - t0,
                        "last": float(last) - t0})
        return out

    def _progress(self, multi: bool) -> tuple[int, float]:
        """(tasks counted so far, time of the last one counted)."""
        if multi:
            rows: dict[bytes, bytes] = self.r.hgetall(KEY_PROGRESS_BY_PID)  # type: ignore[assignment]
            pairs = [v.decode().split() for v in rows.values()]
            return sum(int(p[0]) for p in pairs), max((float(p[1]) for p in pairs), default=0.0)
        top: list[bytes] = self.r.zrange(KEY_PROGRESS, -1, -1)  # type: ignore[assignment]
        if not top:
            return 0, 0.0
        cs, ts = top[0].decode().split()
        return int(cs), float(ts)

    def _first(self, multi: bool) -> float | None:
        """When the first task started (the earliest of the processes' first tasks)."""
        if multi:
            rows: list[tuple[bytes, float]] = self.r.zrange(KEY_FIRSTS, 0, 0, withscores=True)  # type: ignore[assignment]
            return float(rows[0][1]) if rows else None
        first = self.r.get(KEY_FIRST)
        return float(first) if first is not None else None  # type: ignore[arg-type]

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


def group_cpu(pgid: int | None) -> float:
    """User+sys CPU seconds of the live processes of process group pgid and of their descendants (a worker and
    its children, which may lead sessions of their own: `asynqpy worker --processes N`), from /proc."""
    return sum(group_cpu_by_pid(pgid).values())


def group_cpu_by_pid(pgid: int | None) -> dict[int, float]:
    """group_cpu's CPU seconds of each of those processes."""
    if pgid is None:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, int, float]] = {}  # pid -> (ppid, pgrp, CPU seconds)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the name: state, ppid, pgrp, ..., utime (12), stime (13)
        procs[int(entry)] = (int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / tick)
    ours = {pid for pid, (_, pgrp, _) in procs.items() if pgrp == pgid}
    grown = True
    while grown:
        more = {pid for pid, (ppid, _, _) in procs.items() if ppid in ours and pid not in ours}
        ours |= more
        grown = bool(more)
    return {pid: procs[pid][2] for pid in ours}


def machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine so far, every core summed (/proc/stat's first line)."""
    try:
        with open("/proc/stat", "rb") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    total = sum(vals[:8])  # guest time is already counted in user
    return (total - idle) / tick, total / tick


def reason(exc: BaseException) -> str:
    """One line for the table: the message of a StepError, else the exception's type and message."""
    text = " ".join(str(exc).split())
    if not isinstance(exc, StepError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text[:300]
