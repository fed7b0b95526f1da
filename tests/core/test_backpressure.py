"""Producer backpressure: a queue's size and age limits, refused atomically by the enqueue scripts."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest
import redis

from asynqpy import AsyncClient, Client, QueueFullError, Task
from asynqpy.backpressure import parse_duration
from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import clear_queue_limit, queue_limit, set_queue_limit
from asynqpy.rdb.sync_runner import SyncRunner

pytestmark = pytest.mark.cluster_too


def test_size_limit_refuses_past_it_with_queue_limit_and_current(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, "billing", max_size=3)
    c = Client(redis_url)
    for _ in range(2):
        c.enqueue(Task("t", b""), queue="billing")
    c.enqueue(Task("t", b""), queue="billing", process_in=60)  # scheduled tasks count too
    with pytest.raises(QueueFullError) as err:
        c.enqueue(Task("t", b""), queue="billing")
    e = err.value
    assert (e.queue, e.limit_kind, e.limit, e.current) == ("billing", "size", 3, 3)
    assert "queue 'billing' is full (3 tasks, limit 3)" in str(e)
    with pytest.raises(QueueFullError):
        c.enqueue(Task("t", b""), queue="billing", unique=60)
    assert not r.keys("asynq:{billing}:unique:*")  # refused before the lock was taken
    assert r.llen(keys.pending("billing")) == 2 and queue_limit(r, "billing").refused == 2
    assert c.enqueue(Task("t", b""), queue="other")  # other queues are not limited


def test_enqueue_many_refuses_per_task(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, "billing", max_size=5)
    out = Client(redis_url).enqueue_many([Task("t", b"") for _ in range(8)], queue="billing")
    assert [isinstance(o, QueueFullError) for o in out] == [False] * 5 + [True] * 3
    assert r.llen(keys.pending("billing")) == 5


def test_async_client_refuses_and_blocks_until_room(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, "billing", max_size=1)

    async def go() -> None:
        async with AsyncClient(redis_url) as c:
            await c.enqueue(Task("t", b""), queue="billing")
            with pytest.raises(QueueFullError):
                await c.enqueue(Task("t", b""), queue="billing")
            with pytest.raises(QueueFullError):
                await c.enqueue(Task("t", b""), queue="billing", block=0.2)  # bounded
            loop = asyncio.get_running_loop()
            loop.call_later(0.3, lambda: r.delete(keys.pending("billing")))  # a worker drains it
            assert (await c.enqueue(Task("t", b""), queue="billing", block=5)).queue == "billing"
    asyncio.run(go())


def test_blocking_enqueue_waits_for_room(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, "billing", max_size=1)
    c = Client(redis_url)
    first = c.enqueue(Task("t", b""), queue="billing")
    threading.Timer(0.3, lambda: SyncRunner(r).run(
        broker.dequeue_timed("billing", lease_expiry=time.time() + 30, count=1)) and r.delete(
        keys.active("billing"), keys.lease("billing"))).start()
    t0 = time.monotonic()
    assert c.enqueue(Task("t", b""), queue="billing", block=5).id != first.id
    assert time.monotonic() - t0 >= 0.25
    with pytest.raises(InvalidArgumentError):
        c.enqueue(Task("t", b""), queue="billing", block=-1)


def test_latency_limit_refuses_while_the_oldest_task_is_too_old(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue(Task("t", b""), queue="billing")
    set_queue_limit(r, "billing", max_latency=0.2)
    c.enqueue(Task("t", b""), queue="billing")  # the oldest waited less than 0.2 s
    time.sleep(0.3)
    with pytest.raises(QueueFullError) as err:
        c.enqueue(Task("t", b""), queue="billing")
    assert err.value.limit_kind == "latency" and err.value.current >= 0.3
    assert clear_queue_limit(r, "billing")
    c.enqueue(Task("t", b""), queue="billing")


def test_limit_arguments() -> None:
    assert parse_duration("10m") == 600 and parse_duration("250ms") == 0.25 and parse_duration("30") == 30
    with pytest.raises(InvalidArgumentError):
        parse_duration("soon")


def test_tasks_waiting_on_a_limit_count_toward_the_size(redis_url: str, r: redis.Redis) -> None:
    from asynqpy import Limit
    from asynqpy.rdb.flow import remove_limit, set_limit
    c = Client(redis_url)
    set_limit(r, Limit("email:*", concurrency=1), queues=["billing"])
    for _ in range(3):
        c.enqueue(Task("email:send", b""), queue="billing")
    SyncRunner(r).run(broker.dequeue_timed("billing", lease_expiry=time.time() + 30, count=10))
    assert r.llen(keys.pending("billing")) == 0 and r.get("asynqpy:{billing}:lwaitn") == b"2"
    set_queue_limit(r, "billing", max_size=3)  # 1 active + 2 waiting on the limit
    with pytest.raises(QueueFullError):
        c.enqueue(Task("free", b""), queue="billing")
    remove_limit(r, "email:*")
    assert r.get("asynqpy:{billing}:lwaitn") == b"0" and r.llen(keys.pending("billing")) == 2


def test_a_queue_limit_that_is_not_a_whole_size_or_a_finite_age_is_refused(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("a", b""))
    for bad in [dict(max_size=2.5), dict(max_size=True), dict(max_size=math.inf), dict(max_latency=math.inf),
                dict(max_latency=True)]:
        with pytest.raises(InvalidArgumentError):
            set_queue_limit(r, "default", **bad)  # type: ignore[arg-type]
    assert queue_limit(r, "default").max_size is None  # nothing stored: it would break `asynqpy queue limit`
