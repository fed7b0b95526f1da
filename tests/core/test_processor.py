"""The processor's slots and threads: stuck sync handlers, no over-subscription, a bounded route cache."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import tracemalloc

import pytest
import redis
from prometheus_client import CollectorRegistry

from asynqpy import Client, ServeMux, Task
from asynqpy.errors import HandlerNotFound
from asynqpy.metrics.worker import WorkerMetrics
from asynqpy.processor import Processor
from asynqpy.rdb import keys
from asynqpy.task import ReceivedTask
from asynqpy.wire import TaskMessage
from tests.helpers import running, wait_for


def _proc(srv: object) -> Processor:
    p = srv._processor  # type: ignore[attr-defined]
    assert p is not None
    return p  # type: ignore[no-any-return]


def test_a_sync_handler_stuck_past_its_timeout_does_not_starve_the_next_task(
        redis_url: str, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    mux = ServeMux()
    started, release, ran = threading.Event(), threading.Event(), threading.Event()

    @mux.handler("stuck")
    def stuck(t):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(30)  # ignores t.cancelled, as a blocking call would

    mux.handle("next", lambda t: ran.set())
    c = Client(redis_url)
    sid = c.enqueue(Task("stuck", b""), timeout=1, max_retry=0).id
    metrics = WorkerMetrics(CollectorRegistry())
    try:
        with caplog.at_level(logging.WARNING, logger="asynqpy"), running(redis_url, mux, concurrency=1) as srv:
            rt = srv.runtime
            assert rt is not None
            wait_for(started.is_set)
            nid = c.enqueue(Task("next", b""), timeout=5, max_retry=0).id
            wait_for(ran.is_set, timeout=8, what="the next task to run beside the stuck thread")
            wait_for(lambda: r.zscore(keys.archived("default"), sid), what="the timed-out task archived")
            wait_for(lambda: _proc(srv).stuck == 1, what="the stuck thread counted")
            assert srv.health() == (True, True, "ok; 1 handler thread(s) stuck past their tasks")
            wait_for(lambda: r.hget(rt.health_key, "stuck_threads") == b"1", what="the heartbeat to report it")
            metrics.sample(srv)
            assert metrics.stuck._value.get() == 1
            release.set()
            wait_for(lambda: _proc(srv).stuck == 0, what="the stuck thread to return")
            wait_for(lambda: r.hget(rt.health_key, "stuck_threads") == b"0", what="the heartbeat to clear it")
        assert not r.exists(rt.health_key)  # gone with the server's other keys
    finally:
        release.set()
    assert not r.exists(keys.task("default", nid))  # done, never archived for want of a thread
    assert TaskMessage.FromString(r.hget(keys.task("default", sid), "msg")).error_msg == "context deadline exceeded"
    assert any(sid in rec.getMessage() and "still runs" in rec.getMessage() for rec in caplog.records)


def test_past_max_stuck_threads_the_worker_takes_no_tasks_and_is_not_ready(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    started, release, ran = threading.Event(), threading.Event(), threading.Event()

    @mux.handler("stuck")
    def stuck(t):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(30)

    mux.handle("next", lambda t: ran.set())
    c = Client(redis_url)
    c.enqueue(Task("stuck", b""), timeout=1, max_retry=0)
    try:
        with running(redis_url, mux, concurrency=2, max_stuck_threads=1, idle_poll_interval=0.1) as srv:
            wait_for(started.is_set)
            wait_for(lambda: not srv.health()[1], what="not ready once a thread is stuck")
            live, _, why = srv.health()
            assert live and "1 handler threads stuck" in why and "max_stuck_threads 1" in why
            nid = c.enqueue(Task("next", b"")).id
            time.sleep(1.5)  # several polls and a hand-off lane pass: none may take it
            assert not ran.is_set() and r.lrange(keys.pending("default"), 0, -1) == [nid.encode()]
            release.set()  # the thread returns: the worker takes tasks again
            wait_for(ran.is_set, what="the task to run once the stuck thread returned")
            wait_for(lambda: srv.health()[1], what="ready again")
    finally:
        release.set()


def test_running_never_exceeds_concurrency_with_hand_offs_and_fetches_at_once(redis_url: str,
                                                                             r: redis.Redis) -> None:
    mux = ServeMux()
    inflight = peak = 0
    done: list[str] = []

    @mux.handler("t")
    async def work(t):  # type: ignore[no-untyped-def]
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        await asyncio.sleep(0.002)
        inflight -= 1
        done.append(t.id)

    samples: list[int] = []
    stop = threading.Event()

    def sample(p: Processor) -> None:
        while not stop.is_set():
            samples.append(p.running)
            time.sleep(0.0005)

    def produce(n: int) -> None:
        c = Client(redis_url)
        for _ in range(n):
            c.enqueue(Task("t", b""))
        c.close()

    with running(redis_url, mux, concurrency=2, idle_poll_interval=0.05) as srv:
        sampler = threading.Thread(target=sample, args=(_proc(srv),))
        sampler.start()
        producers = [threading.Thread(target=produce, args=(150,)) for _ in range(4)]
        for p in producers:
            p.start()
        for p in producers:
            p.join()
        wait_for(lambda: len(done) == 600, timeout=60, what="all tasks handled")
        stop.set()
        sampler.join()
    assert peak <= 2 and max(samples) <= 2, (peak, max(samples))
    assert len(set(done)) == 600


def test_the_route_cache_stays_bounded_over_200000_distinct_task_types() -> None:
    mux = ServeMux()
    seen = 0

    @mux.handler("t:")
    async def handle(t):  # type: ignore[no-untyped-def]
        nonlocal seen
        seen += 1

    async def run_sync(fn, task):  # type: ignore[no-untyped-def]
        return fn(task)

    route = mux.compile(run_sync)
    task = ReceivedTask(TaskMessage(type="t:0", id="x", queue="default"), deadline=0.0, writer=None)
    other = ReceivedTask(TaskMessage(type="nobody:0", id="y", queue="default"), deadline=0.0, writer=None)

    async def route_all() -> int:
        missing = 0
        for i in range(100_000):
            task.type = f"t:{i}"
            await route(task)
            other.type = f"nobody:{i}"  # types without a handler were cached too
            try:
                await route(other)
            except HandlerNotFound:
                missing += 1
        return missing

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        missing = asyncio.run(route_all())
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert seen == 100_000 and missing == 100_000
    assert grown < 5_000_000, f"the route cache grew by {grown / 1e6:.1f} MB"
