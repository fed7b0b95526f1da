"""A task cancelled at shutdown ends, even where Python 3.11 loses a cancellation (asyncio.wait_for inside redis-py's
greeting of a new connection): a loop aborted while it connects again to a Redis that answers nothing ends at once,
not one socket timeout later."""

from __future__ import annotations

import asyncio
import time

import pytest

from asynqpy.cancelling import cancel_and_wait
from asynqpy.connection import aconnect
from asynqpy.embedded import EmbeddedServer
from asynqpy.errors import RedisUnavailableError
from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import reaching
from tests.redisfaults import fault_server, fault_url, frozen

__all__ = ["fault_server", "fault_url"]  # the fixtures, imported for this module

SOCKET_TIMEOUT = 2.0


class Writer(Loop):
    """Writes a requeue at every pass, as the syncer replays one."""

    name = "writer"
    interval = 0.01

    def __init__(self, runner: AsyncRunner) -> None:
        super().__init__()
        self.runner = runner

    async def run_once(self) -> float | None:
        await self.runner.run(broker.requeue("default", "t1", now=time.time()))
        return None


def test_a_loop_aborted_while_it_connects_again_to_a_redis_that_answers_nothing_ends_at_once(
        fault_server: EmbeddedServer, fault_url: str) -> None:
    async def abort_after(runner: AsyncRunner, turns: int) -> float:
        lp = Writer(runner)
        lp.start()
        for _ in range(turns):  # the abort comes at each step of the pass in turn, the greeting's write among them
            await asyncio.sleep(0)
        began = time.monotonic()
        await asyncio.wait_for(lp.abort(), 2 * SOCKET_TIMEOUT + 5)  # (a hang fails, not blocks)
        return time.monotonic() - began

    async def main() -> list[float]:
        client = aconnect(f"{fault_url}?socket_timeout={SOCKET_TIMEOUT}")
        runner = AsyncRunner(client)
        await client.ping()
        took = []
        with frozen(fault_server):
            # A call that times out drops its connection, which the runner keeps: the next call connects anew (the
            # TCP connection is made by the kernel of the stopped server; its greeting is never answered).
            with pytest.raises(RedisUnavailableError), reaching(fault_url):
                await runner.run(broker.requeue("default", "t0", now=time.time()))
            for turns in range(30):
                took.append(await abort_after(runner, turns))
        await client.aclose()
        return took

    took = asyncio.run(main())
    assert max(took) < SOCKET_TIMEOUT / 2, [f"{t:.2f}" for t in took]


def test_a_cancellation_the_task_lost_is_sent_again() -> None:
    async def main() -> tuple[float, int]:
        lost = 0

        async def loses_the_first() -> None:
            nonlocal lost
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:  # as asyncio.wait_for does in 3.11 when its awaitable ends meanwhile
                lost += 1
            await asyncio.sleep(60)

        task = asyncio.create_task(loses_the_first())
        await asyncio.sleep(0)
        began = time.monotonic()
        await cancel_and_wait([task, None])
        assert task.cancelled()
        return time.monotonic() - began, lost

    took, lost = asyncio.run(main())
    assert lost == 1
    assert took < 1.0, took


def test_the_exception_a_cancelled_task_ended_with_is_taken_not_raised() -> None:
    async def main() -> None:
        async def fails_when_cancelled() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                raise RuntimeError("cleanup failed") from None

        task = asyncio.create_task(fails_when_cancelled())
        await asyncio.sleep(0)
        await cancel_and_wait([task])
        assert isinstance(task.exception(), RuntimeError)

    asyncio.run(main())
