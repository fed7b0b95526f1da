"""Handler threads: plain-function handlers run in daemon threads, with room for threads stuck past their task."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asynqpy.task import ReceivedTask

log = logging.getLogger("asynqpy")

THREAD_PREFIX = "asynqpy-handler"  # the supervisor looks for these names at exit
# A handler given up on (timed out, cancelled, requeued) that still runs this long after is counted stuck: one
# that watches task.cancelled returns well within it, and is not worth a warning.
STUCK_AFTER = 1.0


@dataclass(eq=False)
class _Job:
    fn: Callable[[ReceivedTask], Any]
    task: ReceivedTask
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    started: bool = False
    finished: bool = False
    given_up: float = 0.0  # time.monotonic() when its task was given up while the function still ran
    lock: threading.Lock = field(default_factory=threading.Lock)


class HandlerThreads:
    """Runs plain-function handlers off the event loop, one thread per running handler.

    The threads are daemons, so a process that has requeued its unfinished tasks at shutdown exits without
    waiting for them (as a Go process does not wait for its goroutines): a task is never finished by the
    stopping process while another worker runs it again. A handler that outlives its task keeps its thread
    to the end (Python cannot stop a thread), but every new task gets a free thread, so a stuck handler never
    delays another one; the stuck ones are counted (`stuck`) and on_stuck is called on the event loop
    whenever that count changes. At most `keep` idle threads wait for work.
    """

    def __init__(self, keep: int, on_stuck: Callable[[], None], stuck: dict[str, float] | None = None) -> None:
        self.keep = keep
        self.on_stuck = on_stuck
        # task id -> time.monotonic() it was given up; changed on the event loop only
        self.stuck: dict[str, float] = {} if stuck is None else stuck
        self._work: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._closed = False
        self._count = 0

    @property
    def threads(self) -> int:
        """Handler threads alive now (running a handler or idle)."""
        return self._count

    async def run(self, fn: Callable[[ReceivedTask], Any], task: ReceivedTask) -> Any:
        """fn(task) in a handler thread; its result or exception. Cancelling the await gives the task up: the
        thread runs on, and is counted stuck if it has not returned STUCK_AFTER seconds later."""
        loop = asyncio.get_running_loop()
        job = _Job(fn, task, loop, loop.create_future())
        self._submit(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            with job.lock:
                running = job.started and not job.finished
                if running:
                    job.given_up = time.monotonic()
            if running:
                loop.call_later(STUCK_AFTER, self._check_stuck, job)
            raise

    def close(self) -> None:
        """Let idle threads end; running ones go on to their end (daemons: the process does not wait)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._work.put(None)

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._work.put(job)
                return
            self._count += 1
            n = self._count
        threading.Thread(target=self._thread, args=(job,), name=f"{THREAD_PREFIX}-{n}", daemon=True).start()

    def _thread(self, job: _Job | None) -> None:
        while job is not None:
            self._run(job)
            with self._lock:
                if self._closed or self._idle >= self.keep:
                    self._count -= 1
                    return
                self._idle += 1
            job = self._work.get()
        with self._lock:
            self._count -= 1

    def _run(self, job: _Job) -> None:
        with job.lock:
            if job.future.cancelled():  # given up before it started: never run it
                return
            job.started = True
        result: Any = None
        error: BaseException | None = None
        try:
            result = job.fn(job.task)
        except BaseException as exc:  # SystemExit too: a handler failure, not the end of the worker
            error = exc
        with job.lock:
            job.finished = True
            late = job.given_up
        try:
            job.loop.call_soon_threadsafe(self._deliver, job, result, error, late)
        except RuntimeError:  # the event loop is closed: the server is gone, nobody waits for this
            pass

    def _deliver(self, job: _Job, result: Any, error: BaseException | None, late: float) -> None:
        if not job.future.done():
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(result)
        if self.stuck.pop(job.task.id, None) is not None:
            log.info("processor: the stuck handler of task %s returned %.0f s after its task was given up; "
                     "%d stuck now", job.task.id, time.monotonic() - late, len(self.stuck))
            self.on_stuck()

    def _check_stuck(self, job: _Job) -> None:
        with job.lock:
            if job.finished:
                return
        self.stuck[job.task.id] = job.given_up
        log.warning("processor: the handler of task %s (%s) still runs %.0f s after its task was given up (deadline "
                    "or cancel); it keeps a thread of its own, %d stuck now", job.task.id, job.task.type,
                    time.monotonic() - job.given_up, len(self.stuck))
        self.on_stuck()
