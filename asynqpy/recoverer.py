"""Recoverer: retries or archives tasks whose worker died (lease long expired); reclaims stale aggregation sets."""

from __future__ import annotations

import logging
import time

from asynqpy.errors import MalformedTaskError
from asynqpy.loop import Loop
from asynqpy.processor import ERR_LEASE
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime
from asynqpy.wire import decode_task_message

log = logging.getLogger("asynqpy")


class LeaseExpired(Exception):
    def __str__(self) -> str:
        return ERR_LEASE


class Recoverer(Loop):
    """At start and every recover_interval: for each queue, tasks whose lease ended more than lease_grace ago
    go to retry (or archived when out of retries) with asynq's error text. The scripts re-check the lease
    score, so a worker that renewed it in the meantime keeps its task."""

    name = "recoverer"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.recover_interval

    async def run_once(self) -> float | None:
        now = time.time()
        cutoff = now - self.rt.config.lease_grace
        for q in self.rt.config.queues:
            while await self._recover_batch(q, cutoff) == 100:
                pass
            await self.rt.runner.run(broker.reclaim_stale_aggregation_sets(q, now=now))
        return None

    async def _recover_batch(self, q: str, cutoff: float) -> int:
        expired = await self.rt.runner.run(broker.list_lease_expired(q, cutoff=cutoff, count=100))
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
        msg.error_msg = ERR_LEASE
        msg.last_failed_at = int(now)
        cfg = self.rt.config
        if msg.retried >= msg.retry:
            call = broker.archive(q, tid, msg.SerializeToString(), now=now, lease_cutoff=cutoff)
        else:
            lapsed = LeaseExpired()
            delay = float(cfg.retry_delay(msg.retried, lapsed, None))
            is_failure = bool(cfg.is_failure(lapsed))
            if is_failure:
                msg.retried += 1
            call = broker.retry(q, tid, msg.SerializeToString(), retry_at=now + delay, now=now,
                                is_failure=is_failure, lease_cutoff=cutoff)
        if await self.rt.runner.run(call):
            log.warning("recoverer: task %s in queue %s lost its worker; moved by %s", tid, q, call.script.name)
