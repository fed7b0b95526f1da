"""The Inspector's write side: run, archive and delete (one task, a list, or every task of a state in bounded
chunks), pause and unpause, cancel, delete a queue, update a scheduled task's payload. Each change is one script."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asynqpy.errors import (
    AsynqError,
    FailedPreconditionError,
    InvalidArgumentError,
    MalformedTaskError,
    QueueAlreadyPausedError,
    QueueNotEmptyError,
    QueueNotPausedError,
    RedisCommandError,
    RedisUnavailableError,
    TaskAlreadyArchivedError,
    TaskNotFoundError,
)
from asynqpy.rdb import keys
from asynqpy.rdb.broker import ARCHIVE_MAX_AGE, ARCHIVE_MAX_SIZE
from asynqpy.rdb.scripts import Call
from asynqpy.task import TaskState
from asynqpy.wire import decode_task_message
from inspector.context import Ctx, check_id, check_ids, check_queue_name, check_state, state_source, text
from inspector.models import BatchResult, TaskFailure
from inspector.scripts import script

log = logging.getLogger("asynqpy.inspector")

DEFAULT_CHUNK = 250
MAX_QUEUE_DELETE_ROUNDS = 20
MAX_WAITING_DELETE_CALLS = 100_000  # delete_queue's calls that each delete a chunk of the tasks waiting on a limit
RUNNABLE = (TaskState.SCHEDULED, TaskState.RETRY, TaskState.ARCHIVED, TaskState.AGGREGATING)
ARCHIVABLE = (TaskState.PENDING, TaskState.SCHEDULED, TaskState.RETRY, TaskState.AGGREGATING)
DELETABLE = (TaskState.PENDING, TaskState.SCHEDULED, TaskState.RETRY, TaskState.ARCHIVED, TaskState.COMPLETED,
             TaskState.AGGREGATING)


def _not_found(q: str, tid: str) -> AsynqError:
    return TaskNotFoundError(f"no task {tid!r} in queue {q!r}", queue=q, task_id=tid)


def _run_error(q: str, tid: str, code: int) -> AsynqError:
    if code == -1:
        return FailedPreconditionError(f"task {tid!r} is active: it cannot be run again (cancel it instead)",
                                       queue=q, task_id=tid)
    if code == -2:
        return FailedPreconditionError(f"task {tid!r} is already pending", queue=q, task_id=tid)
    return _not_found(q, tid)


def _archive_error(q: str, tid: str, code: int) -> AsynqError:
    if code == -1:
        return TaskAlreadyArchivedError(f"task {tid!r} is already archived", queue=q, task_id=tid)
    if code == -2:
        return FailedPreconditionError(f"task {tid!r} is active: it cannot be archived (cancel it instead)",
                                       queue=q, task_id=tid)
    return _not_found(q, tid)


def _delete_error(q: str, tid: str, code: int) -> AsynqError:
    if code == -1:
        return FailedPreconditionError(f"task {tid!r} is active: it cannot be deleted (cancel it first)",
                                       queue=q, task_id=tid)
    return _not_found(q, tid)


def _codes(raw: Sequence[Any]) -> list[int]:
    return [int(c) for c in raw]


def _moved_and_taken(raw: Sequence[Any]) -> tuple[int, int]:
    return int(raw[0]), int(raw[1])


def _run_call(q: str, ids: Sequence[str], now: float) -> Call[list[int]]:
    return Call(script("run_tasks"), [keys.pending(q), keys.exact_due(q)],
                [keys.queue_prefix(q), int(now * 1e9), *ids], _codes)


def _archive_call(q: str, ids: Sequence[str], now: float) -> Call[list[int]]:
    return Call(script("archive_tasks"), [keys.pending(q), keys.archived(q), keys.exact_due(q)],
                [keys.queue_prefix(q), int(now), int(now) - ARCHIVE_MAX_AGE, ARCHIVE_MAX_SIZE, *ids], _codes)


def _delete_call(q: str, ids: Sequence[str], now: float) -> Call[list[int]]:
    return Call(script("delete_tasks"), [keys.pending(q), keys.exact_due(q)], [keys.queue_prefix(q), *ids], _codes)


def _run_chunk(q: str, source: Source, n: int, now: float) -> Call[tuple[int, int]]:
    return Call(script("run_all"), [source.key, keys.pending(q), keys.groups(q), keys.exact_due(q)],
                [keys.task_prefix(q), n, int(now * 1e9), source.group], _moved_and_taken)


def _archive_chunk(q: str, source: Source, n: int, now: float) -> Call[tuple[int, int]]:
    return Call(script("archive_all"), [source.key, keys.archived(q), keys.groups(q), keys.exact_due(q)],
                [keys.task_prefix(q), n, source.kind, int(now), int(now) - ARCHIVE_MAX_AGE, ARCHIVE_MAX_SIZE,
                 source.group], _moved_and_taken)


def _delete_chunk(q: str, source: Source, n: int, now: float) -> Call[tuple[int, int]]:
    return Call(script("delete_all"), [source.key, keys.groups(q), keys.exact_due(q)],
                [keys.task_prefix(q), n, source.kind, source.group],
                _moved_and_taken)


@dataclass(frozen=True)
class Source:
    """Where the tasks of one state (and group) live: the key, "list" or "zset", and the group or ""."""

    key: str
    kind: str
    group: str


@dataclass(frozen=True)
class TaskAction:
    """One action on tasks: its script for listed ids (reply: a code per id), its script for a chunk of a whole
    state (reply: moved, taken), the states it applies to as a whole, and the error each failure code means."""

    name: str
    on_ids: Callable[[str, Sequence[str], float], Call[list[int]]]
    on_chunk: Callable[[str, Source, int, float], Call[tuple[int, int]]]
    states: tuple[TaskState, ...]
    error: Callable[[str, str, int], AsynqError]


RUN = TaskAction("run", _run_call, _run_chunk, RUNNABLE, _run_error)
ARCHIVE = TaskAction("archive", _archive_call, _archive_chunk, ARCHIVABLE, _archive_error)
DELETE = TaskAction("delete", _delete_call, _delete_chunk, DELETABLE, _delete_error)


def on_tasks(ctx: Ctx, action: TaskAction, q: str, task_ids: Sequence[str], *, chunk: int) -> BatchResult:
    """Apply action to each id, chunk ids per script call. Raises QueueNotFoundError; per-id errors are returned."""
    check_queue_name(q)
    ids = check_ids(task_ids)
    ctx.require_queue(q)
    ok: list[str] = []
    failed: list[TaskFailure] = []
    for start in range(0, len(ids), chunk):
        part = ids[start:start + chunk]
        codes = ctx.run(action.on_ids(q, part, ctx.now()))
        for tid, code in zip(part, codes, strict=True):
            if code == 1:
                ok.append(tid)
            else:
                failed.append(TaskFailure(tid, action.error(q, tid, code)))
    return BatchResult(tuple(ok), tuple(failed))


def on_task(ctx: Ctx, action: TaskAction, q: str, task_id: str) -> None:
    """Apply action to one task; raises its typed error (QueueNotFoundError, TaskNotFoundError, ...)."""
    check_id(task_id)
    res = on_tasks(ctx, action, q, [task_id], chunk=1)
    if res.failed:
        raise res.failed[0].error


def _groups(ctx: Ctx, q: str, group: str | None) -> list[str | None]:
    if group is not None:
        return [group]
    return [text(g) for g in sorted(ctx.command("SMEMBERS", keys.groups(q)))]


def on_all(ctx: Ctx, action: TaskAction, q: str, state: TaskState | str, *, group: str | None, chunk: int) -> int:
    """Apply action to every task of a state (every group's when state is aggregating and group is None).

    Works in chunks of `chunk` tasks, each one script call, and stops after as many tasks as the state held
    at the start, so producers that keep adding cannot keep it going. Returns how many tasks changed.
    Raises QueueNotFoundError, FailedPreconditionError when the action does not apply to the state.
    """
    check_queue_name(q)
    st = check_state(state)
    if st not in action.states:
        raise FailedPreconditionError(f"cannot {action.name} all {st.value} tasks (possible for: "
                                      f"{', '.join(s.value for s in action.states)})", queue=q)
    if group is not None and st is not TaskState.AGGREGATING:
        raise InvalidArgumentError(f"group= applies to aggregating tasks only, not {st.value}", argument="group")
    ctx.require_queue(q)
    groups = _groups(ctx, q, group) if st is TaskState.AGGREGATING else [None]
    return sum(_drain(ctx, action, q, st, g, chunk) for g in groups)


def size_of(ctx: Ctx, key: str, kind: str) -> int:
    """How many tasks the list or sorted set at key holds."""
    return int(ctx.command("LLEN" if kind == "list" else "ZCARD", key))


def _drain(ctx: Ctx, action: TaskAction, q: str, st: TaskState, group: str | None, chunk: int) -> int:
    key, kind = state_source(q, st, group)
    source = Source(key, kind, group or "")
    budget = size_of(ctx, key, kind)
    moved = seen = 0
    while seen < budget:
        m, taken = ctx.run(action.on_chunk(q, source, min(chunk, budget - seen), ctx.now()))
        moved, seen = moved + m, seen + taken
        if taken == 0:
            break
    return moved


def pause(ctx: Ctx, q: str) -> None:
    """Stop workers from taking the queue's pending tasks. Raises QueueAlreadyPausedError.

    As asynq does, a queue need not be registered to be paused.
    """
    check_queue_name(q)
    if not ctx.command("SET", keys.paused(q), int(ctx.now()), "NX"):
        raise QueueAlreadyPausedError(f"queue {q!r} is already paused", queue=q)


def unpause(ctx: Ctx, q: str) -> None:
    """Let workers take the queue's tasks again. Raises QueueNotPausedError.

    Idle asynqpy workers of the queue are woken (our producers' wake-up channel), so its pending tasks start now
    rather than at their next poll (idle_poll_interval; Go's workers, which do not listen, find them then). The
    queue is resumed once its key is gone: a wake-up Redis refuses (an ACL without PUBLISH) is logged, not raised."""
    check_queue_name(q)
    if not ctx.command("DEL", keys.paused(q)):
        raise QueueNotPausedError(f"queue {q!r} is not paused", queue=q)
    try:
        ctx.command("PUBLISH", keys.WAKE_CHANNEL, q)
    except (RedisUnavailableError, RedisCommandError) as exc:
        log.warning("queue %r resumed; its idle workers were not woken (%s): they find it at their next poll", q, exc)


def cancel(ctx: Ctx, task_id: str) -> int:
    """Ask every server to cancel the running task (best effort). Returns how many servers heard it."""
    check_id(task_id)
    return int(ctx.command("PUBLISH", keys.CANCEL_CHANNEL, task_id))


def delete_queue(ctx: Ctx, q: str, *, force: bool, chunk: int) -> None:
    """Remove a queue: its tasks (all of them with force), its structures and its registration.

    Without force a queue holding pending (waiting on a limit too), active, scheduled, retry, archived or
    aggregating tasks is kept (QueueNotEmptyError); completed tasks are deleted with it. With force only active
    tasks keep it (FailedPreconditionError). Stats and the paused flag stay, as in asynq. Raises QueueNotFoundError.
    """
    check_queue_name(q)
    ctx.require_queue(q)
    names = ("pending", "active", "scheduled", "retry", "archived", "lease", "completed")
    call = Call(script("delete_queue"), [*(keys.state_key(q, s) for s in names), keys.groups(q), keys.exact_due(q)],
                ["1" if force else "0", keys.task_prefix(q), keys.group_prefix(q), chunk], int)
    for _ in range(MAX_QUEUE_DELETE_ROUNDS):
        code = ctx.run(call)
        for _ in range(MAX_WAITING_DELETE_CALLS):  # (force) the tasks waiting on a limit, a chunk per call
            if code != -4:
                break
            code = ctx.run(call)
        if code == 1:
            ctx.command("SREM", keys.QUEUES, q)
            return
        if code == -1:
            raise QueueNotEmptyError(f"queue {q!r} is not empty (use force to delete its tasks)", queue=q)
        if code == -2:
            raise FailedPreconditionError(f"queue {q!r} has active tasks: it cannot be deleted", queue=q)
        states = DELETABLE if force else (TaskState.COMPLETED,)
        for st in states:
            for g in (_groups(ctx, q, None) if st is TaskState.AGGREGATING else [None]):
                _drain(ctx, DELETE, q, st, g, chunk)
    raise FailedPreconditionError(f"queue {q!r} keeps receiving tasks: it could not be emptied", queue=q)


def update_payload(ctx: Ctx, q: str, task_id: str, payload: bytes) -> None:
    """Replace a scheduled task's payload. Raises QueueNotFoundError, TaskNotFoundError,
    FailedPreconditionError (not scheduled), MalformedTaskError (its message does not decode)."""
    check_queue_name(q)
    check_id(task_id)
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"payload must be bytes, not {type(payload).__name__}", argument="payload")
    ctx.require_queue(q)
    key = keys.task(q, task_id)
    for _ in range(5):
        old, state = ctx.command("HMGET", key, "msg", "state")
        if state is None:
            raise _not_found(q, task_id)
        if text(state) != TaskState.SCHEDULED.value:
            break
        if old is None:
            raise MalformedTaskError(f"task {task_id!r} in queue {q!r} has no message", queue=q, task_id=task_id)
        msg = decode_task_message(old if isinstance(old, bytes) else old.encode(), queue=q, task_id=task_id)
        msg.payload = bytes(payload)
        code = ctx.run(Call(script("update_payload"), [key], [old, msg.SerializeToString()], int))
        if code == 1:
            return
        if code == 0:
            raise _not_found(q, task_id)
        if code == -1:
            break
    else:
        raise FailedPreconditionError(f"task {task_id!r} kept changing: try again", queue=q, task_id=task_id)
    state_now = text(ctx.command("HGET", key, "state") or b"gone")
    raise FailedPreconditionError(f"only scheduled tasks can be updated; task {task_id!r} is {state_now}",
                                  queue=q, task_id=task_id)
