"""Syncer: retries state writes that failed while Redis was away, until the task's lease would have lapsed."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from asynqpy.loop import Loop
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.failures import is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.runtime import Runtime

log = logging.getLogger("asynqpy")


@dataclass
class PendingWrite:
    call: Call[object]
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

    def add(self, call: Call[object], *, give_up_at: float, what: str, durable: Durability | None = None) -> None:
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
        durable: list[PendingWrite] = []
        for w in todo:
            if now > w.give_up_at:
                log.warning("syncer: dropped %s: its lease lapsed while Redis was unreachable", w.what)
                continue
            if w.durable is not None:
                durable.append(w)
                continue
            try:
                await self.rt.runner.run(w.call)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self.writes.append(w)
        if durable:
            await self._flush_durable(durable)

    async def _flush_durable(self, writes: list[PendingWrite]) -> None:
        """All durable replays in one batch with one WAIT per node: kept, all of them, until a replica confirms."""
        d = writes[0].durable
        assert d is not None
        try:
            results, confirmed = await self.rt.runner.run_many_durable([w.call for w in writes], d)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self.writes += writes
            return
        if not confirmed:
            self.writes += writes
            return
        self.writes += [w for w, res in zip(writes, results, strict=True)
                        if isinstance(res, Exception) and is_transient(res)]
