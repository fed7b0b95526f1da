"""Injected clocks for scheduler tests: fake time that the test moves, shared with replica processes."""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

from tests import helpers

# Replicas poll this often (real seconds) while the test moves their fake time.
POLL = 0.005


class SharedClock:
    """Reads a fake Unix time from shared memory (a multiprocessing Value), plus a fixed offset.

    Its sleep() returns within POLL real seconds: the scheduler loop then re-reads the time, so moving the
    shared value is all a test does to make ticks come due.
    """

    def __init__(self, base: Any, offset: float = 0.0) -> None:
        self.base = base
        self.offset = offset

    def now(self) -> float:
        return float(self.base.value) + self.offset

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(min(max(seconds, 0.0), POLL))


def shared_time(start: float | None = None) -> Any:
    """A fake time in shared memory: by default half a second past the current whole second."""
    ctx = multiprocessing.get_context("fork")
    return ctx.Value("d", math.floor(time.time()) + 0.5 if start is None else start)


def wait_for(probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Poll probe until it is truthy and return its value; fail naming what after timeout seconds."""
    return helpers.wait_for(probe, timeout=timeout, what=what)
