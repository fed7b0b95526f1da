"""TestWorker: a real Server for one test, with drain() (run until nothing is left to do, report each task) and
advance() (make scheduled and retry tasks due sooner, as if time passed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from asynqpy.connection import connect
from asynqpy.errors import InvalidArgumentError
from asynqpy.mux import AsyncHandler, Handler, ServeMux
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, load_script
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.server import Server
from asynqpy.task import ReceivedTask
from asynqpy.testing.results import Attempt, DrainReport, TaskRun

# A test worker reacts within tens of milliseconds (a production one polls every second or so).
FAST = {"forward_max_wait": 0.05, "idle_poll_interval": 0.05, "heartbeat_interval": 0.5, "shutdown_timeout": 2.0}


class DrainTimeout(AssertionError):
    """drain() gave up: tasks were still pending, active or due when its timeout passed."""


def _quiet(q: str) -> Call[tuple[int, int, float | None, int]]:
    def parse(raw: Any) -> tuple[int, int, float | None, int]:
        busy, due, later, now = raw
        return int(busy), int(due), float(later) if later else None, int(now)
    return Call(load_script("asynqpy.testing", "quiet"),
                [keys.pending(q), keys.active(q), keys.scheduled(q), keys.retry(q)], [], parse)


def _advance(q: str, seconds: float) -> Call[int]:
    return Call(load_script("asynqpy.testing", "advance"), [keys.scheduled(q), keys.retry(q), keys.exact_due(q)],
                [repr(float(seconds))], int)


class _Observed(ServeMux):
    """The test's mux as the server runs it, keeping what each handler writes with write_result."""

    def __init__(self, mux: ServeMux, results: dict[str, bytes]) -> None:
        super().__init__()
        self._mux = mux
        self._results = results

    def compile(self, run_sync: Any) -> AsyncHandler:
        inner = self._mux.compile(run_sync)
        results = self._results

        async def observed(task: ReceivedTask) -> Any:
            write = task._writer

            def keep(q: str, tid: str, data: bytes) -> None:
                write(q, tid, data)
                results[tid] = data
            task._writer = keep
            return await inner(task)
        return observed

    def resolve(self, task_type: str) -> Handler | None:
        return self._mux.resolve(task_type)

    def patterns(self) -> list[str]:
        return self._mux.patterns()


class TestWorker:
    """A Server running mux on redis_url (in a thread) until stop(). settings: ServerConfig's fields, over
    FAST's; outcome_hooks given are called too.

    drain() and advance() read and move only the queues of this worker (settings' queues, default "default").
    """

    __test__ = False  # not a test class, whatever pytest's collection thinks of its name

    def __init__(self, redis_url: str, mux: ServeMux, **settings: Any) -> None:
        self.url = redis_url
        self._lock = threading.Lock()
        self._events: list[TaskOutcome] = []
        self._results: dict[str, bytes] = {}
        hooks = (*settings.pop("outcome_hooks", ()), self._record)
        self.queues: list[str] = list(settings.get("queues") or {"default": 1})
        self.server = Server(redis_url, **{**FAST, **settings, "outcome_hooks": hooks})
        self._redis = connect(redis_url)
        self._runner = SyncRunner(self._redis)
        self.server.start(_Observed(mux, self._results))

    def _record(self, outcome: TaskOutcome) -> None:
        with self._lock:
            self._events.append(outcome)

    def drain(self, queues: Iterable[str] | None = None, *, timeout: float = 10.0,
              advance_time: bool = False) -> DrainReport:
        """Wait until no task of queues (default: all of this worker's) is pending, active, or scheduled or
        retrying and due within a second; return what happened to each task that ran since the worker
        started or the last drain ended.

        advance_time: also run the tasks due later (a retry's backoff, process_in=...), moving their due times
        forward with advance() instead of waiting. Raises DrainTimeout (an AssertionError) after timeout
        seconds, saying what is left.
        """
        qs = list(queues) if queues is not None else self.queues
        end = time.monotonic() + timeout
        while True:
            states = {q: self._runner.run(_quiet(q)) for q in qs}
            busy = any(b or d for b, d, _, _ in states.values())
            if not busy:
                later = [nxt - now for _, _, nxt, now in states.values() if nxt is not None]
                if not advance_time or not later:
                    break
                self.advance(max(1.0, min(later)), queues=qs)
                continue
            if time.monotonic() > end:
                left = {q: f"{b} pending or active, {d} due" for q, (b, d, _, _) in states.items() if b or d}
                raise DrainTimeout(f"drain timed out after {timeout}s with tasks left: {left}")
            time.sleep(0.01)
        with self._lock:
            events, self._events = self._events, []
        return self._report(events)

    def _report(self, events: list[TaskOutcome]) -> DrainReport:
        attempts: dict[str, list[Attempt]] = {}
        first: dict[str, TaskOutcome] = {}
        for e in events:
            first.setdefault(e.task_id, e)
            attempts.setdefault(e.task_id, []).append(Attempt(e.outcome, e.error, e.duration))
        return DrainReport({tid: TaskRun(tid, e.task_type, e.queue, tuple(attempts[tid]), self._results.get(tid))
                            for tid, e in first.items()})

    def advance(self, seconds: float, *, queues: Iterable[str] | None = None) -> int:
        """Make every scheduled and retry task of queues (default: this worker's) due `seconds` earlier, as if
        the clock had moved on; returns how many tasks were moved. Redis's own clock (TIME), by which the
        scripts judge due times, does not move: leases, heartbeats and cron ticks are not affected.
        Raises InvalidArgumentError (a ValueError) for seconds <= 0."""
        if seconds <= 0:
            raise InvalidArgumentError(f"advance needs a positive number of seconds, not {seconds!r}",
                                       argument="seconds")
        return sum(self._runner.run(_advance(q, seconds)) for q in (queues if queues is not None else self.queues))

    def stop(self) -> None:
        """Shut the server down (gracefully, within shutdown_timeout) and close the connection."""
        try:
            self.server.shutdown()
        finally:
            self._redis.close()
