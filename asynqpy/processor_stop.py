"""The processor's stop: the intake ends, handlers get shutdown_timeout to finish, what still runs is cancelled and
requeued in one round trip; and the give-back of tasks to the front of their queues (at a stop, or when a dequeue
in flight took tasks after SIGTSTP paused fetching)."""

from __future__ import annotations

import asyncio
import logging
import time

from asynqpy.cancelling import cancel_and_wait
from asynqpy.config import ServerConfig
from asynqpy.finisher import Finisher
from asynqpy.handoff import HandoffListener
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime
from asynqpy.threads import HandlerThreads

log = logging.getLogger("asynqpy")


class ProcessorStop:
    """The stop of a Processor (asynqpy/processor.py), which it inherits: it works on the processor's state."""

    rt: Runtime
    cfg: ServerConfig
    finisher: Finisher
    handoff: HandoffListener
    threads: HandlerThreads
    _fetching: bool
    _stopping: asyncio.Event
    _wake: asyncio.Event
    _busy: asyncio.Event
    _idle: asyncio.Event
    _fetch_task: asyncio.Task[None] | None
    _lane_task: asyncio.Task[None] | None

    def cancel(self, task_id: str, reason: str) -> bool:
        raise NotImplementedError  # the processor's

    def _slot_freed(self) -> None:
        raise NotImplementedError  # the processor's

    async def stop(self) -> None:
        """Stop fetching and hand-offs; let handlers finish within shutdown_timeout, counted from now whatever
        stopping the fetch loops and the hand-off lanes meets; then cancel what still runs and requeue it, all in
        one round trip. While Redis does not answer, this returns within shutdown_timeout plus that round trip's
        socket timeout: a dequeue or pop still waiting for its reply at shutdown_timeout is given up (what it
        leased comes back by its lease), and a requeue that fails is held for the syncer, else left to the
        recoverer of another worker once the lease lapses. Every step runs even if one before it failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.shutdown_timeout
        self._fetching = False
        self._stopping.set()
        self._wake.set()
        self._slot_freed()
        self._busy.set()  # the second lane waits for it
        # First the intake: a task a dequeue or hand-off still starts gets the same grace as those running.
        intake = asyncio.ensure_future(self._stop_intake())
        await asyncio.wait({intake}, timeout=max(0.0, deadline - loop.time()))
        if not intake.done():
            log.warning("processor: Redis did not answer a fetch or hand-off within shutdown_timeout; giving it up "
                        "(a task it leased comes back by its lease)")
            await cancel_and_wait([intake, self._fetch_task, self._lane_task])
            await self.handoff.close()
        try:
            await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            pass
        try:
            await self._requeue_unfinished()
        finally:
            # Handler threads still running are daemons: once their tasks are requeued the process may exit
            # without them (it must not finish a task that another worker now runs).
            self.threads.close()

    async def _requeue_unfinished(self) -> None:
        """Cancel the handlers still running and requeue their tasks, all in one round trip."""
        left = [at for at in self.rt.active.values() if at.handle is not None and not at.handle.done()]
        for at in left:
            self.cancel(at.msg.id, "shutdown")  # its result writes are refused from now on (task.cancel())
        if not left:
            return
        await asyncio.gather(*(at.handle for at in left if at.handle), return_exceptions=True)
        log.info("processor: requeueing %d unfinished task(s)", len(left))
        await self._requeue([(at.queue, at.msg.id) for at in left])
        for at in left:
            self.rt.active.pop(at.msg.id, None)

    async def _requeue(self, tasks: list[tuple[str, str]]) -> None:
        """Put (queue, id) tasks back at the front of their queues, in one round trip (held for the syncer on
        transient trouble)."""
        now = time.time()
        await self.finisher.write_all_now([(tid, broker.requeue(q, tid, now=now)) for q, tid in tasks], what="requeue")

    async def abort(self) -> None:
        """End what a stop() that was given up left running (the fetch loops, the hand-off lanes, handlers), without
        a word to Redis: their tasks come back when their leases lapse. A no-op after a stop() that ended."""
        running = [t for t in (self._fetch_task, self._lane_task, *(at.handle for at in self.rt.active.values()))
                   if t is not None and not t.done()]
        await cancel_and_wait(running)
        await self.handoff.close()
        self.threads.close()

    async def _stop_intake(self) -> None:
        await asyncio.gather(*(t for t in (self._fetch_task, self._lane_task) if t is not None),
                             return_exceptions=True)
        try:
            await self.handoff.stop()
        except Exception as exc:
            log.error("processor: stopping the hand-off listener failed: %s", exc, exc_info=exc)

