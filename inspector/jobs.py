"""Background jobs that replay, archive or delete every task of a state in chunks, at a chosen rate.

A job's state is a Redis hash under asynqpy:{jobs}:job:<id> (listed, newest first, in asynqpy:{jobs}), so any
dashboard process, or the CLI, can show its progress and cancel it. The process that started a job runs it
(`run`), one bounded chunk per script call, sleeping between chunks to keep to the rate. Every change of a job's
status is one script (inspector/lua/job_*.lua), so a cancel and the job's own end never undo each other.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asynqpy.errors import AsynqError, FailedPreconditionError, RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.failures import TroubleLog
from asynqpy.rdb.scripts import Call
from asynqpy.task import TaskState
from inspector import actions, findjob
from inspector.context import Ctx, check_queue_name, check_state, state_source, text
from inspector.find import Mask
from inspector.jobstep import Receipt, kept, with_receipt
from inspector.scripts import script

log = logging.getLogger("asynqpy.inspector")
T = TypeVar("T")

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
    stops moving. seq is how many chunks were counted (inspector.jobstep); uncounted says a chunk may have been
    applied and not counted (the job failed while one was unanswered, or was canceled as stalled), so done and
    changed are then lower bounds.
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
    seq: int = 0
    uncounted: bool = False

    @property
    def finished(self) -> bool:
        return self.status in FINAL

    def stalled(self, now: float) -> bool:
        """Running, but without progress for STALLED_AFTER seconds: the process that ran it has gone."""
        return not self.finished and now - self.updated_at > STALLED_AFTER

    @property
    def changed_text(self) -> str:
        """changed for people: "1480", or "at least 1480" when it is a lower bound (uncounted)."""
        return f"at least {self.changed}" if self.uncounted else str(self.changed)

    @property
    def percent(self) -> int:
        return 100 if self.total <= 0 else min(100, int(self.done * 100 / self.total))


def _parse(job_id: str, h: Any) -> Job:
    g = {text(k): text(v) for k, v in h.items()}
    return Job(id=job_id, action=g.get("action", ""), queue=g.get("queue", ""),
               state=TaskState(g.get("state", "archived")), group=g.get("group", ""),
               total=int(g.get("total", 0)), done=int(g.get("done", 0)), changed=int(g.get("changed", 0)),
               rate=float(g.get("rate", 0)), status=g.get("status", "failed"), user=g.get("user", ""),
               error=g.get("error", ""), started_at=float(g.get("started_at", 0)),
               updated_at=float(g.get("updated_at", 0)), query=g.get("query", ""), cursor=g.get("cursor", ""),
               seq=int(g.get("seq", 0)), uncounted=g.get("uncounted") == "1")


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
    total = actions.size_of(ctx, key, kind)
    return store(ctx, {"action": action, "queue": q, "state": st.value, "group": group, "total": total,
                       "rate": float(rate), "user": user})


def store(ctx: Ctx, given: dict[str, str | int | float]) -> Job:
    """Record a new running job with the given fields (action, queue, state, total, rate, user, ...)."""
    job_id = secrets.token_hex(8)
    now = ctx.now()
    fields: dict[str, str | int | float] = {"done": 0, "changed": 0, "status": "running", "error": "",
                                            "started_at": now, "updated_at": now, **given}
    ctx.run(Call(script("job_create"), [keys.job(job_id), keys.JOBS],
                 [job_id, now, JOB_TTL, KEEP_JOBS, *(x for kv in fields.items() for x in kv)], int))
    return get(ctx, job_id)


def get(ctx: Ctx, job_id: str) -> Job:
    """Raises JobNotFoundError."""
    h = ctx.command("HGETALL", keys.job(job_id))
    if not h:
        raise _missing(job_id)
    return _parse(job_id, h)


def _missing(job_id: str) -> JobNotFoundError:
    return JobNotFoundError(f"no job {job_id!r} (finished jobs are kept for 7 days)")


def recent(ctx: Ctx, *, queue: str | None = None, limit: int = 20) -> list[Job]:
    """The newest jobs (of one queue when given), newest first; expired ones are skipped."""
    ids = [text(i) for i in ctx.command("ZREVRANGE", keys.JOBS, 0, KEEP_JOBS - 1)]
    hashes = ctx.read(lambda b: [b.command("HGETALL", keys.job(i)) for i in ids])
    out = [_parse(i, h) for i, h in zip(ids, hashes, strict=True) if h]
    return [j for j in out if queue is None or j.queue == queue][:limit]


def cancel(ctx: Ctx, job_id: str) -> Job:
    """Ask a running job to stop after its current chunk (a stalled one is marked canceled at once); a finished
    job stays as it is. One script judges and writes, so a job finishing meanwhile is never left canceling.

    Raises JobNotFoundError."""
    code = ctx.run(Call(script("job_cancel"), [keys.job(job_id)], [ctx.now(), STALLED_AFTER], int))
    if code == 0:
        raise _missing(job_id)
    return get(ctx, job_id)


def step(ctx: Ctx, job: Job, n: int, mask: Mask | None = None, receipt: Receipt | None = None) -> tuple[int, int]:
    """Apply the job's action to up to n tasks (one script call), as the numbered chunk of receipt (by default
    the one after the last counted). Returns (changed, taken); a chunk sent again answers the first reply."""
    receipt = receipt or Receipt.of(job.queue, job.id, job.seq + 1, JOB_TTL)
    if job.query:
        return findjob.step(ctx, job, n, mask, receipt)
    key, kind = state_source(job.queue, job.state, job.group or None)
    action = {a.name: a for a in (actions.RUN, actions.ARCHIVE, actions.DELETE)}[job.action]
    call = action.on_chunk(job.queue, actions.Source(key, kind, job.group), n, ctx.now())
    changed, taken = ctx.run(with_receipt(call, receipt))
    return changed, taken


def _progress(ctx: Ctx, job_id: str, taken: int = 0, changed: int = 0, *, seq: int = 0,
              emptied: bool = False) -> str:
    """Count chunk seq's progress (seq 0: a heartbeat and a look for a cancel; a chunk counted already counts
    nothing); the job's status after it."""
    status = ctx.run(Call(script("job_progress"), [keys.job(job_id)], [taken, changed, ctx.now(),
                                                                       "1" if emptied else "0", seq], _status))
    if status is None:
        raise _missing(job_id)
    return status


