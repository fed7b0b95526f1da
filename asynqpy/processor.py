"""Processor: fetches tasks in batches into free worker slots, runs their handlers, and records outcomes."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asynqpy.acker import Acker
from asynqpy.errors import MalformedTaskError, RevokeTask, SkipRetry
from asynqpy.handoff import HandoffListener
from asynqpy.mux import Handler, HandlerNotFound, ServeMux
from asynqpy.outcome import Outcome, TaskOutcome, call_hooks
from asynqpy.rdb import broker
from asynqpy.rdb.failures import is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.retry import failure_call
from asynqpy.runtime import ActiveTask, Runtime
from asynqpy.syncer import Syncer
from asynqpy.task import ReceivedTask
from asynqpy.wire import TaskMessage, decode_task_message

log = logging.getLogger("asynqpy")

DEFAULT_DEADLINE = 1800.0  # asynq: a task with neither timeout nor deadline gets 30 minutes
# The error texts asynq stores, so Go's tools and ours read them alike.
ERR_DEADLINE = "context deadline exceeded"
ERR_CANCELED = "context canceled"
ERR_LEASE = "asynq: task lease expired"

Dequeued = tuple[str, str, bytes, float | None]  # queue, task id, msg bytes, pending_since (Unix s)


def error_text(exc: BaseException) -> str:
    if isinstance(exc, HandlerNotFound):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def task_deadline(msg: TaskMessage, now: float) -> float:
    """asynq's rule: min(now + timeout, deadline) of those set; 30 minutes when neither is."""
    ends = [now + msg.timeout] if msg.timeout > 0 else []
    if msg.deadline > 0:
        ends.append(float(msg.deadline))
    return min(ends) if ends else now + DEFAULT_DEADLINE


