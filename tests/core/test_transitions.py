"""Every worker-side state transition (one Lua script each) and the keys it leaves behind."""

from __future__ import annotations

import math
import time

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire import TaskMessage

pytestmark = pytest.mark.cluster_too


@pytest.fixture
def run(r: redis.Redis) -> SyncRunner:
    return SyncRunner(r)


def enqueue(url: str, n: int = 1, **kw) -> list[str]:  # type: ignore[no-untyped-def]
    c = Client(url)
    return [c.enqueue(Task("t", f"p{i}".encode()), **kw).id for i in range(n)]


def test_dequeue_moves_oldest_first_with_lease(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    ids = enqueue(redis_url, 3)
    exp = time.time() + 30
    got = run.run(broker.dequeue("default", lease_expiry=exp, count=2))
    assert [i for i, _ in got] == ids[:2]  # FIFO
    assert TaskMessage.FromString(got[0][1]).id == ids[0]
    assert r.lrange(keys.active("default"), 0, -1) == [ids[1].encode(), ids[0].encode()]
    assert r.zscore(keys.lease("default"), ids[0]) == math.ceil(exp)  # whole seconds, rounded up
    h = r.hgetall(keys.task("default", ids[0]))
    assert h[b"state"] == b"active" and b"pending_since" not in h
    assert r.llen(keys.pending("default")) == 1


def test_dequeue_skips_paused_queue_and_drops_dangling_ids(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    enqueue(redis_url, 1)
    r.set(keys.paused("default"), int(time.time()))
    assert run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=5)) == []
    r.delete(keys.paused("default"))
    r.lpush(keys.pending("default"), "ghost")  # an id whose hash is gone
    got = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=5))
    assert len(got) == 1 and r.llen(keys.active("default")) == 1 and r.zcard(keys.lease("default")) == 1


def test_done_deletes_counts_and_releases_own_unique_lock(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1, unique=100)
    [(_, data)] = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    ukey = TaskMessage.FromString(data).unique_key
    now = time.time()
    assert run.run(broker.done("default", [(tid, ukey), ("not-held", "")], now=now)) == ["not-held"]
    assert not r.exists(keys.task("default", tid), ukey)
    assert r.llen(keys.active("default")) == 0 and r.zcard(keys.lease("default")) == 0
    assert r.get(keys.processed_daily("default", now)) == b"1" and r.get(keys.processed_total("default")) == b"1"
    assert 89 * 86400 < r.ttl(keys.processed_daily("default", now)) <= 90 * 86400
    assert r.ttl(keys.processed_total("default")) == -1


def test_done_leaves_someone_elses_unique_lock(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1, unique=100)
    [(_, data)] = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    ukey = TaskMessage.FromString(data).unique_key
    r.set(ukey, "another-task")
    run.run(broker.done("default", [(tid, ukey)], now=time.time()))
    assert r.get(ukey) == b"another-task"


def test_all_time_counter_resets_at_int64_max(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1)
    run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    r.set(keys.processed_total("default"), 2**63 - 1)
    run.run(broker.done("default", [(tid, "")], now=time.time()))
    assert r.get(keys.processed_total("default")) == b"1"


def test_mark_complete_keeps_task_until_expiry(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1, retention=60)
    [(_, data)] = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    m = TaskMessage.FromString(data)
    now = time.time()
    m.completed_at = int(now)
    run.run(broker.mark_complete("default", [(tid, now + 60, m.SerializeToString(), "")], now=now))
    assert r.zscore(keys.completed("default"), tid) == int(now + 60)  # as Go writes completed_at + retention
    assert r.hget(keys.task("default", tid), "state") == b"completed"
    assert TaskMessage.FromString(r.hget(keys.task("default", tid), "msg")).completed_at == int(now)
    assert run.run(broker.delete_expired_completed("default", now=now + 30)) == 0
    assert run.run(broker.delete_expired_completed("default", now=now + 61)) == 1
    assert not r.exists(keys.task("default", tid)) and r.zcard(keys.completed("default")) == 0


