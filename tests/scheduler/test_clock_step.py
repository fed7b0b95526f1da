"""The machine's clock stepped by an hour (an operator, NTP, a resumed VM) while the default scheduler runs: ticks
follow Redis's clock, so they go on at once, each enqueued once; none is skipped or held back for the hour."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis

from asynqpy import Task
from asynqpy.scheduler import Scheduler
from asynqpy.scheduler.clocks import RedisClock

from .clocks import wait_for


class SteppedClock(RedisClock):
    """Redis's clock as the default one reads it, from a machine clock that the test steps by `step` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.step = 0.0

    def machine(self) -> float:
        return time.time() + self.step


@pytest.mark.parametrize("step", [-3600.0, 3600.0])
def test_ticks_go_on_when_the_machine_clock_is_stepped(step: float, redis_url: str, r: redis.Redis) -> None:
    clock = SteppedClock()
    # A heartbeat an hour apart: only the step itself may make the scheduler read Redis's clock again.
    s = Scheduler(redis_url, clock=clock, heartbeat_interval=3600)
    s.register("@every 1s", Task("tick", b""), queue="cron")
    thread = threading.Thread(target=lambda: asyncio.run(s.arun()))
    thread.start()
    try:
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= 2, "two ticks before the step")
        before = r.llen("asynq:{cron}:pending")
        clock.step = step
        # Without the fix: stepped back, no tick is due for an hour; stepped forward, an hour of ticks is skipped.
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= before + 3, "three ticks after the step", timeout=15)
        assert abs(clock.now() - time.time()) < 1  # Redis's clock again, whatever the machine's says
    finally:
        s.stop()
        thread.join(10)
    assert not thread.is_alive()
    # Each tick was claimed (its claim key lives two minutes) and enqueued once, and none was skipped: the
    # claimed ticks are consecutive seconds, as many as the tasks.
    ticks = sorted(int(k.rsplit(b":", 1)[1]) for k in r.keys("asynqpy:{cron}:tick:*"))
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))
    assert len(ticks) == r.llen("asynq:{cron}:pending")
