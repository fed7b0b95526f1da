"""Forwarder: moves due scheduled and retry tasks to pending, sleeping exactly until the next one is due.

Due is judged by the Redis server's clock inside the forward script, never by this machine's: the script
reports the next due time and its own now. The sleep aims to have the next pass's script run right at that due
time: it keeps `lead`, the least gap seen between a pass's start by this machine's clock and its script's now by
Redis's (the clocks' offset plus the quickest trip of a command to Redis), and wakes at the due time minus it.
Whatever the clocks do, the sleep stays between the script's own wait minus that pass's round trip and the
script's own wait (the due time minus its now), so a clock step costs at most one early pass, never a late one.
A pass that comes a hair early finds nothing due and the next one follows at once: no task starts early.

The event loop's timers keep milliseconds (uvloop rounds a delay to the nearest one), so a timer alone starts a
pass up to half a millisecond early (then a second pass costs a round trip) or late. The sleep before a due time
is therefore a timer to FINE before it, then a sleep of the rest in a thread of the loop's default executor
(time.sleep keeps microseconds), ended early by a wake-up as the timer is.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from asynqpy.loop import Loop
from asynqpy.rdb import broker
from asynqpy.runtime import Runtime

BATCH = 100
LEAD_SAMPLES = 32  # passes over which the least start-to-script gap is taken (a clock step ages out this fast)
FINE = 0.002  # the last this many seconds before a due time are slept in a thread (see the module's docstring)


class Forwarder(Loop):
    """One pipelined forward script per queue each pass. The scripts report the earliest remaining due time,
    so the loop sleeps until then (at most forward_max_wait, for tasks that Go producers add without a
    wake-up signal); a new scheduled task from our producers wakes it at once."""

    name = "forwarder"

    def __init__(self, rt: Runtime, on_forwarded: Callable[[], None]) -> None:
        super().__init__()
        self.rt = rt
        self.interval = rt.config.forward_max_wait
        self.on_forwarded = on_forwarded
        self._gaps: deque[float] = deque(maxlen=LEAD_SAMPLES)  # Redis now - this clock at the pass's start
        self._timer: asyncio.Future[None] | None = None
        self._until: float | None = None  # the due time the returned wait aims at (time.monotonic()), else None

    async def run_once(self) -> float | None:
        queues = list(self.rt.config.queues)
        began = time.time()
        results = await self.rt.runner.run_many([broker.forward(q, batch=BATCH) for q in queues])
        ended = time.time()
        moved, full = 0, False
        soonest: tuple[float, float] | None = None  # (next due, the now of the script that reported it)
        first_now = None
        for res in results:
            if isinstance(res, Exception):
                raise res
            n, nxt, now = res
            moved += n
            full = full or n >= BATCH
            first_now = now if first_now is None else min(first_now, now)
            if nxt is not None and (soonest is None or nxt - now < soonest[0] - soonest[1]):
                soonest = (nxt, now)
        if first_now is not None:
            self._gaps.append(first_now - began)
        if moved:
            self.on_forwarded()
        if full:
            return 0
        if soonest is None:
            return self.interval
        nxt, now = soonest
        script_wait = nxt - now  # from when the script ran: an upper bound
        aimed = nxt - min(self._gaps) - time.time()  # the next script runs at the due time, by Redis's clock
        wait = min(script_wait, max(script_wait - (ended - began), aimed))
        if 0 < wait < self.interval:
            self._until = time.monotonic() + wait
            return wait
        return min(self.interval, max(0.0, wait))

    async def stop(self) -> None:
        self._stop.set()
        self.wake()  # Loop.stop sets the event only: end this forwarder's own sleep too
        await super().stop()

    def wake(self) -> None:
        super().wake()
        timer = self._timer
        if timer is not None and not timer.done():
            timer.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """Loop._sleep without asyncio.wait_for's extra task and cancellation: one timer, one future (the
        forwarder's wake-up is on the delayed tasks' path); the end of a sleep aimed at a due time in a thread."""
        until, self._until = self._until, None
        if seconds <= 0 or self._wake.is_set() or self.stopping:
            self._wake.clear()
            return
        loop = asyncio.get_running_loop()
        try:
            coarse = seconds if until is None else seconds - FINE
            if coarse > 0:
                await self._wait(loop, loop.call_later, coarse)
            left = 0.0 if until is None else until - time.monotonic()
            if left > 0 and not self._wake.is_set() and not self.stopping:
                await self._wait(loop, _sleep_in_thread, min(left, FINE))
        finally:
            self._wake.clear()

    async def _wait(self, loop: asyncio.AbstractEventLoop, arm: Callable[..., _Cancellable], seconds: float) -> None:
        """Until the timer that arm(seconds, _release, future) sets ends, or a wake-up (the timer is then
        cancelled: a call_later handle, or the thread's future, whose release would find the timer done)."""
        timer = self._timer = loop.create_future()
        handle = arm(seconds, _release, timer)
        try:
            await timer
        finally:
            handle.cancel()
            self._timer = None


class _Cancellable(Protocol):
    def cancel(self) -> object: ...


def _release(timer: asyncio.Future[None]) -> None:
    if not timer.done():
        timer.set_result(None)


def _sleep_in_thread(seconds: float, release: Callable[[asyncio.Future[None]], None],
                     timer: asyncio.Future[None]) -> asyncio.Future[None]:
    """call_later's shape, slept to the microsecond in the loop's default executor (a wake-up may release the
    timer first: the thread's release then finds it done)."""
    loop = timer.get_loop()

    def sleep() -> None:
        time.sleep(seconds)
        try:
            loop.call_soon_threadsafe(release, timer)
        except RuntimeError:  # the loop closed meanwhile (a stop): nothing waits any more
            pass
    return loop.run_in_executor(None, sleep)