def _status(raw: Any) -> str | None:
    return None if raw is None else text(raw)


class UncountedChunkError(AsynqError):
    """A job's chunk was sent and then an error other than Redis being unreachable ended the job before the
    chunk was counted: it may have been applied, so the job's counts are lower bounds."""


def run(ctx: Ctx, job_id: str, *, chunk: int = actions.DEFAULT_CHUNK, sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[Job], Any] | None = None, mask: Mask | None = None) -> Job:
    """Run a job to its end (or until canceled), keeping to its rate. Returns the final Job.

    A find job keeps its rate in tasks changed (its scan goes as fast as bounded windows go); mask is how its
    user may see tasks (payload terms are judged on that view).

    Each chunk is at most `chunk` tasks (and at most rate tasks, so a slow rate moves small chunks often).
    Transient Redis trouble pauses the job (logged once per kind, backing off) until Redis answers again; it
    shows as stalled meanwhile, so it can be canceled. A call whose reply was lost is sent again as it was: a
    chunk with its sequence number, so it is applied and counted once (inspector.jobstep). Any other error ends
    the job as failed, with the error recorded (and its counts marked lower bounds when a chunk was unanswered);
    it is not raised (JobNotFoundError aside, when the job does not exist).
    """
    trouble = TroubleLog(f"job {job_id}", logger=log)

    def patient(fn: Callable[[], T]) -> T:  # transient trouble: wait it out (logged once per kind), try again
        while True:
            try:
                result = fn()
            except RedisUnavailableError as exc:
                trouble.note(exc, "a background job")
                sleep(trouble.delay(base=0.2, cap=HEARTBEAT))
                continue
            trouble.ok()
            return result

    job = patient(lambda: get(ctx, job_id))
    if not job.finished:  # a runner of this job that was interrupted (Ctrl-C) may have left a chunk uncounted
        patient(lambda: _recover(ctx, job))
        job = patient(lambda: get(ctx, job_id))
    start = time.monotonic()
    while True:
        try:
            status = _run_chunk(ctx, job, chunk, start, sleep, patient, mask)
            if status is not None and status != "running":
                break
            job = patient(lambda: get(ctx, job_id))
            if status is not None and progress is not None:
                progress(job)
        except JobNotFoundError:
            raise
        except Exception as exc:  # a background job must end with a reason, never vanish
            log.warning("job %s failed: %s", job_id, exc)
            _fail(ctx, job_id, exc)
            break
    final = patient(lambda: get(ctx, job_id))
    if progress is not None:
        progress(final)
    return final


