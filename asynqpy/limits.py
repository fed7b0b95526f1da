"""Flow control: fleet-wide concurrency and rate limits per task-type pattern, optionally per partition key.

A Limit is stored in Redis (keys.LIMITS for the fleet, a copy per queue that the queue's dequeue and hand-off
scripts read: see rdb/lua/_limits.lua, where they are enforced). Writing them is configuration, not a task
state change: plain HSET/HDEL, one queue at a time (each queue's copy lives in that queue's Cluster slot).
Only asynqpy workers obey limits; Go asynq workers do not read them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, SyncRunner, script

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|m|min|h|hour)\s*$")
_PER = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-*]{1,200}$")
_KEY = re.compile(r"^(header|payload)\.[^\s\t\n]{1,100}$")
_LUA_MAGIC = set("^$()%.[]+-?")


def parse_rate(text: str) -> float:
    """'100/s', '600/m', '5000/h' -> tasks per second."""
    m = _RATE.match(text)
    if not m or float(m.group(1)) <= 0:
        raise InvalidArgumentError(f"rate {text!r}: expected a number per s, m or h, such as 100/s or 600/m")
    return float(m.group(1)) / _PER[m.group(2)]


def lua_pattern(pattern: str) -> str:
    """A task-type pattern ('*' matches anything, all else literally) as an anchored Lua pattern."""
    body = "".join(".*" if c == "*" else ("%" + c if c in _LUA_MAGIC else c) for c in pattern)
    return f"^{body}$"


@dataclass(frozen=True)
class Limit:
    """At most `concurrency` tasks whose type matches `pattern` running at once, and/or at most `rate` starts
    per second (a token bucket of `burst`, default max(1, rate)), per value of `key` when given
    ('header.tenant': a task header; 'payload.account': a top-level field of a JSON payload; tasks without it
    share one partition). Counted per queue, across every asynqpy worker of the fleet."""

    pattern: str
    concurrency: int = 0
    rate: float = 0.0
    burst: float = 0.0
    key: str = ""

    def __post_init__(self) -> None:
        if not _PATTERN.match(self.pattern):
            raise InvalidArgumentError(f"limit pattern {self.pattern!r}: use letters, digits, _ . : - and *")
        if self.concurrency < 0 or self.rate < 0 or self.burst < 0:
            raise InvalidArgumentError("limit: concurrency, rate and burst cannot be negative")
        if not self.concurrency and not self.rate:
            raise InvalidArgumentError(f"limit {self.pattern}: give a concurrency, a rate, or both")
        if self.key and not _KEY.match(self.key):
            raise InvalidArgumentError(f"limit key {self.key!r}: expected header.NAME or payload.FIELD")

    @property
    def bucket(self) -> float:
        return self.burst or max(1.0, self.rate)

    def encode(self) -> str:
        return "\t".join([lua_pattern(self.pattern), str(self.concurrency), repr(self.rate), repr(self.bucket),
                          self.key])

    @classmethod
    def decode(cls, pattern: str, raw: str) -> Limit:
        f = raw.split("\t")
        return cls(pattern, int(f[1]), float(f[2]), float(f[3]), f[4] if len(f) > 4 else "")

    def describe(self) -> str:
        parts = []
        if self.concurrency:
            parts.append(f"concurrency {self.concurrency}")
        if self.rate:
            parts.append(f"rate {self.rate:g}/s burst {self.bucket:g}")
        if self.key:
            parts.append(f"per {self.key}")
        return ", ".join(parts)


def _queues(r: redis.Redis) -> list[str]:
    return sorted(q.decode() if isinstance(q, bytes) else str(q) for q in r.smembers(keys.QUEUES))


def set_limit(r: redis.Redis, limit: Limit, *, queues: Iterable[str] = ()) -> None:
    """Store the limit for the fleet and in every known queue (and the given ones); workers obey it at once."""
    r.hset(keys.LIMITS, limit.pattern, limit.encode())
    for q in sorted(set(_queues(r)) | set(queues)):
        r.hset(keys.queue_limits(q), limit.pattern, limit.encode())


def limits(r: redis.Redis) -> list[Limit]:
    raw: dict[Any, Any] = r.hgetall(keys.LIMITS)
    out = [Limit.decode(_text(k), _text(v)) for k, v in raw.items()]
    return sorted(out, key=lambda lim: lim.pattern)


def remove_limit(r: redis.Redis, pattern: str) -> bool:
    """Drop the limit everywhere; its waiting tasks go back to pending. False when there was none."""
    existed = bool(r.hdel(keys.LIMITS, pattern))
    for q in _queues(r):
        existed = bool(r.hdel(keys.queue_limits(q), pattern)) or existed
        SyncRunner(r).run(release(q, pattern))
    return existed


def release(q: str, pattern: str) -> Call[int]:
    return Call(script("release_limit"), [keys.limit_waiting(q), keys.pending(q)],
                [f"asynqpy:{{{q}}}:", pattern, keys.task_prefix(q)], int)


def apply_defaults(r: redis.Redis, defaults: Sequence[Limit], queues: Iterable[str]) -> None:
    """At server start: code defaults go in unless a limit of that pattern is stored already (so that a
    change made with `asynqpy limit set` survives restarts); then the fleet's limits are copied to the
    server's queues (a queue created after `limit set` gets them here)."""
    for lim in defaults:
        r.hsetnx(keys.LIMITS, lim.pattern, lim.encode())
    raw: dict[Any, Any] = r.hgetall(keys.LIMITS)
    for q in queues:
        pipe = r.pipeline(transaction=False)
        pipe.delete(keys.queue_limits(q))
        if raw:
            pipe.hset(keys.queue_limits(q), mapping=raw)
        pipe.execute()


