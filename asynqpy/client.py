"""Client (sync) and AsyncClient (asyncio): enqueue tasks into asynq's Redis layout."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Self

import redis
import redis.asyncio as aredis

from asynqpy import tracing
from asynqpy.backpressure import ablocking, ablocking_many, blocking, blocking_many
from asynqpy.batching import AsyncEnqueuer, Batch, Infos, check_task
from asynqpy.connection import aconnect, connect
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError, NotDurableError, TaskIDConflictError, mask_url
from asynqpy.options import EnqueueOptions, TaskOptions, new_task_id, options_from
from asynqpy.rdb import broker, state
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import REDIS_ERRORS, is_redis_error, reaching, translate, url_of
from asynqpy.rdb.overlap import asend_overlapped, send_overlapped
from asynqpy.rdb.packer import SingleEnqueue
from asynqpy.rdb.scripts import Call
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.task import Task, TaskInfo
from asynqpy.wire import TaskMessage


def _info(task: Task, opts: EnqueueOptions, now: float) -> TaskInfo:
    return Infos(opts, now).make(task, opts.task_id)


def message(task: Task, opts: EnqueueOptions) -> TaskMessage:
    """The TaskMessage of task with resolved options (a Task made without payload keeps Go's nil form)."""
    return broker.build_message(task.type, None if task.nil_payload else task.payload, task.headers, opts)


def _single(options: TaskOptions, now: float) -> SingleEnqueue | None:
    """The templates of options when every task enqueued with them is a plain one whatever the time: pending (no
    process_in or process_at), no group, no unique lock, no task_id, not durable. Else None."""
    if (options.process_in is not None or options.process_at is not None or options.task_id is not None
            or options.durable or options.group or options.unique is not None):
        return None
    base = options.resolve(now, task_id="-")
    if base.unique_ttl or base.group or base.process_at or base.process_in or base.durable is not None:
        return None
    return SingleEnqueue(base, now)


def _prepare(task: Task, options: TaskOptions, now: float) -> tuple[EnqueueOptions, Call[None]]:
    opts = options.resolve(now)
    msg = message(check_task(task, "task"), opts)
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


def _unconfirmed(results: list[Any], confirmed: bool) -> list[Any]:
    """A durable chunk's results: when the replicas did not confirm it, every stored task says so."""
    if confirmed:
        return results
    err = NotDurableError("enqueued on the primary, but the replicas did not confirm the batch in time")
    return [r if isinstance(r, Exception) else err for r in results]


def _ours(results: list[TaskInfo | Exception], url: str) -> list[TaskInfo | Exception]:
    """A batch's per-task outcomes with any redis-py error (one command of the batch refused) as ours."""
    return [translate(r, url) if isinstance(r, Exception) and is_redis_error(r) else r for r in results]


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
        # The last options enqueued with (options_from gives the same object for the same keywords), and their
        # SingleEnqueue when they are plain.
        self._plain: tuple[TaskOptions, SingleEnqueue | None] | None = None

    def enqueue(self, task: Task, options: TaskOptions | None = None, *, block: float = 0.0,
                **fields: Any) -> TaskInfo:
        """Store task for processing and return its TaskInfo.

        options: a TaskOptions; fields: any of its fields as keywords (queue=, max_retry=, timeout=, deadline=,
        process_in=, process_at=, unique=, task_id=, retention=, group=, durable=), which win over options.

        durable=True (or a Durability) returns only once a replica also holds the task (Redis WAIT), so
        a failover cannot lose it.

        Raises DuplicateTaskError, TaskIDConflictError, InvalidArgumentError (a ValueError) naming a bad or
        unknown argument, RedisUnavailableError when Redis cannot be reached, and NotDurableError when the
        replicas of a durable enqueue did not confirm it in time, and QueueFullError when the queue is past
        its backpressure limit (`asynqpy queue limit`); block=SECONDS tries again for up to that long first.
        """
        if block:
            return blocking(lambda: self.enqueue(task, options, **fields), _seconds(block))
        merged = options_from(options, fields)
        tracer = tracing.current()
        if tracer is not None:
            return self._traced(tracer, task, merged)
        return self._enqueue(task, merged)

    def _traced(self, tracer: tracing.Tracer, task: Task, options: TaskOptions) -> TaskInfo:
        (traced,), spans = tracing.publishing(tracer, [check_task(task, "task")], options.queue)
        try:
            info = self._enqueue(traced, options)
        except BaseException as exc:
            tracing.fail_all(spans, exc)
            raise
        tracing.settle(spans, [info])
        return info

    def _enqueue(self, task: Task, options: TaskOptions) -> TaskInfo:
        now = time.time()
        plain = self._plain
        if plain is None or plain[0] is not options:
            plain = self._plain = (options, _single(options, now) if self._runner.plain else None)
        single = plain[1]
        if single is not None and not check_task(task, "task").headers:
            return self._enqueue_single(single, task, now)
        opts, call = _prepare(task, options, now)
        try:  # not a with-block: this is the enqueue hot path
            if opts.durable is not None:
                self._runner.run_durable(call, opts.durable, register_queue=self._registry.due(opts.queue, now))
            else:
                self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except REDIS_ERRORS as exc:
            raise translate(exc, self.url) from exc
        except TaskIDConflictError:
            if options.task_id is not None:
                raise
            # An id we drew: only our own command, re-sent after its reply was lost, can hold it. Enqueued.
        return _info(task, opts, now)

    def _enqueue_single(self, single: SingleEnqueue, task: Task, now: float) -> TaskInfo:
        """_enqueue() of a task without headers whose options are plain (see _single): packed from templates."""
        tid = new_task_id()
        q = single.opts.queue
        try:
            raw = self._runner.run_packed(single.command(task.type, task.payload, tid), single.script,
                                          register_queue=self._registry.due(q, now))
        except REDIS_ERRORS as exc:
            raise translate(exc, self.url) from exc
        err = single.packer.check_reply(raw, tid)
        # (a conflict on an id we drew: only our own command, re-sent after its reply was lost, can hold it)
        if err is not None and not isinstance(err, TaskIDConflictError):
            raise err
        return Infos(single.opts, now).make(task, tid)

    def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                     block: float = 0.0, **fields: Any) -> list[TaskInfo | Exception]:
        """Enqueue many tasks with the same options (those of enqueue but task_id), pipelined in chunks.

        Returns, per task, its TaskInfo or the error it met (e.g. DuplicateTaskError with unique=,
        QueueFullError past the queue's backpressure limit (checked per task: the tasks before stay enqueued),
        or NotDurableError for each task of a durable chunk the replicas did not confirm; one WAIT per chunk, per
        node on a cluster). Raises InvalidArgumentError for a bad argument (before anything is enqueued) and
        RedisUnavailableError.

        block=SECONDS bounds the whole call: the tasks refused with QueueFullError are sent again (in their
        order, with back-off) until they are in or the time is up; those still refused keep their error.
        """
        if block:
            wait = _seconds(block)
            return blocking_many(lambda some: self.enqueue_many(some, options, chunk=chunk, **fields), list(tasks),
                                 wait)
        merged = options_from(options, fields)
        tracer = tracing.current()
        if tracer is None:
            return self._enqueue_many(tasks, merged, chunk)
        traced, spans = tracing.publishing(tracer, [check_task(t, "tasks") for t in tasks], merged.queue)
        try:
            out = self._enqueue_many(traced, merged, chunk)
        except BaseException as exc:
            tracing.fail_all(spans, exc)
            raise
        tracing.settle(spans, out)
        return out

    def _enqueue_many(self, tasks: Iterable[Task], options: TaskOptions, chunk: int) -> list[TaskInfo | Exception]:
        now = time.time()
        batch = Batch(tasks, options, now, chunk)
        with reaching(self.url):
            if batch.todo:
                self._runner.run(state.register_queue(batch.queue))
            durable = batch.same.base.durable
            if durable is None and self._runner.plain:  # Redis runs a chunk while the next is packed
                send_overlapped(self._runner, batch.packs(), batch.take)
            for part in batch.parts() if durable is not None or not self._runner.plain else ():
                if durable is not None:
                    results = self._runner.run_many_durable(batch.calls(part), durable)
                    batch.record_parsed(part, _unconfirmed(*results))
                else:
                    batch.record_parsed(part, self._runner.run_many(batch.calls(part)))
        return _ours(batch.out, self.url)

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
        self._enqueuer = AsyncEnqueuer(self._runner, self._registry) if self._runner.plain else None

    async def enqueue(self, task: Task, options: TaskOptions | None = None, *, block: float = 0.0,
                      **fields: Any) -> TaskInfo:
        """See Client.enqueue."""
        if block:
            result: TaskInfo = await ablocking(lambda: self.enqueue(task, options, **fields), _seconds(block))
            return result
        merged = options_from(options, fields)
        tracer = tracing.current()
        if tracer is not None:
            (traced,), spans = tracing.publishing(tracer, [check_task(task, "task")], merged.queue)
            try:
                info = await self._enqueue(traced, merged)
            except BaseException as exc:
                tracing.fail_all(spans, exc)
                raise
            tracing.settle(spans, [info])
            return info
        return await self._enqueue(task, merged)

    async def _enqueue(self, task: Task, merged: TaskOptions) -> TaskInfo:
        if self._enqueuer is not None and not merged.durable:  # concurrent callers share round trips
            check_task(task, "task")
            try:
                return await self._enqueuer.enqueue(task, merged)
            except REDIS_ERRORS as exc:
                raise translate(exc, self.url) from exc
        now = time.time()
        opts, call = _prepare(task, merged, now)
        try:
            if opts.durable is not None:
                await self._runner.run_durable(call, opts.durable,
                                               register_queue=self._registry.due(opts.queue, now))
            else:
                await self._runner.run(call, register_queue=self._registry.due(opts.queue, now))
        except REDIS_ERRORS as exc:
            raise translate(exc, self.url) from exc
        except TaskIDConflictError:
            if merged.task_id is not None:
                raise
            # An id we drew: only our own command, re-sent after its reply was lost, can hold it. Enqueued.
        return _info(task, opts, now)

    async def enqueue_many(self, tasks: Iterable[Task], options: TaskOptions | None = None, *, chunk: int = 1000,
                           block: float = 0.0, **fields: Any) -> list[TaskInfo | Exception]:
        """See Client.enqueue_many (block= waits with asyncio.sleep between tries: the loop goes on meanwhile)."""
        if block:
            wait = _seconds(block)
            return await ablocking_many(lambda some: self.enqueue_many(some, options, chunk=chunk, **fields),
                                        list(tasks), wait)
        merged = options_from(options, fields)
        tracer = tracing.current()
        if tracer is None:
            return await self._enqueue_many(tasks, merged, chunk)
        traced, spans = tracing.publishing(tracer, [check_task(t, "tasks") for t in tasks], merged.queue)
        try:
            out = await self._enqueue_many(traced, merged, chunk)
        except BaseException as exc:
            tracing.fail_all(spans, exc)
            raise
        tracing.settle(spans, out)
        return out

    async def _enqueue_many(self, tasks: Iterable[Task], options: TaskOptions,
                            chunk: int) -> list[TaskInfo | Exception]:
        now = time.time()
        batch = Batch(tasks, options, now, chunk)
        with reaching(self.url):
            if batch.todo:
                await self._runner.run(state.register_queue(batch.queue))
            durable = batch.same.base.durable
            if durable is None and self._runner.plain:  # Redis runs a chunk while the next is packed
                await asend_overlapped(self._runner, batch.packs(), batch.take)
            for part in batch.parts() if durable is not None or not self._runner.plain else ():
                if durable is not None:
                    results = await self._runner.run_many_durable(batch.calls(part), durable)
                    batch.record_parsed(part, _unconfirmed(*results))
                else:
                    batch.record_parsed(part, await self._runner.run_many(batch.calls(part)))
        return _ours(batch.out, self.url)

    async def close(self) -> None:
        await self.redis.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncClient", "Client"]


def _seconds(block: float) -> float:
    if isinstance(block, bool) or not isinstance(block, int | float) or block < 0:
        raise InvalidArgumentError(f"block must be seconds >= 0, got {block!r}", argument="block")
    return float(block)
