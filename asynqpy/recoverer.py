"""Recoverer: retries or archives tasks whose worker died (lease long expired); reclaims stale aggregation sets."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TypeVar

from asynqpy.errors import LeaseExpiredError, MalformedTaskError
from asynqpy.finisher import ERR_LEASE, task_deadline
from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.rdb.failures import is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.retry import failure_call
from asynqpy.runtime import Runtime
from asynqpy.task import ReceivedTask
from asynqpy.wire import decode_task_message

log = logging.getLogger("asynqpy")

BATCH = 100
T = TypeVar("T")


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
        self._down: BaseException | None = None  # this pass's transient trouble, raised at its end

    async def run_once(self) -> float | None:
        now = time.time()
        cutoff = now - self.rt.config.lease_grace
        self._down = None
        # Each step asks every queue in one round trip (a worker of 100 queues made 200 one after the other at each
        # pass); a queue's failed step is its own, and its later steps are skipped.
        left = list(self.rt.config.queues)
        failed: set[str] = set()
        while left:
            calls = [broker.list_lease_expired(q, cutoff=cutoff, count=BATCH) for q in left]
            again = []
            for q, res in zip(left, await self._each(calls), strict=True):
                try:
                    if isinstance(res, BaseException):
                        raise res
                    await self._recover_batch(q, res, cutoff)
                except Exception as exc:  # one queue's trouble (a cluster node away, a bug) spares the others
                    self._failed(q, exc)
                    failed.add(q)
                    continue
                if len(res) == BATCH:
                    again.append(q)
            left = again
        queues = [q for q in self.rt.config.queues if q not in failed]
        reclaimed = await self._each([broker.reclaim_stale_aggregation_sets(q, now=now) for q in queues])
        for q, outcome in zip(queues, reclaimed, strict=True):
            if isinstance(outcome, BaseException):
                self._failed(q, outcome)
        if self._down is not None:
            raise self._down  # the loop backs off and tries again soon
        return None

    async def _each(self, calls: Sequence[Call[T]]) -> list[T | BaseException]:
        """The calls in one round trip; when that round trip fails as a whole (a cluster's pipeline with a node
        away), one call at a time, so that each queue's outcome is its own."""
        try:
            return list(await self.rt.runner.run_many(calls))
        except Exception:
            out: list[T | BaseException] = []
            for call in calls:
                try:
                    out.append(await self.rt.runner.run(call))
                except Exception as exc:
                    out.append(exc)
            return out

    def _failed(self, q: str, exc: BaseException) -> None:
        if is_transient(exc):
            self._down = exc
        else:
            self.trouble.note(exc, f"recovering queue {q!r} failed; the other queues go on")

    async def _recover_batch(self, q: str, expired: list[tuple[str, bytes]], cutoff: float) -> None:
        for tid, data in expired:
            if tid in self.rt.active:
                continue  # ours: the heartbeat or the processor deals with it
            if not data:
                await self.rt.runner.run(broker.drop_lost_lease(q, tid, cutoff=cutoff))
                continue
            await self._recover(q, tid, data, cutoff)

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