@dataclass(frozen=True)
class Usage:
    """What a limit holds in one queue now: running (concurrency slots held, over all partitions), tokens
    (of the unpartitioned bucket, None when partitioned or no rate), waiting tasks, the partitions in use, and
    waits_total: how many times a task was held back by it so far."""

    queue: str
    limit: Limit
    running: int
    tokens: float | None
    waiting: int
    partitions: int
    waits_total: int = 0
    oldest_wait: float = 0.0  # seconds the longest-waiting of them has been pending


def usage(r: redis.Redis, queue: str, limit: Limit, *, now: float | None = None) -> Usage:
    now = time.time() if now is None else now
    running, parts = 0, 0
    for k in r.scan_iter(match=_glob(keys.limit_slots(queue, limit.pattern, "")) + "*", count=500):
        n = int(r.zcount(k, now, "+inf"))
        running += n
        parts += 1 if n else 0
    tokens: float | None = None
    if limit.rate and not limit.key:
        t, ms = r.hmget(keys.limit_bucket(queue, limit.pattern, ""), ["tokens", "ms"])
        refill = 0.0 if t is None else max(0.0, now * 1000 - float(ms or 0)) * limit.rate / 1000
        tokens = limit.bucket if t is None else min(limit.bucket, float(t) + refill)
    waiting, oldest = 0, 0.0
    head = limit.pattern + "\n"
    for m in r.zrange(keys.limit_waiting(queue), 0, -1):
        member = _text(m)
        if member.startswith(head):
            wl = keys.limit_wait_list(queue, member)
            waiting += int(r.llen(wl))
            oldest_id = r.lindex(wl, -1)
            since = r.hget(keys.task(queue, _text(oldest_id)), "pending_since") if oldest_id else None
            if since:
                oldest = max(oldest, now - int(since) / 1e9)
    total = int(r.hget(keys.limit_waits(queue), limit.pattern) or 0)
    return Usage(queue, limit, running, tokens, waiting, parts, total, max(0.0, oldest))


def usages(r: redis.Redis) -> list[Usage]:
    """Each limit in each queue that has it, with its use now."""
    out = []
    for lim in limits(r):
        for q in _queues(r):
            if r.hexists(keys.queue_limits(q), lim.pattern):
                out.append(usage(r, q, lim))
    return out


def _glob(s: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", s)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
