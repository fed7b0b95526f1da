"""Per-task-type metrics read from the workers' minute aggregates (asynqpy.typestats), with deploy marks, and
asynq's own per-queue counters for what Go workers ran (they write no per-type data)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from asynqpy.errors import InvalidArgumentError
from asynqpy.marks import encode_mark
from asynqpy.rdb import keys
from asynqpy.rdb.state import add_mark
from asynqpy.rdb.syncdoor import Batch
from asynqpy.typestats import BUCKETS
from inspector.context import Ctx, text

Window = Literal["1h", "24h", "72h"]
WINDOWS: dict[str, int] = {"1h": 3600, "24h": 86400, "72h": 3 * 86400}
READ_CHUNK = 2000  # hashes per pipelined round trip
N_BUCKETS = len(BUCKETS) + 1


@dataclass(frozen=True)
class Mark:
    """A deploy mark: a label at an instant (Unix seconds); by: who recorded it ('' from the CLI)."""

    label: str
    at: float
    by: str = ""


@dataclass(frozen=True)
class TypeStats:
    """One task type over a window. Times in seconds (percentiles from fixed buckets, interpolated within
    one; None without data). points: (start of each step, runs, failed) oldest first, per minute for 1h,
    per hour for 24h and 72h. run_buckets / wait_buckets: counts per bucket of asynqpy.typestats.BUCKETS
    (one more for longer than the last bound)."""

    task_type: str
    window: str
    processed: int
    failed: int
    run_total: float
    run_p50: float | None
    run_p95: float | None
    run_p99: float | None
    wait_known: int
    wait_p50: float | None
    wait_p95: float | None
    wait_p99: float | None
    run_buckets: tuple[int, ...]
    wait_buckets: tuple[int, ...]
    points: tuple[tuple[int, int, int], ...]
    step: int

    @property
    def failure_rate(self) -> float:
        return self.failed / self.processed if self.processed else 0.0


def check_window(window: str) -> str:
    if window not in WINDOWS:
        raise InvalidArgumentError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}", argument="window")
    return window


def percentile(buckets: Sequence[int], q: float) -> float | None:
    """The q-quantile (0..1) of counts in BUCKETS, linear within the bucket it falls in; None when empty. A
    quantile in the last (open) bucket is its lower bound."""
    total = sum(buckets)
    if total == 0:
        return None
    want = q * total
    seen = 0
    for i, n in enumerate(buckets):
        if n and seen + n >= want:
            if i >= len(BUCKETS):
                return BUCKETS[-1]
            lo = BUCKETS[i - 1] if i else 0.0
            return lo + (BUCKETS[i] - lo) * max(0.0, want - seen) / n
        seen += n
    return BUCKETS[-1]


def _steps(window: str, now: float) -> tuple[int, list[int]]:
    """The step (s) and the step numbers (minutes or hours) a window covers, oldest first."""
    span = WINDOWS[check_window(window)]
    step = 60 if span <= 3600 else 3600
    last = int(now // step)
    return step, list(range(last - span // step + 1, last + 1))


def _fields(raw: Mapping[bytes, bytes]) -> dict[str, int]:
    return {text(k): int(v) for k, v in raw.items()}


def _summary(ttype: str, window: str, step: int, steps: Sequence[int], hashes: Sequence[dict[str, int]]) -> TypeStats:
    tot: dict[str, int] = {}
    points = []
    for s, h in zip(steps, hashes, strict=True):
        for k, v in h.items():
            tot[k] = tot.get(k, 0) + v
        points.append((s * step, h.get("n", 0), h.get("f", 0)))
    run = tuple(tot.get(f"r{i}", 0) for i in range(N_BUCKETS))
    wait = tuple(tot.get(f"w{i}", 0) for i in range(N_BUCKETS))
    return TypeStats(ttype, window, tot.get("n", 0), tot.get("f", 0), tot.get("rt", 0) / 1000,
                     percentile(run, .5), percentile(run, .95), percentile(run, .99), tot.get("wn", 0),
                     percentile(wait, .5), percentile(wait, .95), percentile(wait, .99), run, wait, tuple(points), step)


def _hgetall(names: Sequence[str]) -> Callable[[Batch], object]:
    return lambda b: [b.command("HGETALL", k) for k in names]


def task_types(ctx: Ctx, window: str) -> list[str]:
    """Types recorded within the window (from the index the workers keep)."""
    span = WINDOWS[check_window(window)]
    since = int((ctx.now() - span) // 60)
    return sorted(text(t) for t in ctx.command("ZRANGEBYSCORE", keys.TYPE_INDEX, since, "+inf"))


def type_stats(ctx: Ctx, window: str, types: Sequence[str] | None = None) -> list[TypeStats]:
    """TypeStats of every recorded type (or the given ones), most total run time first."""
    names = task_types(ctx, window) if types is None else list(types)
    step, steps = _steps(window, ctx.now())
    key = keys.type_minute if step == 60 else keys.type_hour
    wanted = [key(t, s) for t in names for s in steps]
    raw: list[dict[str, int]] = []
    for i in range(0, len(wanted), READ_CHUNK):
        chunk = wanted[i:i + READ_CHUNK]
        raw += [_fields(h) for h in ctx.read(_hgetall(chunk))]
    out = [_summary(t, window, step, steps, raw[j * len(steps):(j + 1) * len(steps)]) for j, t in enumerate(names)]
    return sorted(out, key=lambda s: (-s.run_total, s.task_type))


def one_type(ctx: Ctx, task_type: str, window: str) -> TypeStats:
    """One type's TypeStats (zeros when nothing was recorded). Raises InvalidArgumentError for a blank name."""
    if not isinstance(task_type, str) or not task_type:
        raise InvalidArgumentError("task type must be a non-empty str", argument="task_type")
    return type_stats(ctx, window, [task_type])[0]


def mark(ctx: Ctx, label: str, *, by: str = "") -> Mark:
    """Record a deploy mark now. Raises InvalidArgumentError for a blank or over-long label."""
    at = ctx.now()
    data = encode_mark(label, at, by)
    ctx.run(add_mark(data, at=at))
    d = json.loads(data)
    return Mark(d["label"], d["at"], by)


def marks(ctx: Ctx, since: float) -> list[Mark]:
    """Deploy marks from since (Unix s) on, oldest first."""
    out = []
    for m in ctx.command("ZRANGEBYSCORE", keys.MARKS, repr(float(since)), "+inf"):
        try:
            d = json.loads(m)
            out.append(Mark(str(d["label"]), float(d["at"]), str(d.get("by", ""))))
        except (ValueError, KeyError, TypeError):
            continue  # not one of ours: skipped
    return out
