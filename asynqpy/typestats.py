"""Per-task-type minute aggregates: the outcome hook that counts runs in memory and the loop that writes them to
Redis in batches (one script call per flush), for the dashboard's types page and `asynqpy stats --types`.

Each (queue, task type, minute) keeps: n (runs that ended), f (of them failed: retry, archived, canceled), rt (run time,
total ms), wn (runs whose wait is known), wt (wait, total ms), r<i> / w<i> (runs whose run time / wait fell in
bucket i of BUCKETS). Only non-zero fields are written, into a minute hash and its hour's hash, both kept TTL.
The queue is kept so the dashboard can show a user only the figures of queues they may see (per-queue roles).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from asynqpy.loop import Loop
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb.state import record_type_stats

if TYPE_CHECKING:
    from asynqpy.runtime import Runtime

log = logging.getLogger("asynqpy")

# Upper bounds (s) of the fixed buckets, from a few milliseconds to an hour; the last bucket is "longer".
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                              300.0, 600.0, 1800.0, 3600.0)
FLUSH_INTERVAL = 5.0
MAX_TYPES = 500  # distinct (queue, type) pairs one process keeps between flushes; later ones count as OTHER
MAX_PENDING = 20_000  # (queue, type, minute) groups held while Redis is unreachable; the oldest are dropped beyond it
OTHER = "(other types)"
FAILED = frozenset({"retry", "archived", "canceled"})
GROUPS_PER_CALL = 200  # a flush of more groups is several calls of at most this many (each well under 10 ms)


def bucket(seconds: float) -> int:
    """The index of the bucket seconds falls in (len(BUCKETS) for longer than the last bound)."""
    return bisect.bisect_left(BUCKETS, seconds)


# The counters of one (task type, minute), by index: n, f, rt, wn, wt, then r<i>, then w<i> (see the module's
# docstring); observe() adds to a list of these, take() turns each list into its non-zero fields.
FIELDS: tuple[str, ...] = ("n", "f", "rt", "wn", "wt", *(f"r{i}" for i in range(len(BUCKETS) + 1)),
                           *(f"w{i}" for i in range(len(BUCKETS) + 1)))
_INDEX = {name: i for i, name in enumerate(FIELDS)}
_R0 = _INDEX["r0"]
_W0 = _INDEX["w0"]


class TypeStats:
    """Counts outcomes per (queue, task type, minute) in memory; thread-safe. `observe` is the outcome hook."""

    def __init__(self, *, max_types: int = MAX_TYPES, max_pending: int = MAX_PENDING) -> None:
        self.max_types = max_types
        self.max_pending = max_pending
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str, int], list[int]] = {}
        self._types: set[tuple[str, str]] = set()
        # the group observe() added to last: (queue, type, minute, its counters, the dict of groups it is in)
        self._last: tuple[str, str, int, list[int], dict[tuple[str, str, int], list[int]]] = ("", "", -1, [], {})
        self.dropped = 0  # groups given up while Redis stayed unreachable (logged)

    def observe(self, o: TaskOutcome) -> None:
        """The outcome hook: a few list additions under a lock, no Redis call (it runs once per task)."""
        duration, wait = o.duration, o.wait
        minute = int((o.started_at + duration) // 60)
        with self._lock:
            last = self._last
            if last[0] == o.queue and last[1] == o.task_type and last[2] == minute and last[4] is self._groups:
                c = last[3]  # the group of the task before (a drain's tasks share one most of the time)
            else:
                pair = (o.queue, o.task_type)
                if pair not in self._types:
                    if len(self._types) >= self.max_types:
                        pair = (o.queue, OTHER)  # still under its queue: a per-queue role filters it too
                    else:
                        self._types.add(pair)
                key = (pair[0], pair[1], minute)
                found = self._groups.get(key)
                if found is None:
                    c = self._groups[key] = [0] * len(FIELDS)
                else:
                    c = found
                self._last = (o.queue, o.task_type, minute, c, self._groups)
            c[0] += 1
            if o.outcome in FAILED:
                c[1] += 1
            c[2] += round(duration * 1000)
            c[_R0 + bisect.bisect_left(BUCKETS, duration)] += 1
            if wait is not None:
                c[3] += 1
                c[4] += round(wait * 1000)
                c[_W0 + bisect.bisect_left(BUCKETS, wait)] += 1

    def _add(self, queue: str, ttype: str, minute: int, fields: Mapping[str, int]) -> None:
        key = (queue, ttype, minute)
        c = self._groups.get(key)
        if c is None:
            c = self._groups[key] = [0] * len(FIELDS)
        for k, v in fields.items():
            c[_INDEX[k]] += v

    def take(self) -> dict[tuple[str, str, int], dict[str, int]]:
        """Everything counted since the last take, each group's non-zero fields (the caller writes it, or gives
        it back)."""
        with self._lock:
            groups, self._groups = self._groups, {}
            self._types.clear()
        return {k: {FIELDS[i]: v for i, v in enumerate(c) if v} for k, c in groups.items()}

    def give_back(self, groups: Mapping[tuple[str, str, int], Mapping[str, int]]) -> None:
        """Merge groups a failed flush could not write, dropping the oldest beyond max_pending."""
        with self._lock:
            for (queue, ttype, minute), fields in groups.items():
                self._add(queue, ttype, minute, fields)
            over = len(self._groups) - self.max_pending
            if over > 0:
                for k in sorted(self._groups, key=lambda g: g[2])[:over]:
                    del self._groups[k]
                self._last = ("", "", -1, [], {})  # its group may be one of those dropped
                self.dropped += over
                log.warning("type stats: Redis unreachable, dropped %d minute aggregates (%d in all)", over,
                            self.dropped)


class TypeStatsFlusher(Loop):
    """Writes a TypeStats to Redis every few seconds; a last flush at shutdown. Failed writes are kept (bounded)."""

    name = "typestats"
    interval = FLUSH_INTERVAL
    reports_success = True  # a pass with nothing to write makes no call

    def __init__(self, rt: Runtime, stats: TypeStats) -> None:
        super().__init__()
        self.rt = rt
        self.stats = stats

    async def run_once(self) -> float | None:
        groups = self.stats.take()
        items = [(q, t, m, f) for (q, t, m), f in groups.items()]
        written: set[tuple[str, str, int]] = set()
        try:
            for i in range(0, len(items), GROUPS_PER_CALL):
                chunk = items[i:i + GROUPS_PER_CALL]
                await self.rt.runner.run(record_type_stats(chunk))
                self.trouble.ok()
                written.update((q, t, m) for q, t, m, _ in chunk)
        except Exception:
            self.stats.give_back({k: v for k, v in groups.items() if k not in written})
            raise
        return None

    async def probe(self) -> None:
        await self.rt.aredis.ping()
        self.trouble.ok()

    async def on_stop(self) -> None:
        try:
            await self.run_once()
        except Exception as exc:  # Redis gone at shutdown: these minutes are lost, say so once
            log.warning("type stats: last flush not written: %s", exc)
