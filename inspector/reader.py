"""The Inspector's read side for queues and tasks: queue info, daily history, task pages, one task, search."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from asynqpy.errors import InvalidArgumentError, MalformedTaskError, TaskNotFoundError
from asynqpy.options import check_int
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.syncdoor import Batch
from asynqpy.task import TaskState
from inspector import queueread, records
from inspector.context import (
    Ctx,
    check_id,
    check_page,
    check_queue_name,
    check_state,
    list_window,
    queue_missing,
    state_source,
    text,
)
from inspector.models import DailyStats, QueueInfo, SearchResult, TaskPage, TaskRecord
from inspector.scripts import script

MAX_HISTORY_DAYS = 365


def queues(ctx: Ctx) -> list[str]:
    return sorted(text(q) for q in ctx.command("SMEMBERS", keys.QUEUES))


def queue_infos(ctx: Ctx, names: Sequence[str] | None, *, memory: bool | Collection[str]) -> list[QueueInfo]:
    """Infos of the given queues (every registered queue when None), one pipelined round trip for all of them.

    memory: sample the memory estimate of every queue (True), of none (False) or of the queues in a collection.

    Raises QueueNotFoundError for a given name that is not registered.
    """
    names = queues(ctx) if names is None else [check_queue_name(q) for q in names]
    if not names:
        return []
    now = ctx.now()
    sampled = set(names) if memory is True else set() if memory is False else set(memory)
    calls = queueread.calls(names, now, memory=sampled, fingerprints={}, cluster=ctx.door.cluster)

    def fill(b: Batch) -> None:
        b.command("SMISMEMBER", keys.QUEUES, *names)
        for c in calls:
            b.script(c)

    known, *raws = ctx.read(fill)
    for q, ok in zip(names, known, strict=True):
        if not ok:
            raise queue_missing(q)
    read = dict(pair for c, raw in zip(calls, raws, strict=True) for pair in c.parse(raw))
    return [i for i in (read[q] for q in names) if i is not None]  # every one: no fingerprints given


def history(ctx: Ctx, q: str, days: int) -> list[DailyStats]:
    """Processed and failed per UTC day, today first. Raises ValueError for days outside 1..365."""
    check_queue_name(q)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_HISTORY_DAYS:
        raise InvalidArgumentError(f"days must be an int between 1 and {MAX_HISTORY_DAYS}, got {days!r}",
                                   argument="days")
    now = ctx.now()
    times = [now - i * 86400 for i in range(days)]
    ks = [k for t in times for k in (keys.processed_daily(q, t), keys.failed_daily(q, t))]
    known, vals = ctx.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, q), b.command("MGET", *ks)))
    if not known:
        raise queue_missing(q)
    return [DailyStats(q, datetime.fromtimestamp(t, tz=UTC).date(), queueread.int_or_zero(vals[2 * i]),
                       queueread.int_or_zero(vals[2 * i + 1]))
            for i, t in enumerate(times)]


def list_tasks(ctx: Ctx, q: str, state: TaskState | str, *, page: int, size: int,
               group: str | None) -> TaskPage:
    """One page of a state in asynq's order (pending and active: next to run first; sets: lowest score first)."""
    check_queue_name(q)
    st = check_state(state)
    start, stop = check_page(page, size)
    key, kind = state_source(q, st, group)
    lo, hi = list_window(start, stop) if kind == "list" else (start, stop)
    now = ctx.now()

    def parse(raw: Sequence[Any]) -> TaskPage:
        rows = records.rows(q, st, raw[1:], now=now)
        if kind == "list":
            rows.reverse()
        return TaskPage(q, st, group, page, size, int(raw[0]), tuple(rows))

    score = {TaskState.ACTIVE: "1", TaskState.SCHEDULED: "2", TaskState.RETRY: "2"}.get(st, "0")
    call = Call(script("list_tasks"), [key, keys.lease(q), keys.exact_due(q)],
                [kind, lo, hi, keys.task_prefix(q), score], parse)
    known, raw = ctx.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, q), b.script(call)))
    if not known:
        raise queue_missing(q)
    return call.parse(raw)


def get_task(ctx: Ctx, q: str, task_id: str) -> TaskRecord:
    """Everything stored about one task, with full display forms.

    Raises QueueNotFoundError, TaskNotFoundError, MalformedTaskError (the hash's state is not asynq's).
    """
    check_queue_name(q)
    check_id(task_id)
    known, rec = fetch_task(ctx, q, task_id)
    if not known:
        raise queue_missing(q)
    if rec is None:
        raise TaskNotFoundError(f"no task {task_id!r} in queue {q!r}", queue=q, task_id=task_id)
    return rec


