"""The worker under real Redis error replies: fetching, hand-off, failure writes, the syncer and shutdown go on."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.runtime import Runtime
from asynqpy.syncer import Syncer
from asynqpy.wire import TaskMessage
from tests.helpers import running, wait_for
from tests.redisfaults import busy, out_of_memory


@pytest.mark.parametrize("fault", ["BUSY", "OOM"])
def test_fetching_and_hand_off_survive_an_error_reply(redis_url: str, r: redis.Redis, fault: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="asynqpy")
    mux = ServeMux()
    seen: list[str] = []
    mux.handle("t", lambda t: seen.append(t.id))
    with running(redis_url, mux, idle_poll_interval=0.1) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="the idle worker's registration")
        proc = srv._processor
        assert proc is not None
        if fault == "BUSY":
            with busy(redis_url):
                wait_for(lambda: proc.degraded, timeout=1.5, what="the fetch loop to meet BUSY")
                assert proc.degraded.kind == "BUSY"  # type: ignore[union-attr]
        else:
            with out_of_memory(redis_url):
                time.sleep(2.5)  # more than the lane's registration renewal: its ZADD is refused too
                assert proc.degraded is not None and proc.degraded.kind == "OOM"
        wait_for(lambda: proc.degraded is None, what="the trouble to clear by itself")
        c = Client(redis_url)
        ids = {c.enqueue(Task("t", b"")).id for _ in range(5)}
        wait_for(lambda: set(seen) == ids, timeout=15, what="all 5 tasks enqueued after the fault to be taken")
        live, _, why = srv.health()
        assert live, why
    assert r.zcard(keys.SERVERS) == 0 and not r.keys("asynq:servers:*")  # shutdown ran all its steps
    fetch_logs = [rec for rec in caplog.records if rec.getMessage().startswith("processor: fetch: ")]
    assert len(fetch_logs) == 1 and f"answers {fault}" in fetch_logs[0].getMessage()  # once per kind, no trace
    assert fetch_logs[0].exc_info is None


def test_a_failure_written_while_busy_ends_in_retry(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    started, go = threading.Event(), threading.Event()

    @mux.handler("fail")
    def fail(t):  # type: ignore[no-untyped-def]
        started.set()
        go.wait(10)
        raise ValueError("boom")

    tid = Client(redis_url).enqueue(Task("fail", b""), max_retry=3).id
    with running(redis_url, mux, syncer_interval=0.2, retry_delay=lambda n, e, t: 3600) as srv:
        wait_for(started.is_set)
        with busy(redis_url):
            go.set()  # the retry write meets BUSY: held by the syncer, not left active
            wait_for(lambda: not srv.runtime.active, timeout=5, what="the task to leave the active set")  # type: ignore[union-attr]
        wait_for(lambda: r.hget(keys.task("default", tid), "state") == b"retry", timeout=10,
                 what="the held retry write to be replayed")
    m = TaskMessage.FromString(r.hget(keys.task("default", tid), "msg"))
    assert m.retried == 1 and m.error_msg == "ValueError: boom"
    assert r.llen(keys.active("default")) == 0 and r.zcard(keys.lease("default")) == 0


def _active(r: redis.Redis, n: int) -> list[str]:
    c = Client(connection=r)
    ids = [c.enqueue(Task("t", b"")).id for _ in range(n)]
    got = SyncRunner(r).run(broker.dequeue("default", lease_expiry=time.time() + 60, count=n))
    assert [tid for tid, _ in got] == ids[::-1] or sorted(t for t, _ in got) == sorted(ids)
    return ids


def test_syncer_keeps_writes_that_failed_for_a_transient_reason_and_drops_only_bugs(
        redis_url: str, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    a, b, c = _active(r, 3)
    r.set(keys.lease("broken"), "not a zset")  # the requeue script meets WRONGTYPE: a bug, never transient
    calls = [(broker.requeue("default", a, now=time.time()), a),
             (broker.requeue("broken", "ghost-task", now=time.time()), "ghost-task"),
             (broker.requeue("default", b, now=time.time()), b),
             (broker.requeue("default", c, now=time.time()), c)]

    async def flush(syncer: Syncer) -> None:
        await syncer.flush()

    rt = Runtime(ServerConfig(), redis_url)
    syncer = Syncer(rt)
    for call, tid in calls:
        syncer.add(call, give_up_at=time.time() + 60, what="requeue", task_ids=(tid,))
    loop = asyncio.new_event_loop()
    try:
        with busy(redis_url):
            loop.run_until_complete(flush(syncer))
            assert len(syncer.writes) == 4  # all kept: BUSY passes
        with caplog.at_level(logging.ERROR, logger="asynqpy"):
            loop.run_until_complete(flush(syncer))
        assert syncer.writes == []
        loop.run_until_complete(rt.close())
    finally:
        loop.close()
    assert sorted(v.decode() for v in r.lrange(keys.pending("default"), 0, -1)) == sorted([a, b, c])
    dropped = [rec.getMessage() for rec in caplog.records if "ghost-task" in rec.getMessage()]
    assert len(dropped) == 1 and "bug" in dropped[0]


def test_a_worker_state_write_sent_twice_applies_once(redis_url: str, r: redis.Redis) -> None:
    """The runners send a script again when the connection dropped before its reply, though it may have run: the
    worker's writes (retry, archive, requeue, done) must then answer "not held" and change nothing, never raise."""
    a, b, c, d = _active(r, 4)
    run = SyncRunner(r)
    now = time.time()

    def msg(tid: str) -> bytes:
        m = TaskMessage.FromString(r.hget(keys.task("default", tid), "msg"))
        m.retried, m.error_msg = m.retried + 1, "boom"
        return m.SerializeToString()

    writes = [broker.retry("default", a, msg(a), retry_at=now + 3600, now=now, is_failure=True),
              broker.archive("default", b, msg(b), now=now),
              broker.requeue("default", c, now=now)]
    for call in writes:
        assert run.run(call) is True
        assert run.run(call) is False  # the re-send: nothing more happens
    done = broker.done("default", [(d, "")], now=now)
    assert run.run(done) == [] and run.run(done) == [d]  # the ids no longer held: left alone
    assert TaskMessage.FromString(r.hget(keys.task("default", a), "msg")).retried == 1
    assert r.zcard(keys.retry("default")) == 1 and r.zcard(keys.archived("default")) == 1
    assert r.lrange(keys.pending("default"), 0, -1) == [c.encode()]
    assert r.get(keys.failed_total("default")) == b"2" and r.get(keys.processed_total("default")) == b"3"
    assert r.llen(keys.active("default")) == 0 and r.zcard(keys.lease("default")) == 0