class Processor:
    """Keeps up to `concurrency` handlers running. One dequeue script call fills all free slots of a queue;
    successes go to the Acker in batches; failures are retried or archived by one script each."""

    def __init__(self, rt: Runtime, mux: ServeMux, acker: Acker, syncer: Syncer,
                 on_retry: Callable[[], None]) -> None:
        self.rt = rt
        self.cfg = rt.config
        self.acker = acker
        self.syncer = syncer
        self.on_retry = on_retry
        self.handler = mux.compile(self._run_sync)
        self.pool = ThreadPoolExecutor(max_workers=self.cfg.concurrency, thread_name_prefix="asynqpy-handler")
        self.running = 0
        self._slot = asyncio.Event()
        self._wake = asyncio.Event()
        self._fetching = True
        self._paused = False
        self._fetch_task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._writes: set[asyncio.Task[None]] = set()
        self.handoff = HandoffListener(rt, self)

    def start(self) -> None:
        self._fetch_task = asyncio.create_task(self._fetch_loop(), name="asynqpy-processor")
        self.handoff.start()

    @property
    def alive(self) -> bool:
        """False once the fetch loop ended while the server still meant to fetch (a bug killed it)."""
        return self._fetch_task is None or not self._fetch_task.done() or not self._fetching

    def wants_tasks(self) -> bool:
        """True while fetching and a worker slot is free."""
        return self._fetching and not self._paused and self.running < self.cfg.concurrency

    async def wait_for_slot(self, timeout: float) -> None:
        """Wait until a slot frees, at most timeout seconds (always yields to the loop)."""
        self._slot.clear()
        try:
            await asyncio.wait_for(self._slot.wait(), timeout)
        except TimeoutError:
            pass

    def start_task(self, q: str, tid: str, data: bytes, *, wait: float | None = 0.0) -> None:
        """Run a task this server already holds (dequeued, or handed over by an enqueue script: those never
        sat in the pending list, so their wait is 0)."""
        self._start(q, tid, data, wait)

    def wake(self) -> None:
        self._wake.set()

    def pause_fetching(self) -> None:
        """Stop taking new tasks (SIGTSTP); running ones finish."""
        self._paused = True

    # fetching

    async def _fetch_loop(self) -> None:
        backoff = 0.05
        while self._fetching:
            free = self.cfg.concurrency - self.running
            if free <= 0 or self._paused:
                self._slot.clear()
                await self._wait(self._slot, self.cfg.idle_poll_interval if self._paused else None)
                continue
            self._wake.clear()
            try:
                got = await self._dequeue(free)
                backoff = 0.05
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("processor: redis unreachable: %s", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if not got:
                await self._wait(self._wake, self.cfg.idle_poll_interval)
                continue
            now = time.time()
            for q, tid, data, since in got:
                self._start(q, tid, data, max(0.0, now - since) if since else None)

    async def _wait(self, ev: asyncio.Event, timeout: float | None) -> None:
        if not self._fetching:
            return
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            pass

    async def _dequeue(self, free: int) -> list[Dequeued]:
        expiry = time.time() + self.cfg.lease_duration
        if self.cfg.strict_priority or len(self.cfg.queues) == 1:
            got: list[Dequeued] = []
            for q in self.cfg.queue_order():
                rows = await self.rt.runner.run(broker.dequeue_timed(q, lease_expiry=expiry, count=free - len(got)))
                got += [(q, tid, data, since) for tid, data, since in rows]
                if len(got) >= free:
                    break
            return got
        # Weighted: every queue gets a share of the free slots (at least one while slots last, in asynq's
        # weighted random order), all fetched in one pipelined round trip.
        order = self.cfg.queue_order()
        if free < len(order):
            shares = [1] * free + [0] * (len(order) - free)
        else:
            shares = [1 + x for x in _split(free - len(order), [self.cfg.queues[q] for q in order])]
        out = await self._dequeue_shares(order, shares, expiry)
        for q in order[free:] if not out else []:  # the queues that got no share, one at a time
            out = await self._dequeue_shares([q], [free], expiry)
            if out:
                break
        return out

    async def _dequeue_shares(self, order: list[str], shares: list[int], expiry: float) -> list[Dequeued]:
        pairs = zip(order, shares, strict=True)
        calls = [(q, broker.dequeue_timed(q, lease_expiry=expiry, count=n)) for q, n in pairs if n > 0]
        results = await self.rt.runner.run_many([c for _, c in calls])
        out: list[Dequeued] = []
        for (q, _), res in zip(calls, results, strict=True):
            if isinstance(res, Exception):
                raise res
            out += [(q, tid, data, since) for tid, data, since in res]
        return out

    # running

    def _start(self, q: str, tid: str, data: bytes, wait: float | None) -> None:
        now = time.time()
        try:
            msg = decode_task_message(data, queue=q, task_id=tid)
        except MalformedTaskError as exc:
            log.error("processor: task %s in queue %s is not a valid message; archiving it", tid, q)
            self._write(broker.archive(q, tid, data, now=now, note=str(exc)), what="archive malformed")
            return
        deadline = task_deadline(msg, now)
        received = ReceivedTask(msg, deadline=deadline, writer=self.rt.write_result)
        at = ActiveTask(q, msg, received, now, deadline, now + min(self.cfg.lease_duration, broker.HANDOFF_LEASE),
                        wait=wait)
        self.rt.active[tid] = at
        self.running += 1
        self._idle.clear()
        at.handle = asyncio.create_task(self._execute(at))
        if self.running >= self.cfg.concurrency:
            self.handoff.withdraw()  # full: no more hand-offs, not even while its lanes block

    async def _run_sync(self, fn: Handler, task: ReceivedTask) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, task)

    async def _execute(self, at: ActiveTask) -> None:
        outcome: BaseException | None = None
        loop = asyncio.get_running_loop()
        timeout = asyncio.timeout_at(loop.time() + max(0.0, at.deadline - time.time()))
        try:
            async with timeout:
                await self.handler(at.received)
        except asyncio.CancelledError:
            outcome = _StopRequested(at.stop_reason)
        except TimeoutError as exc:
            outcome = _DeadlineExceeded() if timeout.expired() else exc
        except BaseException as exc:
            outcome = exc
        finally:
            self.running -= 1
            self._slot.set()
        if outcome is not None:
            at.received.cancel()
        await self._finish(at, outcome)
        if self.running == 0:
            self._idle.set()

    def _outcome(self, at: ActiveTask, outcome: Outcome, error: str = "") -> None:
        hooks = self.cfg.outcome_hooks
        if hooks:
            ended = at.ended or time.time()
            call_hooks(hooks, TaskOutcome(at.queue, at.msg.type, at.msg.id, outcome, at.started,
                                          max(0.0, ended - at.started), at.wait, error))

    async def _finish(self, at: ActiveTask, outcome: BaseException | None) -> None:
        q, msg = at.queue, at.msg
        at.ended = time.time()
        if outcome is None or isinstance(outcome, RevokeTask):
            self._outcome(at, "success" if outcome is None else "revoked", "" if outcome is None else str(outcome))
            if msg.retention > 0 and outcome is None:
                now = time.time()
                msg.completed_at = int(now)
                self.acker.complete(q, msg.id, now + msg.retention, msg.SerializeToString(), msg.unique_key)
            else:
                self.acker.done(q, msg.id, msg.unique_key)
            return
        if isinstance(outcome, _StopRequested):
            if outcome.reason == "canceled":
                await self._fail(at, outcome, ERR_CANCELED)
            elif outcome.reason == "lease":
                log.warning("processor: lease of task %s lapsed; leaving it to the recoverer", msg.id)
                self.rt.active.pop(msg.id, None)
            return  # "shutdown": the server requeues it
        if isinstance(outcome, _DeadlineExceeded):
            await self._fail(at, outcome, ERR_DEADLINE)
            return
        await self._fail(at, outcome, error_text(outcome), skip=isinstance(outcome, SkipRetry))

    async def _fail(self, at: ActiveTask, exc: BaseException, err: str, *, skip: bool = False) -> None:
        msg, q = at.msg, at.queue
        await self._report(at, exc)
        call, decision = failure_call(self.cfg, q, msg, exc, at.received, error=err, now=time.time(), skip=skip)
        canceled = isinstance(exc, _StopRequested) and exc.reason == "canceled"
        self._outcome(at, "canceled" if canceled else "archived" if decision.archive else "retry", err)
        await self._write_now(call, what=call.script.name)
        self.rt.active.pop(msg.id, None)
        if not decision.archive:
            self.on_retry()

    async def _report(self, at: ActiveTask, exc: BaseException) -> None:
        handler = self.cfg.error_handler
        if handler is None:
            return
        try:
            res = handler(at.received, exc)
            if inspect.isawaitable(res):
                await res
        except Exception:
            log.exception("processor: error_handler raised")

    async def _write_now(self, call: Call[object], *, what: str) -> None:
        try:
            await self.rt.runner.run(call)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self.syncer.add(call, give_up_at=time.time() + self.cfg.lease_duration, what=what)

    def _write(self, call: Call[object], *, what: str) -> None:
        t = asyncio.create_task(self._write_now(call, what=what))
        self._writes.add(t)  # keep a reference until it is done
        t.add_done_callback(self._writes.discard)

    # lifecycle

    def cancel(self, task_id: str, reason: str) -> bool:
        """Cancel a running handler; reason "canceled" (asynq:cancel), "lease" or "shutdown"."""
        at = self.rt.active.get(task_id)
        if at is None or at.handle is None or at.handle.done():
            return False
        at.stop_reason = reason
        at.received.cancel()
        at.handle.cancel()
        return True

    async def stop(self) -> None:
        """Stop fetching, let handlers finish within shutdown_timeout, then requeue what is still running."""
        self._fetching = False
        self._wake.set()
        self._slot.set()
        if self._fetch_task is not None:
            await self._fetch_task
        await self.handoff.stop()
        try:
            await asyncio.wait_for(self._idle.wait(), self.cfg.shutdown_timeout)
        except TimeoutError:
            pass
        left = [at for at in self.rt.active.values() if at.handle is not None and not at.handle.done()]
        for at in left:
            self.cancel(at.msg.id, "shutdown")
        if left:
            await asyncio.gather(*(at.handle for at in left if at.handle), return_exceptions=True)
            log.info("processor: requeueing %d unfinished task(s)", len(left))
            for at in left:
                await self._write_now(broker.requeue(at.queue, at.msg.id, now=time.time()), what="requeue")
                self.rt.active.pop(at.msg.id, None)
        self.pool.shutdown(wait=False, cancel_futures=True)


class _StopRequested(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _DeadlineExceeded(Exception):
    pass


def _split(n: int, weights: list[int]) -> list[int]:
    """n slots shared by weight (largest remainder)."""
    total = sum(weights)
    if n <= 0:
        return [0] * len(weights)
    exact = [n * w / total for w in weights]
    shares = [int(x) for x in exact]
    left = n - sum(shares)
    for i in sorted(range(len(weights)), key=lambda i: shares[i] - exact[i])[:left]:
        shares[i] += 1
    return shares
