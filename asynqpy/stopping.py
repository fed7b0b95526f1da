"""A server's shutdown steps under one deadline: while Redis does not answer, a stop takes at most shutdown_timeout
plus one socket timeout, and what could not be written by then is left to leases and TTLs (at least once)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from asynqpy.cancelling import cancel_and_wait
from asynqpy.loop import Loop
from asynqpy.rdb.failures import TroubleLog, is_transient

log = logging.getLogger("asynqpy")


class Stopping:
    """The steps of one shutdown, each run even if one before it failed (each failure is logged).

    A bounded step that has not ended by the deadline (loop.time()) is cancelled, and one due after it is skipped:
    a task it did not requeue or acknowledge comes back when its lease lapses (another worker's recoverer moves
    it), the server's keys expire with their TTL, a hand-off registration lapses by itself.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._late = False  # the deadline passed: said once

    async def step(self, what: str, fn: Callable[[], Awaitable[object]], *, tries: int = 1,
                   bounded: bool = True) -> None:
        """Run fn; transient Redis trouble is tried again (at most `tries` times, with back-off)."""
        trouble = TroubleLog("server")
        for attempt in range(1, tries + 1):
            try:
                if not bounded:
                    await fn()
                    return
                if asyncio.get_running_loop().time() >= self.deadline:
                    self._give_up(what, "skipped")
                    return
                if not await self._by_deadline(fn):
                    self._give_up(what, "given up")
                return
            except Exception as exc:
                if attempt < tries and is_transient(exc):
                    trouble.note(exc, what)
                    await asyncio.sleep(trouble.delay())
                    continue
                log.error("%s failed: %s: %s", what, type(exc).__name__, exc, exc_info=not is_transient(exc))
                return

    async def _by_deadline(self, fn: Callable[[], Awaitable[object]]) -> bool:
        """Run fn in a task of its own: True once it ended by the deadline (its exception is raised), False when the
        deadline came first; then it is cancelled until it has ended (see asynqpy.cancelling: one cancellation may
        be lost, and the step would wait for Redis one more socket timeout), as when this step is cancelled."""
        task = asyncio.ensure_future(fn())
        try:
            await asyncio.wait({task}, timeout=self.deadline - asyncio.get_running_loop().time())
        finally:
            if not task.done():
                await cancel_and_wait([task])
        if task.cancelled():
            return False
        task.result()
        return True

    def _give_up(self, what: str, how: str) -> None:
        if not self._late:
            self._late = True
            log.warning("stopping: Redis did not answer within shutdown_timeout plus a socket timeout; %s %s and "
                        "the steps after it (unfinished tasks come back when their leases lapse, the server's keys "
                        "expire by themselves)", how, what)


async def stop_together(loops: Sequence[Loop]) -> None:
    """Stop loops at once, each ending its current pass; a loop whose stop fails is logged, the others go on."""
    for lp, res in zip(loops, await asyncio.gather(*(lp.stop() for lp in loops), return_exceptions=True),
                       strict=True):
        if isinstance(res, Exception):
            log.error("stopping the %s failed: %s: %s", lp.name, type(res).__name__, res,
                      exc_info=not is_transient(res))
        elif isinstance(res, BaseException):
            raise res
