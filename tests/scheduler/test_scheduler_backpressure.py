"""The Scheduler and a queue past its backpressure limit: each refused tick is counted and logged (the first of a
run, then rarely), the scheduler goes on, and enqueues again once the queue has room."""

from __future__ import annotations

import logging
import time

import pytest
import redis

from asynqpy import Task
from asynqpy.rdb import keys
from asynqpy.rdb.flow import clear_queue_limit, queue_limit, set_queue_limit

from .clocks import wait_for
from .test_scheduler import Running


@pytest.mark.parametrize("fields", [{}, {"group": "g"}, {"process_in": 60}], ids=["plain", "group", "scheduled"])
def test_a_full_queue_refuses_ticks_and_the_scheduler_goes_on(fields: dict[str, object], redis_url: str,
                                                             r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    set_queue_limit(r, "cron", max_size=1)
    r.lpush(keys.pending("cron"), "x")  # the queue is full
    run = Running(redis_url)
    s = run.s
    s.register("@every 1s", Task("report", b""), queue="cron", **fields)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="asynqpy")
    run.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers"), "start")
        for _ in range(3):
            run.base.value += 1
            time.sleep(0.05)
        wait_for(lambda: s.refused == 3, "three refused ticks")
        assert s.failures == 3 and s.entries()[0].enqueued == 0 and queue_limit(r, "cron").refused == 3
        skipped = [m for m in caplog.messages if "skipped its tick" in m]
        assert len(skipped) == 1 and "queue 'cron' is full" in skipped[0]  # logged once for the run
        clear_queue_limit(r, "cron")
        run.base.value += 1
        wait_for(lambda: s.entries()[0].enqueued == 1, "an enqueue once there is room")
        assert any("enqueues again" in m for m in caplog.messages)
    finally:
        run.stop()


def test_cron_run_now_into_a_full_queue_is_one_line_exit_1(redis_url: str, r: redis.Redis,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.cli import main
    run = Running(redis_url)
    eid = run.s.register("@every 1h", Task("report", b""), queue="cron")
    run.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers"), "start")
        set_queue_limit(r, "cron", max_size=1)
        r.lpush(keys.pending("cron"), "x")
        code = main(["cron", "run", eid, "--redis-url", redis_url])
        _, err = capsys.readouterr()
        assert code == 1 and "queue 'cron' is full" in err and err.count("\n") == 1
        assert r.llen(keys.pending("cron")) == 1 and queue_limit(r, "cron").refused == 1
    finally:
        run.stop()
