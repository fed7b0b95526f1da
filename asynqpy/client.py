"""Client (sync) and AsyncClient (asyncio): enqueue tasks into asynq's Redis layout."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Self

import redis
import redis.asyncio as aredis

from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError, RedisUnavailableError, mask_url
from asynqpy.options import EnqueueOptions, TaskOptions, check_int, options_from
from asynqpy.rdb import broker, keys
from asynqpy.rdb.failures import UNREACHABLE, reaching, url_of
from asynqpy.rdb.packer import EnqueuePacker, MessageTemplate
from asynqpy.rdb.scripts import AsyncRunner, Call, SyncRunner
from asynqpy.task import Task, TaskInfo, TaskState
from asynqpy.wire import TaskMessage


def _state(opts: EnqueueOptions, now: float) -> tuple[TaskState, datetime | None]:
    if opts.process_at > now:
        return TaskState.SCHEDULED, datetime.fromtimestamp(opts.process_at, tz=UTC)
    if opts.group:
        return TaskState.AGGREGATING, None
    return TaskState.PENDING, datetime.fromtimestamp(now, tz=UTC)


class _Infos:
    """TaskInfos of new tasks enqueued with the same options at the same time: what TaskInfo.from_message
    gives for their messages, filled from a template (the hot path)."""

    def __init__(self, opts: EnqueueOptions, now: float) -> None:
        state, nxt = _state(opts, now)
        self.template = {
            "queue": opts.queue, "state": state, "max_retry": opts.max_retry, "retried": 0, "last_err": "",
            "last_failed_at": None, "timeout": opts.timeout,
            "deadline": datetime.fromtimestamp(opts.deadline, tz=UTC) if opts.deadline else None,
            "group": opts.group, "next_process_at": nxt, "is_orphaned": False, "retention": opts.retention,
            "completed_at": None, "result": None,
        }

    def make(self, task: Task, task_id: str) -> TaskInfo:
        info = object.__new__(TaskInfo)
        values = info.__dict__  # frozen: filled directly, with the values from_message would give
        values.update(self.template)
        values["id"] = task_id
        values["type"] = task.type
        values["payload"] = b"" if task.nil_payload else task.payload
        values["headers"] = task.headers
        return info


def _info(task: Task, opts: EnqueueOptions, now: float) -> TaskInfo:
    return _Infos(opts, now).make(task, opts.task_id)


def message(task: Task, opts: EnqueueOptions) -> TaskMessage:
    """The TaskMessage of task with resolved options (a Task made without payload keeps Go's nil form)."""
    return broker.build_message(task.type, None if task.nil_payload else task.payload, task.headers, opts)


def _check_task(task: Task, argument: str) -> Task:
    if not isinstance(task, Task):
        raise InvalidArgumentError(f"{argument} must be a Task, not {type(task).__name__}", argument=argument)
    return task


def _prepare(task: Task, options: TaskOptions, now: float) -> tuple[EnqueueOptions, Call[None]]:
    opts = options.resolve(now)
    msg = message(_check_task(task, "task"), opts)
    return opts, broker.enqueue(msg, opts, now=now)


# Producers register their queue in asynq:queues (asynq's rule). A client repeats the SADD at most this often
# per queue, so a queue deleted by an Inspector is registered again soon, and enqueues stay one command.
REGISTER_EVERY = 10.0


class _Registry:
    """When this client last registered each queue."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def due(self, queue: str, now: float) -> str | None:
        """The queue if it must be registered with this enqueue (the caller registers it), else None."""
        if now - self._at.get(queue, -REGISTER_EVERY) < REGISTER_EVERY:
            return None
        self._at[queue] = now
        return queue


class _Batch:
    """One enqueue_many: every task's packed command, sent a chunk at a time, and each task's outcome.

    The options are checked and resolved once for the batch; each task only gets its own id, message bytes and
    command (rdb/packer.py). Only the last command of a chunk wakes idle workers, so a batch costs one wake-up
    per chunk. A client that is not a plain Redis (a cluster client) runs the same commands as Calls.
    """

    def __init__(self, tasks: Iterable[Task], options: TaskOptions, now: float, chunk: int) -> None:
        check_int(chunk, "chunk", minimum=1)
        if options.task_id is not None:
            raise InvalidArgumentError("enqueue_many takes no task_id: every task gets its own", argument="task_id")
        self.now = now
        self.chunk = chunk
        self.queue = options.queue
        self.base = options.resolve(now, task_id="-")
        template = MessageTemplate(self.base)
        self.packers = (EnqueuePacker(self.base, now, wake=False), EnqueuePacker(self.base, now, wake=True))
        self.infos = _Infos(self.base, now)
        unique = bool(self.base.unique_ttl)
        q = self.queue
        self.prepared: list[tuple[Task, str, bytes, str]] = []
        for t in tasks:
            _check_task(t, "tasks")
            tid = str(uuid.uuid4())
            payload = None if t.nil_payload else t.payload
            ukey = keys.unique(q, t.type, payload) if unique else ""
            self.prepared.append((t, tid, template.encode(t.type, payload, t.headers, tid, ukey), ukey))
        self.out: list[TaskInfo | Exception] = []

    def parts(self) -> Iterator[list[tuple[Task, str, bytes, str]]]:
        for start in range(0, len(self.prepared), self.chunk):
            yield self.prepared[start:start + self.chunk]

    def packed(self, part: list[tuple[Task, str, bytes, str]]) -> list[bytes]:
        last = len(part) - 1
        return [self.packers[i == last].pack(tid, data, ukey) for i, (_, tid, data, ukey) in enumerate(part)]

    def calls(self, part: list[tuple[Task, str, bytes, str]]) -> list[Call[None]]:
        last = len(part) - 1
        return [broker.enqueue_call(data, tid, ukey, self.base, now=self.now, wake=(i == last))
                for i, (_, tid, data, ukey) in enumerate(part)]

    def record(self, part: list[tuple[Task, str, bytes, str]], raws: Sequence[Any]) -> None:
        check = self.packers[0].check_reply
        for (t, tid, _, _), raw in zip(part, raws, strict=True):
            err = check(raw, tid)
            self.out.append(err if err is not None else self.infos.make(t, tid))

    def record_parsed(self, part: list[tuple[Task, str, bytes, str]], results: Sequence[object]) -> None:
        for (t, tid, _, _), res in zip(part, results, strict=True):
            self.out.append(res if isinstance(res, Exception) else self.infos.make(t, tid))


class Client:
    """Enqueues tasks. redis_url: ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy dev` server.

    connection: an existing binary (decode_responses=False) redis.Redis to use instead.
    """

    def __init__(self, redis_url: str | None = None, *, connection: redis.Redis | None = None) -> None:
        url = redis_url or default_redis_url()
        self.redis = connection or redis.Redis.from_url(url)
        self.url = mask_url(url) if connection is None else url_of(connection)  # for errors: password masked
        self._runner = SyncRunner(self.redis)
        self._registry = _Registry()

    def enqueue(self, task: Task, options: TaskOptions | None = None, **fields: Any) -> TaskInfo:
        """Store task for processing and return its TaskInfo.

        options: a TaskOptions; fields: any of its fields as keywords (queue=, max_retry=, timeout=, deadline=,
        process_in=, process_at=, unique=, task_id=, retention=, group=), which win over options.

        Raises DuplicateTaskError, TaskIDConflictError, InvalidArgumentError (a ValueError) naming a bad or
        unknown argument, and RedisUnavailableError when Redis cannot be reached.
        """
        now = time.time()
        opts, call = _prepare(task, options_from(options, fields), now)
        try:  # not a with-block: this is the enqueue hot path
            self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except UNREACHABLE as exc:
            raise RedisUnavailableError(self.url, exc) from exc
        return _info(task, opts, now)

    def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                     **fields: Any) -> list[TaskInfo | Exception]:
        """Enqueue many tasks with the same options (those of enqueue but task_id), pipelined in chunks.

        Returns, per task, its TaskInfo or the error it met (e.g. DuplicateTaskError with unique=). Raises
        InvalidArgumentError for a bad argument (before anything is enqueued) and RedisUnavailableError.
        """
        now = time.time()
        batch = _Batch(tasks, options_from(options, fields), now, chunk)
        with reaching(self.url):
            if batch.prepared:
                self.redis.sadd(keys.QUEUES, batch.queue)
            script = batch.packers[0].script
            for part in batch.parts():
                if self._runner.plain:
                    batch.record(part, self._runner.send_scripts(batch.packed(part), [script] * len(part)))
                else:
                    batch.record_parsed(part, self._runner.run_many(batch.calls(part)))
        return batch.out

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """The asyncio twin of Client, with the same arguments and errors."""

    def __init__(self, redis_url: str | None = None, *, connection: aredis.Redis | None = None) -> None:
        url = redis_url or default_redis_url()
        self.redis = connection or aredis.Redis.from_url(url)
        self.url = mask_url(url) if connection is None else url_of(connection)
        self._runner = AsyncRunner(self.redis, share_round_trips=True)
        self._registry = _Registry()

    async def enqueue(self, task: Task, options: TaskOptions | None = None, **fields: Any) -> TaskInfo:
        """See Client.enqueue."""
        now = time.time()
        opts, call = _prepare(task, options_from(options, fields), now)
        try:  # concurrent callers share round trips (AsyncRunner's share_round_trips)
            await self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except UNREACHABLE as exc:
            raise RedisUnavailableError(self.url, exc) from exc
        return _info(task, opts, now)

    async def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                           **fields: Any) -> list[TaskInfo | Exception]:
        """See Client.enqueue_many."""
        now = time.time()
        batch = _Batch(tasks, options_from(options, fields), now, chunk)
        with reaching(self.url):
            if batch.prepared:
                await self.redis.sadd(keys.QUEUES, batch.queue)
            script = batch.packers[0].script
            for part in batch.parts():
                if self._runner.plain:
                    batch.record(part, await self._runner.send_scripts(batch.packed(part), [script] * len(part)))
                else:
                    batch.record_parsed(part, await self._runner.run_many(batch.calls(part)))
        return batch.out

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncClient", "Client"]
