"""The server's outcome hooks: one TaskOutcome per decided task, with the outcome asynq's state machine took."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis

from asynqpy import Client, RevokeTask, ServeMux, SkipRetry, Task
from asynqpy.config import ServerConfig
from asynqpy.errors import InvalidArgumentError
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb import keys
from tests.helpers import running, wait_for


def test_each_outcome_is_reported_once_with_times(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    started = threading.Event()

    @mux.handler("ok")
    async def ok(t):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)

    @mux.handler("flaky")
    async def flaky(t):  # type: ignore[no-untyped-def]
        raise ValueError("boom 123")

    @mux.handler("skip")
    async def skip(t):  # type: ignore[no-untyped-def]
        raise SkipRetry("no point")

    @mux.handler("revoke")
    async def revoke(t):  # type: ignore[no-untyped-def]
        raise RevokeTask("not mine")

    @mux.handler("long")
    async def long(t):  # type: ignore[no-untyped-def]
        started.set()
        await asyncio.sleep(30)

    seen: list[TaskOutcome] = []

    def broken(o: TaskOutcome) -> None:
        raise RuntimeError("a broken hook must not break processing")

    c = Client(redis_url)
    ids = {name: c.enqueue(Task(name, b""), max_retry=1).id for name in ("ok", "flaky", "skip", "revoke")}
    time.sleep(0.3)  # they wait in pending: the wait is at least this long
    before = time.time()
    with running(redis_url, mux, outcome_hooks=(broken, seen.append), retry_delay=lambda n, e, t: 3600):
        wait_for(lambda: len(seen) == 4, what="four outcomes")
        long_id = c.enqueue(Task("long", b""), max_retry=0).id
        wait_for(started.is_set)
        r.publish(keys.CANCEL_CHANNEL, long_id)
        wait_for(lambda: len(seen) == 5, what="the canceled outcome")
        wait_for(lambda: r.get(keys.processed_total("default")) == b"5")
    by_id = {o.task_id: o for o in seen}
    assert {k: by_id[v].outcome for k, v in ids.items()} == {
        "ok": "success", "flaky": "retry", "skip": "archived", "revoke": "revoked"}
    assert by_id[long_id].outcome == "canceled" and by_id[long_id].error == "context canceled"
    assert by_id[ids["flaky"]].error == "ValueError: boom 123"
    assert by_id[ids["ok"]].error == "" and by_id[ids["ok"]].task_type == "ok"
    for tid in ids.values():
        o = by_id[tid]
        assert o.queue == "default" and o.started_at >= before - 1
        assert o.wait is not None and 0.3 <= o.wait < 10
    assert 0.04 <= by_id[ids["ok"]].duration < 5  # slept 50 ms (uvloop timers may fire a millisecond early)
    # the task that failed is in retry: the hook saw the decision the processor wrote
    assert r.zscore(keys.retry("default"), ids["flaky"]) is not None


def test_outcome_hooks_must_be_callables() -> None:
    with pytest.raises(InvalidArgumentError, match="outcome_hooks"):
        ServerConfig(outcome_hooks=("nope",))  # type: ignore[arg-type]
    assert ServerConfig(outcome_hooks=[print]).outcome_hooks == (print,)  # type: ignore[arg-type]
