"""Per-task-type metrics read from the workers' minute aggregates (asynqpy.typestats), with deploy marks, and
asynq's own per-queue counters for what Go workers ran (they write no per-type data).

The aggregates are kept per (queue, task type), so a reader may count only the queues a predicate admits (the
dashboard's per-queue roles). Aggregates of earlier workers have no queue: they count only when every queue is
admitted (queues=None), and a TypeStats says when they are in it (unqueued)."""

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
    queues: tuple[str, ...] = ()  # the queues the figures come from (sorted)
    unqueued: bool = False  # figures of earlier workers, which recorded no queue, are included

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


QueueFilter = Callable[[str], bool]  # which queues' figures count (None: every queue's, earlier workers' too)


def _summary(ttype: str, window: str, step: int, steps: Sequence[int], hashes: Sequence[dict[str, int]],
             queues: Sequence[str], unqueued: bool) -> TypeStats:
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
                     percentile(wait, .5), percentile(wait, .95), percentile(wait, .99), run, wait, tuple(points), step,
                     tuple(sorted(queues)), unqueued)


def _hgetall(names: Sequence[str]) -> Callable[[Batch], object]:
    return lambda b: [b.command("HGETALL", k) for k in names]


def _since(ctx: Ctx, window: str) -> int:
    return int((ctx.now() - WINDOWS[check_window(window)]) // 60)


def _pair(member: bytes) -> tuple[str, str] | None:
    try:
        q, t = json.loads(member)
    except (ValueError, TypeError):
        return None  # not one of ours: skipped
    return (q, t) if isinstance(q, str) and isinstance(t, str) else None


def recorded(ctx: Ctx, window: str, *, queues: QueueFilter | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """What was recorded within the window: (queue, task type) pairs the filter admits, and the task types of
    earlier workers (no queue; only when queues is None)."""
    since = _since(ctx, window)
    pairs = [p for p in (_pair(m) for m in ctx.command("ZRANGEBYSCORE", keys.TYPE_QUEUE_INDEX, since, "+inf"))
             if p is not None and (queues is None or queues(p[0]))]
    legacy = [] if queues is not None else \
        [text(t) for t in ctx.command("ZRANGEBYSCORE", keys.TYPE_INDEX, since, "+inf")]
    return pairs, legacy


def task_types(ctx: Ctx, window: str, *, queues: QueueFilter | None = None) -> list[str]:
    """Types recorded within the window (in the queues the filter admits), from the index the workers keep."""
    pairs, legacy = recorded(ctx, window, queues=queues)
    return sorted({t for _, t in pairs} | set(legacy))


def type_stats(ctx: Ctx, window: str, types: Sequence[str] | None = None, *,
               queues: QueueFilter | None = None) -> list[TypeStats]:
    """TypeStats of every recorded type (or the given ones), most total run time first, summed over the queues
    the filter admits (queues=None: every queue, and what earlier workers wrote without a queue)."""
    pairs, legacy = recorded(ctx, window, queues=queues)
    names = sorted({t for _, t in pairs} | set(legacy)) if types is None else list(dict.fromkeys(types))
    wanted_types = set(names)
    pairs = [p for p in pairs if p[1] in wanted_types]
    legacy = [t for t in legacy if t in wanted_types]
    step, steps = _steps(window, ctx.now())
    qkey = keys.type_queue_minute if step == 60 else keys.type_queue_hour
    lkey = keys.type_minute if step == 60 else keys.type_hour
    sources: list[tuple[str, str | None]] = [(t, q) for q, t in pairs] + [(t, None) for t in legacy]
    wanted = [qkey(q, t, s) if q is not None else lkey(t, s) for t, q in sources for s in steps]
    raw: list[dict[str, int]] = []
    for i in range(0, len(wanted), READ_CHUNK):
        raw += [_fields(h) for h in ctx.read(_hgetall(wanted[i:i + READ_CHUNK]))]
    per_type: dict[str, list[list[dict[str, int]]]] = {t: [] for t in names}  # each source's hashes per step
    seen_in: dict[str, list[str]] = {t: [] for t in names}
    unqueued: set[str] = set()
    for j, (t, q) in enumerate(sources):
        per_type[t].append(raw[j * len(steps):(j + 1) * len(steps)])
        if q is None:
            unqueued.add(t)
        else:
            seen_in[t].append(q)
    out = [_summary(t, window, step, steps, _merge(per_type[t], len(steps)), seen_in[t], t in unqueued)
           for t in names]
    return sorted(out, key=lambda s: (-s.run_total, s.task_type))


def _merge(sources: Sequence[Sequence[dict[str, int]]], n: int) -> Sequence[dict[str, int]]:
    """Several queues' hashes of one type summed step by step (one queue's as they are)."""
    if len(sources) == 1:
        return sources[0]
    out: list[dict[str, int]] = [{} for _ in range(n)]
    for hashes in sources:
        for acc, h in zip(out, hashes, strict=True):
            for k, v in h.items():
                acc[k] = acc.get(k, 0) + v
    return out


def one_type(ctx: Ctx, task_type: str, window: str, *, queues: QueueFilter | None = None) -> TypeStats:
    """One type's TypeStats over the queues the filter admits (zeros when nothing was recorded). Raises
    InvalidArgumentError for a blank name."""
    if not isinstance(task_type, str) or not task_type:
        raise InvalidArgumentError("task type must be a non-empty str", argument="task_type")
    return type_stats(ctx, window, [task_type], queues=queues)[0]


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
