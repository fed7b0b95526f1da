"""The last errors: the most recent retry and archived tasks of each queue, grouped by queue, type and the
error's fingerprint (inspector.fingerprint: ids, numbers, addresses... replaced by placeholders). Tasks archived by
hand, which never failed (no error, no failure time), are read but are not errors: they are left out.

The cost is bounded: for each queue, one script reads the `limit` newest tasks of the retry set and of the
archived set (by score: archived tasks by the time they failed, retry tasks by their next attempt, which
follows their last failure), all queues in one pipelined round trip. No full scan of a big set, ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import Batch
from asynqpy.task import TaskState
from inspector import records
from inspector.context import Ctx, check_queue_name, queue_missing
from inspector.fingerprint import fingerprint
from inspector.models import TaskRecord
from inspector.reader import queues as all_queues
from inspector.scripts import script

MAX_LIMIT = 1000
EXAMPLE_CHARS = 2000  # the example message kept with a group
SAMPLE_IDS = 5


@dataclass(frozen=True)
class FailureGroup:
    """Recent failures of one queue and task type whose error messages share one fingerprint.

    fingerprint is the message with its varying parts as placeholders ("sending to <email>"); error is one
    real message of the group (the newest). count counts the failures seen among the newest `limit` retry
    and archived tasks of the queue (not all time); first_seen and last_seen are the earliest and latest
    failure times among them; task_ids holds a few of the newest, with their states, to link to.
    """

    queue: str
    task_type: str
    error: str
    fingerprint: str
    count: int
    retry: int
    archived: int
    first_seen: datetime | None
    last_seen: datetime | None
    task_ids: tuple[tuple[str, TaskState], ...]


@dataclass(frozen=True)
class RecentFailures:
    """The groups, most recent first, and how many failed tasks were read to build them (at most 2*limit per
    queue). truncated: some queue had more failed tasks than were read."""

    groups: tuple[FailureGroup, ...]
    scanned: int
    truncated: bool


def _call(q: str, state: TaskState, limit: int) -> Call[list[Any]]:
    key = keys.retry(q) if state is TaskState.RETRY else keys.archived(q)
    score = "2" if state is TaskState.RETRY else "0"  # retry tasks: their exact due time, as list_tasks shows it
    return Call(script("list_tasks"), [key, keys.lease(q), keys.exact_due(q)],
                ["zset", -limit, -1, keys.task_prefix(q), score], list)


def recent_failures(ctx: Ctx, names: Sequence[str] | None, *, limit: int) -> RecentFailures:
    """The newest failures of the given queues (every queue when None). Raises QueueNotFoundError, ValueError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an int between 1 and {MAX_LIMIT}, got {limit!r}")
    qs = all_queues(ctx) if names is None else [check_queue_name(q) for q in names]
    if not qs:
        return RecentFailures((), 0, False)
    states = (TaskState.RETRY, TaskState.ARCHIVED)

    def fill(b: Batch) -> None:
        b.command("SMISMEMBER", keys.QUEUES, *qs)
        for q in qs:
            for st in states:
                b.script(_call(q, st, limit))

    known, *raws = ctx.read(fill)
    for q, ok in zip(qs, known, strict=True):
        if not ok:
            raise queue_missing(q)
    now = ctx.now()
    recs: list[TaskRecord] = []
    truncated = False
    for i, q in enumerate(qs):
        for j, st in enumerate(states):
            raw = raws[i * len(states) + j]
            truncated = truncated or int(raw[0]) > limit
            recs.extend(records.rows(q, st, raw[1:], now=now))
    return RecentFailures(tuple(group([r for r in recs if failed(r)])), len(recs), truncated)


def failed(r: TaskRecord) -> bool:
    """Whether the task failed: it has an error, a failure time or a problem reading it. A task archived by hand
    (an operator's Archive, never run or never failed) has none of them, and is no error."""
    return bool(r.info.last_err or r.info.last_failed_at or r.problem)


def _failed_at(r: TaskRecord) -> datetime | None:
    return r.info.last_failed_at


def _age_key(r: TaskRecord) -> float:
    t = _failed_at(r)
    return t.timestamp() if t else 0.0


def _message(r: TaskRecord) -> str:
    return r.info.last_err or r.problem or "(no error message)"


def group(recs: Sequence[TaskRecord]) -> list[FailureGroup]:
    """Failures grouped by (queue, type, the error's fingerprint), the group with the latest failure first."""
    buckets: dict[tuple[str, str, str], list[TaskRecord]] = {}
    for r in recs:
        buckets.setdefault((r.info.queue, r.info.type, fingerprint(_message(r))), []).append(r)
    out = []
    for (q, typ, fp), rs in buckets.items():
        times = [t for t in (_failed_at(r) for r in rs) if t is not None]
        rs.sort(key=_age_key, reverse=True)
        out.append(FailureGroup(
            queue=q, task_type=typ, error=_message(rs[0])[:EXAMPLE_CHARS], fingerprint=fp, count=len(rs),
            retry=sum(r.state is TaskState.RETRY for r in rs), archived=sum(r.state is TaskState.ARCHIVED for r in rs),
            first_seen=min(times) if times else None, last_seen=max(times) if times else None,
            task_ids=tuple((r.id, r.state) for r in rs[:SAMPLE_IDS])))
    out.sort(key=lambda g: (g.last_seen.timestamp() if g.last_seen else 0.0, g.count), reverse=True)
    return out
