"""ServerConfig: every setting of a worker Server, checked in one place, with asynq's defaults."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.limits import Limit
from asynqpy.options import check_durable, check_int, check_queue
from asynqpy.outcome import OutcomeHook
from asynqpy.rdb.durability import Durability
from asynqpy.task import ReceivedTask, Task


def default_retry_delay(n: int, exc: BaseException, task: ReceivedTask | None) -> float:
    """asynq's formula: n^4 + 15 + rand[0,30) * (n+1) seconds, n = retries done before this failure."""
    return n**4 + 15 + random.randrange(30) * (n + 1)


def default_is_failure(exc: BaseException) -> bool:
    return True


# retry_delay(retries done, the error, the task as its handler saw it) -> seconds until the next attempt. The
# recoverer calls it too, with LeaseExpiredError, for a task whose worker died.
RetryDelay = Callable[[int, BaseException, ReceivedTask], float]


_SECONDS = ("shutdown_timeout", "lease_duration", "lease_grace", "heartbeat_interval", "recover_interval",
            "forward_max_wait", "idle_poll_interval", "janitor_interval", "syncer_interval", "group_grace_period",
            "group_max_delay")
# the period of a background loop: each one asks Redis something every time round
_LOOP_INTERVALS = ("heartbeat_interval", "recover_interval", "forward_max_wait", "idle_poll_interval",
                   "janitor_interval", "syncer_interval")
