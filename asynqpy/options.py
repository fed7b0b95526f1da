"""Enqueue options: every keyword of Client.enqueue is checked here, in one place."""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from asynqpy.rdb.durability import Durability

DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 25
DEFAULT_TIMEOUT = 1800  # seconds; asynq writes it only when neither timeout nor deadline is given

Duration = int | float | timedelta


@dataclass(frozen=True)
class EnqueueOptions:
    """The checked options of one enqueue. Times are Unix seconds; durations seconds.

    queue: "default". max_retry: 25. timeout: 1800 when neither timeout nor deadline is given, else 0 if
    not given. deadline: 0 (none). process_at: 0 means now. unique_ttl: 0 (not unique). task_id: a new
    UUIDv4. retention: 0. group: "" (no aggregation). durable: None (return once the primary has the task);
    a Durability makes the enqueue wait (Redis WAIT) until that many replicas have it too.
    """

    queue: str
    max_retry: int
    timeout: int
    deadline: int
    process_at: float
    unique_ttl: int
    task_id: str
    retention: int
    group: str
    durable: Durability | None = None


def seconds(value: Duration, name: str, *, allow_zero: bool = True) -> float:
    """A duration in seconds from a number or timedelta. Raises TypeError/ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise TypeError(f"{name} must be seconds (int or float) or a timedelta, not {type(value).__name__}")
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(s) or math.isinf(s):
        raise ValueError(f"{name} must be a finite duration")
    if s < 0 or (s == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {s}")
    return s


def unix_time(value: datetime, name: str) -> float:
    """Unix seconds of an aware datetime. Raises TypeError/ValueError naming the argument."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be an aware datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (give it a tzinfo, e.g. datetime.now(UTC))")
    return value.timestamp()


def check_queue(queue: str) -> str:
    """Raises TypeError/ValueError for a queue name asynq cannot store (blank, or containing braces)."""
    if not isinstance(queue, str):
        raise TypeError(f"queue must be a str, not {type(queue).__name__}")
    if not queue.strip():
        raise ValueError("queue name must not be blank")
    if "{" in queue or "}" in queue:
        raise ValueError(f"queue name {queue!r} must not contain '{{' or '}}' (they form the Redis hash tag)")
    return queue


def build_options(*, queue: str = DEFAULT_QUEUE, max_retry: int = DEFAULT_MAX_RETRY,
                  timeout: Duration | None = None, deadline: datetime | None = None,
                  process_in: Duration | None = None, process_at: datetime | None = None,
                  unique: Duration | None = None, task_id: str | None = None,
                  retention: Duration | None = None, group: str | None = None,
                  durable: bool | Durability = False, now: float | None = None) -> EnqueueOptions:
    """Check every enqueue option and apply asynq's defaults.

    Raises TypeError for a wrong type and ValueError for a wrong value, naming the argument.
    """
    check_queue(queue)
    if isinstance(max_retry, bool) or not isinstance(max_retry, int):
        raise TypeError(f"max_retry must be an int, not {type(max_retry).__name__}")
    if max_retry < 0:
        raise ValueError(f"max_retry must be >= 0, got {max_retry}")
    if max_retry > 2**31 - 1:
        raise ValueError("max_retry must fit in 32 bits")
    if process_in is not None and process_at is not None:
        raise ValueError("give process_in or process_at, not both")
    now = time.time() if now is None else now
    at = 0.0
    if process_in is not None:
        delay = seconds(process_in, "process_in")
        at = now + delay if delay > 0 else 0.0
    elif process_at is not None:
        at = unix_time(process_at, "process_at")
    t = int(seconds(timeout, "timeout", allow_zero=False)) if timeout is not None else 0
    if timeout is not None and t == 0:
        raise ValueError("timeout must be at least 1 second (asynq stores whole seconds)")
    d = int(unix_time(deadline, "deadline")) if deadline is not None else 0
    if timeout is None and deadline is None:
        t = DEFAULT_TIMEOUT
    u = 0
    if unique is not None:
        u = int(seconds(unique, "unique"))
        if u < 1:
            raise ValueError("unique must be at least 1 second")
    if task_id is not None:
        if not isinstance(task_id, str):
            raise TypeError(f"task_id must be a str, not {type(task_id).__name__}")
        if not task_id.strip():
            raise ValueError("task_id must not be blank")
    r = int(seconds(retention, "retention")) if retention is not None else 0
    if group is not None:
        if not isinstance(group, str):
            raise TypeError(f"group must be a str, not {type(group).__name__}")
        if not group.strip():
            raise ValueError("group must not be blank")
    return EnqueueOptions(
        queue=queue, max_retry=max_retry, timeout=t, deadline=d, process_at=at, unique_ttl=u,
        task_id=task_id or str(uuid.uuid4()), retention=r, group=group or "", durable=check_durable(durable),
    )


def check_durable(durable: bool | Durability) -> Durability | None:
    """durable=True means one replica within a second; a Durability says how many and how long."""
    if isinstance(durable, Durability):
        return durable
    if not isinstance(durable, bool):
        raise TypeError(f"durable must be a bool or a Durability, not {type(durable).__name__}")
    return Durability() if durable else None