def _run_chunk(ctx: Ctx, job: Job, chunk: int, start: float, sleep: Callable[[float], None],
               patient: Callable[[Callable[[], Any]], Any], mask: Mask | None = None) -> str | None:
    """One step of run: wait for the rate, apply one chunk, count it, each call waiting out Redis trouble.
    Returns the job's status after it (not "running": it has ended), or None when it only waited (a slow rate).
    Raises UncountedChunkError when an error ends it between sending the chunk and counting it."""
    status: str = patient(lambda: _progress(ctx, job.id))  # a heartbeat, and a look for a cancel
    if status != "running":
        return status
    left = job.total - job.done
    n = min(chunk, MAX_CHUNK, left)
    if job.rate > 0:  # small chunks ten times a second, so the rate holds at every moment
        n = max(1, min(n, -(-int(job.rate) // 10)))
        wait = start + (job.changed if job.query else job.done) / job.rate - time.monotonic()
        if wait > HEARTBEAT:  # a slow rate: show we are alive, and look for a cancel, meanwhile
            sleep(HEARTBEAT)
            return None
        if wait > 0:
            sleep(wait)
    seq = job.seq + 1
    receipt = Receipt.of(job.queue, job.id, seq, JOB_TTL)
    try:
        changed, taken = patient(lambda: step(ctx, job, n, mask, receipt))
        counted: str = patient(lambda: _progress(ctx, job.id, taken if taken else left, changed, seq=seq,
                                                 emptied=taken == 0))
    except JobNotFoundError:
        raise
    except Exception as exc:
        raise UncountedChunkError(str(exc)) from exc
    return counted


def _recover(ctx: Ctx, job: Job) -> None:
    """Count the chunk an earlier runner of the job applied and never counted (its receipt is numbered one past
    the last counted), as that runner would have."""
    receipt = Receipt.of(job.queue, job.id, job.seq + 1, JOB_TTL)
    got = kept(ctx, receipt)
    if got is None:
        return
    changed, taken = findjob.finish(ctx, job, got[0], got[2]) if job.query else got[:2]
    left = job.total - job.done
    _progress(ctx, job.id, taken if taken else left, changed, seq=receipt.seq, emptied=taken == 0)


def _fail(ctx: Ctx, job_id: str, exc: Exception) -> None:
    uncounted = "1" if isinstance(exc, UncountedChunkError) else "0"
    try:
        ctx.run(Call(script("job_fail"), [keys.job(job_id)], [str(exc)[:500], ctx.now(), uncounted], int))
    except AsynqError as again:  # Redis refuses this too: the job shows as stalled, and can be canceled
        log.warning("job %s: could not record its failure: %s", job_id, again)
