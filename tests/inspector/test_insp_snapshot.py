"""The oldest retry and archived ages, and the queue snapshot shared through Redis by every asker."""

from __future__ import annotations

import threading

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.errors import RedisUnavailableError
from asynqpy.rdb import keys
from inspector import Inspector, QueueSnapshot
from tests.inspector.worker import Clock, Worker


def test_oldest_retry_and_archived_ages(insp: Inspector, client: Client, worker: Worker, clock: Clock) -> None:
    for tid in ("r1", "r2", "a1", "a2"):
        client.enqueue(Task("t", tid.encode() * 500), queue="q", task_id=tid)  # a payload to skip over
    worker.take("q", 4)
    worker.fail("q", "r1", "first", retry_in=7200)  # failed first, but due last
    worker.kill("q", "a1", "gone")
    clock.advance(100)
    worker.fail("q", "r2", "second", retry_in=60)
    worker.kill("q", "a2", "gone too")
    clock.advance(20)
    qi = insp.queue_info("q")
    assert qi.oldest_archived_age == pytest.approx(120, abs=1)
    assert qi.oldest_retry_age == pytest.approx(120, abs=1)  # r1's failure, though r2 is due first
    assert qi.oldest_retry_failed_at is not None and qi.oldest_archived_at is not None


def test_ages_are_zero_without_tasks(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("t"), queue="q")
    qi = insp.queue_info("q")
    assert (qi.oldest_retry_age, qi.oldest_archived_age, qi.oldest_retry_failed_at) == (0.0, 0.0, None)


def test_snapshot_is_shared_until_it_is_older_than_max_age(redis_url: str, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="a")
    one, two = Inspector(redis_url), Inspector(redis_url)
    s1 = one.queue_snapshot(max_age=5)
    assert isinstance(s1, QueueSnapshot) and [q.queue for q in s1.queues] == ["a"] and s1.queues[0].pending == 1
    assert r.ttl(keys.SNAPSHOT) > 0 and not r.exists(keys.SNAPSHOT_LOCK)
    client.enqueue(Task("t"), queue="b")
    s2 = two.queue_snapshot(max_age=5)  # another process: the stored one, not a new read
    assert s2.taken_at == s1.taken_at and s2.queues == s1.queues
    s3 = two.queue_snapshot(max_age=0)
    assert s3.taken_at > s1.taken_at and [q.queue for q in s3.queues] == ["a", "b"]
    assert s3.queue("b") is not None and s3.queue("zzz") is None
    one.close()
    two.close()


