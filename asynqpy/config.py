"""ServerConfig: every setting of a worker Server, checked in one place, with asynq's defaults."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asynqpy.options import check_durable, check_queue
from asynqpy.rdb.durability import Durability


def default_retry_delay(n: int, exc: BaseException, task: Any) -> float:
    """asynq's formula: n^4 + 15 + rand[0,30) * (n+1) seconds, n = retries done before this failure."""
    return n**4 + 15 + random.randrange(30) * (n + 1)


def default_is_failure(exc: BaseException) -> bool:
    return True


RetryDelay = Callable[[int, BaseException, Any], float]


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one worker server (one process).

    concurrency: 10 tasks at once. queues: {"default": 1}, priorities > 0 (weighted random order, or
    strict descending with strict_priority). retry_delay(n, exc, task) -> seconds: asynq's formula.
    is_failure(exc) -> bool: True (False = retry without counting an attempt). error_handler(task, exc):
    None. shutdown_timeout: 8 s, then unfinished tasks are requeued. lease_duration: 30 s (asynq's);
    heartbeat_interval: 5 s; recover_interval: 60 s, recovering leases expired for more than
    lease_grace (30 s). forward_max_wait: 1 s (the forwarder otherwise sleeps until the next due time).
    idle_poll_interval: 0.1 s between fetches when idle (producers of ours also wake workers at once).
    janitor_interval: 8 s. syncer_interval: 1 s. group_aggregator(group, tasks) -> Task: None;
    group_grace_period 60 s, group_max_delay 0 (off), group_max_size 0 (unlimited). durable_acks: off;
    True (or a Durability) makes every batch of acknowledgements wait for a replica (Redis WAIT), and replays
    a batch the replicas did not confirm, so a failover cannot bring finished tasks back to run again.
    """

    concurrency: int = 10
    queues: Mapping[str, int] = field(default_factory=lambda: {"default": 1})
    strict_priority: bool = False
    retry_delay: RetryDelay = default_retry_delay
    is_failure: Callable[[BaseException], bool] = default_is_failure
    error_handler: Callable[[Any, BaseException], Any] | None = None
    shutdown_timeout: float = 8.0
    lease_duration: float = 30.0
    lease_grace: float = 30.0
    heartbeat_interval: float = 5.0
    recover_interval: float = 60.0
    forward_max_wait: float = 1.0
    idle_poll_interval: float = 0.1
    janitor_interval: float = 8.0
    syncer_interval: float = 1.0
    group_aggregator: Callable[[str, list[Any]], Any] | None = None
    group_grace_period: float = 60.0
    group_max_delay: float = 0.0
    group_max_size: int = 0
    durable_acks: bool | Durability | None = None

    def __post_init__(self) -> None:
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be a positive int, got {self.concurrency!r}")
        if not isinstance(self.queues, Mapping) or not self.queues:
            raise ValueError("queues must be a non-empty mapping of queue name to priority")
        kept = {}
        for q, p in self.queues.items():
            check_queue(q)
            if isinstance(p, bool) or not isinstance(p, int):
                raise TypeError(f"priority of queue {q!r} must be an int, not {type(p).__name__}")
            if p > 0:  # asynq ignores queues with priority <= 0
                kept[q] = p
        if not kept:
            raise ValueError("every queue has priority <= 0; give at least one a positive priority")
        object.__setattr__(self, "queues", kept)
        for name in ("shutdown_timeout", "lease_duration", "lease_grace", "heartbeat_interval", "recover_interval",
                     "forward_max_wait", "idle_poll_interval", "janitor_interval", "syncer_interval",
                     "group_grace_period", "group_max_delay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v < 0:
                raise ValueError(f"{name} must be a non-negative number of seconds, got {v!r}")
        if self.heartbeat_interval >= self.lease_duration:
            raise ValueError("heartbeat_interval must be shorter than lease_duration, or leases lapse")
        for name in ("retry_delay", "is_failure"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name} must be callable")
        object.__setattr__(self, "durable_acks", check_durable(self.durable_acks or False))
        if self.group_aggregator is not None and self.group_grace_period < 1:
            raise ValueError("group_grace_period must be at least 1 second")

    def queue_order(self) -> list[str]:
        """The order to try queues for one fetch: strict by priority, or asynq's weighted random order."""
        if self.strict_priority:
            return sorted(self.queues, key=lambda q: -self.queues[q])
        names = list(self.queues)
        weights = [self.queues[q] for q in names]
        order: list[str] = []
        while names:
            i = random.choices(range(len(names)), weights)[0]
            order.append(names.pop(i))
            weights.pop(i)
        return order
