"""The type index of a queue's limits (asynqpy:{q}:ltypes, lua/_limits.lua): a task costs one HGET however many
limits are defined, and every change of the limits applies at once to the types already indexed."""

from __future__ import annotations

import time

import pytest
import redis

from asynqpy import Client, Limit, Task
from asynqpy.rdb import keys
from asynqpy.rdb.flow import remove_limit, set_limit
from tests.core.test_limits import dequeue, types_of

pytestmark = pytest.mark.cluster_too

INDEX = keys.limit_types("default")


def test_a_queue_without_limits_keeps_no_index(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("email:send", b""))
    assert len(dequeue(r)) == 1
    assert r.exists(INDEX) == 0


def test_an_unlimited_type_is_indexed_with_no_limits_and_starts(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("sync:*", concurrency=1), queues=["default"])
    Client(redis_url).enqueue_many([Task("email:send", b"") for _ in range(3)])
    assert len(dequeue(r)) == 3
    assert r.hget(INDEX, "email:send") == b""
    assert 0 < r.ttl(INDEX) <= 600  # the index expires: types no longer seen do not stay


def test_a_limit_added_after_the_type_was_indexed_applies_at_once(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("sync:*", concurrency=1), queues=["default"])
    c = Client(redis_url)
    c.enqueue(Task("email:send", b""))
    assert len(dequeue(r)) == 1 and r.hget(INDEX, "email:send") == b""
    set_limit(r, Limit("email:*", concurrency=1))
    c.enqueue_many([Task("email:send", b"") for _ in range(3)])
    assert len(dequeue(r)) == 1  # the first one started before the limit: it holds no slot
    assert r.hget(INDEX, "email:send") == b"email:*"
    # the hand-off to an idle worker reads the same index
    set_limit(r, Limit("mail:*", concurrency=1))
    r.zadd(keys.waiters("default"), {"w1": time.time() + 30, "w2": time.time() + 30})
    c.enqueue(Task("mail:one", b""))  # handed to one waiter, holding mail:*'s one slot
    assert r.hget(INDEX, "mail:one") == b"mail:*"
    set_limit(r, Limit("mail:one", concurrency=5))
    c.enqueue(Task("mail:one", b""))  # mail:* is full: waits, not handed to the other waiter
    assert r.llen(keys.handoff("default", "w1")) + r.llen(keys.handoff("default", "w2")) == 1
    assert r.zcard(keys.waiters("default")) == 1
    assert sorted(r.hget(INDEX, "mail:one").split(b"\t")) == [b"mail:*", b"mail:one"]


def test_removing_a_limit_frees_its_types_at_once(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1), queues=["default"])
    set_limit(r, Limit("sync:*", concurrency=1), queues=["default"])
    Client(redis_url).enqueue_many([Task("email:send", b"") for _ in range(4)])
    assert len(dequeue(r)) == 1 and r.hget(INDEX, "email:send") == b"email:*"
    assert remove_limit(r, "email:*")
    assert len(dequeue(r)) == 3  # the waiting ones went back to pending and run without a slot
    assert r.hget(INDEX, "email:send") == b""


def test_a_new_pattern_over_an_indexed_type_adds_to_its_limits(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=10), queues=["default"])
    c = Client(redis_url)
    c.enqueue(Task("email:send", b""))
    c.enqueue(Task("email:read", b""))
    assert len(dequeue(r)) == 2
    set_limit(r, Limit("*:send", concurrency=1))  # the tighter of the two holds email:send now
    c.enqueue_many([Task("email:send", b"") for _ in range(3)] + [Task("email:read", b"") for _ in range(3)])
    assert sorted(types_of(r, dequeue(r))) == ["email:read"] * 3 + ["email:send"]
    assert sorted(r.hget(INDEX, "email:send").split(b"\t")) == [b"*:send", b"email:*"]
    assert r.hget(INDEX, "email:read") == b"email:*"


def test_a_changed_limit_keeps_the_index_and_its_new_numbers_apply(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1), queues=["default"])
    Client(redis_url).enqueue_many([Task("email:send", b"") for _ in range(5)])
    assert len(dequeue(r)) == 1
    set_limit(r, Limit("email:*", concurrency=3))
    assert r.hget(INDEX, "email:send") == b"email:*"  # same name, same pattern: the entry is still right
    assert len(dequeue(r)) == 2


def test_a_stale_index_from_a_writer_that_did_not_drop_it_is_rebuilt(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1), queues=["default"])
    set_limit(r, Limit("sync:*", concurrency=1), queues=["default"])
    Client(redis_url).enqueue_many([Task("email:send", b"") for _ in range(3)])
    assert len(dequeue(r)) == 1
    r.hdel(keys.queue_limits("default"), "email:*")  # an older asynqpy's write: the index still names it
    r.rpush(keys.pending("default"), *r.lrange(keys.limit_wait_list("default", "email:*\n"), 0, -1))
    r.delete(keys.limit_wait_list("default", "email:*\n"), keys.limit_waiting("default"))
    assert len(dequeue(r)) == 2  # the named limit is gone: matched again, none applies
    assert r.hget(INDEX, "email:send") == b""


def test_many_distinct_types_keep_the_index_bounded(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("limited:*", concurrency=1), queues=["default"])
    Client(redis_url).enqueue_many([Task(f"type:{i}", b"") for i in range(1500)])
    started = 0
    while started < 1500:
        got = dequeue(r, 100)
        assert got
        started += len(got)
        assert r.hlen(INDEX) <= 1000
    assert r.hget(INDEX, "type:1499") == b""  # begun again when full: the newest types are there
    assert 0 < r.ttl(INDEX) <= 600


def test_writing_limits_keeps_no_connection_for_itself(redis_url: str, r: redis.Redis) -> None:
    # set_limit/remove_limit ran their scripts through a SyncRunner made per call, each of which kept a pooled
    # connection in use for good: `limit rm` in a loop (a dashboard, a bench) ran out of connections
    if isinstance(r, redis.RedisCluster):
        pytest.skip("one server's count of clients is enough")
    r.sadd(keys.QUEUES, "default", "other")
    before = r.info("clients")["connected_clients"]
    for i in range(40):
        set_limit(r, Limit(f"t{i}:*", concurrency=1))
        remove_limit(r, f"t{i}:*")
    assert r.info("clients")["connected_clients"] - before < 10
