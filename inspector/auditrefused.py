"""Refused and failed requests, counted apart from the audit chain: one aggregate per action, outcome, user,
address, queue and reason in each window (default 5 minutes), so a flood of them costs a counter, never an
action record (inspector.audit keeps those).

An aggregate names the verb (e.g. "tasks.delete", "login.failed"), the queue and the first task ids refused
(up to MAX_IDS), with its count and the times of its first and last request. A window holds at most
max_aggregates of them (whatever is new beyond that counts in one "overflow" aggregate), and windows are kept
for `retention` seconds. These counts are not chained: whoever can write Redis can change them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import SyncDoor
from inspector.scripts import script

INDEX = keys.AUDIT_REFUSED
MAX_IDS = 20
_FIELDS = ("action", "outcome", "user", "addr", "queue", "detail")


@dataclass(frozen=True)
class RefusedCount:
    """How many requests of one kind were refused in one window: action (the verb), outcome ("denied",
    "failed", "throttled", ...), who and from where, the queue, the first task ids, the reason (detail), and the
    first and last time (Unix seconds)."""

    action: str
    outcome: str
    user: str
    addr: str
    queue: str
    detail: str
    count: int
    first: float
    last: float
    window: float
    task_ids: tuple[str, ...] = ()

    @property
    def when(self) -> datetime:
        """The last request's time."""
        return datetime.fromtimestamp(self.last, tz=UTC)

    @property
    def started(self) -> datetime:
        """The first request's time."""
        return datetime.fromtimestamp(self.first, tz=UTC)

    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in (*_FIELDS, "count", "first", "last", "window")}
        d["task_ids"] = list(self.task_ids)
        return json.dumps(d, sort_keys=True, ensure_ascii=False)


class RefusedLog:
    """Counts refused requests (count()) and lists the counts (list()) on a binary redis.Redis connection, or
    the door (asynqpy.rdb.syncdoor) of one.

    window: seconds per aggregate; retention: seconds a window is kept; max_aggregates: per window. Every method
    raises RedisUnavailableError for Redis trouble that passes, RedisCommandError for a refused command.
    """

    def __init__(self, connection: redis.Redis | SyncDoor, *, window: int = 300, retention: int = 30 * 86400,
                 max_aggregates: int = 1000, clock: Callable[[], float] = time.time) -> None:
        for name, v in (("window", window), ("retention", retention), ("max_aggregates", max_aggregates)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidArgumentError(f"{name} must be a positive int, got {v!r}", argument=name)
        self.door = SyncDoor.of(connection)
        self.window, self.retention, self.max_aggregates, self.clock = window, retention, max_aggregates, clock

    def count(self, action: str, *, outcome: str, user: str = "", addr: str = "", queue: str | None = None,
              task_ids: list[str] | tuple[str, ...] | None = None, detail: str = "") -> int:
        """Count one refused request; returns its aggregate's count in this window (1: the first).

        Raises InvalidArgumentError for a blank action or outcome, RedisUnavailableError.
        """
        if not action or not outcome:
            raise InvalidArgumentError("action and outcome must be non-empty", argument="action")
        now = self.clock()
        start = int(now // self.window * self.window)
        desc = {"action": action[:100], "outcome": outcome[:32], "user": user[:200], "addr": addr[:64],
                "queue": (queue or "")[:200], "detail": detail[:300]}
        text = json.dumps(desc, sort_keys=True, ensure_ascii=False)
        agg = hashlib.sha256(text.encode()).hexdigest()[:24]
        overflow = json.dumps({**dict.fromkeys(_FIELDS, ""), "action": "(others)", "outcome": "mixed",
                               "detail": f"more than {self.max_aggregates} kinds of refused request in this window"})
        ids = json.dumps([str(t)[:200] for t in (task_ids or ())][:MAX_IDS])
        n = self.door.run(Call(script("audit_refused"), (keys.audit_refused_window(start), INDEX),
                               (agg, text, repr(now), self.max_aggregates, self.retention, start, overflow, ids,
                                MAX_IDS), int))
        return int(n)

    def list(self, *, since: float | None = None, until: float | None = None, limit: int = 100) -> list[RefusedCount]:
        """The aggregates of the windows from since to until (Unix seconds), newest last request first.

        Raises InvalidArgumentError for a bad limit, RedisUnavailableError.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidArgumentError(f"limit must be between 1 and 10000, got {limit!r}", argument="limit")
        low = "-inf" if since is None else int(since // self.window * self.window)
        high = "+inf" if until is None else f"({until}"
        out: list[RefusedCount] = []
        windows = self.door.command("ZREVRANGEBYSCORE", INDEX, high, low)[:limit]  # a window holds at least one
        for key, fields in zip(windows, self.door.read(lambda b: [b.command("HGETALL", k) for k in windows]),
                               strict=True):
            out.extend(_aggregates(fields, float(key.rsplit(b":", 1)[1])))
        out.sort(key=lambda c: (c.last, c.first, c.action, c.user, c.addr), reverse=True)
        return out[:limit]


def _aggregates(fields: dict[bytes, bytes], window: float) -> list[RefusedCount]:
    out = []
    for name, raw in fields.items():
        if b":" in name:
            continue
        try:
            d = json.loads(raw)
            agg = name.decode()
            out.append(RefusedCount(
                **{k: str(d.get(k, "")) for k in _FIELDS}, count=int(fields.get(f"{agg}:n".encode(), b"0")),
                first=float(fields.get(f"{agg}:first".encode(), b"0")),
                last=float(fields.get(f"{agg}:last".encode(), b"0")), window=window,
                task_ids=tuple(str(x) for x in json.loads(fields.get(f"{agg}:ids".encode(), b"[]")))))
        except (ValueError, TypeError):
            continue  # not one of ours: these counts are not evidence, a damaged one is skipped
    return out
