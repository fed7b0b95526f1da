"""Producer backpressure: a queue's size limit and oldest-task age limit, stored in Redis (asynqpy:{q}:qlimit),
enforced atomically by our enqueue scripts (rdb/lua/_room.lua), which refuse past it with QueueFullError.

Storing the limit is configuration (one HSET or DEL, in the queue's own slot), not a task state change.
Go asynq producers do not read it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from asynqpy.errors import InvalidArgumentError, QueueFullError

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
    """max_size: tasks pending (waiting on a flow-control limit too) + scheduled + retry + active + aggregating
    (in a group: asynq counts them in a queue's size; the aggregator's one task made of them is not refused);
    max_latency: seconds the oldest pending task may have waited. None: no such limit."""

    queue: str
    max_size: int | None = None
    max_latency: float | None = None
    refused: int = 0  # enqueues refused so far (all producers of ours)


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


Results = list[Any]  # per task: its TaskInfo or the error it met (enqueue_many's answer)


def _refused(out: Results) -> list[int]:
    return [i for i, o in enumerate(out) if isinstance(o, QueueFullError)]


def blocking_many(send: Callable[[Sequence[T]], Results], tasks: Sequence[T], block: float) -> Results:
    """enqueue_many with block: send(tasks), then the tasks refused with QueueFullError are sent again (in their
    order, backing off from BLOCK_POLL to 1 s) until none is refused or block seconds have passed since the start
    (the whole call's bound); a task still refused then keeps its QueueFullError. Tasks refused for any other
    reason, and the tasks that went in, are not sent again."""
    deadline = time.monotonic() + block
    out = send(tasks)
    delay = BLOCK_POLL
    while (todo := _refused(out)) and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(delay, left))
        delay = min(1.0, delay * 2)
        for i, o in zip(todo, send([tasks[i] for i in todo]), strict=True):
            out[i] = o
    return out


async def ablocking_many(send: Callable[[Sequence[T]], Awaitable[Results]], tasks: Sequence[T],
                         block: float) -> Results:
    """blocking_many() for a coroutine function."""
    import asyncio
    deadline = time.monotonic() + block
    out = await send(tasks)
    delay = BLOCK_POLL
    while (todo := _refused(out)) and (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(delay, left))
        delay = min(1.0, delay * 2)
        for i, o in zip(todo, await send([tasks[i] for i in todo]), strict=True):
            out[i] = o
    return out
