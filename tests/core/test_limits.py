"""Flow control at the script level: limits held by the dequeue and hand-off scripts themselves."""

from __future__ import annotations

import json
import math
import time

import pytest
import redis

from asynqpy import Client, Limit, Task
from asynqpy.errors import InvalidArgumentError
from asynqpy.limits import lua_pattern, parse_rate
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import limits, remove_limit, set_limit, usage
from asynqpy.rdb.sync_runner import SyncRunner

pytestmark = pytest.mark.cluster_too


def dequeue(r: redis.Redis, n: int = 10, q: str = "default", lease: float = 30) -> list[str]:
    rows = SyncRunner(r).run(broker.dequeue_timed(q, lease_expiry=time.time() + lease, count=n))
    return [tid for tid, _, _ in rows]


def types_of(r: redis.Redis, ids: list[str], q: str = "default") -> list[str]:
    from asynqpy.wire.codec import decode_task_message
    return [decode_task_message(r.hget(keys.task(q, i), "msg"), queue=q, task_id=i).type  # type: ignore[arg-type]
            for i in ids]


def test_rate_and_pattern_parsing() -> None:
    assert parse_rate("100/s") == 100 and parse_rate("600/m") == 10 and parse_rate("36/h") == 0.01
    with pytest.raises(InvalidArgumentError):
        parse_rate("fast")
    with pytest.raises(InvalidArgumentError):
        Limit("email:*")  # neither concurrency nor rate
    with pytest.raises(InvalidArgumentError):
        Limit("a", concurrency=1, key="tenant")
    assert lua_pattern("email:*") == "^email:.*$" and lua_pattern("a.b-c") == "^a%.b%-c$"


