"""The forwarder's sleep: aimed by Redis's clock at the next due time, bounded by the script's own wait whatever
this machine's clock does, cut short by a wake-up, ended by stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import redis

from asynqpy import Client, Task
from asynqpy import forwarder as forwarder_module
from asynqpy.config import ServerConfig
from asynqpy.forwarder import Forwarder
from asynqpy.rdb import keys
from asynqpy.runtime import Runtime


def _with_forwarder(redis_url: str, body: Callable[[Forwarder], object]) -> None:
    async def go() -> None:
        rt = Runtime(ServerConfig(forward_max_wait=120.0), redis_url)
        fw = Forwarder(rt, on_forwarded=lambda: None)
        try:
            res = body(fw)
            if asyncio.iscoroutine(res):
                await res
        finally:
            await fw.stop()
            await rt.close()
    asyncio.run(go())


def test_the_wait_stays_within_the_scripts_own_when_this_clock_steps(redis_url: str, r: redis.Redis,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    Client(redis_url).enqueue(Task("later", b""), process_in=30)
    waits: list[float] = []

    async def passes(fw: Forwarder) -> None:
        waits.append(await fw.run_once() or 0.0)  # learns the gap between the clocks
        for step in (1000.0, -1000.0):  # this machine's clock jumps forward, then back (e.g. an NTP step)
            monkeypatch.setattr(forwarder_module.time, "time", lambda s=step: _real_time() + s)
            waits.append(await fw.run_once() or 0.0)
        monkeypatch.setattr(forwarder_module.time, "time", _real_time)

    _with_forwarder(redis_url, passes)
    # Never past the script's wait (30 s from its now), never short of it by more than a round trip: a clock step
    # makes neither a forwarder that busy-loops nor one that sleeps past the due time.
    assert all(28 < w <= 30 for w in waits), waits


def test_a_wake_up_ends_the_sleep_and_a_task_due_soon_is_forwarded(redis_url: str, r: redis.Redis) -> None:
    async def body(fw: Forwarder) -> None:
        fw.start()
        await asyncio.sleep(0.2)  # its first pass found nothing: it sleeps forward_max_wait (120 s)
        tid = Client(redis_url).enqueue(Task("soon", b""), process_in=0.2).id
        fw.wake()  # what the subscriber does on our producers' wake-up message
        for _ in range(100):
            if r.hget(keys.task("default", tid), "state") == b"pending":
                break
            await asyncio.sleep(0.05)
        assert r.hget(keys.task("default", tid), "state") == b"pending"
        assert r.zscore(keys.exact_due("default"), tid) is None  # its exact due time went with it

    _with_forwarder(redis_url, body)


def test_stop_ends_the_sleep(redis_url: str) -> None:
    async def body(fw: Forwarder) -> None:
        fw.start()
        await asyncio.sleep(0.2)  # asleep for 120 s
        await asyncio.wait_for(fw.stop(), 5)

    _with_forwarder(redis_url, body)


_real_time = time.time


def test_an_idle_forward_pass_reads_one_zrange_per_set(redis_url: str, r: redis.Redis) -> None:
    # Nothing due: the pass reads each set's first member (also its next due time) and no range; it was a
    # ZRANGEBYSCORE and a ZRANGE per set.
    from collections import Counter

    from asynqpy.rdb import broker
    from asynqpy.rdb.sync_runner import SyncRunner

    def commands() -> Counter[str]:
        return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()})

    Client(redis_url).enqueue(Task("later", b""), queue="fwd-idle", process_in=60)
    runner = SyncRunner(r)
    runner.run(broker.forward("fwd-idle"))  # the script is loaded
    before = commands()
    moved, nxt, now = runner.run(broker.forward("fwd-idle"))
    spent = commands() - before
    assert moved == 0 and nxt is not None and nxt > now + 50
    assert spent["zrangebyscore"] == 0 and spent["zrange"] == 4  # scheduled, retry, exact due times, limit waits
