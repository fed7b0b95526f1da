"""run_task: one handler called in-process with a real ReceivedTask, no server and no Redis."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import uuid
from typing import Any

from asynqpy.config import ServerConfig
from asynqpy.errors import RevokeTask, SkipRetry
from asynqpy.finisher import ERR_DEADLINE, error_text
from asynqpy.mux import Handler, ServeMux
from asynqpy.retry import decide
from asynqpy.task import ReceivedTask, Task
from asynqpy.testing.results import TaskResult
from asynqpy.threads import STUCK_AFTER, HandlerThreads
from asynqpy.typed import TypedTask
from asynqpy.wire import TaskMessage


def run_task(handler: ServeMux | TypedTask[Any, Any] | Handler, task: Task, *, retry_count: int = 0,
             max_retry: int = 25, queue: str = "default", task_id: str | None = None, timeout: float = 1800.0,
             config: ServerConfig | None = None) -> TaskResult:
    """Call the handler of task (a ServeMux routes it, with its middleware; a TypedTask or a plain or async
    function is called directly) as a server would on attempt retry_count + 1, and return what happened.

    The handler gets a real ReceivedTask: retry_count, max_retry, queue, id, a deadline timeout seconds
    away (its `cancelled` is set when it passes), and a result writer that keeps the bytes in the TaskResult.
    The outcome is decided as the server decides it, with config's retry_delay and is_failure (defaults:
    ServerConfig()'s). Raises RuntimeError when called from a running event loop (use run_task_async there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_task_async(handler, task, retry_count=retry_count, max_retry=max_retry,
                                          queue=queue, task_id=task_id, timeout=timeout, config=config))
    raise RuntimeError("run_task was called inside a running event loop: await run_task_async(...) instead")


async def run_task_async(handler: ServeMux | TypedTask[Any, Any] | Handler, task: Task, *, retry_count: int = 0,
                         max_retry: int = 25, queue: str = "default", task_id: str | None = None,
                         timeout: float = 1800.0, config: ServerConfig | None = None) -> TaskResult:
    """run_task for async tests: the same arguments and result."""
    mux = handler if isinstance(handler, ServeMux) else _mux_of(task.type, handler)
    msg = TaskMessage(type=task.type, payload=task.payload, id=task_id or str(uuid.uuid4()), queue=queue,
                      retry=max_retry, retried=retry_count, timeout=int(timeout))
    msg.headers.update(task.headers)
    written: list[bytes] = []
    received = ReceivedTask(msg, deadline=time.time() + timeout, writer=lambda q, tid, data: written.append(data))
    threads = HandlerThreads(keep=0, on_stuck=lambda: None)
    returned: list[threading.Event] = []

    async def in_thread(fn: Handler, task: ReceivedTask) -> Any:
        # a daemon thread of its own, as a server runs it: one that ignores its deadline is given up (a
        # default-executor thread would hold asyncio.run, and so run_task, until it returned)
        ctx = contextvars.copy_context()
        done = threading.Event()
        returned.append(done)

        def run(t: ReceivedTask) -> Any:
            try:
                return ctx.run(fn, t)
            finally:
                done.set()
        return await threads.run(run, task)

    call = mux.compile(in_thread)
    exc: BaseException | None = None
    value: Any = None
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            value = await call(received)
    except Exception as e:
        exc = e
    finally:
        threads.close()
    if exc is not None:
        received.cancel()
        # a plain handler that watches task.cancelled returns now: wait for it (what it does on its way out is
        # part of the run), up to STUCK_AFTER, after which a server too counts it stuck
        give_up = time.monotonic() + STUCK_AFTER
        while not all(d.is_set() for d in returned) and time.monotonic() < give_up:
            await asyncio.sleep(0.01)
    result = written[-1] if written else None
    if exc is None:
        return TaskResult("success", value=value, result=result)
    err = ERR_DEADLINE if deadline.expired() else error_text(exc)
    if isinstance(exc, RevokeTask):
        return TaskResult("revoked", str(exc), exc, result=result)
    decision = decide(config or ServerConfig(), msg, exc, received, skip=isinstance(exc, SkipRetry))
    if decision.archive:
        return TaskResult("archived", err, exc, result=result)
    return TaskResult("retry", err, exc, result=result, retry_delay=decision.delay)


def _mux_of(task_type: str, handler: TypedTask[Any, Any] | Handler) -> ServeMux:
    mux = ServeMux()
    mux.handle(task_type, handler)
    return mux

