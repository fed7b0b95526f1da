"""Queue sizes over the last hour: one sample per interval in a capped Redis list, whichever process takes it.

Every dashboard process runs a sampler; each interval, the first to claim the slot (SET NX on a key named
after the slot) reads the queue sizes and pushes one sample, so N processes still write one sample per interval.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from inspector.context import Ctx
from inspector.models import QueueInfo
from inspector.scripts import script

TOTAL = "*"  # the queue name of a totals sample
STATES = ("pending", "active", "scheduled", "retry", "archived")
DEFAULT_KEEP = 360


@dataclass(frozen=True)
class SizeSample:
    """Queue sizes by state (pending, active, scheduled, retry, archived) at Unix time t."""

    t: float
    sizes: dict[str, tuple[int, ...]]

    def total(self, queue: str | None = None) -> int:
        if queue is not None:
            return sum(self.sizes.get(queue, ()))
        return sum(sum(v) for v in self.sizes.values())


def claim(ctx: Ctx, interval: float) -> bool:
    """Whether this process takes the current interval's sample (only one caller per interval does)."""
    slot = int(ctx.now() // interval)
    return bool(ctx.command("SET", keys.size_slot(slot), 1, "NX", "EX", max(1, int(interval * 2))))


def record(ctx: Ctx, infos: Sequence[QueueInfo], *, keep: int = DEFAULT_KEEP) -> None:
    """Push one sample of the given queue infos, keeping the newest `keep`."""
    t = round(ctx.now(), 3)
    per_queue = {i.queue: [i.count(s) for s in STATES] for i in infos}
    totals = [sum(v[k] for v in per_queue.values()) for k in range(len(STATES))]
    ctx.run(Call(script("push_size_sample"), [keys.SIZE_SAMPLES, keys.SIZE_TOTALS],
                 [_dumps({"t": t, "q": per_queue}), _dumps({"t": t, "q": {TOTAL: totals}}), keep], int))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def read(ctx: Ctx, *, since: float | None = None, totals: bool = False) -> list[SizeSample]:
    """The samples, oldest first (those from `since` on, when given). totals: only the sums over all queues,
    under the queue name "*" (a small read, whatever the number of queues)."""
    out = []
    for raw in reversed(ctx.command("LRANGE", keys.SIZE_TOTALS if totals else keys.SIZE_SAMPLES, 0, -1)):
        try:
            d: Any = json.loads(raw)
            s = SizeSample(float(d["t"]), {str(q): tuple(int(x) for x in v) for q, v in d["q"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a damaged sample is skipped, never fatal for a chart
        if since is None or s.t >= since:
            out.append(s)
    return out
