"""Client (sync) and AsyncClient (asyncio): enqueue tasks into asynq's Redis layout."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Self

import redis
import redis.asyncio as aredis

from asynqpy.connection import aconnect, connect
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError, NotDurableError, RedisUnavailableError, mask_url
from asynqpy.options import EnqueueOptions, TaskOptions, check_int, options_from
from asynqpy.rdb import broker, keys
from asynqpy.rdb.failures import UNREACHABLE, reaching, url_of
from asynqpy.rdb.scripts import AsyncRunner, Call, SyncRunner
from asynqpy.task import Task, TaskInfo, TaskState
from asynqpy.wire import TaskMessage


def _info(msg: TaskMessage, opts: EnqueueOptions, now: float) -> TaskInfo:
    if opts.process_at > now:
        state, nxt = TaskState.SCHEDULED, datetime.fromtimestamp(opts.process_at, tz=UTC)
    elif opts.group:
        state, nxt = TaskState.AGGREGATING, None
    else:
        state, nxt = TaskState.PENDING, datetime.fromtimestamp(now, tz=UTC)
    return TaskInfo.from_message(msg, state, next_process_at=nxt)


def message(task: Task, opts: EnqueueOptions) -> TaskMessage:
    """The TaskMessage of task with resolved options (a Task made without payload keeps Go's nil form)."""
    return broker.build_message(task.type, None if task.nil_payload else task.payload, task.headers, opts)


def _check_task(task: Task, argument: str) -> Task:
    if not isinstance(task, Task):
        raise InvalidArgumentError(f"{argument} must be a Task, not {type(task).__name__}", argument=argument)
    return task


def _prepare(task: Task, options: TaskOptions, now: float) -> tuple[TaskMessage, EnqueueOptions, Call[None]]:
    opts = options.resolve(now)
    msg = message(_check_task(task, "task"), opts)
    return msg, opts, broker.enqueue(msg, opts, now=now)


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
    """One enqueue_many: the messages, their Calls a chunk at a time, and each task's outcome.

    The options are checked and resolved once for the batch; each task only gets its own id. Only the last
    Call of a chunk wakes idle workers, so a batch costs one wake-up per chunk.
    """

    def __init__(self, tasks: Iterable[Task], options: TaskOptions, now: float, chunk: int) -> None:
        check_int(chunk, "chunk", minimum=1)
        if options.task_id is not None:
            raise InvalidArgumentError("enqueue_many takes no task_id: every task gets its own", argument="task_id")
        self.now = now
        self.chunk = chunk
        self.queue = options.queue
        base = options.resolve(now, task_id="-")
        self.durable = base.durable
        self.prepared: list[tuple[TaskMessage, EnqueueOptions]] = []
        for t in tasks:
            opts = dataclasses.replace(base, task_id=str(uuid.uuid4()))
            self.prepared.append((message(_check_task(t, "tasks"), opts), opts))
        self.out: list[TaskInfo | Exception] = []

    def chunks(self) -> Iterator[list[Call[None]]]:
        for start in range(0, len(self.prepared), self.chunk):
            part = self.prepared[start:start + self.chunk]
            yield [broker.enqueue(msg, opts, now=self.now, wake=(i == len(part) - 1))
                   for i, (msg, opts) in enumerate(part)]

    def record(self, results: Sequence[object]) -> None:
        part = self.prepared[len(self.out):len(self.out) + len(results)]
        for (msg, opts), res in zip(part, results, strict=True):
            self.out.append(res if isinstance(res, Exception) else _info(msg, opts, self.now))


def _unconfirmed(results: list[Exception | None], confirmed: bool) -> list[Exception | None]:
    """A durable chunk's results: when the replicas did not confirm it, every stored task says so."""
    if confirmed:
        return results
    err = NotDurableError("enqueued on the primary, but the replicas did not confirm the batch in time")
    return [r if isinstance(r, Exception) else err for r in results]


class Client:
    """Enqueues tasks. redis_url: ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy dev` server.

    connection: an existing binary (decode_responses=False) redis.Redis to use instead.
    """

    def __init__(self, redis_url: str | None = None, *, connection: redis.Redis | None = None) -> None:
        url = redis_url or default_redis_url()
        self.redis = connection or connect(url)
        self.url = mask_url(url) if connection is None else url_of(connection)  # for errors: password masked
        self._runner = SyncRunner(self.redis)
        self._registry = _Registry()

    def enqueue(self, task: Task, options: TaskOptions | None = None, **fields: Any) -> TaskInfo:
        """Store task for processing and return its TaskInfo.

        options: a TaskOptions; fields: any of its fields as keywords (queue=, max_retry=, timeout=, deadline=,
        process_in=, process_at=, unique=, task_id=, retention=, group=, durable=), which win over options.

        durable=True (or a Durability) returns only once a replica also holds the task (Redis WAIT), so
        a failover cannot lose it.

        Raises DuplicateTaskError, TaskIDConflictError, InvalidArgumentError (a ValueError) naming a bad or
        unknown argument, RedisUnavailableError when Redis cannot be reached, and NotDurableError when the
        replicas of a durable enqueue did not confirm it in time.
        """
        now = time.time()
        msg, opts, call = _prepare(task, options_from(options, fields), now)
        try:  # not a with-block: this is the enqueue hot path
            if opts.durable is not None:
                self._runner.run_durable(call, opts.durable, register_queue=self._registry.due(opts.queue, now))
            else:
                self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except UNREACHABLE as exc:
            raise RedisUnavailableError(self.url, exc) from exc
        return _info(msg, opts, now)

    def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                     **fields: Any) -> list[TaskInfo | Exception]:
        """Enqueue many tasks with the same options (those of enqueue but task_id), pipelined in chunks.

        Returns, per task, its TaskInfo or the error it met (e.g. DuplicateTaskError with unique=, or
        NotDurableError for each task of a durable chunk the replicas did not confirm; one WAIT per chunk, per
        node on a cluster). Raises InvalidArgumentError for a bad argument (before anything is enqueued) and
        RedisUnavailableError.
        """
        now = time.time()
        batch = _Batch(tasks, options_from(options, fields), now, chunk)
        with reaching(self.url):
            if batch.prepared:
                self.redis.sadd(keys.QUEUES, batch.queue)
            for calls in batch.chunks():
                if batch.durable is not None:
                    batch.record(_unconfirmed(*self._runner.run_many_durable(calls, batch.durable)))
                else:
                    batch.record(self._runner.run_many(calls))
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
        self.redis = connection or aconnect(url)
        self.url = mask_url(url) if connection is None else url_of(connection)
        self._runner = AsyncRunner(self.redis)
        self._registry = _Registry()

    async def enqueue(self, task: Task, options: TaskOptions | None = None, **fields: Any) -> TaskInfo:
        """See Client.enqueue."""
        now = time.time()
        msg, opts, call = _prepare(task, options_from(options, fields), now)
        try:
            if opts.durable is not None:
                await self._runner.run_durable(call, opts.durable,
                                               register_queue=self._registry.due(opts.queue, now))
            else:
                await self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except UNREACHABLE as exc:
            raise RedisUnavailableError(self.url, exc) from exc
        return _info(msg, opts, now)

    async def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                           **fields: Any) -> list[TaskInfo | Exception]:
        """See Client.enqueue_many."""
        now = time.time()
        batch = _Batch(tasks, options_from(options, fields), now, chunk)
        with reaching(self.url):
            if batch.prepared:
                await self.redis.sadd(keys.QUEUES, batch.queue)
            for calls in batch.chunks():
                if batch.durable is not None:
                    batch.record(_unconfirmed(*await self._runner.run_many_durable(calls, batch.durable)))
                else:
                    batch.record(await self._runner.run_many(calls))
        return batch.out

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncClient", "Client"]
