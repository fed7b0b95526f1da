"""Recoverer: retries or archives tasks whose worker died (lease long expired); reclaims stale aggregation sets."""

from __future__ import annotations

import logging
import time

from asynqpy.errors import LeaseExpiredError, MalformedTaskError
from asynqpy.loop import Loop
from asynqpy.processor import ERR_LEASE, task_deadline
from asynqpy.rdb import broker
from asynqpy.rdb.failures import is_transient
from asynqpy.retry import failure_call
from asynqpy.runtime import Runtime
from asynqpy.task import ReceivedTask
from asynqpy.wire import decode_task_message

log = logging.getLogger("asynqpy")

BATCH = 100


class Recoverer(Loop):
    """At start and every recover_interval: for each queue, tasks whose lease ended more than lease_grace ago
    go to retry (or archived when out of retries) with asynq's error text, decided as the processor decides
    for a failed handler (asynqpy.retry). The scripts re-check the lease score, so a worker that renewed it in
    the meantime keeps its task. A queue that fails is logged and skipped: the others are still recovered."""

    name = "recoverer"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.recover_interval

    async def run_once(self) -> float | None:
        now = time.time()
        cutoff = now - self.rt.config.lease_grace
        down: BaseException | None = None
        for q in self.rt.config.queues:
            try:
                while await self._recover_batch(q, cutoff) == BATCH:
                    pass
                await self.rt.runner.run(broker.reclaim_stale_aggregation_sets(q, now=now))
            except Exception as exc:  # one queue's trouble (a cluster node away, a bug) spares the others
                if is_transient(exc):
                    down = exc
                else:
                    self.trouble.note(exc, f"recovering queue {q!r} failed; the other queues go on")
        if down is not None:
            raise down  # the loop backs off and tries again soon
        return None

    async def _recover_batch(self, q: str, cutoff: float) -> int:
        expired = await self.rt.runner.run(broker.list_lease_expired(q, cutoff=cutoff, count=BATCH))
        for tid, data in expired:
            if tid in self.rt.active:
                continue  # ours: the heartbeat or the processor deals with it
            if not data:
                await self.rt.runner.run(broker.drop_lost_lease(q, tid, cutoff=cutoff))
                continue
            await self._recover(q, tid, data, cutoff)
        return len(expired)

    async def _recover(self, q: str, tid: str, data: bytes, cutoff: float) -> None:
        now = time.time()
        try:
            msg = decode_task_message(data, queue=q, task_id=tid)
        except MalformedTaskError as exc:
            await self.rt.runner.run(broker.archive(q, tid, data, now=now, lease_cutoff=cutoff, note=str(exc)))
            return
        # The task as its handler saw it, for retry_delay(n, exc, task); it is over, so it cannot write a result.
        task = ReceivedTask(msg, deadline=task_deadline(msg, now), writer=self.rt.write_result)
        task.cancel()
        lapsed = LeaseExpiredError(ERR_LEASE, queue=q, task_id=tid)
        call, _ = failure_call(self.rt.config, q, msg, lapsed, task, error=ERR_LEASE, now=now, lease_cutoff=cutoff)
        if await self.rt.runner.run(call):
            log.warning("recoverer: task %s in queue %s lost its worker; moved by %s", tid, q, call.script.name)
