"""The one shape of every background loop: start, a pass every interval, shutdown, errors logged not fatal."""

from __future__ import annotations

import asyncio
import time

from asynqpy.cancelling import cancel_and_wait
from asynqpy.rdb.failures import Degraded, TroubleLog


class Loop:
    """A background loop: run_once() every `interval` seconds until stop().

    run_once may return a number of seconds to wait before the next pass (None = interval); wake() cuts
    the current wait short. A failing pass never ends the loop: it goes through the loop's TroubleLog, which
    logs transient Redis trouble once per kind per 10 s and a bug with its trace at most as often; transient
    trouble is tried again after a jittered back-off, a bug after the usual interval. `degraded` says what
    trouble lasts (None once a pass succeeds again).
    """

    name = "loop"
    interval: float = 1.0
    # True: run_once calls self.trouble.ok() itself, after a call Redis answered (its passes may make none, or go on
    # past a failed call). Otherwise a pass that returns without having met trouble counts as Redis answering.
    reports_success = False

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.trouble = TroubleLog(self.name)
        self.last_ok = 0.0  # time.monotonic() of the last pass that succeeded (health checks read it)

    async def run_once(self) -> float | None:
        raise NotImplementedError

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"asynqpy-{self.name}")

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Ask the loop to stop and wait for its current pass to finish."""
        self._stop.set()
        self._wake.set()
        if self._task is not None and not self._task.done():  # a loop that died already: nothing to wait for
            await self._task
        await self.on_stop()

    async def abort(self) -> None:
        """End the loop now, its current pass cancelled, without its last pass (a shutdown gave up on Redis)."""
        self._stop.set()
        await cancel_and_wait([self._task])

    async def probe(self) -> None:
        """With reports_success: one call (a PING) after a pass that met no failure while trouble lasts, which then
        calls self.trouble.ok(); so that trouble ends when Redis answers, not at the loop's next write."""

    async def on_stop(self) -> None:
        """A last pass after the loop ended (e.g. a final flush); nothing by default."""

    @property
    def alive(self) -> bool:
        """False once the loop's task ended without being asked to stop (a bug killed it)."""
        return self._task is None or not self._task.done() or self._stop.is_set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def degraded(self) -> Degraded | None:
        """The transient Redis trouble this loop has met since its last good pass, or None."""
        return self.trouble.degraded

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                failures = self.trouble.failures
                wait = await self.run_once()
                if self.reports_success and self.trouble.degraded is not None and self.trouble.failures == failures:
                    await self.probe()  # the pass may have made no call: ask whether the trouble is over
                if self.trouble.failures == failures:  # (a pass may go on past a failure it noted)
                    self.last_ok = time.monotonic()
                    if not self.reports_success:
                        self.trouble.ok()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # neither Redis trouble nor a bug in one pass may end the loop
                kind = self.trouble.note(exc, "pass failed")
                wait = self.trouble.delay() if kind is not None else max(self.interval, 0.1)
            await self._sleep(self.interval if wait is None else wait)

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0 or self._stop.is_set():
            self._wake.clear()
            return
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            pass
        self._wake.clear()