def fetch_task(ctx: Ctx, q: str, task_id: str) -> tuple[bool, TaskRecord | None]:
    """Whether q is registered, and the task (None when its hash does not exist), in one round trip.

    Raises MalformedTaskError when the hash's state is not one of asynq's.
    """
    now = ctx.now()

    def parse(raw: Sequence[Any]) -> TaskRecord | None:
        if not raw:
            return None
        msg, st, result, since, note, sc = raw
        state_name = text(records.value(st) or b"")
        try:
            state = TaskState(state_name)
        except ValueError:
            raise MalformedTaskError(f"task {task_id!r} in queue {q!r} has an unknown state {state_name!r}",
                                     queue=q, task_id=task_id) from None
        return records.record(q, task_id, state, [msg, st, result, since, note], sc, now=now, full=True)

    call = Call(script("get_task"), [keys.task(q, task_id), keys.lease(q), keys.exact_due(q)],
                [keys.queue_prefix(q), task_id], parse)
    known, raw = ctx.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, q), b.script(call)))
    return bool(known), call.parse(raw)


def search(ctx: Ctx, q: str, state: TaskState | str, flt: SearchFilter, *, limit: int, cursor: int,
           max_scan: int, window: int, group: str | None) -> SearchResult:
    """Matches of flt among at most max_scan tasks from position cursor, window tasks per script call."""
    check_queue_name(q)
    st = check_state(state)
    for name, v in (("limit", limit), ("max_scan", max_scan), ("window", window)):
        check_int(v, name, minimum=1)
    check_int(cursor, "cursor")
    ctx.require_queue(q)
    key, kind = state_source(q, st, group)
    found: list[TaskRecord] = []
    pos, scanned = cursor, 0
    while scanned < max_scan:
        n = min(window, max_scan - scanned)
        taken, hits = _scan_window(ctx, q, st, key, kind, pos, n, flt)
        for offset, rec in hits:
            found.append(rec)
            if len(found) == limit:
                scanned += offset + 1 - pos
                return SearchResult(q, st, tuple(found), scanned, cursor, offset + 1)
        scanned += taken
        pos += taken
        if taken < n:
            return SearchResult(q, st, tuple(found), scanned, cursor, None)
    return SearchResult(q, st, tuple(found), scanned, cursor, pos)


def _scan_window(ctx: Ctx, q: str, st: TaskState, key: str, kind: str, pos: int, n: int,
                 flt: SearchFilter) -> tuple[int, list[tuple[int, TaskRecord]]]:
    """Scan n tasks from position pos. Returns how many were scanned and the (position, record) matches."""
    lo, hi = list_window(pos, pos + n - 1) if kind == "list" else (pos, pos + n - 1)
    now = ctx.now()

    def parse(raw: Sequence[Any]) -> tuple[int, list[tuple[int, TaskRecord]]]:
        taken = int(raw[0])
        hits = []
        width = records.ROW_WIDTH + 1
        for i in range(1, len(raw), width):
            at, tid, sc, *fields = raw[i:i + width]
            offset = pos + (taken - int(at) if kind == "list" else int(at) - 1)
            rec = records.record(q, text(tid), st, fields, sc, now=now)
            if flt.matches(rec, fields[4]):
                hits.append((offset, rec))
        hits.sort(key=lambda h: h[0])
        return taken, hits

    return ctx.read_script(Call(script("search"), [key], [kind, lo, hi, keys.task_prefix(q), flt.id_prefix,
                                                          *flt.needles()], parse))


class SearchFilter:
    """What search looks for: a type prefix, an id prefix, a payload substring and an error substring.

    Substrings match case-insensitively for ASCII letters. Raises InvalidArgumentError for a non-str criterion.
    """

    def __init__(self, *, type: str | None = None, id_prefix: str | None = None, text: str | None = None,
                 error: str | None = None) -> None:
        for name, v in (("type", type), ("id_prefix", id_prefix), ("text", text), ("error", error)):
            if v is not None and not isinstance(v, str):
                raise InvalidArgumentError(f"{name} must be a str, not {type_name(v)}", argument=name)
        self.type = type or ""
        self.id_prefix = id_prefix or ""
        self.text = (text or "").encode().lower()
        self.error = (error or "").encode().lower()

    def needles(self) -> list[bytes]:
        return [n for n in (self.type.encode().lower(), self.text, self.error) if n]

    def matches(self, rec: TaskRecord, note: Any) -> bool:
        info = rec.info
        if not info.id.startswith(self.id_prefix):
            return False
        if rec.problem and (self.type or self.text):
            return False
        if self.type and not info.type.startswith(self.type):
            return False
        if self.text and self.text not in info.payload.lower():
            return False
        noted = records.value(note) or b""
        return not self.error or self.error in info.last_err.encode().lower() or self.error in noted.lower()


def type_name(v: object) -> str:
    return type(v).__name__
