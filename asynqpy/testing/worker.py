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
from asynqpy.typed import TypedTask
from asynqpy.wire import decode_task_message

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

    def typed_tasks(self) -> list[TypedTask[Any, Any]]:
        return self._mux.typed_tasks()


class TestWorker:
    """A Server running mux on redis_url (in a thread) until stop(). settings: ServerConfig's fields, over
    FAST's; outcome_hooks given are called too.

    drain() and advance() read and move only the queues of this worker: settings' queues, by default "default"
    and the queues the mux's typed tasks enqueue into (`@mux.task("x", queue="critical")`).
    Raises InvalidArgumentError for a mux that is not a ServeMux, or a bad setting.
    """

    __test__ = False  # not a test class, whatever pytest's collection thinks of its name

    def __init__(self, redis_url: str, mux: ServeMux, **settings: Any) -> None:
        if not isinstance(mux, ServeMux):
            hint = (f"; register it on one first: mux.handle({mux.type!r}, {mux.name})"
                    if isinstance(mux, TypedTask) else "")
            raise InvalidArgumentError(f"a TestWorker runs a ServeMux, not {type(mux).__name__}{hint}",
                                       argument="mux")
        self.url = redis_url
        self._lock = threading.Lock()
        self._events: list[TaskOutcome] = []
        self._results: dict[str, bytes] = {}
        self._stopped = False
        hooks = (*settings.pop("outcome_hooks", ()), self._record)
        if settings.get("queues") is None:
            settings["queues"] = dict.fromkeys(["default", *(t.defaults.queue for t in mux.typed_tasks())], 1)
        self.server = Server(redis_url, **{**FAST, **settings, "outcome_hooks": hooks})
        self.queues: list[str] = list(self.server.config.queues)
        self._redis = connect(redis_url)
        self._runner = SyncRunner(self._redis)
        try:
            self.server.start(_Observed(mux, self._results))
        except BaseException:
            self._redis.close()
            raise

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
        qs = self._served(queues)
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
                left = "; ".join(self._left(q, b, d) for q, (b, d, _, _) in states.items() if b or d)
                raise DrainTimeout(f"drain timed out after {timeout}s with tasks left: {left}")
            time.sleep(0.01)
        with self._lock:
            events, self._events = self._events, []
        return self._report(events)

    def _served(self, queues: Iterable[str] | None) -> list[str]:
        """queues (one name or several) checked against this worker's: a queue it does not serve never drains."""
        if queues is None:
            return self.queues
        qs = [queues] if isinstance(queues, str) else list(queues)
        for q in qs:
            if q not in self.queues:
                raise InvalidArgumentError(
                    f"this worker serves the queues {', '.join(map(repr, self.queues))}, not {q!r}: start it "
                    f"with queues={{...}} naming {q!r} to run its tasks", argument="queues")
        return qs

    def _left(self, q: str, busy: int, due: int) -> str:
        """What keeps queue q from draining, naming (some of) its active and pending tasks."""
        named = []
        for state, key in (("active", keys.active(q)), ("pending", keys.pending(q))):
            try:
                ids = [i.decode() if isinstance(i, bytes) else i for i in self._redis.lrange(key, 0, 4)]
                for tid in ids:
                    raw = self._redis.hget(keys.task(q, tid), "msg")
                    kind = decode_task_message(raw).type if isinstance(raw, bytes) else "?"
                    named.append(f"{state} {kind} {tid}")
            except Exception:  # the counts alone then; a failing look must not hide the timeout
                break
        more = f" ({', '.join(named)}{', ...' if busy > len(named) else ''})" if named else ""
        return f"queue {q!r}: {busy} pending or active{more}, {due} scheduled or retrying and due"

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
        Raises InvalidArgumentError (a ValueError) for seconds that are not a number > 0 (infinity moves every
        task to now), or a queue this worker does not serve."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise InvalidArgumentError(f"advance needs a positive number of seconds, not {seconds!r}",
                                       argument="seconds")
        return sum(self._runner.run(_advance(q, seconds)) for q in self._served(queues))

    def stop(self) -> None:
        """Shut the server down (gracefully, within shutdown_timeout) and close the connection. Once: calling it
        again (as the asynqpy_worker fixture does after a test that stopped its worker) does nothing."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.server.shutdown()
        finally:
            self._redis.close()
