"""The incremental snapshot (unchanged queues kept, changed ones read again) shows what a fresh one shows, and the
stored snapshot decodes to what its taker returned; on one server and on a cluster (queues of many slots)."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from asynqpy import Client, Limit, QueueFullError, Task
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from inspector import Inspector, QueueSnapshot
from tests.inspector.worker import Clock, Worker

pytestmark = pytest.mark.cluster_too

QUEUES = [f"q{i}" for i in range(8)]  # their hash tags spread over every primary of a cluster


def _figures(s: QueueSnapshot) -> list[dict[str, object]]:
    """Every field of every queue but timestamp (when the queue was last read in full: kept queues keep theirs)."""
    return [{k: v for k, v in dataclasses.asdict(q).items() if k != "timestamp"} for q in s.queues]


def _fill(client: Client) -> None:
    for q in QUEUES:
        for i in range(3):
            client.enqueue(Task("t", f"{q}-{i}".encode()), queue=q, task_id=f"{q}-p{i}")
        client.enqueue(Task("t"), queue=q, task_id=f"{q}-s", process_in=600)
    client.enqueue(Task("t:agg"), queue="q7", task_id="agg1", group="g")


def _change_some(client: Client, worker: Worker, insp: Inspector) -> None:
    worker.take("q0", 1)  # pending -> active: two sizes move
    (tid,) = worker.take("q1", 1)
    worker.done("q1", tid)  # a task done: pending shrinks, the processed counters grow
    (tid,) = worker.take("q2", 1)
    worker.fail("q2", tid, "boom", retry_in=60)  # a retry: the failed counters, the retry set and its ages
    (tid,) = worker.take("q3", 1)
    worker.kill("q3", tid, "fatal")  # archived, with its age
    insp.pause("q4")  # only the paused flag
    client.enqueue(Task("t:agg"), queue="q7", task_id="agg2", group="g")  # a group grows: sizes unchanged
    insp.delete_task("q5", "q5-s")  # a scheduled task gone: the soonest due time with it


def test_incremental_and_fresh_snapshots_agree(redis_url: str, client: Client, worker: Worker, clock: Clock,
                                               r: redis.Redis) -> None:
    _fill(client)
    with Inspector(redis_url, clock=clock) as taker, Inspector(redis_url, clock=clock) as fresh, \
            Inspector(redis_url, clock=clock) as reader:
        first = taker.queue_snapshot(0)
        clock.advance(5)
        _change_some(client, worker, taker)
        clock.advance(5)
        incremental = taker.queue_snapshot(0)  # from the first: unchanged queues kept, their ages brought up
        assert incremental.taken_at > first.taken_at
        r.delete(keys.SNAPSHOT)
        full = fresh.queue_snapshot(0)  # no snapshot before it: every queue read in full, at the same clock
        assert full.taken_at == incremental.taken_at
        assert _figures(incremental) == _figures(full)
        by_name = {q.queue: q for q in incremental.queues}
        assert by_name["q0"].active == 1 and by_name["q1"].processed == 1 and by_name["q2"].retry == 1
        assert by_name["q3"].archived == 1 and by_name["q4"].paused and by_name["q7"].aggregating == 2
        assert by_name["q5"].next_scheduled_at is None
        kept = by_name["q6"]  # unchanged, kept from the first snapshot (not read again), its age brought up to now
        assert kept.timestamp == first.queues[6].timestamp and kept.oldest_pending_since is not None
        assert kept.latency == pytest.approx(clock() - kept.oldest_pending_since.timestamp())
        assert kept.latency > first.queues[6].latency
        # What another process reads back from Redis is what the taker returned (took aside).
        clock.advance(1)
        again = taker.queue_snapshot(0)
        stored = reader.queue_snapshot(max_age=60)
        assert stored == dataclasses.replace(again, took=0.0)
        assert stored.queues == again.queues and stored.taken_at == again.taken_at


def test_flow_control_counters_come_with_the_snapshot(redis_url: str, client: Client, clock: Clock,
                                                      r: redis.Redis) -> None:
    # A refusal changes no size: only the fingerprint's refused counter tells the queue changed.
    _fill(client)
    with Inspector(redis_url, clock=clock) as taker, Inspector(redis_url, clock=clock) as fresh:
        first = taker.queue_snapshot(0)
        assert {(q.enqueue_refused, q.limit_waits) for q in first.queues} == {(0, ())}
        taker.set_queue_limit("q6", max_size=4)  # its 3 pending and 1 scheduled tasks: full
        with pytest.raises(QueueFullError):
            client.enqueue(Task("t"), queue="q6")
        clock.advance(0.5)  # too soon for any unchanged queue to be read in full on schedule
        second = taker.queue_snapshot(0)
        q6 = second.queue("q6")
        assert q6 is not None and q6.enqueue_refused == 1
        assert q6.timestamp > first.queues[6].timestamp  # read again, where the unchanged q5 was kept
        assert second.queues[5].timestamp == first.queues[5].timestamp
        # A task held back by a limit: counted per queue and limit.
        taker.set_limit(Limit("t:one", concurrency=1))
        client.enqueue(Task("t:one"), queue="q0", task_id="one-a")
        client.enqueue(Task("t:one"), queue="q0", task_id="one-b")
        SyncRunner(r).run(broker.dequeue_timed("q0", lease_expiry=clock() + 30, count=10))
        clock.advance(0.5)
        third = taker.queue_snapshot(0)
        q0 = third.queue("q0")
        assert q0 is not None and q0.limit_waits == (("t:one", 1),)
        r.delete(keys.SNAPSHOT)
        assert _figures(fresh.queue_snapshot(0)) == _figures(third)  # as a fresh read shows them
    with Inspector(redis_url, clock=clock) as reader:  # and as another process decodes the stored one
        stored = reader.queue_snapshot(60).queue("q0")
    assert stored is not None and stored.limit_waits == (("t:one", 1),) and stored.enqueue_refused == 0
