"""Flow control: fleet-wide concurrency and rate limits per task-type pattern, optionally per partition key.

A Limit is stored in Redis (keys.LIMITS for the fleet, a copy per queue that the queue's dequeue and hand-off
scripts read: see rdb/lua/_limits.lua, where they are enforced). Writing them is configuration, not a task
state change: plain HSET/HDEL, one queue at a time (each queue's copy lives in that queue's Cluster slot).
Only asynqpy workers obey limits; Go asynq workers do not read them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from asynqpy.errors import InvalidArgumentError

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|m|min|h|hour)\s*$")
_PER = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}
_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-*]{1,200}$")
_KEY = re.compile(r"^(header|payload)\.[^\s\t\n]{1,100}$")
_LUA_MAGIC = set("^$()%.[]+-?")


def parse_rate(text: str) -> float:
    """'100/s', '600/m', '5000/h' -> tasks per second."""
    m = _RATE.match(text)
    if not m:
        raise InvalidArgumentError(f"rate {text!r}: expected a number per s, m or h, such as 100/s or 600/m")
    if float(m.group(1)) <= 0:
        raise InvalidArgumentError(f"rate {text!r}: must be above 0 (for no rate limit, leave --rate out)")
    if not math.isfinite(float(m.group(1))):
        raise InvalidArgumentError(f"rate {text!r}: too large a number")
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
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise InvalidArgumentError(f"limit {self.pattern}: concurrency must be a whole number, got "
                                       f"{self.concurrency!r}")
        for name, x in (("rate", self.rate), ("burst", self.burst)):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise InvalidArgumentError(f"limit {self.pattern}: {name} must be a finite number, got {x!r}")
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
