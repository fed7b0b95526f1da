"""Inspector: the one door through which the dashboard, the exporter and the CLI see and change queues."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Self

import redis

from asynqpy.backpressure import QueueLimit
from asynqpy.connection import connect
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError, QueueNotFoundError, mask_url
from asynqpy.limits import Limit, Usage
from asynqpy.options import check_int
from asynqpy.rdb import flow
from asynqpy.rdb.failures import reaching, url_of
from asynqpy.rdb.syncdoor import SyncDoor
from asynqpy.task import TaskState
from inspector import (
    actions,
    cluster,
    croncontrols,
    explain,
    failures,
    find,
    findjob,
    reader,
    samples,
    snapshot,
    typestats,
)
from inspector import jobs as jobstore
from inspector import query as querylang
from inspector.context import Ctx, check_queue_name
from inspector.failures import RecentFailures
from inspector.find import FindCount, FindResult, Mask
from inspector.jobs import Job
from inspector.models import (
    BatchResult,
    DailyStats,
    Explanation,
    Finding,
    GroupInfo,
    QueueInfo,
    RedisInfo,
    SchedulerEnqueueEvent,
    SchedulerEntry,
    SearchResult,
    ServerInfo,
    TaskPage,
    TaskRecord,
    UniqueLock,
)
from inspector.snapshot import QueueSnapshot


class Inspector:
    """Reads and changes asynq queues in Redis, whether Go asynq or asynqpy wrote them.

    redis_url: ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy dev` server, then localhost.
    connection: an existing binary (decode_responses=False) client to use instead.
    clock: Unix seconds, for "now" (tests and replays of recorded state). chunk: tasks per script call in
    the actions on many tasks (500 keeps each call to a few ms). timeout: seconds a Redis reply (and a connect)
    may take before RedisUnavailableError (default asynqpy.connection's: 10 s, 5 s to connect); the dashboard
    gives a shorter one so that a frozen Redis is a quick 503.

    Every method reaches Redis through one door (asynqpy.rdb.syncdoor), so every Redis error comes out as
    asynqpy's: RedisUnavailableError (asynqpy.errors; .url names the server, password masked; .kind says what:
    a subclass per kind, e.g. RedisBusyError, RedisOutOfMemoryError) for trouble that passes, RedisCommandError
    for a command Redis refused for good (a bug); and InvalidArgumentError (a ValueError; .argument names it)
    for a bad argument. No redis-py exception leaves it.
    """

    def __init__(self, redis_url: str | None = None, *, connection: redis.Redis | None = None,
                 clock: Callable[[], float] = time.time, chunk: int = actions.DEFAULT_CHUNK,
                 timeout: float | None = None) -> None:
        check_int(chunk, "chunk", minimum=1)
        if not callable(clock):
            raise InvalidArgumentError("clock must be a callable returning Unix seconds", argument="clock")
        url = redis_url or default_redis_url()
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise InvalidArgumentError(f"timeout must be a positive number of seconds, got {timeout!r}",
                                       argument="timeout")
        kw: dict[str, Any] = {} if timeout is None else {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        self.redis = connection or connect(url, **kw)  # for the dashboard's session store and audit log (their doors)
        self.url = mask_url(url) if connection is None else url_of(connection)  # for errors: password masked
        self.door = SyncDoor(self.redis, self.url)
        self._ctx = Ctx(self.door, clock)
        self.chunk = chunk

    def now(self) -> float:
        """The Inspector's "now" in Unix seconds (its clock): what ages and due times are measured from."""
        return self._ctx.now()

    def close(self) -> None:
        self.door.close()

    def ping(self) -> float:
        """One PING: the round-trip time in seconds. Raises RedisUnavailableError when Redis cannot be reached."""
        return self.door.ping()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- flow control (asynqpy.limits) ---------------------------------------------------------------------

    def set_limit(self, limit: Limit) -> None:
        """Store a limit for the fleet and every registered queue; workers obey it from their next fetch.
        Go asynq workers do not read limits."""
        if not isinstance(limit, Limit):
            raise InvalidArgumentError("set_limit takes an asynqpy.Limit", argument="limit")
        with reaching(self.url):
            flow.set_limit(self.door.client, limit)

    def limits(self) -> list[Limit]:
        """The fleet's limits, by pattern."""
        with reaching(self.url):
            return flow.limits(self.door.client)

    def limit_usage(self) -> list[Usage]:
        """Each limit in each queue that holds it: running, tokens, waiting tasks."""
        with reaching(self.url):
            return flow.usages(self.door.client)

    def remove_limit(self, pattern: str) -> bool:
        """Drop a limit everywhere; the tasks waiting on it go back to pending. False when there was none."""
        with reaching(self.url):
            return flow.remove_limit(self.door.client, pattern)

    def set_queue_limit(self, queue: str, *, max_size: int | None = None, max_latency: float | None = None) -> None:
        """Backpressure: our enqueue scripts refuse tasks for queue past max_size tasks (pending, scheduled,
        retry, active, aggregating) or while its oldest pending task has waited more than max_latency seconds
        (QueueFullError). Replaces the queue's previous limit. Go producers do not read it."""
        check_queue_name(queue)
        with reaching(self.url):
            flow.set_queue_limit(self.door.client, queue, max_size=max_size, max_latency=max_latency)

    def queue_limit(self, queue: str) -> QueueLimit:
        check_queue_name(queue)
        with reaching(self.url):
            return flow.queue_limit(self.door.client, queue)

    def clear_queue_limit(self, queue: str) -> bool:
        check_queue_name(queue)
        with reaching(self.url):
            return flow.clear_queue_limit(self.door.client, queue)

    # -- queues -------------------------------------------------------------------------------------------

    def queues(self) -> list[str]:
        """Names of the registered queues (asynq:queues), sorted."""
        return reader.queues(self._ctx)

    def queue_info(self, queue: str, *, memory: bool = True) -> QueueInfo:
        """Counts and health of one queue. memory=False skips the (sampled) memory estimate.

        Raises QueueNotFoundError.
        """
        return reader.queue_infos(self._ctx, [queue], memory=memory)[0]

    def queue_infos(self, queues: Sequence[str] | None = None, *, memory: bool = True) -> list[QueueInfo]:
        """QueueInfo of every registered queue (or of the given ones), in one pipelined round trip.

        Raises QueueNotFoundError for a given queue that is not registered.
        """
        return reader.queue_infos(self._ctx, queues, memory=memory)

    def queue_snapshot(self, max_age: float = 2.0) -> QueueSnapshot:
        """Every queue's QueueInfo and the live servers, shared through Redis by every process that asks:
        the stored snapshot when at most max_age seconds old, else a new one taken by one asker at a time.

        While Redis refuses writes but answers reads (OOM, READONLY) the snapshot is this Inspector's own, marked
        with the kind of trouble (QueueSnapshot.unshared). Raises RedisUnavailableError when Redis cannot answer
        the reads, ValueError for a negative max_age.
        """
        return snapshot.queue_snapshot(self._ctx, max_age)

    def last_snapshot(self) -> QueueSnapshot | None:
        """The newest snapshot this Inspector read or took (None before the first): what a scrape can still show,
        marked stale, while Redis cannot answer."""
        snap: QueueSnapshot | None = self._ctx.last_snapshot
        return snap

    def history(self, queue: str, days: int = 7) -> list[DailyStats]:
        """Processed and failed per UTC day, today first. Raises QueueNotFoundError."""
        return reader.history(self._ctx, queue, days)

    def groups(self, queue: str) -> list[GroupInfo]:
        """Aggregation groups of a queue with their sizes. Raises QueueNotFoundError."""
        return cluster.groups(self._ctx, queue)

    def pause(self, queue: str, *, known_only: bool = False) -> None:
        """Stop servers from taking the queue's tasks. Raises QueueAlreadyPausedError. As asynq, any name may be
        paused (ahead of its first task); with known_only a queue that is neither registered nor consumed by a live
        server raises QueueNotFoundError and nothing is written (a typo, or a queue deleted meanwhile)."""
        if known_only:
            self.require_known(queue)
        actions.pause(self._ctx, queue)

    def require_known(self, queue: str) -> None:
        """Raise QueueNotFoundError unless the queue is registered or a live server consumes it."""
        if queue not in self.queues() and not any(queue in s.queues for s in self.servers()):
            raise QueueNotFoundError(f"queue {queue!r} not found: it is not registered and no live server consumes "
                                     "it (`asynqpy queue ls` lists the queues)", queue=queue)

    def unpause(self, queue: str) -> None:
        """Resume a paused queue, waking its idle asynqpy workers (see actions.unpause). Raises
        QueueNotPausedError."""
        actions.unpause(self._ctx, queue)

    def delete_queue(self, queue: str, force: bool = False) -> None:
        """Remove a queue. Raises QueueNotFoundError, QueueNotEmptyError (without force), FailedPreconditionError
        (active tasks). See actions.delete_queue."""
        actions.delete_queue(self._ctx, queue, force=force, chunk=self.chunk)

    # -- tasks --------------------------------------------------------------------------------------------

    def list_tasks(self, queue: str, state: TaskState | str, *, page: int = 1, size: int = 30,
                   group: str | None = None) -> TaskPage:
        """One page of a state's tasks, in asynq's order; group= is required for aggregating tasks.

        A task that cannot be read is listed with its problem set. Raises QueueNotFoundError.
        """
        return reader.list_tasks(self._ctx, queue, state, page=page, size=size, group=group)

    def get_task(self, queue: str, task_id: str) -> TaskRecord:
        """Everything stored about a task, with the full display form of its payload and result.

        Raises QueueNotFoundError, TaskNotFoundError, MalformedTaskError (the hash's state is not asynq's).
        """
        return reader.get_task(self._ctx, queue, task_id)

    def search(self, queue: str, state: TaskState | str, *, type: str | None = None, id_prefix: str | None = None,
               text: str | None = None, error: str | None = None, limit: int = 50, cursor: int = 0,
               max_scan: int = 10_000, window: int = 500, group: str | None = None) -> SearchResult:
        """Tasks of a state whose type starts with type, id with id_prefix, whose payload contains text and
        whose last error contains error (substrings: ASCII case-insensitive).

        Scans at most max_scan tasks from position cursor, window tasks per script call, and stops at
        limit matches; result.next_cursor resumes it. Raises QueueNotFoundError.
        """
        flt = reader.SearchFilter(type=type, id_prefix=id_prefix, text=text, error=error)
        return reader.search(self._ctx, queue, state, flt, limit=limit, cursor=cursor, max_scan=max_scan,
                             window=window, group=group)

    def find(self, queue: str, query: str, *, limit: int = 50, cursor: str = "", max_scan: int = 10_000,
             window: int = find.ROWS_WINDOW, mask: Mask | None = None) -> FindResult:
        """Tasks of any state matching a query of the task query language (inspector.query: `type:email:*
        state:retry error:"SMTP busy" payload.user_id:42 -header.tenant:acme age:>1h`), in scanning order.

        Scans at most max_scan tasks from cursor ("" the start; result.next_cursor resumes), window tasks per
        script call (at most find.ROWS_WINDOW, so no call holds Redis for long), and stops at limit matches.
        mask: how the viewer may see a task (e.g. a redaction policy's); payload and header terms are judged on
        that view, so a masked value cannot be matched.
        Raises InvalidArgumentError naming a bad term or cursor, QueueNotFoundError.
        """
        return find.find(self._ctx, queue, querylang.parse(query), limit=limit, cursor=cursor, max_scan=max_scan,
                         window=window, mask=mask)

    def count_matches(self, queue: str, query: str, *, max_scan: int = 100_000, window: int = 500,
                      mask: Mask | None = None, cursor: str = "") -> FindCount:
        """How many tasks match a query among at most max_scan (result.complete: all were scanned, else the
        count is "at least"). Raises InvalidArgumentError, QueueNotFoundError."""
        return find.count(self._ctx, queue, querylang.parse(query), max_scan=max_scan, window=window, mask=mask,
                          cursor=cursor)

    def run_task(self, queue: str, task_id: str) -> None:
        """Move a scheduled, retry, archived, completed or aggregating task to pending.

        Raises QueueNotFoundError, TaskNotFoundError, FailedPreconditionError (active or pending).
        """
        actions.on_task(self._ctx, actions.RUN, queue, task_id)

    def run_tasks(self, queue: str, task_ids: Sequence[str]) -> BatchResult:
        """run_task for each id; per-id errors are in the result. Raises QueueNotFoundError."""
        return actions.on_tasks(self._ctx, actions.RUN, queue, task_ids, chunk=self.chunk)

    def run_all(self, queue: str, state: TaskState | str, *, group: str | None = None) -> int:
        """Move every scheduled, retry, archived or aggregating task to pending, in chunks. Returns how many.

        Raises QueueNotFoundError, FailedPreconditionError for another state.
        """
        return actions.on_all(self._ctx, actions.RUN, queue, state, group=group, chunk=self.chunk)

    def archive_task(self, queue: str, task_id: str) -> None:
        """Archive a pending, scheduled, retry, completed or aggregating task.

        Raises QueueNotFoundError, TaskNotFoundError, TaskAlreadyArchivedError, FailedPreconditionError (active).
        """
        actions.on_task(self._ctx, actions.ARCHIVE, queue, task_id)

    def archive_tasks(self, queue: str, task_ids: Sequence[str]) -> BatchResult:
        """archive_task for each id; per-id errors are in the result. Raises QueueNotFoundError."""
        return actions.on_tasks(self._ctx, actions.ARCHIVE, queue, task_ids, chunk=self.chunk)

    def archive_all(self, queue: str, state: TaskState | str, *, group: str | None = None) -> int:
        """Archive every pending, scheduled, retry or aggregating task, in chunks. Returns how many.

        Raises QueueNotFoundError, FailedPreconditionError for another state.
        """
        return actions.on_all(self._ctx, actions.ARCHIVE, queue, state, group=group, chunk=self.chunk)

    def delete_task(self, queue: str, task_id: str) -> None:
        """Delete a task that is not active, releasing its uniqueness lock.

        Raises QueueNotFoundError, TaskNotFoundError, FailedPreconditionError (active).
        """
        actions.on_task(self._ctx, actions.DELETE, queue, task_id)

    def delete_tasks(self, queue: str, task_ids: Sequence[str]) -> BatchResult:
        """delete_task for each id; per-id errors are in the result. Raises QueueNotFoundError."""
        return actions.on_tasks(self._ctx, actions.DELETE, queue, task_ids, chunk=self.chunk)

    def delete_all(self, queue: str, state: TaskState | str, *, group: str | None = None) -> int:
        """Delete every task of a state but active, in chunks. Returns how many.

        Raises QueueNotFoundError, FailedPreconditionError for active.
        """
        return actions.on_all(self._ctx, actions.DELETE, queue, state, group=group, chunk=self.chunk)

    def cancel(self, task_id: str) -> int:
        """Ask the servers to cancel an active task (best effort; the handler sees a cancellation, which counts
        as a failure). Returns how many servers heard the request."""
        return actions.cancel(self._ctx, task_id)

    def update_payload(self, queue: str, task_id: str, payload: bytes) -> TaskRecord:
        """Replace a scheduled task's payload and return the task as now stored.

        Raises QueueNotFoundError, TaskNotFoundError, FailedPreconditionError (not scheduled),
        MalformedTaskError.
        """
        actions.update_payload(self._ctx, queue, task_id, payload)
        return self.get_task(queue, task_id)

    # -- servers, schedulers, diagnosis --------------------------------------------------------------------

    def servers(self) -> list[ServerInfo]:
        """Live servers with their running tasks."""
        return cluster.servers(self._ctx)

    def scheduler_entries(self) -> list[SchedulerEntry]:
        """Cron entries of live schedulers."""
        return cluster.scheduler_entries(self._ctx)

    def scheduler_history(self, entry_id: str, *, page: int = 1, size: int = 30) -> list[SchedulerEnqueueEvent]:
        """The entry's enqueue events, newest first."""
        return cluster.scheduler_history(self._ctx, entry_id, page=page, size=size)

    def cron_statuses(self, entries: Sequence[SchedulerEntry] | None = None) -> list[croncontrols.CronStatus]:
        """Every live entry (or the given ones, e.g. one page of scheduler_entries()) with its pause flag,
        plain-words schedule, next runs, last task and recent firings."""
        return croncontrols.statuses(self._ctx, None if entries is None else list(entries))

    def cron_status(self, entry_id: str) -> croncontrols.CronStatus:
        """One live entry's CronStatus. Raises InvalidArgumentError for an unknown entry."""
        return croncontrols.find(self._ctx, entry_id)

    def cron_pause(self, entry_id: str, *, by: str = "") -> bool:
        """Pause an asynqpy scheduler's entry on every replica; True when it was running. Raises
        InvalidArgumentError for an unknown entry or a Go scheduler's (Go does not read the flag)."""
        return croncontrols.pause(self._ctx, entry_id, by=by)

    def cron_resume(self, entry_id: str) -> bool:
        """Resume a paused entry; True when it was paused. Raises as cron_pause."""
        return croncontrols.resume(self._ctx, entry_id)

    def cron_enqueue_now(self, entry_id: str) -> str:
        """Enqueue an entry's task now, outside its schedule; returns the task id. Raises InvalidArgumentError."""
        return croncontrols.enqueue_now(self._ctx, entry_id)

    # -- per-type metrics and deploy marks -----------------------------------------------------------------

    def type_stats(self, window: str = "1h", *,
                   queues: typestats.QueueFilter | None = None) -> list[typestats.TypeStats]:
        """Per-task-type runs, failures, run-time and wait percentiles over window ("1h", "24h", "72h"), most
        total run time first (from asynqpy workers' aggregates; Go workers write none). queues: count only the
        queues this predicate admits (default every queue, and earlier workers' figures, which have no queue).
        Raises InvalidArgumentError for another window."""
        return typestats.type_stats(self._ctx, window, queues=queues)

    def one_type_stats(self, task_type: str, window: str = "1h", *,
                       queues: typestats.QueueFilter | None = None) -> typestats.TypeStats:
        """One type's TypeStats over the queues admitted (zeros when nothing was recorded)."""
        return typestats.one_type(self._ctx, task_type, window, queues=queues)

    def task_types(self, window: str = "1h", *, queues: typestats.QueueFilter | None = None) -> list[str]:
        """The task types recorded within window in the queues admitted (reads only the workers' index)."""
        return typestats.task_types(self._ctx, window, queues=queues)

    def mark(self, label: str, *, by: str = "") -> typestats.Mark:
        """Record a deploy mark ("v1.4.2") now; the dashboard's charts draw it. Raises InvalidArgumentError for
        a blank or over-long label."""
        return typestats.mark(self._ctx, label, by=by)

    def marks(self, since: float) -> list[typestats.Mark]:
        """Deploy marks from since (Unix s) on, oldest first."""
        return typestats.marks(self._ctx, since)

    def scheduler_history_size(self, entry_id: str) -> int:
        """How many enqueue events of the entry are kept."""
        return cluster.scheduler_history_size(self._ctx, entry_id)

    def unique_lock(self, queue: str, task_id: str) -> UniqueLock | None:
        """The task's uniqueness lock (holder and time left), or None for a task enqueued without unique=.
        Raises InvalidArgumentError for a bad queue name."""
        return cluster.unique_lock(self._ctx, queue, task_id)

    def redis_info(self) -> RedisInfo:
        """Version, memory, clients and uptime, with warnings for settings that can lose tasks."""
        return cluster.redis_info(self._ctx)

    def explain(self, queue: str, task_id: str) -> Explanation:
        """Why the task has not run (yet): findings in the order an operator checks them (never raises for a
        missing queue or task: those are findings)."""
        return explain.explain(self._ctx, queue, task_id)

    def queue_warnings(self, queue: str, *, latency_threshold: float = 300.0,
                       archive_ratio: float = 0.9) -> list[Finding]:
        """What needs attention in a queue. Raises QueueNotFoundError."""
        return explain.queue_warnings(self._ctx, queue, latency_threshold=latency_threshold,
                                      archive_ratio=archive_ratio)

    # -- the dashboard's needs: last errors, size samples, background jobs ---------------------------------

    def recent_failures(self, queues: Sequence[str] | None = None, *, limit: int = 100) -> RecentFailures:
        """The newest failures (retry and archived tasks, from Go workers as well as ours) grouped by queue,
        task type and error. Reads at most `limit` retry and `limit` archived tasks per queue, all queues in
        one round trip. Raises QueueNotFoundError, ValueError (limit outside 1..1000)."""
        return failures.recent_failures(self._ctx, queues, limit=limit)

    def claim_size_sample(self, interval: float) -> bool:
        """Whether this caller should take this interval's queue-size sample (one caller per interval wins)."""
        return samples.claim(self._ctx, interval)

    def record_size_sample(self, infos: Sequence[QueueInfo], *, keep: int = samples.DEFAULT_KEEP) -> None:
        """Push one queue-size sample into the capped list asynqpy:{sizes}."""
        samples.record(self._ctx, infos, keep=keep)

    def size_samples(self, *, since: float | None = None, totals: bool = False) -> list[samples.SizeSample]:
        """The queue-size samples, oldest first; totals=True: summed over queues, under the name "*"."""
        return samples.read(self._ctx, since=since, totals=totals)

    def start_job(self, action: str, queue: str, state: TaskState | str, *, rate: float = 0.0, group: str = "",
                  user: str = "") -> Job:
        """Record a background job doing action (run, archive, delete) to every task of a state; run it with
        run_job. Raises QueueNotFoundError, FailedPreconditionError, ValueError."""
        return jobstore.create(self._ctx, action, queue, state, rate=rate, group=group, user=user)

    def start_find_job(self, action: str, queue: str, query: str, *, rate: float = 0.0, user: str = "") -> Job:
        """Record a background job doing action (run, archive, delete) to every task matching query (as find);
        run it with run_job. rate is tasks changed per second (0: as fast as bounded windows go).
        Raises InvalidArgumentError (a bad action, query or rate), QueueNotFoundError."""
        return findjob.create(self._ctx, action, queue, query, rate=rate, user=user)

    def run_job(self, job_id: str, *, progress: Callable[[Job], object] | None = None,
                mask: Mask | None = None) -> Job:
        """Run a job to its end or until canceled, in chunks, at its rate. mask: how the job's user may see
        tasks (a find job judges payload terms on that view). Raises JobNotFoundError."""
        return jobstore.run(self._ctx, job_id, chunk=self.chunk, progress=progress, mask=mask)

    def job(self, job_id: str) -> Job:
        """Raises JobNotFoundError."""
        return jobstore.get(self._ctx, job_id)

    def jobs(self, *, queue: str | None = None, limit: int = 20) -> list[Job]:
        """The newest background jobs (of one queue), newest first."""
        return jobstore.recent(self._ctx, queue=queue, limit=limit)

    def cancel_job(self, job_id: str) -> Job:
        """Ask a running job to stop after its current chunk. Raises JobNotFoundError."""
        return jobstore.cancel(self._ctx, job_id)
