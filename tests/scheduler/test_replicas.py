"""Replicas: scheduler processes racing for the same ticks against the real test server, with fake clocks
the test moves (shared memory), so 50 one-second ticks take a couple of real seconds."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from asynqpy import Task
from asynqpy.scheduler import Scheduler
from asynqpy.wire import SchedulerEnqueueEvent

from .clocks import SharedClock, shared_time, wait_for

QUEUE = "cron"
STEP = 0.03  # real seconds per fake second


def _replica(redis_url: str, base: Any, offset: float, catch_up: str) -> None:
    # Fake seconds pass 30x faster than real ones: a generous late_grace keeps a replica that the busy test
    # machine stalls for a moment from skipping ticks as too late.
    s = Scheduler(redis_url, clock=SharedClock(base, offset), heartbeat_interval=3600,
                  catch_up=catch_up, late_grace=3600)  # type: ignore[arg-type]
    s.register("@every 1s", Task("tick", b"t"), queue=QUEUE)
    s.run()


class Replicas:
    """Scheduler processes (fork) sharing one fake time; each may run ahead of it by an offset."""

    def __init__(self, redis_url: str) -> None:
        self.url = redis_url
        self.base = shared_time()
        self.procs: list[Any] = []
        self.r = redis.Redis.from_url(redis_url)

    def start(self, offset: float = 0.0, catch_up: str = "none") -> Any:
        p = multiprocessing.get_context("fork").Process(target=_replica, args=(self.url, self.base, offset, catch_up))
        p.start()
        self.procs.append(p)
        want = sum(1 for q in self.procs if q.is_alive())
        wait_for(lambda: self.r.zcard("asynq:schedulers") >= want, "replicas to publish their entries")
        return p

    def advance(self, seconds: int, each: Callable[[int], None] | None = None) -> None:
        for i in range(seconds):
            with self.base.get_lock():
                self.base.value += 1
            time.sleep(STEP)
            if each:
                each(i + 1)

    def tasks(self) -> int:
        return int(self.r.llen(f"asynq:{{{QUEUE}}}:pending"))

    def settle(self, expected: int) -> int:
        """The task count once it stops changing (at least expected, or a few seconds)."""
        wait_for(lambda: self.tasks() >= expected, f"{expected} tasks", timeout=10)
        time.sleep(0.3)
        return self.tasks()

    def stop(self) -> None:
        for p in self.procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        self.r.close()



@pytest.fixture
def replicas(redis_url: str) -> Iterator[Replicas]:
    rs = Replicas(redis_url)
    try:
        yield rs
    finally:
        rs.stop()


def history(r: redis.Redis) -> list[SchedulerEnqueueEvent]:
    (key,) = r.keys("asynq:scheduler_history:*")
    out = []
    for data in r.zrange(key, 0, -1):
        ev = SchedulerEnqueueEvent()
        ev.ParseFromString(data)
        out.append(ev)
    return out


def test_two_replicas_racing_over_50_ticks_enqueue_50_tasks(replicas: Replicas) -> None:
    replicas.start()
    replicas.start()
    replicas.advance(50)
    assert replicas.settle(50) == 50
    events = history(replicas.r)
    assert len(events) == 50 and len({e.task_id for e in events}) == 50


def test_clocks_three_seconds_apart_still_enqueue_each_tick_once(replicas: Replicas) -> None:
    """One replica runs 3 s ahead: it takes the ticks first, the other finds them claimed. Ticks run from
    the first after the slow clock's start to the last the fast clock reached: 47 + 3 = 50."""
    replicas.start(offset=0.0)
    replicas.start(offset=3.0)
    replicas.advance(47)
    assert replicas.settle(50) == 50
    assert len(history(replicas.r)) == 50


def test_one_replica_killed_midway_the_other_carries_on(replicas: Replicas) -> None:
    first = replicas.start()
    replicas.start()

    def kill_at_25(step: int) -> None:
        if step == 25:
            os.kill(first.pid, signal.SIGKILL)
            first.join(5)

    replicas.advance(50, kill_at_25)
    assert replicas.settle(50) == 50
    # The killed replica never removed its entries: they expire with their TTL, as Go's do.
    assert replicas.r.zcard("asynq:schedulers") == 2


def test_missed_ticks_are_not_replayed_unless_catch_up_last(replicas: Replicas) -> None:
    p = replicas.start()
    replicas.advance(3)
    assert replicas.settle(3) == 3
    os.kill(p.pid, signal.SIGTERM)
    p.join(5)
    replicas.advance(10)  # nobody runs: 10 ticks missed
    q = replicas.start()
    replicas.advance(2)
    assert replicas.settle(5) == 5  # the 2 new ones only
    os.kill(q.pid, signal.SIGTERM)
    q.join(5)
    replicas.advance(10)
    replicas.start(catch_up="last")
    assert replicas.settle(6) == 6  # the most recent missed tick, once
    replicas.start(catch_up="last")  # a second replica starting finds it claimed already
    replicas.advance(1)
    assert replicas.settle(7) == 7


def test_a_tick_is_never_enqueued_before_its_time_by_the_replicas_clock(redis_url: str) -> None:
    """With a clock that stands still a millisecond before a tick, nothing is enqueued however long we wait."""
    base = shared_time(1_800_000_000.0 - 0.001)
    s = Scheduler(redis_url, clock=SharedClock(base), heartbeat_interval=3600)  # type: ignore[arg-type]
    s.register("@every 10s", Task("tick", b""), queue=QUEUE)
    r = redis.Redis.from_url(redis_url)
    t = threading.Thread(target=lambda: asyncio.run(s.arun()))
    t.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers"), "the scheduler to start")
        time.sleep(0.3)
        assert r.llen(f"asynq:{{{QUEUE}}}:pending") == 0
        base.value = 1_800_000_000.0
        wait_for(lambda: r.llen(f"asynq:{{{QUEUE}}}:pending") == 1, "the tick")
    finally:
        s.stop()
        t.join(5)
        r.close()
