"""Client (sync) and AsyncClient (asyncio): enqueue tasks into asynq's Redis layout."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Self

import redis
import redis.asyncio as aredis

from asynqpy.connection import aconnect, connect
from asynqpy.embedded import default_redis_url
from asynqpy.errors import NotDurableError
from asynqpy.options import DEFAULT_MAX_RETRY, DEFAULT_QUEUE, Duration, EnqueueOptions, build_options
from asynqpy.rdb import broker, keys
from asynqpy.rdb.durability import Durability
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


def _prepare(task: Task, kw: dict[str, Any], now: float) -> tuple[TaskMessage, EnqueueOptions, Call]:
    if not isinstance(task, Task):
        raise TypeError(f"enqueue takes a Task, not {type(task).__name__}")
    opts = build_options(now=now, **kw)
    msg = broker.build_message(task.type, task.payload, dict(task.headers), opts)
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
    """One enqueue_many: the checked messages, their Calls a chunk at a time, and each task's outcome.

    Only the last Call of a chunk wakes idle workers, so a batch costs one wake-up per chunk.
    """

    def __init__(self, tasks: Iterable[Task], kw: dict[str, Any], now: float, chunk: int) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be a positive int, got {chunk!r}")
        self.now = now
        self.chunk = chunk
        self.prepared = [_prepare(t, kw, now) for t in tasks]
        self.durable = build_options(now=now, **kw).durable  # checked even for an empty batch
        self.out: list[TaskInfo | Exception] = []

    def chunks(self) -> Iterator[list[Call]]:
        for start in range(0, len(self.prepared), self.chunk):
            part = self.prepared[start:start + self.chunk]
            yield [broker.enqueue(msg, opts, now=self.now, wake=(i == len(part) - 1))
                   for i, (msg, opts, _) in enumerate(part)]

    def record(self, results: list[Any]) -> None:
        part = self.prepared[len(self.out):len(self.out) + len(results)]
        for (msg, opts, _), res in zip(part, results, strict=True):
            self.out.append(res if isinstance(res, Exception) else _info(msg, opts, self.now))


def _unconfirmed(results: list[Any], confirmed: bool) -> list[Any]:
    """A durable chunk's results: when the replicas did not confirm it, every stored task says so."""
    if confirmed:
        return results
    err = NotDurableError("enqueued on the primary, but the replicas did not confirm the batch in time")
    return [r if isinstance(r, Exception) else err for r in results]


class _Options:
    """The keyword-only enqueue signature, shared by both clients."""

    @staticmethod
    def collect(queue: str = DEFAULT_QUEUE, max_retry: int = DEFAULT_MAX_RETRY, timeout: Duration | None = None,
                deadline: datetime | None = None, process_in: Duration | None = None,
                process_at: datetime | None = None, unique: Duration | None = None, task_id: str | None = None,
                retention: Duration | None = None, group: str | None = None,
                durable: bool | Durability = False) -> dict[str, Any]:
        return {"queue": queue, "max_retry": max_retry, "timeout": timeout, "deadline": deadline,
                "process_in": process_in, "process_at": process_at, "unique": unique, "task_id": task_id,
                "retention": retention, "group": group, "durable": durable}


class Client:
    """Enqueues tasks. redis_url: ASYNQPY_REDIS_URL, then REDIS_URL, then the `asynqpy dev` server."""

    def __init__(self, redis_url: str | None = None, *, connection: redis.Redis | None = None) -> None:
        self.redis = connection or connect(redis_url or default_redis_url())
        self._runner = SyncRunner(self.redis)
        self._registry = _Registry()

    def enqueue(self, task: Task, *, queue: str = DEFAULT_QUEUE, max_retry: int = DEFAULT_MAX_RETRY,
                timeout: Duration | None = None, deadline: datetime | None = None,
                process_in: Duration | None = None, process_at: datetime | None = None,
                unique: Duration | None = None, task_id: str | None = None,
                retention: Duration | None = None, group: str | None = None,
                durable: bool | Durability = False) -> TaskInfo:
        """Store task for processing and return its TaskInfo.

        durable=True (or a Durability) returns only once a replica also holds the task (Redis WAIT), so
        a failover cannot lose it; NotDurableError says the replicas did not confirm in time.
        Raises DuplicateTaskError, TaskIDConflictError, TypeError/ValueError for a bad argument,
        and redis.ConnectionError when Redis cannot be reached.
        """
        now = time.time()
        kw = _Options.collect(queue, max_retry, timeout, deadline, process_in, process_at, unique, task_id,
                              retention, group, durable)
        msg, opts, call = _prepare(task, kw, now)
        if opts.durable is not None:
            self._runner.run_durable(call, opts.durable, register_queue=self._registry.due(opts.queue, now))
        else:
            self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        return _info(msg, opts, now)

    def enqueue_many(self, tasks: Iterable[Task], *, queue: str = DEFAULT_QUEUE,
                     max_retry: int = DEFAULT_MAX_RETRY, timeout: Duration | None = None,
                     deadline: datetime | None = None, process_in: Duration | None = None,
                     process_at: datetime | None = None, retention: Duration | None = None,
                     group: str | None = None, chunk: int = 1000,
                     durable: bool | Durability = False) -> list[TaskInfo | Exception]:
        """Enqueue many tasks with the same options, pipelined in chunks.

        Returns, per task, its TaskInfo or the error it met (e.g. TaskIDConflictError, or NotDurableError for
        each task of a durable chunk the replicas did not confirm); argument errors raise.
        """
        now = time.time()
        kw = _Options.collect(queue, max_retry, timeout, deadline, process_in, process_at, None, None,
                              retention, group, durable)
        batch = _Batch(tasks, kw, now, chunk)
        if batch.prepared:
            self.redis.sadd(keys.QUEUES, queue)
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
        self.redis = connection or aconnect(redis_url or default_redis_url())
        self._runner = AsyncRunner(self.redis)
        self._registry = _Registry()

    async def enqueue(self, task: Task, *, queue: str = DEFAULT_QUEUE, max_retry: int = DEFAULT_MAX_RETRY,
                      timeout: Duration | None = None, deadline: datetime | None = None,
                      process_in: Duration | None = None, process_at: datetime | None = None,
                      unique: Duration | None = None, task_id: str | None = None,
                      retention: Duration | None = None, group: str | None = None,
                      durable: bool | Durability = False) -> TaskInfo:
        """See Client.enqueue."""
        now = time.time()
        kw = _Options.collect(queue, max_retry, timeout, deadline, process_in, process_at, unique, task_id,
                              retention, group, durable)
        msg, opts, call = _prepare(task, kw, now)
        if opts.durable is not None:
            await self._runner.run_durable(call, opts.durable, register_queue=self._registry.due(opts.queue, now))
        else:
            await self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        return _info(msg, opts, now)

    async def enqueue_many(self, tasks: Iterable[Task], *, queue: str = DEFAULT_QUEUE,
                           max_retry: int = DEFAULT_MAX_RETRY, timeout: Duration | None = None,
                           deadline: datetime | None = None, process_in: Duration | None = None,
                           process_at: datetime | None = None, retention: Duration | None = None,
                           group: str | None = None, chunk: int = 1000,
                           durable: bool | Durability = False) -> list[TaskInfo | Exception]:
        """See Client.enqueue_many."""
        now = time.time()
        kw = _Options.collect(queue, max_retry, timeout, deadline, process_in, process_at, None, None,
                              retention, group, durable)
        batch = _Batch(tasks, kw, now, chunk)
        if batch.prepared:
            await self.redis.sadd(keys.QUEUES, queue)
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
