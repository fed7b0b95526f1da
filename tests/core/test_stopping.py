"""A shutdown step keeps the stop's deadline even when its task loses the cancellation the deadline sends (Python
3.11's asyncio.wait_for loses one that comes as its awaitable ends: see asynqpy.cancelling)."""

from __future__ import annotations

import asyncio

import pytest

from asynqpy.stopping import Stopping


def test_a_step_that_loses_the_deadlines_cancellation_still_ends_at_the_deadline(
        caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[float, list[str]]:
        loop = asyncio.get_running_loop()
        stopping = Stopping(loop.time() + 0.2)
        after: list[str] = []

        async def loses_the_first() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                after.append("lost")
            await asyncio.sleep(5)  # e.g. a greeting's reply, read for a socket timeout
            after.append("went on")

        began = loop.time()
        await stopping.step("the step", loses_the_first)
        await stopping.step("the next step", loses_the_first)
        return loop.time() - began, after

    with caplog.at_level("WARNING", logger="asynqpy"):
        took, after = asyncio.run(main())
    assert took < 1.0, took
    assert after == ["lost"]
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and "given up the step and the steps after it" in msgs[0], msgs


def test_a_steps_own_error_is_logged_and_the_next_step_runs(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[str]:
        stopping = Stopping(asyncio.get_running_loop().time() + 5)
        ran: list[str] = []

        async def times_out() -> None:
            async with asyncio.timeout(0.01):  # a timeout of its own, not the deadline's
                await asyncio.sleep(1)

        async def next_step() -> None:
            ran.append("next")

        await stopping.step("the step", times_out)
        await stopping.step("the next step", next_step)
        return ran

    with caplog.at_level("WARNING", logger="asynqpy"):
        assert asyncio.run(main()) == ["next"]
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["the step failed: TimeoutError: "], msgs
