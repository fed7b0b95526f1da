"""Producer backpressure on every enqueue kind and path: plain, unique, scheduled (process_in / process_at),
unique scheduled and grouped tasks, from Client, AsyncClient (its shared round trips), enqueue_many per task
and the `asynqpy task enqueue` command; grouped tasks count toward the size (as asynq counts "aggregating"),
the aggregator's one task is not refused; enqueue_many's block=."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from asynqpy import AsyncClient, Client, QueueFullError, ServeMux, Task
from asynqpy.rdb import keys
from asynqpy.rdb.flow import clear_queue_limit, queue_limit, set_queue_limit
from tests.core.procs import run
from tests.helpers import running, wait_for

pytestmark = pytest.mark.cluster_too

Q = "billing"
KINDS: dict[str, dict[str, Any]] = {
    "plain": {},
    "unique": {"unique": 60},
    "process_in": {"process_in": 60},
    "process_at": {"process_at": None},  # an hour from now (see _fields)
    "unique scheduled": {"process_in": 60, "unique": 60},
    "group": {"group": "g1"},
    "unique group": {"group": "g1", "unique": 60},
}


def _tasks_stored(r: redis.Redis) -> int:
    return len(r.keys(f"asynq:{{{Q}}}:t:*"))


def _fields(kind: str) -> dict[str, Any]:
    f = dict(KINDS[kind])
    if "process_at" in f:
        f["process_at"] = datetime.now(UTC) + timedelta(hours=1)
    return f


@pytest.mark.parametrize("kind", KINDS)
def test_client_refuses_every_kind_past_the_size_and_writes_nothing(kind: str, redis_url: str,
                                                                    r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=3)
    c = Client(redis_url)
    for i in range(3):
        c.enqueue(Task("t", str(i).encode()), queue=Q, **_fields(kind))  # they all count toward the size
    with pytest.raises(QueueFullError) as err:
        c.enqueue(Task("t", b"more"), queue=Q, **_fields(kind))
    assert (err.value.limit_kind, err.value.limit, err.value.current) == ("size", 3, 3)
    with pytest.raises(QueueFullError):
        c.enqueue(Task("plain", b""), queue=Q)  # whatever kind filled it
    assert _tasks_stored(r) == 3 and queue_limit(r, Q).refused == 2
    assert len(r.keys(f"asynq:{{{Q}}}:unique:*")) == (3 if "unique" in kind else 0)  # no lock for a refused one
    assert clear_queue_limit(r, Q)
    c.enqueue(Task("t", b"more"), queue=Q, **_fields(kind))


@pytest.mark.parametrize("kind", ["plain", "process_in", "group", "unique group"])
def test_every_kind_is_refused_while_the_oldest_pending_task_is_too_old(kind: str, redis_url: str,
                                                                        r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue(Task("old", b""), queue=Q)
    set_queue_limit(r, Q, max_latency=0.2)
    time.sleep(0.3)
    with pytest.raises(QueueFullError) as err:
        c.enqueue(Task("t", b""), queue=Q, **_fields(kind))
    assert err.value.limit_kind == "latency"
    assert _tasks_stored(r) == 1 and not r.exists(keys.group(Q, "g1"))


@pytest.mark.parametrize("kind", KINDS)
def test_async_client_refuses_every_kind(kind: str, redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=2)

    async def go() -> list[Any]:
        async with AsyncClient(redis_url) as c:
            # concurrent callers: one shared round trip on a plain Redis (each gets its own answer)
            return await asyncio.gather(*(c.enqueue(Task("t", str(i).encode()), queue=Q, **_fields(kind))
                                          for i in range(4)), return_exceptions=True)
    out = asyncio.run(go())  # (in order on a plain Redis; a cluster client runs them side by side)
    assert sorted(isinstance(o, QueueFullError) for o in out) == [False, False, True, True]
    assert _tasks_stored(r) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_enqueue_many_refuses_every_kind_per_task(kind: str, redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=3)
    tasks = [Task("t", str(i).encode()) for i in range(5)]
    out = Client(redis_url).enqueue_many(tasks, queue=Q, **_fields(kind))
    assert [isinstance(o, QueueFullError) for o in out] == [False] * 3 + [True] * 2
    clear_queue_limit(r, Q)
    set_queue_limit(r, "other", max_size=3)

    async def go() -> list[Any]:
        async with AsyncClient(redis_url) as c:
            return await c.enqueue_many(tasks, queue="other", **_fields(kind))
    assert [isinstance(o, QueueFullError) for o in asyncio.run(go())] == [False] * 3 + [True] * 2
    assert _tasks_stored(r) == 3 and len(r.keys("asynq:{other}:t:*")) == 3


def test_grouped_tasks_count_toward_the_size_in_every_group(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for g in ("a", "b", "c"):
        c.enqueue(Task("t", b""), queue=Q, group=g)
    set_queue_limit(r, Q, max_size=4)
    c.enqueue(Task("t", b""), queue=Q)
    with pytest.raises(QueueFullError) as err:
        c.enqueue(Task("t", b""), queue=Q, group="d")
    assert err.value.current == 4 and not r.exists(keys.group(Q, "d"))
    assert r.smembers(keys.groups(Q)) == {b"a", b"b", b"c"}


def test_the_aggregators_task_is_not_refused(redis_url: str, r: redis.Redis) -> None:
    """The group's tasks were counted when they were added; the one task made of them must not be refused
    (here an operator lowered the limit meanwhile, so the queue is past it without them)."""
    c = Client(redis_url)
    for i in range(3):
        c.enqueue(Task("item", str(i).encode()), queue=Q, group="g1")
    c.enqueue(Task("later", b""), queue=Q, process_in=3600)
    set_queue_limit(r, Q, max_size=1)
    batches: list[bytes] = []
    mux = ServeMux()
    mux.handle("batch", lambda t: batches.append(t.payload))
    with running(redis_url, mux, queues={Q: 1}, group_aggregator=lambda g, ts: Task(
            "batch", b",".join(t.payload for t in ts)), group_grace_period=1, group_max_size=10):
        wait_for(lambda: batches, timeout=15, what="the aggregated task to run")
    assert sorted(batches[0].split(b",")) == [b"0", b"1", b"2"]
    assert queue_limit(r, Q).refused == 0


def _drain_when_full(r: redis.Redis, size: int) -> None:
    """Empty the queue 0.3 s after it holds size tasks: a worker draining it. (Not a timer from the start: a
    client's start can take 0.3 s on a loaded machine, and the queue emptied before the first tasks came would stay
    full for good.)"""
    deadline = time.monotonic() + 10
    while r.llen(keys.pending(Q)) < size and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    r.delete(keys.pending(Q))


def test_enqueue_many_block_sends_the_refused_tasks_again_until_room(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=2)
    c = Client(redis_url)
    threading.Thread(target=_drain_when_full, args=(r, 2)).start()  # a worker drains the first two
    t0 = time.monotonic()
    out = c.enqueue_many([Task("t", str(i).encode()) for i in range(4)], queue=Q, block=5)
    assert not [o for o in out if isinstance(o, Exception)] and time.monotonic() - t0 >= 0.25
    assert r.llen(keys.pending(Q)) == 2
    out = c.enqueue_many([Task("t", b"x")], queue=Q, block=0.2)  # bounded: still full after 0.2 s
    assert isinstance(out[0], QueueFullError) and r.llen(keys.pending(Q)) == 2


def test_async_enqueue_many_block_awaits_room(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=2)

    async def go() -> tuple[list[Any], int]:
        ticks = 0

        async def ticker() -> None:  # the event loop goes on while enqueue_many waits
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)
        async with AsyncClient(redis_url) as c:
            t = asyncio.create_task(ticker())
            room = asyncio.create_task(asyncio.to_thread(_drain_when_full, r, 2))
            out = await c.enqueue_many([Task("t", str(i).encode()) for i in range(3)], queue=Q, block=5)
            await room
            t.cancel()
            return out, ticks
    out, ticks = asyncio.run(go())
    assert not [o for o in out if isinstance(o, Exception)] and ticks >= 10
    assert r.llen(keys.pending(Q)) == 1


def test_cli_task_enqueue_exits_1_with_one_line_when_full(redis_url: str, r: redis.Redis) -> None:
    set_queue_limit(r, Q, max_size=1)
    ok = run("task", "enqueue", "email:send", '{"to": "a@b"}', "--queue", Q, "--redis-url", redis_url)
    assert ok.returncode == 0 and f"in queue {Q}: pending" in ok.stdout
    for extra in ([], ["--group", "g"], ["--process-in", "10m"], ["--unique", "1h"]):
        full = run("task", "enqueue", "t", "--queue", Q, "--redis-url", redis_url, *extra)
        assert full.returncode == 1 and "Traceback" not in full.stderr
        assert f"queue '{Q}' is full (1 tasks, limit 1)" in full.stderr and len(full.stderr.strip().splitlines()) == 1
    threading.Timer(0.5, lambda: r.delete(keys.pending(Q))).start()
    waited = run("task", "enqueue", "t", "--queue", Q, "--redis-url", redis_url, "--block", "10s", "--json")
    assert waited.returncode == 0 and '"state": "pending"' in waited.stdout
    bad = run("task", "enqueue", "t", "--block", "soon", "--redis-url", redis_url)
    assert bad.returncode == 2 and "duration" in bad.stderr


def test_the_aggregating_count_is_kept_a_second_then_counted_again(redis_url: str, r: redis.Redis) -> None:
    """One ZCARD per group is too dear for every enqueue: the count is kept for a second (our group enqueues add
    to it); a Go producer's grouped task (written without it) counts from the next count."""
    set_queue_limit(r, Q, max_size=4)
    c = Client(redis_url)
    for g in ("a", "b"):
        c.enqueue(Task("t", b""), queue=Q, group=g)
    assert r.get(f"asynqpy:{{{Q}}}:aggn") == b"2" and 0 < r.pttl(f"asynqpy:{{{Q}}}:aggn") <= 1000
    r.hset(f"asynq:{{{Q}}}:t:go1", mapping={"msg": b"", "state": "aggregating", "group": "c"})  # as Go writes it
    r.zadd(keys.group(Q, "c"), {"go1": int(time.time())})
    r.sadd(keys.groups(Q), "c")
    c.enqueue(Task("t", b""), queue=Q)  # 1 pending + 2 kept: room
    wait_for(lambda: not r.exists(f"asynqpy:{{{Q}}}:aggn"), timeout=3, what="the kept count to expire")
    with pytest.raises(QueueFullError) as err:  # 1 pending + 3 grouped
        c.enqueue(Task("t", b""), queue=Q)
    assert err.value.current == 4
