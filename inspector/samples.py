"""Queue sizes over the last hour: one sample per interval in a capped Redis list, whichever process takes it.

Every dashboard process runs a sampler; each interval, the first to claim the slot (SET NX on a key named
after the slot) reads the queue sizes and pushes one sample, so N processes still write one sample per interval.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspector.context import Ctx
from inspector.models import QueueInfo

SAMPLES_KEY = "asynqpy:sizes"
TOTALS_KEY = "asynqpy:sizes:total"  # the same samples summed over queues: what the overview's chart reads
TOTAL = "*"  # the queue name of a totals sample
SLOT_KEY = "asynqpy:sizes:slot"
STATES = ("pending", "active", "scheduled", "retry", "archived")
DEFAULT_KEEP = 360

PUSH = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[3]) - 1)
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
"""


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
    return bool(ctx.redis.set(f"{SLOT_KEY}:{slot}", 1, nx=True, ex=max(1, int(interval * 2))))


def record(ctx: Ctx, infos: Sequence[QueueInfo], *, keep: int = DEFAULT_KEEP) -> None:
    """Push one sample of the given queue infos, keeping the newest `keep`."""
    t = round(ctx.now(), 3)
    per_queue = {i.queue: [i.count(s) for s in STATES] for i in infos}
    totals = [sum(v[k] for v in per_queue.values()) for k in range(len(STATES))]
    ctx.redis.eval(PUSH, 2, SAMPLES_KEY, TOTALS_KEY, _dumps({"t": t, "q": per_queue}),
                   _dumps({"t": t, "q": {TOTAL: totals}}), keep)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def read(ctx: Ctx, *, since: float | None = None, totals: bool = False) -> list[SizeSample]:
    """The samples, oldest first (those from `since` on, when given). totals: only the sums over all queues,
    under the queue name "*" (a small read, whatever the number of queues)."""
    out = []
    for raw in reversed(ctx.redis.lrange(TOTALS_KEY if totals else SAMPLES_KEY, 0, -1)):
        try:
            d: Any = json.loads(raw)
            s = SizeSample(float(d["t"]), {str(q): tuple(int(x) for x in v) for q, v in d["q"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a damaged sample is skipped, never fatal for a chart
        if since is None or s.t >= since:
            out.append(s)
    return out
