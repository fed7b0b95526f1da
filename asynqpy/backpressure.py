"""Producer backpressure: a queue's size limit and oldest-task age limit, stored in Redis (asynqpy:{q}:qlimit),
enforced atomically by our enqueue scripts (rdb/lua/_room.lua), which refuse past it with QueueFullError.

Storing the limit is configuration (one HSET or DEL, in the queue's own slot), not a task state change.
Go asynq producers do not read it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from asynqpy.errors import InvalidArgumentError, QueueFullError
from asynqpy.rdb import keys

T = TypeVar("T")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
BLOCK_POLL = 0.05  # seconds between tries while a blocking enqueue waits for room (it backs off to 1 s)


def parse_duration(text: str) -> float:
    """'10m', '90s', '1.5h', '250ms', '30' (seconds) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise InvalidArgumentError(f"duration {text!r}: expected a number with ms, s, m, h or d, such as 10m")
    return float(m.group(1)) * _UNIT[m.group(2)]


@dataclass(frozen=True)
class QueueLimit:
    """max_size: tasks pending + scheduled + retry + active; max_latency: seconds the oldest pending task may
    have waited. None: no such limit."""

    queue: str
    max_size: int | None = None
    max_latency: float | None = None
    refused: int = 0  # enqueues refused so far (all producers of ours)


def set_queue_limit(r: redis.Redis, queue: str, *, max_size: int | None = None,
                    max_latency: float | None = None) -> None:
    if max_size is None and max_latency is None:
        raise InvalidArgumentError("give max_size and/or max_latency (or clear the limit)")
    if (max_size is not None and max_size < 1) or (max_latency is not None and max_latency <= 0):
        raise InvalidArgumentError("max_size must be at least 1 and max_latency above 0")
    fields: dict[str, str] = {}
    if max_size is not None:
        fields["max_size"] = str(max_size)
    if max_latency is not None:
        fields["max_latency"] = repr(max_latency)
    pipe = r.pipeline(transaction=True)  # one key: a MULTI is fine in a cluster too
    pipe.delete(keys.queue_limit(queue))
    pipe.hset(keys.queue_limit(queue), mapping=fields)  # type: ignore[arg-type]
    pipe.execute()


def clear_queue_limit(r: redis.Redis, queue: str) -> bool:
    return bool(r.delete(keys.queue_limit(queue)))


def queue_limit(r: redis.Redis, queue: str) -> QueueLimit:
    size, latency = r.hmget(keys.queue_limit(queue), ["max_size", "max_latency"])
    refused = r.get(keys.queue_refused(queue))
    return QueueLimit(queue, int(size) if size is not None else None,
                      float(latency) if latency is not None else None, int(refused or 0))


def blocking(attempt: Callable[[], T], block: float) -> T:
    """attempt() until it does not raise QueueFullError, for at most block seconds (then the last one raises)."""
    deadline = time.monotonic() + block
    delay = BLOCK_POLL
    while True:
        try:
            return attempt()
        except QueueFullError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(1.0, delay * 2)


async def ablocking(attempt: Callable[[], Any], block: float) -> Any:
    """blocking() for a coroutine function."""
    import asyncio
    deadline = time.monotonic() + block
    delay = BLOCK_POLL
    while True:
        try:
            return await attempt()
        except QueueFullError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            await asyncio.sleep(min(delay, left))
            delay = min(1.0, delay * 2)
