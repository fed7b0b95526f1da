"""The one shape of every background loop: start, a pass every interval, shutdown, errors logged not fatal."""

from __future__ import annotations

import asyncio
import logging
import time

from redis.exceptions import ClusterDownError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger("asynqpy")

# A cluster resharding or electing a new primary answers CLUSTERDOWN or TRYAGAIN for a moment: the same as down.
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError, OSError, ClusterDownError, TryAgainError)


class Loop:
    """A background loop: run_once() every `interval` seconds until stop().

    run_once may return a number of seconds to wait before the next pass (None = interval); wake() cuts
    the current wait short. A failing pass is logged (at most every 10 s while Redis is away) and retried
    after a back-off, so a short Redis outage never kills the server.
    """

    name = "loop"
    interval: float = 1.0

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_error_log = 0.0
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

    async def on_stop(self) -> None:
        """A last pass after the loop ended (e.g. a final flush); nothing by default."""

    @property
    def alive(self) -> bool:
        """False once the loop's task ended without being asked to stop (a bug killed it)."""
        return self._task is None or not self._task.done() or self._stop.is_set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                wait = await self.run_once()
                self.last_ok = time.monotonic()
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except REDIS_DOWN as exc:
                self._log_error("redis unreachable", exc)
                wait, backoff = backoff, min(backoff * 2, 5.0)
            except Exception as exc:  # a bug in one pass must not end the loop
                self._log_error("pass failed", exc, with_trace=True)
                wait = self.interval
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

    def _log_error(self, what: str, exc: BaseException, *, with_trace: bool = False) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= 10 or with_trace:
            self._last_error_log = now
            log.warning("%s: %s: %s", self.name, what, exc, exc_info=with_trace)
