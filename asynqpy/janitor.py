"""Janitor: deletes completed tasks whose retention has run out."""

from __future__ import annotations

import time

from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime

BATCH = 100


class Janitor(Loop):
    """Every janitor_interval, per queue, deletes expired completed tasks in batches of 100 (all queues in one
    round trip per batch)."""

    name = "janitor"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.janitor_interval

    async def run_once(self) -> float | None:
        # every queue in one round trip (a worker of 100 queues made 100 one after the other), again for those
        # with more to delete; a queue's failure is raised once the others had theirs
        left = list(self.rt.config.queues)
        failed: Exception | None = None
        while left:
            now = time.time()
            results = await self.rt.runner.run_many([broker.delete_expired_completed(q, now=now, batch=BATCH)
                                                     for q in left])
            failed = failed or next((res for res in results if isinstance(res, Exception)), None)
            left = [q for q, res in zip(left, results, strict=True) if not isinstance(res, Exception) and res >= BATCH]
        if failed is not None:
            raise failed
        return None
