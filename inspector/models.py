"""The frozen dataclasses the Inspector returns: queues, tasks, pages, servers, scheduler entries, findings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from asynqpy.task import TaskInfo, TaskState


@dataclass(frozen=True)
class PayloadView:
    """Bytes made readable: kind is empty, json (pretty), text, hex, call (a typed task's payload as the
    call it stands for, when its type is registered in this process) or redacted (hidden whole from the
    viewer's role: inspector.redact); size is the full size in bytes."""

    kind: Literal["empty", "json", "text", "hex", "call", "redacted"]
    text: str
    size: int
    truncated: bool


@dataclass(frozen=True)
class QueueInfo:
    """One queue's counts and health, as asynq's QueueInfo plus the soonest due times.

    size counts every state, completed and aggregating included (as asynq does). latency is the age in
    seconds of the oldest pending task (0 when there is none or its pending_since is unknown).
    memory_usage is approximate (sampled), None when not sampled.
    oldest_archived_at / oldest_archived_age: when the longest-archived task was archived, and seconds since
    (0 when none). oldest_retry_failed_at / oldest_retry_age: the earliest last failure among the 20 retry
    tasks due soonest (the retry set is ordered by due time, not by failure time: a sample), seconds since.
    enqueue_refused: enqueues refused so far by the queue's backpressure limit (asynqpy.backpressure).
    limit_waits: (limit, times a task was held back by it) pairs, as Redis lists them (asynqpy.limits).
    """

    queue: str
    size: int
    pending: int
    active: int
    scheduled: int
    retry: int
    archived: int
    completed: int
    aggregating: int
    groups: int
    processed: int
    failed: int
    processed_total: int
    failed_total: int
    paused: bool
    latency: float
    oldest_pending_since: datetime | None
    next_scheduled_at: datetime | None
    next_retry_at: datetime | None
    memory_usage: int | None
    timestamp: datetime
    oldest_retry_failed_at: datetime | None = None
    oldest_archived_at: datetime | None = None
    oldest_retry_age: float = 0.0
    oldest_archived_age: float = 0.0
    enqueue_refused: int = 0
    limit_waits: tuple[tuple[str, int], ...] = ()

    def count(self, state: TaskState | str) -> int:
        """The number of tasks in a state. Raises ValueError for an unknown state."""
        return int(getattr(self, TaskState(state).value))


@dataclass(frozen=True)
class DailyStats:
    """Tasks processed (succeeded or failed) and failed in one queue on one UTC day."""

    queue: str
    date: date
    processed: int
    failed: int


@dataclass(frozen=True)
class TaskRecord:
    """A stored task: asynq's TaskInfo plus display forms and what the listing saw beside it.

    problem is '' for a healthy task, else why the task could not be read fully (its hash is gone, or its
    message does not decode); info then holds what is known (id, queue, state, last error).
    score is the sorted-set score that places the task (due time, archive time, completion expiry, time
    added to its group); lease_expires_at is set for active tasks; pending_since for pending ones.
    redacted names what inspector.redact masked for the role it was shown to (e.g. "payload.card.number").
    """

    info: TaskInfo
    payload: PayloadView
    result: PayloadView | None
    problem: str = ""
    score: float | None = None
    pending_since: datetime | None = None
    lease_expires_at: datetime | None = None
    redacted: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def state(self) -> TaskState:
        return self.info.state


@dataclass(frozen=True)
class TaskPage:
    """One page of a state's tasks in asynq's order; total is the state's size when the page was read."""

    queue: str
    state: TaskState
    group: str | None
    page: int
    size: int
    total: int
    tasks: tuple[TaskRecord, ...]


@dataclass(frozen=True)
class SearchResult:
    """Matches of one bounded search. next_cursor resumes the scan (None when the state was scanned to its end)."""

    queue: str
    state: TaskState
    tasks: tuple[TaskRecord, ...]
    scanned: int
    cursor: int
    next_cursor: int | None

    @property
    def done(self) -> bool:
        return self.next_cursor is None


@dataclass(frozen=True)
class TaskFailure:
    """Why one task of a batch action was not changed."""

    task_id: str
    error: Exception


@dataclass(frozen=True)
class BatchResult:
    """The outcome of an action on a list of ids: which ids changed and which failed, with why."""

    succeeded: tuple[str, ...]
    failed: tuple[TaskFailure, ...]


@dataclass(frozen=True)
class GroupInfo:
    """An aggregation group and how many tasks wait in it."""

    group: str
    size: int


@dataclass(frozen=True)
class ActiveWorker:
    """A task a server is running right now."""

    task_id: str
    task_type: str
    task_payload: bytes
    queue: str
    started: datetime | None
    deadline: datetime | None


@dataclass(frozen=True)
class ServerInfo:
    """A live worker server (its heartbeat has not expired) and the tasks it runs.

    degraded: what its health note (written with its heartbeat) says of Redis trouble it meets, e.g.
    "degraded: Redis answers BUSY since 12 s"; "" when none (or from a server that keeps none, such as Go's).
    clock_offset: how far its clock is from Redis's (asynqpy servers only).
    """

    id: str
    host: str
    pid: int
    concurrency: int
    queues: Mapping[str, int]
    strict_priority: bool
    started: datetime | None
    status: str
    active_workers: tuple[ActiveWorker, ...]
    degraded: str = ""
    # Redis's clock minus the server's (s), from its last heartbeat; None for a Go server (it does not say).
    clock_offset: float | None = None
    stuck_threads: int = 0  # handler threads still running past their tasks (servers of ours report it)


@dataclass(frozen=True)
class UniqueLock:
    """A unique task's lock: its key, the task id that holds it (None when the lock has expired or was
    released), and its time left in seconds (None for no expiry or no lock)."""

    key: str
    held_by: str | None
    ttl: float | None


@dataclass(frozen=True)
class SchedulerEntry:
    """A cron entry of a live scheduler; opts are Go's option strings, e.g. Queue("critical")."""

    id: str
    spec: str
    task_type: str
    task_payload: bytes
    opts: tuple[str, ...]
    next_enqueue_at: datetime | None
    prev_enqueue_at: datetime | None
    scheduler_id: str


@dataclass(frozen=True)
class SchedulerEnqueueEvent:
    """One firing of a scheduler entry: the task it enqueued and when."""

    task_id: str
    enqueued_at: datetime | None


@dataclass(frozen=True)
class Finding:
    """One line of a diagnosis. level: ok, info, warn or error; code: a stable machine-readable name."""

    level: Literal["ok", "info", "warn", "error"]
    code: str
    message: str


@dataclass(frozen=True)
class Explanation:
    """Why a task has not run (yet): findings in the order an operator checks them."""

    queue: str
    task_id: str
    state: TaskState | None
    findings: tuple[Finding, ...]

    @property
    def summary(self) -> str:
        """The first finding that is not ok (the likeliest reason), else the last one."""
        for f in self.findings:
            if f.level in ("error", "warn"):
                return f.message
        return self.findings[-1].message if self.findings else ""


@dataclass(frozen=True)
class RedisInfo:
    """The server's identity and health, with warnings for settings that can lose tasks."""

    server: str
    version: str
    mode: str
    uptime_seconds: int
    connected_clients: int
    used_memory: int
    used_memory_human: str
    used_memory_peak: int
    maxmemory: int
    maxmemory_policy: str
    fragmentation_ratio: float
    persistence: str
    warnings: tuple[Finding, ...]
    raw: Mapping[str, object]
