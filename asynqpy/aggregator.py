"""Aggregator: turns a ready group of tasks into one task through the user's group_aggregator function."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid

from asynqpy.errors import MalformedTaskError
from asynqpy.loop import Loop
from asynqpy.options import build_options
from asynqpy.rdb import broker, keys, state
from asynqpy.runtime import Runtime
from asynqpy.task import Task
from asynqpy.wire import decode_task_message

log = logging.getLogger("asynqpy")

SET_TTL = 120.0  # an aggregation set not deleted within 2 minutes is reclaimed by the recoverer


class Aggregator(Loop):
    """Every min(7 s, grace period), per queue and group: one script decides whether the group is ready
    (max size, max delay, or grace period since the newest task) and moves it into an aggregation set;
    the set's tasks are aggregated into one new pending task, then the set is deleted."""

    name = "aggregator"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = min(7.0, rt.config.group_grace_period)

    async def run_once(self) -> float | None:
        for q in self.rt.config.queues:
            for g in await self.rt.runner.run(state.list_groups(q)):
                await self._check(q, g)
        return None

    async def _check(self, q: str, group: str) -> None:
        cfg = self.rt.config
        now = time.time()
        set_id = str(uuid.uuid4())
        made = await self.rt.runner.run(broker.aggregation_check(
            q, group, set_id, now=now, max_size=cfg.group_max_size, max_delay=cfg.group_max_delay,
            grace=cfg.group_grace_period, set_deadline=now + SET_TTL))
        if not made:
            return
        set_key = keys.aggregation_set(q, group, set_id)
        _, datas = await self.rt.runner.run(broker.read_aggregation_set(q, set_key))
        tasks = []
        for data in datas:
            try:
                m = decode_task_message(data, queue=q)
            except MalformedTaskError:
                log.error("aggregator: skipped an undecodable task in group %s of queue %s", group, q)
                continue
            tasks.append(Task(m.type, m.payload, dict(m.headers)))
        try:
            result = await self._aggregate(group, tasks)
        except Exception:
            log.exception("aggregator: group_aggregator failed for group %s of queue %s; retried later", group, q)
            return
        if not isinstance(result, Task):
            log.error("aggregator: group_aggregator returned %r, not a Task; group %s kept", result, group)
            return
        opts = build_options(queue=q, now=time.time())
        msg = broker.build_message(result.type, result.payload, dict(result.headers), opts)
        # admitted: the group's tasks were counted against the queue's backpressure limit when they were added
        await self.rt.runner.run(broker.enqueue(msg, opts, now=time.time(), admitted=True), register_queue=q)
        await self.rt.runner.run(broker.delete_aggregation_set(q, set_key))

    async def _aggregate(self, group: str, tasks: list[Task]) -> object:
        """The user's group_aggregator on the tasks: a coroutine function awaited here, a plain function run in a
        thread, so that a slow one does not stop the event loop (the fetcher, the heartbeat, the hand-off)."""
        fn = self.rt.config.group_aggregator
        assert fn is not None
        if inspect.iscoroutinefunction(fn):
            return await fn(group, tasks)
        result = await asyncio.to_thread(fn, group, tasks)
        if inspect.isawaitable(result):  # a plain function that returned an awaitable
            result = await result
        return result
