"""Enqueueing many tasks at once: the work shared by tasks with the same options is done once.

SameOptions resolves the options once and packs each task's command from templates (rdb/packer.py); Batch is
one Client.enqueue_many; AsyncEnqueuer gathers what concurrent AsyncClient.enqueue callers hand in while a
round trip is in flight and sends it in the next one, each caller getting its own TaskInfo or error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from asynqpy.errors import InvalidArgumentError, TaskIDConflictError
from asynqpy.options import EnqueueOptions, TaskOptions, check_int, check_payload_size, check_task_type, new_task_ids
from asynqpy.rdb import broker, keys
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.overlap import Pack
from asynqpy.rdb.packer import EnqueuePacker, ManyPacker, MessageTemplate
from asynqpy.rdb.resp import pack_command
from asynqpy.rdb.scripts import Call, Script
from asynqpy.task import Task, TaskInfo, TaskState

MAX_ROUND_TRIP = 1000  # AsyncEnqueuer: tasks sent in one round trip at most
# AsyncEnqueuer packs tasks whose options are equal in every field but task_id together (each caller's merged
# options are a new object, so packing by identity packed nothing). Every field but task_id, so a new option
# cannot be forgotten here.
_SHARED_FIELDS = tuple(f.name for f in dataclasses.fields(TaskOptions) if f.name != "task_id")
options_key = operator.attrgetter(*_SHARED_FIELDS)
RUN = 100  # Batch: plain tasks per enqueue_many script command


def check_task(task: Task, argument: str) -> Task:
    if not isinstance(task, Task):
        raise InvalidArgumentError(f"{argument} must be a Task, not {type(task).__name__}", argument=argument)
    check_task_type(task.type)
    check_payload_size(task.payload)
    return task


def state_of(opts: EnqueueOptions, now: float) -> tuple[TaskState, datetime | None]:
    """The state and next process time of a task enqueued with opts at now."""
    if opts.process_at > now:
        return TaskState.SCHEDULED, datetime.fromtimestamp(opts.process_at, tz=UTC)
    if opts.group:
        return TaskState.AGGREGATING, None
    return TaskState.PENDING, datetime.fromtimestamp(now, tz=UTC)


class Infos:
    """TaskInfos of new tasks enqueued with the same options at the same time: what TaskInfo.from_message
    gives for their messages, filled from a template (the hot path)."""

    def __init__(self, opts: EnqueueOptions, now: float) -> None:
        state, nxt = state_of(opts, now)
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


# One prepared task: the task, its id, its message bytes, its unique key ("" if none).
Item = tuple[Task, str, bytes, str]


class SameOptions:
    """What tasks enqueued with the same options at the same time share: the resolved options, the message
    and command templates and the TaskInfo template."""

    def __init__(self, options: TaskOptions, now: float) -> None:
        self.now = now
        self.task_id = options.task_id
        self.base = options.resolve(now, task_id="-")
        self.template = MessageTemplate(self.base)
        self.packers = (EnqueuePacker(self.base, now, wake=False), EnqueuePacker(self.base, now, wake=True))
        self.infos = Infos(self.base, now)
        # Ids this client drew itself: a conflict on one of them can only be our own command, re-sent after its
        # reply was lost (the runners send once more after a broken connection): it was enqueued.
        self._drawn: set[str] = set()
        base = self.base
        plain = not base.unique_ttl and not base.group and base.process_at <= now
        # Plain tasks go RUN at a time through the enqueue_many script (one command per run).
        self.many = (ManyPacker(base, now, wake=False), ManyPacker(base, now, wake=True)) if plain else None
        self.script: Script = self.many[0].script if self.many else self.packers[0].script

    def commands(self, items: Sequence[Item]) -> list[tuple[bytes, int]]:
        """The packed commands that enqueue items, each with how many items it carries (in order). Only the
        last one wakes idle workers."""
        if self.many is not None:
            runs = [items[i:i + RUN] for i in range(0, len(items), RUN)]
            return [(self.many[j == len(runs) - 1].pack([(it[1], it[2]) for it in run]), len(run))
                    for j, run in enumerate(runs)]
        last = len(items) - 1
        return [(self.packers[i == last].pack(it[1], it[2], it[3]), 1) for i, it in enumerate(items)]

    def outcomes(self, items: Sequence[Item], raw: Any) -> list[TaskInfo | Exception]:
        """The outcome of each item of one command from commands(), from its raw reply (a code per task from
        the enqueue_many script, one code from the others, or the error of the whole command)."""
        if not isinstance(raw, list):
            return [self.outcome(it, raw) for it in items]
        make, outcome = self.infos.make, self.outcome
        return [make(it[0], it[1]) if c == 1 else outcome(it, c) for it, c in zip(items, raw, strict=True)]

    def item(self, task: Task, new_id: str, task_id: str | None = None) -> Item:
        """The task prepared, with its id: task_id, else the options' task_id, else new_id."""
        tid = task_id or self.task_id or new_id
        if tid == new_id:
            self._drawn.add(tid)
            if not self.base.unique_ttl and not task.headers:  # the hot path (see items())
                return task, tid, self.template.encode_drawn(task.type, task.payload, tid), ""
        payload = None if task.nil_payload else task.payload
        ukey = keys.unique(self.base.queue, task.type, payload) if self.base.unique_ttl else ""
        return task, tid, self.template.encode(task.type, payload, task.headers, tid, ukey), ukey

    def items(self, tasks: Sequence[Task], ids: Sequence[str]) -> list[Item]:
        """item() of each task with its drawn id (options without a task_id, as enqueue_many's), the plain
        tasks' message bytes by the template's hot path."""
        if self.task_id is not None or self.base.unique_ttl:
            return [self.item(t, i) for t, i in zip(tasks, ids, strict=True)]
        self._drawn.update(ids)
        drawn, encode = self.template.encode_drawn, self.template.encode
        return [(t, i, encode(t.type, None if t.nil_payload else t.payload, t.headers, i, "") if t.headers
                 else drawn(t.type, t.payload, i), "") for t, i in zip(tasks, ids, strict=True)]

    def drew(self, task_id: str) -> bool:
        """Whether this id was drawn here (not given by the caller)."""
        return task_id in self._drawn

    def call(self, item: Item, *, wake: bool) -> Call[None]:
        return broker.enqueue_call(item[2], item[1], item[3], self.base, now=self.now, wake=wake)

    def outcome(self, item: Item, raw: Any) -> TaskInfo | Exception:
        """The TaskInfo, or the error (DuplicateTaskError, ...) that the raw reply of item's command stands for."""
        err = self.packers[0].check_reply(raw, item[1])
        if isinstance(err, TaskIDConflictError) and self.drew(item[1]):
            err = None  # our own re-sent command: the first one enqueued it
        return err if err is not None else self.infos.make(item[0], item[1])


