"""Builds TaskRecords from the rows the Inspector's scripts return, never failing on a damaged task."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from asynqpy.errors import MalformedTaskError
from asynqpy.task import TaskInfo, TaskState
from asynqpy.unixtime import utc_from_unix
from asynqpy.wire import decode_task_message
from inspector import display
from inspector.context import from_unix, text
from inspector.models import PayloadView, TaskRecord

ROW_WIDTH = 7  # id, score, msg, state, result, pending_since, asynqpy_error
MISSING_HASH = "the id is listed but its task hash is gone"


def value(v: Any) -> bytes | None:
    """A script reply value, the integer 0 meaning missing."""
    return None if isinstance(v, int) else v


def score(v: Any) -> float | None:
    b = value(v)
    return float(b) if b not in (None, b"") else None


def ns_time(v: bytes | None) -> datetime | None:
    if not v:
        return None
    try:
        return utc_from_unix(int(v) / 1e9)
    except ValueError:
        return None


def _bare(q: str, tid: str, state: TaskState, last_err: str) -> TaskInfo:
    """The TaskInfo of a task whose message is unreadable: what the hash still tells."""
    return TaskInfo(id=tid, queue=q, type="", payload=b"", headers=MappingProxyType({}), state=state,
                    max_retry=0, retried=0, last_err=last_err, last_failed_at=None, timeout=0,
                    deadline=None, group="", next_process_at=None)


def record(q: str, tid: str, state: TaskState, fields: Sequence[Any], raw_score: Any, *, now: float,
           full: bool = False) -> TaskRecord:
    """A TaskRecord from the hash fields (msg, state, result, pending_since, asynqpy_error).

    raw_score: the set score, or the lease expiry for an active task. full: display forms for a detail
    view rather than a table cell.
    """
    msg, _, result, since, note = (value(f) for f in fields)
    sc = score(raw_score)
    view = display.view if full else display.preview
    active = state is TaskState.ACTIVE

    def make(info: TaskInfo, payload: PayloadView, problem: str = "") -> TaskRecord:
        return TaskRecord(info, payload, view(result) if result is not None else None, problem,
                          score=None if active else sc, pending_since=ns_time(since),
                          lease_expires_at=from_unix(sc) if active else None)

    if msg is None:
        problem = MISSING_HASH if fields[1] in (0, None) else "the task hash has no message"
        return make(_bare(q, tid, state, text(note or b"")), display.view(None), problem)
    try:
        m = decode_task_message(msg, queue=q, task_id=tid)
    except MalformedTaskError:
        return make(_bare(q, tid, state, text(note or b"")), view(msg),
                    f"the task message ({len(msg)} bytes) cannot be decoded")
    info = TaskInfo.from_message(m, state, next_process_at=_next(state, sc, now),
                                 is_orphaned=_orphaned(state, sc, now), result=result)
    if not info.id:
        info = replace(info, id=tid)
    if not info.queue:
        info = replace(info, queue=q)
    return make(info, view(info.payload, task_type=info.type))


def _next(state: TaskState, sc: float | None, now: float) -> datetime | None:
    if state is TaskState.PENDING:
        return from_unix(now)
    if state in (TaskState.SCHEDULED, TaskState.RETRY):
        return from_unix(sc)
    return None


def _orphaned(state: TaskState, sc: float | None, now: float) -> bool:
    """An active task whose lease ran out (or that has no lease at all) is held by no live worker."""
    return state is TaskState.ACTIVE and (sc is None or sc <= now)


def rows(q: str, state: TaskState, flat: Sequence[Any], *, now: float) -> list[TaskRecord]:
    """TaskRecords from a flat reply of ROW_WIDTH values per task."""
    out = []
    for i in range(0, len(flat), ROW_WIDTH):
        tid, sc, *fields = flat[i:i + ROW_WIDTH]
        out.append(record(q, text(tid), state, fields, sc, now=now))
    return out