def test_concurrency_limit_holds_in_dequeue_and_others_pass_the_blocked(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for i in range(5):
        c.enqueue(Task("email:send", str(i).encode()))
    c.enqueue(Task("free:x", b""))
    set_limit(r, Limit("email:*", concurrency=2))
    got = dequeue(r)
    assert sorted(types_of(r, got)) == ["email:send", "email:send", "free:x"]  # no head-of-line blocking
    assert r.llen(keys.pending("default")) == 0  # the three over the limit wait on it, not in pending
    u = usage(r, "default", Limit("email:*", concurrency=2))
    assert (u.running, u.waiting) == (2, 3)
    assert r.hget(keys.task("default", r.lindex(keys.limit_wait_list("default", "email:*\n"), 0).decode()),
                  "state") == b"pending"
    assert dequeue(r) == []  # still full
    SyncRunner(r).run(broker.done("default", [(got[0], "")], now=time.time()))  # one finishes: its slot frees
    again = dequeue(r)
    assert len(again) == 1 and types_of(r, again) == ["email:send"]
    assert r.hget(keys.task("default", again[0]), "limit_wait") is None


def test_expired_lease_gives_its_slot_back(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(2):
        c.enqueue(Task("email:send", b""))
    set_limit(r, Limit("email:*", concurrency=1))
    assert len(dequeue(r, lease=0.5)) == 1  # its worker dies; its lease runs out: no permit leaks
    time.sleep(math.ceil(time.time() + 0.5) - time.time() + 0.1)  # whole-second lease scores
    assert len(dequeue(r)) == 1


def test_rate_limit_admits_burst_then_waits(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(10):
        c.enqueue(Task("sync:crm", b""))
    set_limit(r, Limit("sync:crm", rate=2, burst=3))
    assert len(dequeue(r)) == 3
    first = r.zrange(keys.limit_waiting("default"), 0, 0, withscores=True)
    assert first and first[0][1] > time.time()  # looked at again when the next token comes
    time.sleep(0.55)
    assert len(dequeue(r)) == 1


def test_partitioned_limit_holds_per_key(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for acct in ["a", "a", "a", "b", "b"]:
        c.enqueue(Task("sync:crm", json.dumps({"account": acct}).encode()))
    for tenant in ["x", "x", "y"]:
        c.enqueue(Task("email:send", b"", headers={"tenant": tenant}))
    set_limit(r, Limit("sync:crm", concurrency=1, key="payload.account"))
    set_limit(r, Limit("email:*", concurrency=1, key="header.tenant"))
    got = dequeue(r, 20)
    assert sorted(types_of(r, got)) == ["email:send"] * 2 + ["sync:crm"] * 2


def test_handoff_obeys_limits(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1), queues=["default"])
    r.zadd(keys.waiters("default"), {"w1": time.time() + 30, "w2": time.time() + 30})
    c = Client(redis_url)
    c.enqueue(Task("email:a", b""))
    c.enqueue(Task("email:b", b""))  # over the limit: waits, not handed to the second waiter
    assert r.llen(keys.handoff("default", "w1")) + r.llen(keys.handoff("default", "w2")) == 1
    assert r.zcard(keys.waiters("default")) == 1
    assert usage(r, "default", Limit("email:*", concurrency=1)).waiting == 1


def test_remove_limit_sends_waiting_tasks_back_to_pending(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(3):
        c.enqueue(Task("email:send", b""))
    set_limit(r, Limit("email:*", concurrency=1))
    assert len(dequeue(r)) == 1
    assert [lim.pattern for lim in limits(r)] == ["email:*"]
    assert remove_limit(r, "email:*")
    assert r.llen(keys.pending("default")) == 2 and r.zcard(keys.limit_waiting("default")) == 0
    assert len(dequeue(r)) == 2
    assert not remove_limit(r, "email:*")


def test_no_limits_dequeue_unchanged(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(3):
        c.enqueue(Task("email:send", b""))
    assert len(dequeue(r)) == 3


def test_server_applies_code_defaults_at_start_without_overriding_stored_limits(redis_url: str,
                                                                                r: redis.Redis) -> None:
    from asynqpy import ServeMux
    from tests.helpers import running
    set_limit(r, Limit("sync:*", concurrency=7))  # set with the CLI earlier: survives restarts
    defaults = (Limit("email:*", concurrency=3), Limit("sync:*", concurrency=1))
    with running(redis_url, ServeMux(), queues={"mail": 1}, limits=defaults):
        pass
    assert {lim.pattern: lim.concurrency for lim in limits(r)} == {"email:*": 3, "sync:*": 7}
    stored = {k.decode() for k in r.hkeys(keys.queue_limits("mail"))}
    assert stored == {"email:*", "sync:*"}  # the server's queue got its copy
    with pytest.raises(InvalidArgumentError):
        from asynqpy.config import ServerConfig
        ServerConfig(limits=("email:*",))  # type: ignore[arg-type]


def test_a_waiting_task_archived_meanwhile_does_not_start(redis_url: str, r: redis.Redis) -> None:
    from inspector.api import Inspector
    c = Client(redis_url)
    first = c.enqueue(Task("email:send", b"")).id
    second = c.enqueue(Task("email:send", b"")).id
    set_limit(r, Limit("email:*", concurrency=1))
    assert dequeue(r) == [first]  # the second waits on the limit
    with Inspector(redis_url) as insp:
        try:
            insp.archive_task("default", second)
        except Exception:  # an Inspector that cannot find it there refuses: the point is what dequeue does
            r.hset(keys.task("default", second), "state", "archived")
    SyncRunner(r).run(broker.done("default", [(first, "")], now=time.time()))
    assert dequeue(r) == []
    assert r.llen(keys.limit_wait_list("default", "email:*\n")) == 0


def test_odd_limit_values_are_refused_and_never_fail_the_queues_dequeue(redis_url: str, r: redis.Redis) -> None:
    for bad in [dict(rate=math.inf), dict(rate=math.nan), dict(rate=1, burst=math.nan), dict(concurrency=2.5),
                dict(concurrency=True)]:
        with pytest.raises(InvalidArgumentError):
            Limit("x:*", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="too large"):
        parse_rate("9" * 400 + "/s")  # a float of inf
    c = Client(redis_url)
    for t in ["x:a", "x:a", "y:a", "y:a", "free"]:
        c.enqueue(Task(t, b""))
    # finite but extreme: the token bucket's expiry would be out of PEXPIRE's range; so would a raw 'inf' written
    # by hand. None of them may fail the dequeue of the queue (every other type would stop too).
    set_limit(r, Limit("x:*", rate=1e-300))
    set_limit(r, Limit("y:*", rate=1, burst=1e300))
    assert sorted(types_of(r, dequeue(r))) == ["free", "x:a", "y:a", "y:a"]
    r.hset(keys.queue_limits("default"), "z:*", "^z:.*$\t0\tinf\tinf\t")
    c.enqueue(Task("z:a", b""))
    c.enqueue(Task("free", b""))
    assert sorted(types_of(r, dequeue(r))) == ["free", "z:a"]


def test_usage_counts_as_running_only_the_holders_whose_lease_runs_on(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(3):
        c.enqueue(Task("email:send", b""))
    set_limit(r, Limit("email:*", concurrency=2))
    got = dequeue(r)
    assert usage(r, "default", Limit("email:*", concurrency=2)).running == 2
    SyncRunner(r).run(broker.done("default", [(got[0], "")], now=time.time()))
    # its slot entry stays until a fetch finds the limit full; it holds no lease, it is not running
    assert usage(r, "default", Limit("email:*", concurrency=2)).running == 1


def test_usage_of_a_limit_leaves_out_the_slots_of_a_limit_whose_name_begins_with_its_own(
        redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(2):
        c.enqueue(Task("email:send", b"", headers={"tenant": "a"}))
    set_limit(r, Limit("email", concurrency=5, key="header.tenant"), queues=["default"])  # type 'email' only
    set_limit(r, Limit("email:*", concurrency=5))
    set_limit(r, Limit("email:send", concurrency=5, key="header.tenant"))
    assert len(dequeue(r)) == 2
    running = {lim: usage(r, "default", Limit(lim, concurrency=5, key=key)).running
               for lim, key in [("email", "header.tenant"), ("email:*", ""), ("email:send", "header.tenant")]}
    assert running == {"email": 0, "email:*": 2, "email:send": 2}


def test_a_partition_with_room_starts_behind_more_than_twenty_blocked_ones(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    for k in range(2):
        for t in range(25):
            c.enqueue(Task("sync", b"", headers={"tenant": f"{t:02d}"}), task_id=f"{t:02d}-{k}")
    set_limit(r, Limit("sync", concurrency=1, key="header.tenant"), queues=["default"])
    assert len(dequeue(r, 100)) == 25  # one per tenant; the other 25 wait, each in its own partition
    # the tenants sorting last finish; the first 20 partitions (the same score: their holders' lease) stay full
    SyncRunner(r).run(broker.done("default", [(f"{t:02d}-0", "") for t in range(20, 25)], now=time.time()))
    started = dequeue(r, 100) + dequeue(r, 100)  # the first fetch looks at 20 partitions, the next at the rest
    assert sorted(started) == [f"{t}-1" for t in range(20, 25)]


def test_a_call_that_held_back_max_blocked_tasks_wakes_the_queues_workers_for_the_rest(redis_url: str,
                                                                                      r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue_many([Task("email:send", b"") for _ in range(250)])
    c.enqueue(Task("free", b""))
    set_limit(r, Limit("email:*", concurrency=1))
    sub = r.pubsub()
    sub.subscribe(keys.WAKE_CHANNEL)
    assert sub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    assert len(dequeue(r)) == 1  # one starts, 100 are held back: the call stops there
    woke = sub.get_message(timeout=5)
    assert woke and woke["data"] == b"default"  # idle workers fetch again now, not at their next poll
    assert dequeue(r) == [] and sub.get_message(timeout=5)["data"] == b"default"  # type: ignore[index]
    assert types_of(r, dequeue(r)) == ["free"]  # the last 49 limited ones, then the free one
    assert sub.get_message(timeout=0.2) is None  # nothing more behind: no wake
    sub.close()


def test_a_task_handed_off_does_not_overtake_those_waiting_on_its_partition(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("sync", rate=2, burst=1), queues=["default"])
    c = Client(redis_url)

    def idle_worker(name: str) -> None:
        r.zadd(keys.waiters("default"), {name: time.time() + 30})

    idle_worker("w0")
    c.enqueue(Task("sync", b""), task_id="t0")  # takes the token: handed to w0
    idle_worker("w1")
    c.enqueue(Task("sync", b""), task_id="t1")  # no token: waits
    r.hset(keys.limit_bucket("default", "sync", ""), "tokens", "1")  # the next token came
    c.enqueue(Task("sync", b""), task_id="t2")  # w1 is idle: t2 must not take t1's token
    assert r.llen(keys.handoff("default", "w1")) == 0
    assert r.lrange(keys.limit_wait_list("default", "sync\n"), 0, -1) == [b"t2", b"t1"]
    assert dequeue(r) == ["t1"]  # the oldest first


def test_a_slot_zset_holds_about_the_running_tasks_not_all_those_started(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue_many([Task("sync", b"") for _ in range(600)])
    set_limit(r, Limit("sync", concurrency=100_000))  # never full: the fetch's full-limit pruning never runs
    run = SyncRunner(r)
    for _ in range(30):
        rows = run.run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=20))
        run.run(broker.done("default", [(tid, "") for tid, _, _ in rows], now=time.time()))
    assert r.llen(keys.pending("default")) == 0
    # 600 started and finished; their entries leave as later ones are taken (about twice the 20 running stay)
    assert r.zcard(keys.limit_slots("default", "sync", "")) < 150


def test_tasks_left_waiting_on_a_queue_without_limits_start(redis_url: str, r: redis.Redis) -> None:
    from asynqpy.rdb.flow import apply_defaults
    c = Client(redis_url)
    for i in range(3):
        c.enqueue(Task("email:x", b""), task_id=f"t{i}")
    set_limit(r, Limit("email:*", concurrency=1))
    assert dequeue(r) == ["t0"]  # t1 and t2 wait
    r.hdel(keys.LIMITS, "email:*")  # a `limit rm` cut short after its first step (the fleet's copy)
    apply_defaults(r, [], ["default"])  # a server starts: the queue's copy becomes the fleet's (none); no release
    assert sorted(dequeue(r)) == ["t1", "t2"]  # not stuck out of pending with nothing looking at them
