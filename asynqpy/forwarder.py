"""Forwarder: moves due scheduled and retry tasks to pending, sleeping exactly until the next one is due.

Due is judged by the Redis server's clock inside the forward script, never by this machine's: the script
reports the next due time and its own now, so the sleep is their difference and this clock never enters.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime

BATCH = 100
# Waking a hair after the due time means one script call finds the task due, never before it.
OVERSHOOT = 0.0005


class Forwarder(Loop):
    """One pipelined forward script per queue each pass. The scripts report the earliest remaining due time,
    so the loop sleeps until then (at most forward_max_wait, for tasks that Go producers add without a
    wake-up signal); a new scheduled task from our producers wakes it at once."""

    name = "forwarder"

    def __init__(self, rt: Runtime, on_forwarded: Callable[[], None]) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.forward_max_wait
        self.on_forwarded = on_forwarded

    async def run_once(self) -> float | None:
        queues = list(self.rt.config.queues)
        sent = time.monotonic()
        results = await self.rt.runner.run_many([broker.forward(q, batch=BATCH) for q in queues])
        # The scripts ran about half the round trip ago: their waits count from then.
        elapsed = (time.monotonic() - sent) / 2
        moved, waits = 0, []
        full = False
        for res in results:
            if isinstance(res, Exception):
                raise res
            n, nxt, now = res
            moved += n
            full = full or n >= BATCH
            if nxt is not None:
                waits.append(nxt - now)
        if moved:
            self.on_forwarded()
        if full:
            return 0
        if not waits:
            return self.interval
        return min(self.interval, max(0.0, min(waits) - elapsed + OVERSHOOT))
