"""Processor: fetches tasks in batches into free worker slots and runs their handlers under their deadlines."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable
from typing import Any

from asynqpy import tracing
from asynqpy.acker import Acker
from asynqpy.errors import MalformedTaskError
from asynqpy.fetch import Dequeued, Offer, Riders, dequeue_for, forget_dry
from asynqpy.finisher import DeadlineExceeded, Finisher, StopRequested, task_deadline
from asynqpy.handoff import HandoffListener
from asynqpy.mux import Handler, ServeMux, route_of
from asynqpy.processor_stop import ProcessorStop
from asynqpy.rdb import broker
from asynqpy.rdb.failures import Degraded, TroubleLog
from asynqpy.runtime import ActiveTask, Runtime
from asynqpy.syncer import Syncer
from asynqpy.task import ReceivedTask
from asynqpy.threads import HandlerThreads
from asynqpy.wire import decode_task_message

log = logging.getLogger("asynqpy")

# Fetch loops while the queues have a backlog: with 2, one dequeue is in flight while the batch the other got runs
# (bench/drain_profile.py --lanes 1 measures without).
FETCH_LANES = 2


class Processor(ProcessorStop):
    """Keeps up to `concurrency` handlers running. One dequeue script call fills all free slots of a queue;
    successes go to the Acker in batches; failures are retried or archived by one script each. Its stop (and the
    give-back of tasks to their queues) is ProcessorStop's (asynqpy/processor_stop.py)."""

    def __init__(self, rt: Runtime, mux: ServeMux, acker: Acker, syncer: Syncer,
                 on_retry: Callable[[], None]) -> None:
        self.rt = rt
        self.cfg = rt.config
        self.acker = acker
        self.syncer = syncer
        self.on_retry = on_retry
        self.handler = tracing.wrap_handler(mux.compile(self._run_sync))  # itself when tracing is off
        self.hooks = tracing.outcome_hooks(self.cfg.outcome_hooks)
        self.threads = HandlerThreads(self.cfg.concurrency, on_stuck=self._stuck_changed, stuck=rt.stuck)
        self.running = 0
        self._reserved = 0  # slots the dequeue in flight may fill: hand-off lanes must not take them meanwhile
        # Tasks a hand-off lane received and has not started (or given back) yet: they are leased to this server
        # already, and hold the slots it offered, so a fetch must leave them those slots.
        self._claimed = 0
        self._fetched = asyncio.Event()
        self._fetched.set()
        self._stopping = asyncio.Event()
        self.trouble = TroubleLog("processor")  # the fetch loop's
        self.finisher = Finisher(rt, acker, syncer, on_retry, self.hooks)
        self.write_trouble = self.finisher.write_trouble  # writes of task outcomes
        # The finisher's methods bound once: _execute calls them as it called the processor's own.
        self._succeeded = self.finisher.succeeded
        self._finish = self.finisher.finish
        self._write_now = self.finisher.write_now
        self._write = self.finisher.write
        self._slot = asyncio.Event()  # the fetch loop's
        self._slot_waiters: set[asyncio.Future[None]] = set()  # wait_for_slot()'s
        self._wake = asyncio.Event()
        self._fetching = True
        self._paused = False
        self._fetch_task: asyncio.Task[None] | None = None
        self._lane_task: asyncio.Task[None] | None = None
        self._busy = asyncio.Event()  # the queues have a backlog: the second fetch lane runs
        self._idle = asyncio.Event()
        self._idle.set()
        self.handoff = HandoffListener(rt, self)
        self._offer = Offer(rt.server_id, self.handoff.offering)
        self._write_result = rt.write_result
        self._start_lease = min(self.cfg.lease_duration, broker.HANDOFF_LEASE)  # a started task's first lease
        # The mux's router when nothing wraps it (no middleware, no tracing): _execute calls its handler directly.
        self._route = route_of(self.handler)
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._fetch_task = asyncio.create_task(self._fetch_loop(), name="asynqpy-processor")
        if FETCH_LANES > 1:
            self._lane_task = asyncio.create_task(self._fetch_loop(1), name="asynqpy-processor-lane")
        self.handoff.start()

    @property
    def alive(self) -> bool:
        """False once the fetch loop ended while the server still meant to fetch (a bug killed it)."""
        tasks = [t for t in (self._fetch_task, self._lane_task) if t is not None]
        return not self._fetching or not any(t.done() for t in tasks)

    @property
    def degraded(self) -> Degraded | None:
        """The Redis trouble fetching, hand-off or outcome writes meet now (the oldest), None when there is none."""
        found = [t.degraded for t in (self.trouble, self.write_trouble, self.handoff.trouble,
                                      *(lane.trouble for lane in self.handoff.lanes)) if t.degraded is not None]
        return min(found, key=lambda d: d.since) if found else None

    @property
    def stuck(self) -> int:
        """Handler threads still running after their task was given up (timed out, cancelled or requeued)."""
        return len(self.threads.stuck)

    @property
    def too_many_stuck(self) -> bool:
        """True once max_stuck_threads handler threads are stuck: the worker takes no tasks, and is not ready."""
        return self.stuck >= self.cfg.max_stuck_threads

    def wants_tasks(self) -> bool:
        """True while fetching and a worker slot is free (not reserved by a dequeue in flight, nor held by a task
        handed over that a lane is about to start)."""
        return (self._fetching and not self._paused and not self.too_many_stuck
                and self.running + self._reserved + self._claimed < self.cfg.concurrency)

    async def room_after_fetch(self) -> bool:
        """wants_tasks(), once the dequeue in flight (if any) has started what it got."""
        if self._reserved:
            await self._fetched.wait()
        return self.wants_tasks()

    def claim_handed(self) -> None:
        """A lane just received a task handed over: until it starts it (or gives it back, see room_for_handed and
        unclaim_handed), fetches leave it its slot."""
        self._claimed += 1

    def unclaim_handed(self) -> None:
        """The lane started its task (running counts it now) or gives it back (its slot is free again)."""
        self._claimed -= 1
        self._slot.set()  # the fetch loop looks again

    async def room_for_handed(self) -> bool:
        """True when a task a lane claimed may start now (then start_task at once, without an await between), once
        the dequeue in flight (if any) has started what it got. That dequeue left the slot to the lane when its
        script found the hand-off (see fetch.Offer); False means that the worker filled up otherwise (a dequeue
        that ran before the hand-off, another lane, a pause or a stop): the lane gives its task back, the younger
        one."""
        if self._reserved:
            await self._fetched.wait()
        return self._room_for_handed()

    def room_for_handed_now(self) -> bool | None:
        """room_for_handed() without its wait: None while a dequeue is in flight (then the lane asks that)."""
        return None if self._reserved else self._room_for_handed()

    def _room_for_handed(self) -> bool:
        cfg = self.cfg  # (too_many_stuck unfolded: an idle worker's pickup runs this)
        return (self._fetching and not self._paused and len(self.threads.stuck) < cfg.max_stuck_threads
                and self.running + self._reserved < cfg.concurrency)

    async def wait_for_slot(self, timeout: float) -> None:
        """Wait until a slot frees, at most timeout seconds (always yields to the loop)."""
        # A future and a timer, not wait_for(): a hand-off lane asks this at each freed slot of a busy drain.
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._slot_waiters.add(fut)
        timer = loop.call_later(timeout, _settle, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._slot_waiters.discard(fut)

    def _slot_freed(self) -> None:
        self._slot.set()
        for fut in self._slot_waiters:
            _settle(fut)

    def start_task(self, q: str, tid: str, data: bytes, *, wait: float | None = 0.0) -> None:
        """Run a task this server already holds (dequeued, or handed over by an enqueue script: those never
        sat in the pending list, so their wait is 0)."""
        self._start(q, tid, data, wait)

    def wake(self) -> None:
        forget_dry(self.cfg)  # tasks came: the queues found dry lately are asked again
        self._wake.set()

    def pause_fetching(self) -> None:
        """Stop taking new tasks (SIGTSTP); running ones finish."""
        self._paused = True

    # fetching

    async def _fetch_loop(self, lane: int = 0) -> None:
        """Lane 0 fetches whenever slots are free (polling an empty queue every idle_poll_interval). Lane 1 runs
        only while the queues have a backlog (the last dequeue got all it asked for): then each lane takes at most
        half the slots, so one lane's dequeue is in flight while the tasks the other got run, and the worker does
        not sit idle for a round trip after each batch (it never holds more tasks than it runs)."""
        cfg = self.cfg
        while self._fetching:
            if lane and not self._busy.is_set():
                await self._wait(self._busy, None)
                continue
            free = cfg.concurrency - self.running - self._reserved - self._claimed
            if free <= 0 or self._paused or self.too_many_stuck:
                self._slot.clear()
                await self._wait(self._slot, None if free <= 0 else cfg.idle_poll_interval)
                continue
            if self._busy.is_set():
                free = min(free, (cfg.concurrency + 1) // 2)
            if not lane:
                self._wake.clear()
            got: list[Dequeued] = []
            self._reserved += free
            self._fetched.clear()
            failures = self.trouble.failures
            try:
                got = await self._dequeue(free)
            except Exception as exc:  # transient trouble or a bug: either way fetching goes on, after a back-off
                self._busy.clear()
                self.trouble.note(exc, "fetch")
                await self._wait(self._stopping, self.trouble.delay())
                continue
            finally:
                self._reserved -= free
                if not self._reserved:
                    self._fetched.set()
                self._slot.set()  # the other lane may wait for the slots this one had reserved
            if self.trouble.failures == failures:  # (a dequeue over several queues notes one's failure and goes on)
                self.trouble.ok()
            if len(got) >= free and cfg.concurrency > 1:
                self._busy.set()
            else:
                self._busy.clear()
            if not got:
                if not lane:
                    await self._wait(self._wake, cfg.idle_poll_interval)
                continue
            if self._paused:  # SIGTSTP came while this dequeue was on its way: its tasks go back to their queues' front
                log.info("processor: fetching is paused; giving back %d task(s) a dequeue in flight took", len(got))
                await self._requeue([(q, tid) for q, tid, *_ in got])
                continue
            now = self.rt.redis_now()  # pending_since is by Redis's clock (our scripts) or a Go producer's
            for q, tid, data, since, limit in got:
                try:
                    self._start(q, tid, data, (now - since if now > since else 0.0) if since else None, limit)
                except Exception as exc:  # a bug: this task comes back by lease recovery; fetching goes on
                    log.error("processor: could not start task %s of queue %s: %s", tid, q, exc, exc_info=exc)

    async def _wait(self, ev: asyncio.Event, timeout: float | None) -> None:
        if not self._fetching:
            return
        if timeout is None:  # (a busy drain waits so at every batch: wait_for's task and timer cost more)
            await ev.wait()
            return
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            pass

    async def _dequeue(self, free: int) -> list[Dequeued]:
        # The acknowledgements due ride in the dequeue's round trip, ahead of it: a busy drain makes one round trip
        # per batch of tasks, not two. They were sent only after their handlers returned (at-least-once).
        acks = self.acker.take_for_fetch()
        riders = Riders(acks.calls) if acks is not None else None
        try:
            return await dequeue_for(self.rt.runner, self.cfg, free,
                                     lease_expiry=time.time() + self.cfg.lease_duration, trouble=self.trouble,
                                     riders=riders, offer=self._offer)
        finally:
            if acks is not None and riders is not None:
                if riders.results is None:
                    self.acker.put_back(acks)
                else:
                    self.acker.settle(acks, riders.results)

    # running

    def _start(self, q: str, tid: str, data: bytes, wait: float | None, limit: str | None = None) -> None:
        now = time.time()
        try:
            msg = decode_task_message(data, queue=q, task_id=tid)
        except MalformedTaskError as exc:
            log.error("processor: task %s in queue %s is not a valid message; archiving it", tid, q)
            self._write(broker.archive(q, tid, data, now=now, note=str(exc)), what="archive malformed", task_id=tid)
            return
        deadline = task_deadline(msg, now)
        received = ReceivedTask(msg, deadline=deadline, writer=self._write_result)
        at = ActiveTask(q, msg, received, now, deadline, now + self._start_lease, wait=wait, limit=limit)
        self.rt.active[tid] = at
        if not self.running:
            self._idle.clear()
        self.running += 1
        loop = self._loop or asyncio.get_running_loop()
        # the deadline by the loop's clock (a timer in _execute cancels the handler then)
        at.handle = loop.create_task(self._execute(at, loop.time() + (deadline - now)))
        if self.running >= self.cfg.concurrency:
            self.handoff.withdraw()  # full: no more hand-offs, not even while its lanes block

    async def _run_sync(self, fn: Handler, task: ReceivedTask) -> Any:
        # in the task's context, so a handler's own spans (and other context variables) follow the task
        ctx = contextvars.copy_context()
        return await self.threads.run(lambda t: ctx.run(fn, t), task)

    def _stuck_changed(self) -> None:
        self._slot_freed()  # the fetch loop looks again: past max_stuck_threads it stops, below it goes on
        if self.too_many_stuck:
            log.error("processor: %d handler threads are stuck (max_stuck_threads %d): taking no new tasks, and "
                      "reporting not ready so that this worker is replaced", self.stuck, self.cfg.max_stuck_threads)

    async def _execute(self, at: ActiveTask, deadline_at: float) -> None:
        """Run the task's handler (cancelled at deadline_at, by the loop's clock), then record its outcome."""
        outcome: BaseException | None = None
        # The deadline is a plain timer that cancels the task (asyncio.timeout costs twice as much per task).
        timer = asyncio.get_running_loop().call_at(deadline_at, self._deadline_passed, at)
        route = self._route
        try:
            if route is None:
                await self.handler(at.received)
            else:  # the mux's router without middleware or tracing: its handler, without the router's own await
                await route(at.received.type)(at.received)
        except asyncio.CancelledError as exc:
            if at.stop_reason == "deadline":
                outcome = DeadlineExceeded()
            elif at.stop_reason or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                outcome = StopRequested(at.stop_reason or "shutdown")  # (no reason: the loop itself is closing)
            else:  # raised by the handler itself, nobody cancelled it: a failure like any other, retried or archived
                outcome = exc
        except BaseException as exc:
            outcome = exc
        finally:
            timer.cancel()
            self.running -= 1
            self._slot_freed()
        try:
            if outcome is None:
                self._succeeded(at)  # no coroutine of its own: the common case writes nothing now
            else:
                at.received.cancel()
                await self._finish(at, outcome)
        except Exception as exc:  # a bug while recording the outcome: the task must not stay active for good
            log.error("processor: recording the outcome of task %s failed; its lease lapses and the recoverer "
                      "retries it: %s", at.msg.id, exc, exc_info=exc)
            self.rt.active.pop(at.msg.id, None)
        finally:
            if self.running == 0:
                self._idle.set()

    @staticmethod
    def _deadline_passed(at: ActiveTask) -> None:
        """The task's deadline timer: cancel its handler, unless it was already cancelled for another reason."""
        if at.handle is not None and not at.handle.done() and not at.stop_reason:
            at.stop_reason = "deadline"
            at.handle.cancel()


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


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
