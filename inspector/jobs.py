"""Background jobs that replay, archive or delete every task of a state in chunks, at a chosen rate.

A job's state is a Redis hash under asynqpy:{jobs}:job:<id> (listed, newest first, in asynqpy:{jobs}), so any
dashboard process, or the CLI, can show its progress and cancel it. The process that started a job runs it
(`run`), one bounded chunk per script call, sleeping between chunks to keep to the rate.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asynqpy.errors import AsynqError, FailedPreconditionError
from asynqpy.task import TaskState
from inspector import actions, findjob
from inspector.context import Ctx, check_queue_name, check_state, state_source, text
from inspector.find import Mask

JOBS_KEY = "asynqpy:{jobs}"
JOB_PREFIX = "asynqpy:{jobs}:job:"
KEEP_JOBS = 100
JOB_TTL = 7 * 86400
MAX_CHUNK = 500
FINAL = ("done", "canceled", "failed")
HEARTBEAT = 5.0  # a running job touches updated_at at least this often
STALLED_AFTER = 60.0  # no progress for this long: the process running it is gone
VERBS = {"run": actions.RUNNABLE, "archive": actions.ARCHIVABLE, "delete": actions.DELETABLE}


class JobNotFoundError(AsynqError):
    """No job with that id (it never existed, or it expired)."""


@dataclass(frozen=True)
class Job:
    """A background action on every task of a state. status: running, canceling, done, canceled or failed.

    total is the state's size when the job started (the job stops after that many, so producers cannot keep it
    going); done counts tasks taken so far, changed those actually moved; rate is tasks per second (0: as fast
    as bounded chunks go). updated_at is the last progress (Unix seconds): a running job whose process died
    stops moving.
    """

    id: str
    action: str
    queue: str
    state: TaskState
    group: str
    total: int
    done: int
    changed: int
    rate: float
    status: str
    user: str
    error: str
    started_at: float
    updated_at: float
    query: str = ""  # a find job (inspector.findjob): the query whose matches it acts on; total is then the
    cursor: str = ""  # tasks to scan, done those scanned, cursor where the scan goes on

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    def stalled(self, now: float) -> bool:
        """Running, but without progress for STALLED_AFTER seconds: the process that ran it has gone."""
        return not self.finished and now - self.updated_at > STALLED_AFTER

    @property
    def percent(self) -> int:
        return 100 if self.total <= 0 else min(100, int(self.done * 100 / self.total))


def _key(job_id: str) -> str:
    return JOB_PREFIX + job_id


def _parse(job_id: str, h: Any) -> Job:
    g = {text(k): text(v) for k, v in h.items()}
    return Job(id=job_id, action=g.get("action", ""), queue=g.get("queue", ""),
               state=TaskState(g.get("state", "archived")), group=g.get("group", ""),
               total=int(g.get("total", 0)), done=int(g.get("done", 0)), changed=int(g.get("changed", 0)),
               rate=float(g.get("rate", 0)), status=g.get("status", "failed"), user=g.get("user", ""),
               error=g.get("error", ""), started_at=float(g.get("started_at", 0)),
               updated_at=float(g.get("updated_at", 0)), query=g.get("query", ""), cursor=g.get("cursor", ""))


def create(ctx: Ctx, action: str, q: str, state: TaskState | str, *, rate: float = 0.0, group: str = "",
           user: str = "") -> Job:
    """Record a new running job (run it with `run`). Raises QueueNotFoundError, FailedPreconditionError when the
    action does not apply to the state, ValueError for a bad action, state or rate."""
    if action not in VERBS:
        raise ValueError(f"unknown action {action!r}; expected run, archive or delete")
    check_queue_name(q)
    st = check_state(state)
    if st not in VERBS[action]:
        raise FailedPreconditionError(f"cannot {action} all {st.value} tasks", queue=q)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
        raise ValueError(f"rate must be a number of tasks per second >= 0, got {rate!r}")
    if st is TaskState.AGGREGATING and not group:
        raise ValueError("a job on aggregating tasks needs a group")
    ctx.require_queue(q)
    key, kind = state_source(q, st, group or None)
    total = int(ctx.redis.llen(key) if kind == "list" else ctx.redis.zcard(key))
    return store(ctx, {"action": action, "queue": q, "state": st.value, "group": group, "total": total,
                       "rate": float(rate), "user": user})


def store(ctx: Ctx, given: dict[str, Any]) -> Job:
    """Record a new running job with the given fields (action, queue, state, total, rate, user, ...)."""
    job_id = secrets.token_hex(8)
    now = ctx.now()
    fields: dict[Any, Any] = {"done": 0, "changed": 0, "status": "running", "error": "", "started_at": now,
                              "updated_at": now, **given}
    pipe = ctx.redis.pipeline(transaction=True)
    pipe.hset(_key(job_id), mapping=fields)
    pipe.expire(_key(job_id), JOB_TTL)
    pipe.zadd(JOBS_KEY, {job_id: now})
    pipe.zremrangebyrank(JOBS_KEY, 0, -(KEEP_JOBS + 1))
    pipe.execute()
    return get(ctx, job_id)


def get(ctx: Ctx, job_id: str) -> Job:
    """Raises JobNotFoundError."""
    h = ctx.redis.hgetall(_key(job_id))
    if not h:
        raise JobNotFoundError(f"no job {job_id!r} (finished jobs are kept for 7 days)")
    return _parse(job_id, h)


def recent(ctx: Ctx, *, queue: str | None = None, limit: int = 20) -> list[Job]:
    """The newest jobs (of one queue when given), newest first; expired ones are skipped."""
    ids = [text(i) for i in ctx.redis.zrevrange(JOBS_KEY, 0, KEEP_JOBS - 1)]
    pipe = ctx.redis.pipeline(transaction=False)
    for i in ids:
        pipe.hgetall(_key(i))
    out = [_parse(i, h) for i, h in zip(ids, pipe.execute(), strict=True) if h]
    return [j for j in out if queue is None or j.queue == queue][:limit]


def cancel(ctx: Ctx, job_id: str) -> Job:
    """Ask a running job to stop after its current chunk (a stalled one is marked canceled at once).

    Raises JobNotFoundError."""
    job = get(ctx, job_id)
    if job.stalled(ctx.now()):  # nobody runs it any more: it ends here
        ctx.redis.hset(_key(job_id), mapping={"status": "canceled", "error": "stalled: its process had stopped"})
    elif not job.finished:
        ctx.redis.hset(_key(job_id), "status", "canceling")
    return get(ctx, job_id)


def step(ctx: Ctx, job: Job, n: int, mask: Mask | None = None) -> tuple[int, int]:
    """Apply the job's action to up to n tasks (one script call). Returns (changed, taken)."""
    if job.query:
        return findjob.step(ctx, job, n, mask)
    key, kind = state_source(job.queue, job.state, job.group or None)
    action = {a.name: a for a in (actions.RUN, actions.ARCHIVE, actions.DELETE)}[job.action]
    changed, taken = ctx.run(action.on_chunk(job.queue, actions.Source(key, kind, job.group), n, ctx.now()))
    return changed, taken


