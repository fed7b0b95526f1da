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
SLOT_KEY = "asynqpy:sizes:slot"
STATES = ("pending", "active", "scheduled", "retry", "archived")
DEFAULT_KEEP = 360

PUSH = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
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
    sample = {"t": round(ctx.now(), 3), "q": {i.queue: [i.count(s) for s in STATES] for i in infos}}
    ctx.redis.eval(PUSH, 1, SAMPLES_KEY, json.dumps(sample, separators=(",", ":")), keep)


def read(ctx: Ctx, *, since: float | None = None) -> list[SizeSample]:
    """The samples, oldest first (those from `since` on, when given)."""
    out = []
    for raw in reversed(ctx.redis.lrange(SAMPLES_KEY, 0, -1)):
        try:
            d: Any = json.loads(raw)
            s = SizeSample(float(d["t"]), {str(q): tuple(int(x) for x in v) for q, v in d["q"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a damaged sample is skipped, never fatal for a chart
        if since is None or s.t >= since:
            out.append(s)
    return out