def test_concurrent_askers_take_one_snapshot(redis_url: str, client: Client, r: redis.Redis) -> None:
    for i in range(50):
        client.enqueue(Task("t"), queue=f"q{i}")
    r.delete(keys.SNAPSHOT)
    r.config_resetstat()
    results: list[QueueSnapshot] = []

    def ask() -> None:
        with Inspector(redis_url) as i:
            results.append(i.queue_snapshot(max_age=10))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and len({s.taken_at for s in results}) == 1
    stats = r.info("commandstats")
    calls = sum(v["calls"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
    assert calls <= 50 + 1 + 1, calls  # one queue_info script per queue, the lock release (+ a NOSCRIPT retry)


def test_snapshot_carries_servers_and_busy_workers(redis_url: str, r: redis.Redis) -> None:
    import asyncio

    from asynqpy import ServeMux
    from tests.helpers import running, wait_for

    mux = ServeMux()
    go = threading.Event()

    @mux.handler("slow")
    async def slow(t):  # type: ignore[no-untyped-def]
        while not go.is_set():
            await asyncio.sleep(0.02)

    Client(redis_url).enqueue(Task("slow"), queue="work")
    with Inspector(redis_url) as insp, running(redis_url, mux, queues={"work": 1, "other": 1}):
        snap = wait_for(lambda: (s := insp.queue_snapshot(max_age=0)).workers_busy.get("work") and s)
        assert snap.servers == 1 and dict(snap.queue_servers) == {"work": 1, "other": 1}
        assert dict(snap.workers_busy) == {"work": 1}
        go.set()


def test_snapshot_raises_redis_unavailable() -> None:
    with Inspector("redis://127.0.0.1:1/0") as i, pytest.raises(RedisUnavailableError):
        i.queue_snapshot()


def test_bad_max_age(insp: Inspector) -> None:
    with pytest.raises(ValueError, match="max_age"):
        insp.queue_snapshot(max_age=-1)


def test_stale_or_foreign_snapshot_is_retaken(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="q")
    r.set(keys.SNAPSHOT, b"not json")
    assert [q.queue for q in insp.queue_snapshot().queues] == ["q"]


def test_an_incremental_snapshot_keeps_unchanged_queues_and_rereads_changed_ones(
        insp: Inspector, client: Client, worker: Worker, clock: Clock, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="quiet")
    client.enqueue(Task("t"), queue="busy")
    first = insp.queue_snapshot(0)
    assert first.queue("quiet").pending == 1  # type: ignore[union-attr]
    clock.advance(10)
    client.enqueue(Task("t"), queue="busy")
    r.config_resetstat()
    second = insp.queue_snapshot(0)
    busy, quiet = second.queue("busy"), second.queue("quiet")
    assert busy is not None and quiet is not None
    assert busy.pending == 2 and quiet.pending == 1
    assert quiet.latency == pytest.approx(first.queue("quiet").latency + 10, abs=1)  # type: ignore[union-attr]
    # One queue_info script (the changed queue's), not two.
    assert int(r.info("commandstats")["cmdstat_evalsha"]["calls"]) <= 2  # the script and the lock release
    worker.take("busy", 1)  # a change the counts show (pending -> active)
    clock.advance(1)
    assert insp.queue_snapshot(0).queue("busy").active == 1  # type: ignore[union-attr]
    clock.advance(31)  # past FULL_EVERY: every queue is read in full again
    r.config_resetstat()
    insp.queue_snapshot(0)
    assert int(r.info("commandstats")["cmdstat_evalsha"]["calls"]) >= 2


def test_memory_is_sampled_once_a_minute_per_queue(insp: Inspector, client: Client, clock: Clock,
                                                   r: redis.Redis) -> None:
    client.enqueue(Task("t", b"x" * 1000), queue="q")
    assert insp.queue_snapshot(0).queue("q").memory_usage  # type: ignore[union-attr]
    r.config_resetstat()
    for _ in range(3):
        clock.advance(15)
        client.enqueue(Task("t"), queue="q")
        assert insp.queue_snapshot(0).queue("q").memory_usage  # type: ignore[union-attr]  # the stored sample
    assert "cmdstat_memory|usage" not in r.info("commandstats")
    clock.advance(20)  # a minute since the sample
    insp.queue_snapshot(0)
    assert int(r.info("commandstats")["cmdstat_memory|usage"]["calls"]) >= 1


def test_kept_queues_are_reread_a_share_at_a_time(insp: Inspector, client: Client, clock: Clock) -> None:
    for i in range(6):
        client.enqueue(Task("t"), queue=f"q{i}")
    first = insp.queue_snapshot(0)
    read_at = {q.queue: q.timestamp for q in first.queues}
    for _ in range(3):  # 10 s apart: a third of FULL_EVERY, so a third of the unchanged queues, the oldest first
        clock.advance(10)
        snap = insp.queue_snapshot(0)
        reread = [q.queue for q in snap.queues if q.timestamp != read_at[q.queue]]
        assert len(reread) == 2, reread
        assert all(read_at[q] == min(read_at.values()) for q in reread)
        read_at = {q.queue: q.timestamp for q in snap.queues}
    assert min(read_at.values()).timestamp() > first.taken_at  # after FULL_EVERY, each was read again once