def test_retry_counts_failure_and_keeps_unique_lock(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1, unique=100)
    [(_, data)] = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    m = TaskMessage.FromString(data)
    m.retried, m.error_msg = 1, "boom"
    now = time.time()
    assert run.run(broker.retry("default", tid, m.SerializeToString(), retry_at=now + 20, now=now, is_failure=True))
    assert r.zscore(keys.retry("default"), tid) == math.ceil(now + 20)  # whole seconds, never early
    assert r.zscore(keys.exact_due("default"), tid) == pytest.approx(now + 20, abs=1e-3)
    assert r.hget(keys.task("default", tid), "state") == b"retry"
    assert r.get(keys.failed_daily("default", now)) == b"1" and r.get(keys.failed_total("default")) == b"1"
    assert r.exists(m.unique_key)
    # a second write for the same task finds it no longer held
    assert not run.run(broker.retry("default", tid, data, retry_at=now, now=now, is_failure=True))


def test_retry_without_failure_counts_nothing(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1)
    [(_, data)] = run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    run.run(broker.retry("default", tid, data, retry_at=time.time(), now=time.time(), is_failure=False))
    assert r.get(keys.processed_total("default")) is None and r.get(keys.failed_total("default")) is None


def test_archive_trims_by_size_and_deletes_trimmed_hashes(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    ids = enqueue(redis_url, 3)
    now = time.time()
    r.zadd(keys.archived("default"), {f"old{i}": now - 100 + i for i in range(broker.ARCHIVE_MAX_SIZE)})
    for i in range(3):
        r.hset(keys.task("default", f"old{i}"), "state", "archived")
    r.zadd(keys.archived("default"), {"ancient": now - 91 * 86400})
    r.hset(keys.task("default", "ancient"), "state", "archived")
    got = run.run(broker.dequeue("default", lease_expiry=now + 30, count=1))
    assert run.run(broker.archive("default", ids[0], got[0][1], now=now))
    assert r.zcard(keys.archived("default")) == broker.ARCHIVE_MAX_SIZE - 1
    assert r.zscore(keys.archived("default"), ids[0]) is not None
    assert not r.exists(keys.task("default", "ancient"), keys.task("default", "old0"), keys.task("default", "old1"))
    assert r.hget(keys.task("default", ids[0]), "state") == b"archived"
    assert r.get(keys.failed_total("default")) == b"1" and r.get(keys.processed_total("default")) == b"1"


def test_requeue_puts_task_at_the_front(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    ids = enqueue(redis_url, 2)
    run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))
    assert run.run(broker.requeue("default", ids[0], now=1_800_000_000.5))
    assert r.lindex(keys.pending("default"), -1) == ids[0].encode()  # next to run
    assert r.hget(keys.task("default", ids[0]), "state") == b"pending"
    assert r.hget(keys.task("default", ids[0]), "pending_since") == b"1800000000500000000"  # pending again now
    assert r.zcard(keys.lease("default")) == 0


