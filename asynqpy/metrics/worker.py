"""Worker metrics: task duration and wait histograms, failures, waits on flow-control limits and tasks in progress,
built on the server's outcome hooks; readiness and liveness gauges a supervisor reads when worker processes share
prometheus_client's multiprocess directory."""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from asynqpy.outcome import TaskOutcome

if TYPE_CHECKING:
    from asynqpy.server import Server

# Background work: from a few milliseconds to an hour.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                    600.0, 1800.0, 3600.0)
WAIT_BUCKETS = DURATION_BUCKETS
DEFAULT_MAX_TASK_TYPES = 100
MAX_LIMITS = 100  # limit names kept as labels per process; more count as "other" (limits are few, set by operators)
OTHER = "other"
FAILURES = frozenset({"retry", "archived", "canceled"})


class WorkerMetrics:
    """The metrics of one worker process. Hand `observe` to the Server as an outcome hook and call `watch(server)`.

    max_task_types bounds the task_type label: the first max_task_types types seen keep their name, later ones
    count as "other" (per process). Labels never carry task ids or error text.
    """

    def __init__(self, registry: CollectorRegistry, *, max_task_types: int = DEFAULT_MAX_TASK_TYPES) -> None:
        if isinstance(max_task_types, bool) or not isinstance(max_task_types, int) or max_task_types < 0:
            raise ValueError(f"max_task_types must be an int >= 0, got {max_task_types!r}")
        self.max_task_types = max_task_types
        self._types: set[str] = set()
        self._lock = threading.Lock()
        self.duration = Histogram("asynqpy_task_duration_seconds", "Seconds a task's handler ran, by outcome.",
                                  ["queue", "task_type", "outcome"], buckets=DURATION_BUCKETS, registry=registry)
        self.wait = Histogram("asynqpy_task_wait_seconds",
                              "Seconds from a task becoming pending (pending_since) to its handler starting.",
                              ["queue"], buckets=WAIT_BUCKETS, registry=registry)
        self.limit_waits = Counter("asynqpy_task_limit_waits", "Tasks that waited on a flow-control limit before "
                                   "they started (counted when their run ends), by the limit's pattern.",
                                   ["queue", "limit"], registry=registry)
        self.limit_wait = Histogram("asynqpy_task_limit_wait_seconds",
                                    "Seconds from pending_since to the start of tasks that waited on a flow-control "
                                    "limit (the wait on the limit included), by the limit's pattern.",
                                    ["queue", "limit"], buckets=WAIT_BUCKETS, registry=registry)
        self._limits: set[str] = set()
        self.failures = Counter("asynqpy_task_failures", "Task runs that failed (retry, archived or canceled).",
                                ["queue", "task_type"], registry=registry)
        self.in_progress = Gauge("asynqpy_tasks_in_progress", "Tasks whose handler is running.", ["queue"],
                                 registry=registry, multiprocess_mode="livesum")
        self.ready = Gauge("asynqpy_worker_ready", "1 while the worker process takes tasks and reaches Redis.",
                           registry=registry, multiprocess_mode="liveall")
        self.live = Gauge("asynqpy_worker_live", "1 while every loop of the worker process runs.",
                          registry=registry, multiprocess_mode="liveall")
        self.live.set(1)  # starting, until the first sample: live (as Server.health says), not ready
        self.checked = Gauge("asynqpy_worker_last_check_timestamp_seconds", "Unix time of the process's last "
                             "self-check (asynqpy_worker_live and _ready, every 0.25 s): one that stops moving is a "
                             "frozen or wedged process.", registry=registry, multiprocess_mode="liveall")
        self.checked.set(time.time())
        self.clock_offset = Gauge("asynqpy_worker_clock_offset_seconds",
                                  "Redis's clock minus this worker's, measured at every heartbeat (due times follow "
                                  "Redis's clock; beyond a second, fix the worker's clock).",
                                  registry=registry, multiprocess_mode="liveall")
        self.stuck = Gauge("asynqpy_worker_stuck_threads", "Handler threads still running after their task timed out, "
                           "was cancelled or requeued.", registry=registry, multiprocess_mode="livesum")
        self._queues: set[str] = set()
        self._children: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def task_type(self, name: str) -> str:
        """The label for a task type: its name while fewer than max_task_types names are in use, else "other"."""
        if name in self._types:
            return name
        with self._lock:
            if name in self._types or len(self._types) < self.max_task_types:
                self._types.add(name)
                return name
        return OTHER

    def observe(self, o: TaskOutcome) -> None:
        """The outcome hook (a few microseconds: the labelled children are looked up once and kept)."""
        children = self._children.get((o.queue, o.task_type, o.outcome))
        if children is None:
            # Kept by the label, not the type: past max_task_types every new type shares the "other" entry, so a
            # worker fed unbounded distinct types (ids in the type) keeps a bounded table.
            t = self.task_type(o.task_type)
            key = (o.queue, t, o.outcome)
            children = self._children.get(key)
            if children is None:
                children = (self.duration.labels(o.queue, t, o.outcome), self.wait.labels(o.queue),
                            self.failures.labels(o.queue, t) if o.outcome in FAILURES else None)
                self._children[key] = children
        duration, wait, failures = children
        duration.observe(o.duration)
        if o.wait is not None:
            wait.observe(o.wait)
        if failures is not None:
            failures.inc()
        if o.limit is not None:
            self._waited(o)

    def limit_label(self, name: str) -> str:
        """The label for a limit: its pattern while fewer than MAX_LIMITS are in use, else "other"."""
        if name in self._limits:
            return name
        with self._lock:
            if name in self._limits or len(self._limits) < MAX_LIMITS:
                self._limits.add(name)
                return name
        return OTHER

    def _waited(self, o: TaskOutcome) -> None:
        assert o.limit is not None
        label = self.limit_label(o.limit)
        self.limit_waits.labels(o.queue, label).inc()
        if o.wait is not None:
            self.limit_wait.labels(o.queue, label).observe(o.wait)

    def watch(self, server: Server, interval: float = 0.25) -> None:
        """Sample the server every interval seconds (tasks in progress, live, ready) in a daemon thread."""
        for q in server.config.queues:
            self._queues.add(q)
            self.in_progress.labels(q).set(0)
        self._thread = threading.Thread(target=self._watch, args=(server, interval), name="asynqpy-metrics",
                                        daemon=True)
        self._thread.start()

    def sample(self, server: Server) -> None:
        live, ready, _ = server.health()
        rt = server.runtime
        running = Tally(at.queue for at in list(rt.active.values()) if at.handle is not None
                        and not at.handle.done()) if rt is not None else Tally[str]()
        for q in self._queues | set(running):
            self.in_progress.labels(q).set(running.get(q, 0))
        self.stuck.set(len(rt.stuck) if rt is not None else 0)
        self.live.set(1 if live else 0)
        self.ready.set(1 if ready else 0)
        if rt is not None and rt.clock_offset is not None:
            self.clock_offset.set(rt.clock_offset)
        self.checked.set(time.time())

    def _watch(self, server: Server, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.sample(server)
            except Exception:  # a sample during start or shutdown may see half-built state: try again
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
