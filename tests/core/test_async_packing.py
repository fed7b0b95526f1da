"""AsyncClient: concurrent enqueues with per-call options are packed by their options' values (each call's
merged options are a new object), and each caller still gets its own TaskInfo or error, with the task stored
with its own fields."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import redis

from asynqpy import AsyncClient, DuplicateTaskError, Task, TaskIDConflictError, TaskState
from asynqpy.rdb import keys
from asynqpy.task import TaskInfo
from tests.helpers import msg_of


def counting_commands(c: AsyncClient) -> list[int]:
    """Wraps the client's runner: the number of commands of each round trip is appended to the list."""
    sizes: list[int] = []
    send = c._runner.send_scripts

    async def counting(packed: Sequence[bytes], scripts: Sequence[Any]) -> list[Any]:
        sizes.append(len(packed))
        return await send(packed, scripts)

    c._runner.send_scripts = counting  # type: ignore[method-assign]
    return sizes


def test_per_call_queue_is_packed_like_default_options(redis_url: str, r: redis.Redis) -> None:
    async def go() -> tuple[list[TaskInfo], list[int]]:
        async with AsyncClient(redis_url) as c:
            await c.enqueue(Task("warm"), queue="emails")  # registers the queue: no SADD in the trip below
            sizes = counting_commands(c)
            out = await asyncio.gather(*(c.enqueue(Task("mail", b"%d" % i), queue="emails") for i in range(100)))
            return out, sizes

    out, sizes = asyncio.run(go())
    # 100 callers, each with its own merged TaskOptions: one enqueue_many command, not one command per caller.
    assert sizes == [1]
    assert [o.payload for o in out] == [b"%d" % i for i in range(100)]
    assert all(o.queue == "emails" and o.state is TaskState.PENDING for o in out)
    assert len({o.id for o in out}) == 100
    assert r.llen(keys.pending("emails")) == 101


def test_concurrent_enqueues_with_any_options_keep_their_own_fields_and_errors(
        redis_url: str, r: redis.Redis) -> None:
    async def go() -> list[Any]:
        async with AsyncClient(redis_url) as c:
            await c.enqueue(Task("u", b"held"), queue="uq", unique=60)
            await c.enqueue(Task("x", b"old"), queue="iq", task_id="taken")
            calls = []
            for i in range(4):  # four callers of each kind, interleaved, all in one round trip
                calls += [
                    c.enqueue(Task("q", b"q%d" % i), queue="emails"),
                    c.enqueue(Task("m", b"m%d" % i), queue="mq", max_retry=3),
                    c.enqueue(Task("p", b"p%d" % i), queue="pq", process_in=30),
                    c.enqueue(Task("u", b"u%d" % i), queue="uq", unique=60),
                    c.enqueue(Task("i", b"i%d" % i), queue="iq", task_id=f"own-{i}"),
                    c.enqueue(Task("r", b"r%d" % i), queue="rq", retention=600),
                    c.enqueue(Task("g", b"g%d" % i), queue="gq", group="grp"),
                ]
            calls.append(c.enqueue(Task("u", b"held"), queue="uq", unique=60))  # the lock is held
            calls.append(c.enqueue(Task("u", b"u0"), queue="uq", unique=60))  # the same as a caller above
            calls.append(c.enqueue(Task("i", b"again"), queue="iq", task_id="taken"))  # the id exists
            calls.append(c.enqueue(Task("i", b"twin"), queue="iq", task_id="own-1"))  # an id of this trip
            return await asyncio.gather(*calls, return_exceptions=True)

    before = time.time()
    out = asyncio.run(go())
    *infos, held, twin_unique, taken, twin_id = out
    assert isinstance(held, DuplicateTaskError) and isinstance(twin_unique, DuplicateTaskError)
    assert isinstance(taken, TaskIDConflictError) and isinstance(twin_id, TaskIDConflictError)
    assert all(isinstance(o, TaskInfo) for o in infos), [o for o in infos if not isinstance(o, TaskInfo)]
    by_queue: dict[str, list[TaskInfo]] = {}
    for o in infos:
        by_queue.setdefault(o.queue, []).append(o)
    assert {q: len(v) for q, v in by_queue.items()} == dict.fromkeys(
        ["emails", "mq", "pq", "uq", "iq", "rq", "gq"], 4)
    for q, kind in [("emails", "q"), ("mq", "m"), ("pq", "p"), ("uq", "u"), ("iq", "i"), ("rq", "r"), ("gq", "g")]:
        assert [o.payload for o in by_queue[q]] == [b"%s%d" % (kind.encode(), i) for i in range(4)]
        for o in by_queue[q]:
            m = msg_of(r, q, o.id)
            assert (m.queue, m.type, m.payload) == (q, o.type, o.payload)
            assert m.retry == (3 if q == "mq" else 25) and o.max_retry == m.retry
            assert m.retention == (600 if q == "rq" else 0)
            assert m.group_key == ("grp" if q == "gq" else "")
            assert (m.unique_key != "") == (q == "uq")
    assert [o.id for o in by_queue["iq"]] == [f"own-{i}" for i in range(4)]
    assert msg_of(r, "iq", "own-1").payload == b"i1" and msg_of(r, "iq", "taken").payload == b"old"
    assert r.llen(keys.pending("emails")) == 4 and r.llen(keys.pending("rq")) == 4
    assert r.llen(keys.pending("uq")) == 5 and r.llen(keys.pending("iq")) == 5
    assert all(o.state is TaskState.SCHEDULED for o in by_queue["pq"]) and r.zcard(keys.scheduled("pq")) == 4
    for o in by_queue["pq"]:
        score = r.zscore(keys.scheduled("pq"), o.id)
        assert score is not None and before + 29 <= score <= time.time() + 31
    assert all(o.state is TaskState.AGGREGATING for o in by_queue["gq"]) and r.zcard(keys.group("gq", "grp")) == 4
    assert r.llen(keys.pending("gq")) == 0
