"""The enqueue scripts' checks and their order, whatever the queue: the backpressure limit first, then the
uniqueness lock, then the task id (asynq's order). The common case (a queue with nothing to check, a new id) asks
them all in one EXISTS; a queue with something to check, or a taken id, asks each one. Also: a forward of due
tasks hands one to each live waiter and leaves a lapsed registration alone."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis

from asynqpy import Client, DuplicateTaskError, QueueFullError, Task, TaskIDConflictError
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import set_queue_limit
from asynqpy.rdb.sync_runner import SyncRunner
from inspector import Inspector
from tests.helpers import msg_of

Q = "checks"


def _prepare(kind: str, r: redis.Redis) -> None:
    if kind == "paused":
        Inspector(connection=r).pause(Q)
    elif kind == "with room":
        set_queue_limit(r, Q, max_size=100)


@pytest.mark.parametrize("kind", ["plain", "paused", "with room"])
def test_a_taken_id_is_a_conflict_and_changes_nothing(kind: str, redis_url: str, r: redis.Redis) -> None:
    _prepare(kind, r)
    c = Client(redis_url)
    c.enqueue(Task("t", b"first"), queue=Q, task_id="x")
    with pytest.raises(TaskIDConflictError):
        c.enqueue(Task("t", b"second"), queue=Q, task_id="x")
    assert msg_of(r, Q, "x").payload == b"first" and r.lrange(keys.pending(Q), 0, -1) == [b"x"]
    info = c.enqueue(Task("t", b"third"), queue=Q, task_id="y")  # a new id still goes in
    assert info.id == "y" and r.llen(keys.pending(Q)) == 2


def test_a_full_queue_refuses_before_the_id_is_asked(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=1)
    c = Client(redis_url)
    c.enqueue(Task("t", b"first"), queue=Q, task_id="x")
    with pytest.raises(QueueFullError):
        c.enqueue(Task("t", b"again"), queue=Q, task_id="x")
    with pytest.raises(QueueFullError):
        c.enqueue(Task("t", b"again"), queue=Q, task_id="x", unique=60)
    assert r.get(keys.unique(Q, "t", b"again")) is None  # refused before the lock was taken


@pytest.mark.parametrize("kind", ["plain", "paused", "with room"])
def test_unique_checks_the_lock_then_the_id(kind: str, redis_url: str, r: redis.Redis) -> None:
    _prepare(kind, r)
    c = Client(redis_url)
    c.enqueue(Task("t", b"first"), queue=Q, task_id="x")
    lock = keys.unique(Q, "t", b"u")
    with pytest.raises(TaskIDConflictError):  # the lock was free: it is taken, and stays (as in asynq)
        c.enqueue(Task("t", b"u"), queue=Q, task_id="x", unique=60)
    assert r.get(lock) == b"x" and msg_of(r, Q, "x").payload == b"first"
    with pytest.raises(DuplicateTaskError):  # held now: the lock answers first
        c.enqueue(Task("t", b"u"), queue=Q, task_id="z", unique=timedelta(seconds=60))
    r.delete(lock)
    info = c.enqueue(Task("t", b"u"), queue=Q, task_id="z", unique=60)
    assert info.id == "z" and r.get(lock) == b"z" and r.llen(keys.pending(Q)) == 2


def test_a_forward_hands_one_task_to_each_live_waiter_only(redis_url: str, r: redis.Redis) -> None:
    now = time.time()
    r.zadd(keys.waiters(Q), {"live": now + 60, "lapsed": now - 5})
    c = Client(redis_url)
    ids = [c.enqueue(Task("t", str(i).encode()), queue=Q, process_in=timedelta(seconds=1)).id for i in range(3)]
    moved, _, _ = SyncRunner(r).run(broker.forward(Q, now=now + 2))
    assert moved == 3
    handed: list[bytes] = r.lrange(keys.handoff(Q, "live"), 0, -1)  # type: ignore[assignment]
    assert len(handed) == 1 and broker.parse_handoff(handed[0])[0] in ids
    assert r.llen(keys.handoff(Q, "lapsed")) == 0 and r.llen(keys.pending(Q)) == 2
    assert r.zrange(keys.waiters(Q), 0, -1) == [b"lapsed"]  # the live one consumed, the lapsed one left as it was