MIN_LOOP_INTERVAL = 0.01


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one worker server (one process).

    concurrency: 10 tasks at once. queues: {"default": 1}, priorities > 0 (weighted random order, or
    strict descending with strict_priority). retry_delay(n, exc, task) -> seconds: asynq's formula.
    is_failure(exc) -> bool: True (False = retry without counting an attempt). Both are also asked about a task
    whose worker died (exc is asynqpy.errors.LeaseExpiredError); if either raises, the task is retried with
    asynq's delay all the same. error_handler(task, exc):
    None. shutdown_timeout: 8 s, then unfinished tasks are requeued; once their requeue is written the process
    exits without waiting for plain-function handlers still running in their threads (as a Go process exits
    without its goroutines), so a requeued task is never also finished by the stopping process: their result
    writes are refused from then on, and side effects they make after that moment are lost with the process.
    (In a process that goes on running after Server.shutdown(), such a thread runs on to its end; its result
    and acknowledgement are still dropped.) max_stuck_threads: 10; a plain-function handler that ignores
    task.cancelled keeps running in its thread after its task timed out or was cancelled: new tasks get other
    threads, each stuck thread is logged with its task id and counted (the asynqpy_worker_stuck_threads metric,
    health(), the servers page), and once this many are stuck the worker takes no new tasks and reports not
    ready (/readyz), so that an orchestrator replaces it; it takes tasks again if they return.
    lease_duration: 30 s (asynq's); heartbeat_interval: 5 s; recover_interval: 60 s, recovering leases expired
    for more than lease_grace (30 s). forward_max_wait: 5 s, as Go's DelayedTaskCheckInterval (the forwarder otherwise
    sleeps until the next due time it knows of; our producers and retries wake it at once, so this only bounds
    scheduled and retry tasks written by Go). idle_poll_interval: 1 s between fetches when idle, as Go's
    TaskCheckInterval: our producers hand tasks to idle workers (or wake them) in one hop, so this poll only
    picks up tasks that Go producers enqueue; lower it for faster pickup of those, at ~3 commands per queue
    per poll.
    janitor_interval: 8 s. syncer_interval: 1 s. Durations are seconds or a timedelta; the loops' intervals are at
    least 0.01 s, lease_duration at least 1 s. group_aggregator(group, tasks) -> Task: None;
    group_grace_period 60 s, group_max_delay 0 (off), group_max_size 0 (unlimited). durable_acks: off;
    True (or a Durability) makes every batch of acknowledgements wait for a replica (Redis WAIT), and replays
    a batch the replicas did not confirm, so a failover cannot bring finished tasks back to run again.
    limits: () asynqpy.Limit values, flow-control defaults stored in Redis at start unless a limit of that
    pattern is stored already (see asynqpy.limits; `asynqpy limit ls`).
    outcome_hooks: () callables taking an asynqpy.outcome.TaskOutcome, called where the processor decides
    each task's outcome (metrics, tracing); one that raises is logged, never breaks processing.
    type_stats: True: per-task-type minute aggregates (runs, failures, run time and wait histograms) are counted
    by a hook of their own and written to Redis in one script call every 5 s, kept 72 h, for the dashboard's
    types page and `asynqpy stats --types`.

    The one definition of a server's settings: Server(url, config, **settings), the supervisor and
    `asynqpy worker` build one of these. A bad value raises InvalidArgumentError (a ValueError) naming the
    field. Adding a setting is a field here (with its check) plus its use.
    """

    concurrency: int = 10
    queues: Mapping[str, int] = field(default_factory=lambda: {"default": 1})
    strict_priority: bool = False
    retry_delay: RetryDelay = default_retry_delay
    is_failure: Callable[[BaseException], bool] = default_is_failure
    error_handler: Callable[[ReceivedTask, BaseException], Any] | None = None
    shutdown_timeout: float = 8.0
    max_stuck_threads: int = 10
    lease_duration: float = 30.0
    lease_grace: float = 30.0
    heartbeat_interval: float = 5.0
    recover_interval: float = 60.0
    forward_max_wait: float = 5.0
    idle_poll_interval: float = 1.0
    janitor_interval: float = 8.0
    syncer_interval: float = 1.0
    group_aggregator: Callable[[str, list[Task]], Any] | None = None
    group_grace_period: float = 60.0
    group_max_delay: float = 0.0
    group_max_size: int = 0
    outcome_hooks: tuple[OutcomeHook, ...] = ()
    durable_acks: bool | Durability | None = None
    limits: tuple[Limit, ...] = ()
    type_stats: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", tuple(self.limits))
        if not all(isinstance(lim, Limit) for lim in self.limits):
            raise InvalidArgumentError("limits must be asynqpy.Limit values", argument="limits")
        check_int(self.concurrency, "concurrency", minimum=1, maximum=100_000)
        if not isinstance(self.queues, Mapping) or not self.queues:
            raise InvalidArgumentError("queues must be a non-empty mapping of queue name to priority",
                                       argument="queues")
        kept = {}
        for q, p in self.queues.items():
            check_queue(q, "queues")
            if isinstance(p, bool) or not isinstance(p, int):
                raise InvalidArgumentError(f"priority of queue {q!r} must be an int, not {type(p).__name__}",
                                           argument="queues")
            if p > 0:  # asynq ignores queues with priority <= 0
                kept[q] = p
        if not kept:
            raise InvalidArgumentError("every queue has priority <= 0; give at least one a positive priority",
                                       argument="queues")
        object.__setattr__(self, "queues", kept)
        if not isinstance(self.strict_priority, bool):
            raise InvalidArgumentError("strict_priority must be True or False", argument="strict_priority")
        for name in _SECONDS:
            v = getattr(self, name)
            if isinstance(v, timedelta):  # as the task options take them
                v = v.total_seconds()
                object.__setattr__(self, name, v)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) or v < 0:
                raise InvalidArgumentError(f"{name} must be a non-negative number of seconds or a timedelta, "
                                           f"got {v!r}", argument=name)
        for name in _LOOP_INTERVALS:
            if getattr(self, name) < MIN_LOOP_INTERVAL:
                raise InvalidArgumentError(f"{name} must be at least {MIN_LOOP_INTERVAL} s (a loop run more often "
                                           f"floods Redis), got {getattr(self, name)!r}", argument=name)
        if self.lease_duration < 1:
            raise InvalidArgumentError(f"lease_duration must be at least 1 second, got {self.lease_duration!r}",
                                       argument="lease_duration")
        check_int(self.group_max_size, "group_max_size")
        check_int(self.max_stuck_threads, "max_stuck_threads", minimum=1)
        if self.heartbeat_interval >= self.lease_duration:
            raise InvalidArgumentError("heartbeat_interval must be shorter than lease_duration, or leases lapse",
                                       argument="heartbeat_interval")
        for name in ("retry_delay", "is_failure"):
            if not callable(getattr(self, name)):
                raise InvalidArgumentError(f"{name} must be callable", argument=name)
        for name in ("error_handler", "group_aggregator"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise InvalidArgumentError(f"{name} must be callable or None", argument=name)
        hooks = tuple(self.outcome_hooks) if isinstance(self.outcome_hooks, (tuple, list)) else None
        if hooks is None or not all(callable(h) for h in hooks):
            raise InvalidArgumentError("outcome_hooks must be a tuple of callables taking a TaskOutcome",
                                       argument="outcome_hooks")
        object.__setattr__(self, "outcome_hooks", hooks)
        if not isinstance(self.type_stats, bool):
            raise InvalidArgumentError("type_stats must be True or False", argument="type_stats")
        object.__setattr__(self, "durable_acks", check_durable(self.durable_acks, "durable_acks"))
        if self.group_aggregator is not None and self.group_grace_period < 1:
            raise InvalidArgumentError("group_grace_period must be at least 1 second", argument="group_grace_period")

    def replace(self, settings: Mapping[str, Any]) -> ServerConfig:
        """This config with settings replacing its fields (checked again). Raises InvalidArgumentError for an
        unknown name or a bad value."""
        if not settings:
            return self
        names = {f.name for f in dataclasses.fields(self)}
        for k in settings:
            if k not in names:
                raise InvalidArgumentError(f"unknown server setting {k!r}; the settings are: "
                                           f"{', '.join(sorted(names))}", argument=k)
        return dataclasses.replace(self, **settings)

    def queue_order(self) -> list[str]:
        """The order to try queues for one fetch: strict by priority, or asynq's weighted random order."""
        if self.strict_priority:
            return sorted(self.queues, key=lambda q: -self.queues[q])
        # Efraimidis-Spirakis: sorting by random() ** (1 / weight) draws the same order as picking queue after
        # queue by weight without replacement, in O(n log n) rather than a weighted draw per place (O(n^2)).
        rnd = random.random
        return sorted(self.queues, key=lambda q: rnd() ** (1.0 / self.queues[q]), reverse=True)
