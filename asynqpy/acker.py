"""Acker: hands successful tasks back to Redis in batches (done, or completed with retention), per queue."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from asynqpy.connection import is_cluster
from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.failures import TroubleLog, is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.runtime import Runtime
from asynqpy.syncer import Syncer

log = logging.getLogger("asynqpy")
MAX_BATCH = 500
T = TypeVar("T")


@dataclass
class AckBatch:
    """One write of acknowledgements: a script call per queue (done, or completed with retention), each with the
    ids it acknowledges, taken from the Acker's buffers at `now`."""

    now: float
    calls: list[Call[list[str]]]
    ids: list[tuple[str, ...]]


class Acker(Loop):
    """Collects successes and writes each queue's batch with one script call, all queues in one pipeline.

    A batch goes out as soon as the previous one is answered, so acknowledgements wait for no timer; while
    a write is in flight, new successes pile up into the next batch. Ids stay "held" (their leases keep
    being extended) until their batch is written.

    During a busy drain the processor's fetch loop takes the batch (take_for_fetch) and sends it in its dequeue's
    round trip, ahead of the dequeue: one round trip per cycle instead of two. The acker itself is woken only
    for what the fetch loop left (it looks once the loop turn in which tasks succeeded is over).
    """

    name = "acker"
    interval = 1.0
    reports_success = True  # settle() does, for a batch Redis answered

    def __init__(self, rt: Runtime, syncer: Syncer, on_acked: Callable[[list[str]], None]) -> None:
        super().__init__()
        self.rt = rt
        self.syncer = syncer
        self.on_acked = on_acked
        self._done: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self._complete: dict[str, list[tuple[str, float, bytes, str]]] = defaultdict(list)
        self.held: set[str] = set()
        self.idle = asyncio.Event()
        self.idle.set()
        self.trouble = TroubleLog("acker")
        self._look_scheduled = False

    def done(self, queue: str, task_id: str, unique_key: str) -> None:
        self._done[queue].append((task_id, unique_key))
        self._added(task_id)

    def complete(self, queue: str, task_id: str, expiry: float, data: bytes, unique_key: str) -> None:
        self._complete[queue].append((task_id, expiry, data, unique_key))
        self._added(task_id)

    def _added(self, task_id: str) -> None:
        self.held.add(task_id)
        self.idle.clear()
        if not self._look_scheduled:
            # After the callbacks already due in this turn of the loop: the fetch loop, woken by the slot this task
            # freed, takes the batch first when it is about to dequeue.
            self._look_scheduled = True
            asyncio.get_running_loop().call_soon(self._look)

    def _look(self) -> None:
        self._look_scheduled = False
        if self._done or self._complete:
            self.wake()

    @property
    def pending(self) -> bool:
        return bool(self._done or self._complete)

    def take_for_fetch(self) -> AckBatch | None:
        """The next batch, for the fetch loop to send ahead of its dequeue; None when there is none, or when
        acknowledgements wait for replicas (durable_acks: those keep the acker's own round trips)."""
        if isinstance(self.rt.config.durable_acks, Durability):
            return None
        return self.take()

    def take(self) -> AckBatch | None:
        """The next batch (at most MAX_BATCH ids per queue), taken out of the buffers; None when they are empty.
        Its ids stay held until settle()."""
        if not (self._done or self._complete):
            return None
        now = time.time()
        batch = AckBatch(now, [], [])
        done = [(q, self._take(self._done, q)) for q in list(self._done)]
        if len(done) > 1 and not is_cluster(self.rt.aredis):
            # the queues share a call (one per MAX_BATCH tasks), so the cost of an ack does not grow with them
            group: list[tuple[str, list[tuple[str, str]]]] = []
            size = 0
            for n, (q, items) in enumerate(done):
                group.append((q, items))
                size += len(items)
                if n == len(done) - 1 or size + len(done[n + 1][1]) > MAX_BATCH:
                    batch.calls.append(broker.done_queues(group, now=now))
                    batch.ids.append(tuple(i for _, x in group for i, _ in x))
                    group, size = [], 0
        else:
            for q, items in done:
                batch.calls.append(broker.done(q, items, now=now))
                batch.ids.append(tuple(i for i, _ in items))
        for q in list(self._complete):
            citems = self._take(self._complete, q)
            batch.calls.append(broker.mark_complete(q, citems, now=now))
            batch.ids.append(tuple(i for i, *_ in citems))
        return batch

    def put_back(self, batch: AckBatch) -> None:
        """A taken batch whose round trip ended without replies (cancelled, or a bug before sending): its calls go
        to the syncer, which sends them within its interval (the scripts skip tasks no longer held, so a call that
        did reach Redis after all is harmless)."""
        for call, ids in zip(batch.calls, batch.ids, strict=True):
            self.syncer.add(call, give_up_at=batch.now + self.rt.config.lease_duration, what=call.script.name,
                            task_ids=ids)
        self._settled(batch)

    async def run_once(self) -> float | None:
        while self._done or self._complete:
            await self._flush_batch()
        self.idle.set()
        return None

    async def probe(self) -> None:
        await self.rt.aredis.ping()
        self.trouble.ok()

    async def on_stop(self) -> None:
        await self.run_once()

    async def _flush_batch(self) -> None:
        batch = self.take()
        if batch is None:
            return
        durable = self.rt.config.durable_acks
        confirmed = True
        results: list[list[str] | Exception]
        try:
            if isinstance(durable, Durability):
                many, confirmed = await self.rt.runner.run_many_durable(batch.calls, durable)
                results = list(many)
            else:
                results = list(await self.rt.runner.run_many(batch.calls))
        except Exception as exc:  # the whole round trip failed: every batch is held (or dropped, for a bug)
            results = [exc] * len(batch.calls)
        self.settle(batch, results, confirmed=confirmed)

    def settle(self, batch: AckBatch, results: Sequence[object], *, confirmed: bool = True) -> None:
        """What a sent batch's replies say: written, held for the syncer (transient trouble, or not confirmed by
        a replica), or dropped as a bug (the leases lapse and the recoverer retries those tasks)."""
        durable = self.rt.config.durable_acks
        now = batch.now
        failed = answered = False
        for call, ids, res in zip(batch.calls, batch.ids, results, strict=True):
            answered = answered or not isinstance(res, Exception) or not is_transient(res)
            # Not confirmed by a replica: replay it (harmless: the scripts skip tasks no longer held), so that
            # after a failover the new primary gets the acknowledgement too.
            if isinstance(res, Exception) and not is_transient(res):
                log.error("acker: %s of task(s) %s failed as a bug (%s: %s); their leases lapse and the recoverer "
                          "retries them", call.script.name, ", ".join(ids[:10]), type(res).__name__, res)
            elif isinstance(res, Exception) or not confirmed:
                if isinstance(res, Exception):
                    failed = True
                    self.trouble.note(res, f"{call.script.name} held for the syncer")
                self.syncer.add(call, give_up_at=now + self.rt.config.lease_duration, what=call.script.name,
                                durable=durable if isinstance(durable, Durability) else None, task_ids=ids)
        if answered and not failed:
            self.trouble.ok()
        self._settled(batch)

    def _settled(self, batch: AckBatch) -> None:
        all_ids = [i for ids in batch.ids for i in ids]
        self.held.difference_update(all_ids)
        self.on_acked(all_ids)
        if not (self._done or self._complete):
            self.idle.set()

    @staticmethod
    def _take(buf: dict[str, list[T]], q: str) -> list[T]:
        items = buf[q]
        if len(items) <= MAX_BATCH:
            del buf[q]
            return items
        buf[q] = items[MAX_BATCH:]
        return items[:MAX_BATCH]
