"""The janitor: completed tasks whose retention ran out are deleted, every queue in one round trip per batch."""

from __future__ import annotations

import time

import redis

from asynqpy import ServeMux
from asynqpy.rdb import keys
from tests.helpers import running, wait_for


def _completed(r: redis.Redis, q: str, n: int, *, expiry: float) -> list[str]:
    ids = [f"{q}-{expiry:.0f}-{i}" for i in range(n)]
    for tid in ids:
        r.hset(keys.task(q, tid), mapping={"state": "completed", "msg": b"x"})
    r.zadd(keys.completed(q), dict.fromkeys(ids, int(expiry)))
    return ids


def test_expired_completed_tasks_go_in_every_queue_even_past_a_broken_one(redis_url: str, r: redis.Redis) -> None:
    # jbad's completed key is not a sorted set: its delete fails, the queues after it are still cleaned; jq1 holds
    # more than one batch (100), so it is asked again.
    past, future = time.time() - 60, time.time() + 3600
    r.set(keys.completed("jbad"), "not a zset")
    gone = _completed(r, "jq1", 150, expiry=past) + _completed(r, "jq2", 3, expiry=past)
    kept = _completed(r, "jq2", 2, expiry=future)
    with running(redis_url, ServeMux(), queues={"jbad": 3, "jq1": 2, "jq2": 1}, janitor_interval=0.2):
        wait_for(lambda: r.zcard(keys.completed("jq1")) == 0 and r.zcard(keys.completed("jq2")) == 2,
                 what="the expired completed tasks to be deleted")
    assert not any(r.exists(keys.task(q, tid)) for q, tid in [("jq1" if t.startswith("jq1") else "jq2", t)
                                                               for t in gone])
    assert all(r.exists(keys.task("jq2", tid)) for tid in kept)
    assert r.zrange(keys.completed("jq2"), 0, -1) == sorted(t.encode() for t in kept)
    assert r.get(keys.completed("jbad")) == b"not a zset"