class Batch:
    """One enqueue_many: every task's packed command, sent a chunk at a time, and each task's outcome.

    The options are checked and resolved once for the batch; each task only gets its own id, message bytes and
    command. Only the last command of a chunk wakes idle workers, so a batch costs one wake-up per chunk. A
    client that is not a plain Redis (a cluster client) runs the same commands as Calls.
    """

    def __init__(self, tasks: Iterable[Task], options: TaskOptions, now: float, chunk: int) -> None:
        check_int(chunk, "chunk", minimum=1)
        if options.task_id is not None:
            raise InvalidArgumentError("enqueue_many takes no task_id: every task gets its own", argument="task_id")
        self.chunk = chunk
        self.queue = options.queue
        self.same = SameOptions(options, now)
        self.todo = [check_task(t, "tasks") for t in tasks]  # all checked before anything is sent
        self._ids = new_task_ids(len(self.todo))
        self.out: list[TaskInfo | Exception] = []
        self._sent: deque[tuple[list[Item], list[tuple[bytes, int]]]] = deque()

    def parts(self) -> Iterator[list[Item]]:
        """The tasks prepared (id, message bytes) a chunk at a time, as they are sent."""
        items, todo, ids, chunk = self.same.items, self.todo, self._ids, self.chunk
        for start in range(0, len(todo), chunk):
            yield items(todo[start:start + chunk], ids[start:start + chunk])

    def packs(self) -> Iterator[Pack]:
        """Each chunk's packed commands for overlap.send_overlapped; take() records their replies."""
        for part in self.parts():
            cmds = self.same.commands(part)
            self._sent.append((part, cmds))
            yield [c for c, _ in cmds], [self.same.script] * len(cmds)

    def take(self, raws: Sequence[Any]) -> None:
        """The outcomes of the oldest chunk from packs() from its raw replies."""
        part, cmds = self._sent.popleft()
        self.record(part, cmds, raws)

    def calls(self, part: list[Item]) -> list[Call[None]]:
        last = len(part) - 1
        return [self.same.call(item, wake=i == last) for i, item in enumerate(part)]

    def record(self, part: list[Item], commands: Sequence[tuple[bytes, int]], raws: Sequence[Any]) -> None:
        """Each task's outcome from the replies to same.commands(part)."""
        at = 0
        for (_, n), raw in zip(commands, raws, strict=True):
            self.out += self.same.outcomes(part[at:at + n], raw)
            at += n

    def record_parsed(self, part: list[Item], results: Sequence[object]) -> None:
        for item, res in zip(part, results, strict=True):
            if isinstance(res, TaskIDConflictError) and self.same.drew(item[1]):
                res = None  # our own re-sent command (see SameOptions.outcome)
            self.out.append(res if isinstance(res, Exception) else self.same.infos.make(item[0], item[1]))


