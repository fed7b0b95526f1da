"""Syncer: retries state writes that failed while Redis was away, until the task's lease would have lapsed."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from asynqpy.errors import NotDurableError
from asynqpy.loop import REDIS_DOWN, Loop
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.scripts import Call
from asynqpy.runtime import Runtime

log = logging.getLogger("asynqpy")


@dataclass
class PendingWrite:
    call: Call
    give_up_at: float
    what: str
    durable: Durability | None = None  # replayed until a replica confirms it, not merely the primary


class Syncer(Loop):
    """Holds failed writes and replays them every syncer_interval; a write past its deadline is dropped
    (the task's lease has lapsed by then and the recoverer owns it)."""

    name = "syncer"

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.syncer_interval
        self.writes: list[PendingWrite] = []

    def add(self, call: Call, *, give_up_at: float, what: str, durable: Durability | None = None) -> None:
        self.writes.append(PendingWrite(call, give_up_at, what, durable))

    async def run_once(self) -> float | None:
        await self.flush()
        return None

    async def on_stop(self) -> None:
        await self.flush()

    async def flush(self) -> None:
        """Replay every held write once; keep those that fail again and are still in time."""
        if not self.writes:
            return
        now = time.time()
        todo, self.writes = self.writes, []
        for w in todo:
            if now > w.give_up_at:
                log.warning("syncer: dropped %s: its lease lapsed while Redis was unreachable", w.what)
                continue
            try:
                if w.durable is not None:
                    await self.rt.runner.run_durable(w.call, w.durable)
                else:
                    await self.rt.runner.run(w.call)
            except (*REDIS_DOWN, NotDurableError):
                self.writes.append(w)
