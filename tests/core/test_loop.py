"""The loop base: a failing pass never ends a loop; transient trouble and bugs are both logged rarely."""

from __future__ import annotations

import asyncio

import pytest
from redis.exceptions import ResponseError

from asynqpy.loop import Loop


class Failing(Loop):
    """Fails its first `fails` passes with exc, then succeeds."""

    name = "failing"
    interval = 0.01

    def __init__(self, exc: Exception, fails: int = 10**9) -> None:
        super().__init__()
        self.exc = exc
        self.fails = fails
        self.passes = 0

    async def run_once(self) -> float | None:
        self.passes += 1
        if self.passes <= self.fails:
            raise self.exc
        return None


def _run(lp: Loop, seconds: float) -> None:
    async def go() -> None:
        lp.start()
        await asyncio.sleep(seconds)
        assert lp.alive
        await lp.stop()
    asyncio.run(go())


def test_a_bug_is_logged_with_its_trace_but_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    lp = Failing(ValueError("a bug in the pass"))
    with caplog.at_level("WARNING", logger="asynqpy"):
        _run(lp, 0.5)
    logged = [rec for rec in caplog.records if "a bug in the pass" in rec.getMessage()]
    assert lp.passes >= 3  # it went on trying
    assert len(logged) == 1 and logged[0].exc_info is not None  # one traceback, not one per pass
    assert lp.degraded is None  # a bug is no Redis trouble


def test_transient_trouble_is_logged_once_backs_off_and_clears(caplog: pytest.LogCaptureFixture) -> None:
    lp = Failing(ResponseError("BUSY Redis is busy running a script"), fails=4)
    states: list[str | None] = []

    async def go() -> None:
        lp.start()
        for _ in range(300):
            await asyncio.sleep(0.01)
            states.append(lp.degraded.kind if lp.degraded else None)
            if lp.passes > 5:
                break
        await lp.stop()

    with caplog.at_level("INFO", logger="asynqpy"):
        asyncio.run(go())
    busy = [rec for rec in caplog.records if "answers BUSY (" in rec.getMessage()]
    assert len(busy) == 1 and busy[0].exc_info is None
    assert "BUSY" in states and states[-1] is None and lp.degraded is None
    assert any("answers again" in rec.getMessage() for rec in caplog.records)
