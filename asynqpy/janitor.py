"""Janitor: deletes completed tasks whose retention has run out."""

from __future__ import annotations

import time

from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime

BATCH = 100


class Janitor(Loop):
    """Every janitor_interval, per queue, deletes expired completed tasks in batches of 100."""

    name = "janitor"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.janitor_interval

    async def run_once(self) -> float | None:
        for q in self.rt.config.queues:
            while await self.rt.runner.run(broker.delete_expired_completed(q, now=time.time(), batch=BATCH)) >= BATCH:
                pass
        return None
