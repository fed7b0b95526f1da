"""Syncer: retries state writes that failed while Redis was away, until the task's lease would have lapsed."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from asynqpy.loop import Loop
from asynqpy.rdb.durability import Durability
from asynqpy.rdb.failures import TroubleLog, is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.runtime import Runtime

log = logging.getLogger("asynqpy")


@dataclass
class PendingWrite:
    call: Call[object]
    give_up_at: float
    what: str
    durable: Durability | None = None  # replayed until a replica confirms it, not merely the primary
    task_ids: tuple[str, ...] = ()  # the tasks whose state it writes (for the log when it is dropped)


class Syncer(Loop):
    """Holds failed writes and replays them every syncer_interval; a write past its deadline is dropped
    (the task's lease has lapsed by then and the recoverer owns it).

    A replay that fails for a transient reason is kept, and so is every write after it (not tried in that pass:
    Redis answers them alike); one that fails as a bug (a script error, WRONGTYPE) is dropped with an error
    naming its tasks, whose leases lapse so that the recoverer retries them."""

    name = "syncer"
    reports_success = True  # flush() does, after a replay Redis answered

    def __init__(self, rt: Runtime) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.syncer_interval
        self.writes: list[PendingWrite] = []
        self.trouble = TroubleLog("syncer")

    def add(self, call: Call[object], *, give_up_at: float, what: str, durable: Durability | None = None,
            task_ids: tuple[str, ...] = ()) -> None:
        self.writes.append(PendingWrite(call, give_up_at, what, durable, task_ids))

    async def run_once(self) -> float | None:
        await self.flush()
        return None

    async def probe(self) -> None:
        await self.rt.aredis.ping()
        self.trouble.ok()

    async def on_stop(self) -> None:
        await self.flush()

    async def flush(self) -> None:
        """Replay every held write once; keep those that fail again for a transient reason and are still in time."""
        if not self.writes:
            return
        now = time.time()
        todo, self.writes = self.writes, []
        durable: list[PendingWrite] = []
        answered = False
        for i, w in enumerate(todo):
            if now > w.give_up_at:
                log.warning("syncer: dropped %s%s: its lease lapsed while Redis could not take it", w.what, _of(w))
                continue
            if w.durable is not None:
                durable.append(w)
                continue
            try:
                await self.rt.runner.run(w.call)
            except Exception as exc:
                if self._failed(w, exc):
                    self.writes += [w, *(x for x in todo[i + 1:] if x.durable is None)]
                    durable += [x for x in todo[i + 1:] if x.durable is not None]
                    break
                answered = True  # a bug's error reply: Redis answered
            else:
                answered = True
        else:
            if answered:
                self.trouble.ok()
        if durable:
            await self._flush_durable(durable)

    def _failed(self, w: PendingWrite, exc: BaseException) -> bool:
        """True (keep it) for transient trouble; a bug is logged naming the tasks, and the write dropped."""
        if is_transient(exc):
            self.trouble.note(exc, f"replaying {w.what}")
            return True
        log.error("syncer: dropped %s%s: it failed as a bug (%s: %s); the recoverer retries its tasks once their "
                  "leases lapse", w.what, _of(w), type(exc).__name__, exc)
        return False

    async def _flush_durable(self, writes: list[PendingWrite]) -> None:
        """All durable replays in one batch with one WAIT per node: kept, all of them, until a replica confirms."""
        d = writes[0].durable
        assert d is not None
        try:
            results, confirmed = await self.rt.runner.run_many_durable([w.call for w in writes], d)
        except Exception as exc:
            self.writes += [w for w in writes if self._failed(w, exc)]
            return
        if not confirmed:
            self.writes += writes
            return
        kept = [w for w, res in zip(writes, results, strict=True)
                if isinstance(res, Exception) and self._failed(w, res)]
        self.writes += kept
        if not kept:
            self.trouble.ok()


def _of(w: PendingWrite) -> str:
    if not w.task_ids:
        return ""
    shown = ", ".join(w.task_ids[:10])
    return f" of task(s) {shown}" + (f" and {len(w.task_ids) - 10} more" if len(w.task_ids) > 10 else "")