class AsyncEnqueuer:
    """AsyncClient.enqueue on a plain Redis: callers queue (task, options); one flusher at a time takes what
    is queued, packs it (once per distinct options, task_id aside) and sends it in one round trip, then repeats while
    more was queued meanwhile. Each caller's future gets its own TaskInfo or error; a broken connection fails
    the callers of that round trip. Tasks are stamped with the time of the round trip that carries them.
    """

    def __init__(self, runner: AsyncRunner, register: Any) -> None:
        self.runner = runner
        self.register = register  # the client's _Registry: due(queue, now) -> queue or None
        self._queue: list[tuple[Task, TaskOptions, asyncio.Future[TaskInfo]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def enqueue(self, task: Task, options: TaskOptions) -> TaskInfo:
        fut: asyncio.Future[TaskInfo] = asyncio.get_running_loop().create_future()
        self._queue.append((task, options, fut))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="asynqpy-enqueuer")
        return await fut

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_ROUND_TRIP], self._queue[MAX_ROUND_TRIP:]
                await self._round_trip(batch)
                await asyncio.sleep(0)  # the callers just answered may queue their next task for this trip
        finally:
            self._flusher = None
            for _, _, fut in self._queue:  # cancelled meanwhile (the loop is closing): nobody sends these
                fut.cancel()
            self._queue = []

    async def _round_trip(self, batch: list[tuple[Task, TaskOptions, asyncio.Future[TaskInfo]]]) -> None:
        now = time.time()
        shared: dict[Any, SameOptions] = {}
        groups: dict[Any, list[tuple[Item, asyncio.Future[TaskInfo]]]] = {}
        packed: list[bytes] = []
        scripts: list[Script | None] = []
        keyed: dict[int, Any] = {}  # options objects seen (alive in batch meanwhile) -> their key
        for (task, options, fut), new_id in zip(batch, new_task_ids(len(batch)), strict=True):
            try:
                key = keyed.get(id(options))  # the same object (options_from shares them): known
                if key is None:
                    key = keyed[id(options)] = options_key(options)  # equal but task_id share one SameOptions
                same = shared.get(key)
                if same is None:
                    # Built without the task_id: that stays each caller's own (passed to item below).
                    base = options if options.task_id is None else options.merge({"task_id": None})
                    same = shared[key] = SameOptions(base, now)
                    groups[key] = []
                    queue = self.register.due(same.base.queue, now)
                    if queue is not None:
                        packed.append(pack_command("SADD", keys.QUEUES, queue))
                        scripts.append(None)
                groups[key].append((same.item(task, new_id, options.task_id), fut))
            except Exception as exc:
                fut.set_exception(exc)
        owners: list[tuple[SameOptions, list[tuple[Item, asyncio.Future[TaskInfo]]]] | None] = [None] * len(packed)
        for key, entries in groups.items():
            same, at = shared[key], 0
            for cmd, n in same.commands([item for item, _ in entries]):
                packed.append(cmd)
                scripts.append(same.script)
                owners.append((same, entries[at:at + n]))
                at += n
        if not groups:
            return
        try:
            raws = await self.runner.send_scripts(packed, scripts)
        except BaseException as exc:  # this round trip's callers get it; later ones get their own try
            for entries in groups.values():
                for _, fut in entries:
                    if not fut.done():
                        fut.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for owner, raw in zip(owners, raws, strict=True):
            if owner is None:
                continue
            same, entries = owner
            for (_, fut), out in zip(entries, same.outcomes([item for item, _ in entries], raw), strict=True):
                if fut.done():
                    continue
                if isinstance(out, Exception):
                    fut.set_exception(out)
                else:
                    fut.set_result(out)