def run(ctx: Ctx, job_id: str, *, chunk: int = actions.DEFAULT_CHUNK, sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[Job], Any] | None = None, mask: Mask | None = None) -> Job:
    """Run a job to its end (or until canceled), keeping to its rate. Returns the final Job.

    A find job keeps its rate in tasks changed (its scan goes as fast as bounded windows go); mask is how its
    user may see tasks (payload terms are judged on that view).

    Each chunk is at most `chunk` tasks (and at most rate tasks, so a slow rate moves small chunks often).
    An error ends the job as failed, with the error recorded; it is not raised.
    """
    job = get(ctx, job_id)
    key = _key(job_id)
    start = time.monotonic()
    try:
        while True:
            status = text(ctx.redis.hget(key, "status") or b"")
            if status == "canceling":
                ctx.redis.hset(key, mapping={"status": "canceled", "updated_at": ctx.now()})
                break
            left = job.total - job.done
            if left <= 0:
                ctx.redis.hset(key, mapping={"status": "done", "updated_at": ctx.now()})
                break
            n = min(chunk, MAX_CHUNK, left)
            if job.rate > 0:  # small chunks ten times a second, so the rate holds at every moment
                n = max(1, min(n, -(-int(job.rate) // 10)))
                wait = start + (job.changed if job.query else job.done) / job.rate - time.monotonic()
                if wait > HEARTBEAT:  # a slow rate: show we are alive, and look for a cancel, meanwhile
                    sleep(HEARTBEAT)
                    ctx.redis.hset(key, "updated_at", ctx.now())
                    continue
                if wait > 0:
                    sleep(wait)
            changed, taken = step(ctx, job, n, mask)
            pipe = ctx.redis.pipeline(transaction=False)
            pipe.hincrby(key, "done", taken if taken else left)
            pipe.hincrby(key, "changed", changed)
            pipe.hset(key, "updated_at", ctx.now())
            pipe.execute()
            job = get(ctx, job_id)
            if taken == 0:  # the state emptied faster than expected
                ctx.redis.hset(key, mapping={"status": "done", "done": job.total})
            if progress is not None:
                progress(job)
    except Exception as exc:  # a background job must end with a reason, never vanish
        ctx.redis.hset(key, mapping={"status": "failed", "error": str(exc)[:500], "updated_at": ctx.now()})
    final = get(ctx, job_id)
    if progress is not None:
        progress(final)
    return final
