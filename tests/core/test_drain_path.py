"""The busy-drain path: acknowledgements riding in the dequeue's round trip, the deadline timer, the two fetch
lanes, and the cheap forms of TaskOutcome and of the daily counters' key."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.connection import aconnect
from asynqpy.fetch import Riders, dequeue_for
from asynqpy.outcome import TaskOutcome, task_outcome
from asynqpy.rdb import broker, keys
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import TroubleLog
from asynqpy.task import ReceivedTask
from asynqpy.wire import decode_task_message
from tests.helpers import running, wait_for


def test_task_outcome_is_the_dataclass_with_every_field() -> None:
    args = ("q", "email:send", "id1", "retry", 1.5, 0.25, None, "boom", "rate")
    fast, slow = task_outcome(*args), TaskOutcome(*args)  # type: ignore[arg-type]
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert [getattr(fast, f.name) for f in dataclasses.fields(TaskOutcome)] == list(args)


def test_the_daily_counter_key_names_the_utc_day_on_both_sides_of_midnight() -> None:
    midnight = datetime(2024, 5, 2, tzinfo=UTC).timestamp()
    for t in (midnight - 0.001, midnight, midnight + 0.5, midnight - 86400.0, midnight + 86399.999, 0.0, -1.0,
              midnight - 0.001):
        assert keys.utc_date(t) == datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d"), t
    assert keys.processed_daily("q", midnight - 1) == "asynq:{q}:processed:2024-05-01"
    assert keys.processed_daily("q", midnight) == "asynq:{q}:processed:2024-05-02"


def _enqueue(url: str, n: int) -> list[str]:
    with Client(url) as c:
        return [c.enqueue(Task("t", b"x")).id for _ in range(n)]


def test_acknowledgements_ride_ahead_of_the_dequeue_in_one_round_trip(redis_url: str, r: redis.Redis) -> None:
    ids = _enqueue(redis_url, 4)
    cfg = ServerConfig(queues={"default": 1})

    async def go() -> tuple[list[str], Riders, list[str]]:
        conn = aconnect(redis_url)
        runner = AsyncRunner(conn)
        try:
            first = await dequeue_for(runner, cfg, 2, lease_expiry=time.time() + 30, trouble=TroubleLog("t"))
            done = [tid for _, tid, *_ in first]
            riders = Riders([broker.done("default", [(tid, "") for tid in done], now=time.time())])
            second = await dequeue_for(runner, cfg, 2, lease_expiry=time.time() + 30, trouble=TroubleLog("t"),
                                       riders=riders)
            return done, riders, [tid for _, tid, *_ in second]
        finally:
            await conn.aclose()

    done, riders, second = asyncio.run(go())
    assert sorted(done + second) == sorted(ids)
    assert riders.results == [[]]  # the done script's reply: no id it no longer held
    for tid in done:  # acknowledged: gone, and no longer active or leased
        assert not r.exists(keys.task("default", tid))
    active = {x.decode() for x in r.lrange(keys.active("default"), 0, -1)}
    assert active == set(second)
    assert {x.decode() for x in r.zrange(keys.lease("default"), 0, -1)} == set(second)


def test_riders_of_a_round_trip_that_failed_hold_its_error() -> None:
    """A dequeue whose round trip fails: its riders' results are that error (the acker holds them for the
    syncer), never left unset as if they had not been sent."""
    cfg = ServerConfig(queues={"default": 1})

    async def go() -> tuple[Riders, BaseException | None]:
        conn = aconnect("redis://127.0.0.1:1/0")  # nothing listens there
        riders = Riders([broker.done("default", [("id1", "")], now=time.time())])
        try:
            await dequeue_for(AsyncRunner(conn), cfg, 1, lease_expiry=time.time() + 30, trouble=TroubleLog("t"),
                              riders=riders)
        except Exception as exc:
            return riders, exc
        finally:
            await conn.aclose()
        return riders, None

    riders, exc = asyncio.run(go())
    assert exc is not None
    assert riders.results == [exc]


def test_a_backlog_drains_through_both_lanes_with_every_task_acknowledged_once(redis_url: str,
                                                                              r: redis.Redis) -> None:
    ids = set(_enqueue(redis_url, 300))
    mux = ServeMux()
    seen: list[str] = []

    @mux.handler("t")
    async def work(t: ReceivedTask) -> None:
        seen.append(t.id)

    with running(redis_url, mux, concurrency=4):
        wait_for(lambda: len(seen) >= 300 and not r.llen(keys.active("default")), timeout=30,
                 what="the backlog drained and acknowledged")
    assert sorted(seen) == sorted(ids)  # each task ran once
    assert not r.zcard(keys.lease("default")) and not r.llen(keys.pending("default"))
    assert not [k for k in r.keys("asynq:{default}:t:*")]
    day = keys.processed_daily("default", time.time())
    assert int(r.get(day) or 0) == 300


def test_a_task_past_its_timeout_fails_with_the_deadline_error_and_is_retried(redis_url: str,
                                                                              r: redis.Redis) -> None:
    mux = ServeMux()

    @mux.handler("slow")
    async def slow(t: ReceivedTask) -> None:
        await asyncio.sleep(10)

    with Client(redis_url) as c:
        info = c.enqueue(Task("slow", b""), timeout=1, max_retry=3)
    with running(redis_url, mux):
        wait_for(lambda: r.zcard(keys.retry("default")) == 1, timeout=10, what="the task in the retry set")
    err = r.hget(keys.task("default", info.id), "msg")
    assert err is not None
    msg = decode_task_message(err)
    assert msg.error_msg == "context deadline exceeded" and msg.retried == 1
