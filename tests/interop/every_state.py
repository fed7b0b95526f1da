"""A queue that asynqpy wrote with a task in every state, for Go's Inspector and asynqmon to read.

Our Client enqueues and a real asynqpy Server works the tasks: one completed (with retention and a result),
one archived, one waiting in retry, one active (its handler holds until the block ends), pending ones behind
it, one scheduled an hour ahead and one aggregating in a group. A scheduler entry with its enqueue events is
written as a scheduler writes it. The server keeps running (and heartbeating) for the block.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from asynqpy.wire import SchedulerEnqueueEvent, SchedulerEntry, timestamp
from tests.helpers import running, wait_for

QUEUE = "mixed"
GROUP = "g1"
SCHEDULER_ENTRY = "entry-1"
HEADERS = {"trace": "abc-123"}


@dataclass(frozen=True)
class EveryState:
    """The ids written, by state, and the scheduler entry id; the server that holds the active task."""

    queue: str
    ids: dict[str, list[str]]
    group: str
    scheduled_at: float  # the exact due time asked for the scheduled task
    scheduler_entry: str
    server_pid: int  # the server runs in a thread of this process

    def all_ids(self) -> list[tuple[str, str]]:
        """(state, id) for every task written."""
        return [(state, tid) for state, tids in self.ids.items() for tid in tids]


def _mux(release: threading.Event) -> ServeMux:
    mux = ServeMux()

    @mux.handler("ok:")
    def ok(task) -> None:  # type: ignore[no-untyped-def]
        task.write_result(b"done:" + task.id.encode())

    @mux.handler("fail:")
    def fail(task) -> None:  # type: ignore[no-untyped-def]
        raise RuntimeError(f"boom {task.id}")

    @mux.handler("hold:")
    def hold(task) -> None:  # type: ignore[no-untyped-def]
        release.wait(120)

    return mux


def _write_scheduler_entry(r: redis.Redis, now: float) -> None:
    entry = SchedulerEntry(id=SCHEDULER_ENTRY, spec="@every 30s", task_type="ok:tick", task_payload=b"{}",
                           enqueue_options=[f'Queue("{QUEUE}")'])
    entry.next_enqueue_time.CopyFrom(timestamp(now + 30))
    entry.prev_enqueue_time.CopyFrom(timestamp(now - 30))
    skey = keys.scheduler_entries("testhost:1:sched")
    r.lpush(skey, entry.SerializeToString())
    r.zadd(keys.SCHEDULERS, {skey: int(now) + 60})
    ev = SchedulerEnqueueEvent(task_id="from-cron")
    ev.enqueue_time.CopyFrom(timestamp(now - 30))
    r.zadd(keys.scheduler_history(SCHEDULER_ENTRY), {ev.SerializeToString(): int(now) - 30})


@contextlib.contextmanager
def every_state(redis_url: str) -> Iterator[EveryState]:
    """Write the queue, keep its server running for the block, then release the active task and stop."""
    release = threading.Event()
    r = redis.Redis.from_url(redis_url)
    c = Client(redis_url)
    ids: dict[str, list[str]] = {}
    scheduled_at = time.time() + 3600.4
    ids["scheduled"] = [c.enqueue(Task("ok:later", b'{"when": "later"}'), queue=QUEUE, task_id="sched-1",
                                  process_at=datetime.fromtimestamp(scheduled_at, UTC)).id]
    ids["aggregating"] = [c.enqueue(Task("ok:agg", b"member"), queue=QUEUE, task_id="agg-1", group=GROUP).id]
    c.enqueue(Task("ok:keep", b"kept"), queue=QUEUE, task_id="done-1", retention=3600)
    c.enqueue(Task("fail:now", b"gives up"), queue=QUEUE, task_id="dead-1", max_retry=0)
    c.enqueue(Task("fail:later", b"tries again"), queue=QUEUE, task_id="retry-1", max_retry=5)
    settings = {"queues": {QUEUE: 1}, "concurrency": 1, "retry_delay": lambda n, exc, task: 3600.25}
    try:
        with running(redis_url, _mux(release), **settings):
            wait_for(lambda: (r.zcard(keys.completed(QUEUE)), r.zcard(keys.archived(QUEUE)),
                              r.zcard(keys.retry(QUEUE))) == (1, 1, 1), timeout=20, what="completed, archived, retry")
            ids["completed"], ids["archived"], ids["retry"] = ["done-1"], ["dead-1"], ["retry-1"]
            ids["active"] = [c.enqueue(Task("hold:busy", b"holding"), queue=QUEUE, task_id="busy-1").id]
            wait_for(lambda: r.lrange(keys.active(QUEUE), 0, -1) == [b"busy-1"], timeout=20, what="the active task")
            # The only worker slot is taken: these stay pending.
            ids["pending"] = [c.enqueue(Task("ok:wait", b"in line"), queue=QUEUE, task_id="wait-1").id,
                              c.enqueue(Task("ok:hdr", b"with headers", headers=HEADERS), queue=QUEUE,
                                        task_id="wait-2").id]
            # A hand-off registration the worker withdraws as it fills up may still take wait-1 (it is then
            # given back to the front of the queue at once): wait until both are in line.
            try:
                wait_for(lambda: sorted(r.lrange(keys.pending(QUEUE), 0, -1)) == [b"wait-1", b"wait-2"],
                         timeout=20, what="the two pending tasks in line")
            except AssertionError as exc:  # say where the missing one is, so the failure can be judged
                where = {k.decode(): r.type(k).decode() for k in r.scan_iter(f"*{{{QUEUE}}}*")}
                raise AssertionError(f"{exc}: pending {r.lrange(keys.pending(QUEUE), 0, -1)}, active "
                                     f"{r.lrange(keys.active(QUEUE), 0, -1)}, wait-1 "
                                     f"{r.hgetall(keys.task(QUEUE, 'wait-1'))}, keys {where}") from None
            _write_scheduler_entry(r, time.time())
            wait_for(lambda: any(r.hexists(k, "busy-1") for k in r.scan_iter("asynq:workers:*")),
                     what="the heartbeat that lists the active task")
            yield EveryState(QUEUE, ids, GROUP, scheduled_at, SCHEDULER_ENTRY, os.getpid())
            release.set()
    finally:
        release.set()
        c.close()
        r.close()