def test_forward_moves_only_due_tasks_and_reports_next(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    c = Client(redis_url)
    a = c.enqueue(Task("t", b""), process_in=10).id
    b = c.enqueue(Task("t", b""), process_in=20).id
    due_a = r.zscore(keys.exact_due("default"), a)
    assert due_a < r.zscore(keys.scheduled("default"), a) == math.ceil(due_a)
    moved, nxt, _ = run.run(broker.forward("default", now=due_a - 0.001))
    assert moved == 0 and nxt == pytest.approx(due_a)  # never early
    moved, nxt, _ = run.run(broker.forward("default", now=due_a))  # on time, before its whole-second score
    assert moved == 1 and nxt == pytest.approx(r.zscore(keys.exact_due("default"), b))
    assert r.zscore(keys.exact_due("default"), a) is None
    h = r.hgetall(keys.task("default", a))
    assert h[b"state"] == b"pending" and int(h[b"pending_since"]) == pytest.approx(due_a * 1e9, rel=1e-9)


def test_forward_routes_group_tasks_to_their_group(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1, group="g")
    run.run(broker.dequeue("default", lease_expiry=0, count=1))  # nothing: it is aggregating
    r.zrem(keys.group("default", "g"), tid)
    r.zadd(keys.retry("default"), {tid: 1})
    r.hset(keys.task("default", tid), "state", "retry")
    assert run.run(broker.forward("default", now=time.time()))[0] == 1
    assert r.zscore(keys.group("default", "g"), tid) is not None
    assert r.hget(keys.task("default", tid), "state") == b"aggregating"


def test_lease_recovery_respects_renewed_lease(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    [tid] = enqueue(redis_url, 1)
    now = time.time()
    run.run(broker.dequeue("default", lease_expiry=now - 40, count=1))
    [(got, data)] = run.run(broker.list_lease_expired("default", cutoff=now - 30))
    assert got == tid and TaskMessage.FromString(data).id == tid
    r.zadd(keys.lease("default"), {tid: now + 30}, xx=True)  # the worker renewed it meanwhile
    assert not run.run(broker.retry("default", tid, data, retry_at=now, now=now, is_failure=True,
                                    lease_cutoff=now - 30))
    assert r.hget(keys.task("default", tid), "state") == b"active"


def test_aggregation_check_and_reclaim(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    c = Client(redis_url)
    ids = [c.enqueue(Task("t", str(i).encode()), group="g").id for i in range(3)]
    now = time.time()
    assert not run.run(broker.aggregation_check("default", "g", "s1", now=now, max_size=0, max_delay=0,
                                                grace=60, set_deadline=now + 120))
    assert run.run(broker.aggregation_check("default", "g", "s1", now=now, max_size=2, max_delay=0,
                                            grace=60, set_deadline=now + 120))
    set_key = keys.aggregation_set("default", "g", "s1")
    deadline, msgs = run.run(broker.read_aggregation_set("default", set_key))
    assert deadline == pytest.approx(now + 120) and len(msgs) == 2
    assert r.zcard(keys.group("default", "g")) == 1 and r.sismember(keys.groups("default"), "g")
    assert run.run(broker.reclaim_stale_aggregation_sets("default", now=now + 121)) == 1
    assert r.zcard(keys.group("default", "g")) == 3 and not r.exists(set_key)
    assert run.run(broker.aggregation_check("default", "g", "s2", now=now + 61, max_size=0, max_delay=0,
                                            grace=60, set_deadline=now + 200))
    assert not r.sismember(keys.groups("default"), "g")  # the group emptied
    set2 = keys.aggregation_set("default", "g", "s2")
    assert run.run(broker.delete_aggregation_set("default", set2)) == 3
    assert not any(r.exists(keys.task("default", i)) for i in ids)


def test_forward_reads_fractional_scores_of_older_releases(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    """A task stored by an older asynqpy (fractional score, no exact time of ours) runs at that exact time."""
    [tid] = enqueue(redis_url, 1, process_in=100)
    r.delete(keys.exact_due("default"))
    at = int(time.time()) + 5.25
    r.zadd(keys.scheduled("default"), {tid: at})
    moved, nxt, _ = run.run(broker.forward("default", now=at - 0.001))
    assert moved == 0 and nxt == at
    moved, _, _ = run.run(broker.forward("default", now=at))
    assert moved == 1 and r.hget(keys.task("default", tid), "state") == b"pending"


def test_forward_ignores_an_exact_time_outside_the_score_second(redis_url: str, r: redis.Redis,
                                                               run: SyncRunner) -> None:
    """Go scored the task again (say a Go worker retried it): our old exact time no longer applies."""
    [tid] = enqueue(redis_url, 1, process_in=100)
    old_exact = r.zscore(keys.exact_due("default"), tid)
    r.zrem(keys.scheduled("default"), tid)
    r.zadd(keys.retry("default"), {tid: math.ceil(old_exact) + 60})
    r.hset(keys.task("default", tid), "state", "retry")
    moved, nxt, _ = run.run(broker.forward("default", now=old_exact + 1))
    assert moved == 0 and r.zscore(keys.exact_due("default"), tid) is None  # the stale entry is dropped
    assert nxt == math.ceil(old_exact) + 60
    moved, _, _ = run.run(broker.forward("default", now=math.ceil(old_exact) + 60))
    assert moved == 1


def test_scores_in_asynq_sets_are_whole_seconds(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    """Every score written by the client and the worker scripts is a whole number of Unix seconds."""
    c = Client(redis_url)
    c.enqueue(Task("t", b"s"), process_in=12.345)
    c.enqueue(Task("t", b"su"), process_in=12.345, unique=60)
    c.enqueue(Task("t", b"g"), group="g1")
    ids = enqueue(redis_url, 3, retention=90)
    now = time.time() + 0.5
    got = run.run(broker.dequeue("default", lease_expiry=now + 30.7, count=3))
    data = dict(got)
    run.run(broker.retry("default", ids[0], data[ids[0]], retry_at=now + 15.3, now=now, is_failure=True))
    run.run(broker.archive("default", ids[1], data[ids[1]], now=now))
    run.run(broker.mark_complete("default", [(ids[2], now + 90, data[ids[2]], "")], now=now))
    for key in r.scan_iter("asynq:*"):
        if r.type(key) == b"zset":
            for member, score in r.zrange(key, 0, -1, withscores=True):
                assert score == int(score), (key, member, score)


def test_exact_times_left_behind_by_go_are_dropped(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    """Where only Go forwards our tasks, their exact times are dropped by the next schedule once long past."""
    r.zadd(keys.exact_due("default"), {"moved-by-go": time.time() - 61, "recent": time.time() - 5})
    [tid] = enqueue(redis_url, 1, process_in=30)
    assert r.zrange(keys.exact_due("default"), 0, -1) == [b"recent", tid.encode()]


def _redis_now(r: redis.Redis) -> float:
    sec, usec = r.time()
    return float(sec + usec / 1e6)


def test_a_tick_ahead_of_redis_clock_is_refused_and_nothing_written(r: redis.Redis, run: SyncRunner) -> None:
    """The scheduler's clock may run ahead: the claim script judges the tick by Redis's clock (TIME)."""
    from asynqpy.options import build_options

    def claim(tick: int, now: float | None = None) -> str:
        opts = build_options(queue="cron")
        msg = broker.build_message("tick", b"", {}, opts)
        return run.run(broker.claim_tick(broker.enqueue(msg, opts, now=time.time()), "cron", "e1", tick=tick,
                                         claim_ttl=120, latest_ttl=3600, tolerance=90, owner="s1", now=now))

    ahead = math.ceil(_redis_now(r)) + 30
    assert claim(ahead) == "early"
    assert not r.exists(keys.tick_mark("cron", "e1"), keys.tick_claim("cron", "e1", ahead), keys.pending("cron"))
    assert claim(ahead, now=ahead) == "enqueued"  # a test's fake clock says it is due: that clock judges
    assert claim(ahead, now=ahead) == "taken"
    past = math.floor(_redis_now(r)) - 1
    assert claim(past) == "enqueued" and claim(past) == "taken"
    assert r.llen(keys.pending("cron")) == 2


def test_forward_judges_due_by_redis_clock(redis_url: str, r: redis.Redis, run: SyncRunner) -> None:
    """Without a test's now, the forward script uses TIME, and reports it with the next due time."""
    [tid] = enqueue(redis_url, 1, process_in=0.3)
    due = r.zscore(keys.exact_due("default"), tid)
    moved, nxt, now = run.run(broker.forward("default"))
    if now < due:  # the usual case: not due yet by Redis's clock; it says how long to wait
        # the delay counts from Redis's now rounded up to the millisecond: due - now may pass 0.3 by < 1 ms
        assert moved == 0 and nxt == due and 0 < due - now <= 0.301
        time.sleep(due - now + 0.01)
        moved, nxt, now = run.run(broker.forward("default"))
    assert moved == 1 and nxt is None and now >= due
    assert abs(now - _redis_now(r)) < 0.5
