"""The scheduler's clocks (the machine's, Redis's as the machine's plus a measured offset) and ClockWatch, which
reads one and notices when the machine's clock was stepped."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Protocol

log = logging.getLogger("asynqpy.scheduler")

# The machine's clock counts as stepped (by an operator, NTP, a resumed VM) when it moved this many seconds more
# or less than the monotonic clock between two readings: the offset to Redis is measured again at once, and the
# heartbeat written, before any tick is judged due, late or skipped by the stepped clock.
CLOCK_STEP = 1.0


class Clock(Protocol):
    """Where the scheduler reads the time (Unix seconds) and how it waits. Inject one in tests."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...


class SystemClock:
    """The machine's clock."""

    def machine(self) -> float:
        """This machine's clock (time.time()), which an operator or NTP may step either way."""
        return time.time()

    def now(self) -> float:
        return self.machine()

    def sleep(self, seconds: float) -> Awaitable[None]:
        return asyncio.sleep(seconds)


class RedisClock(SystemClock):
    """The Redis server's clock, as this machine's plus the offset the scheduler measures at every heartbeat
    (the default clock: ticks are judged by Redis's clock, whatever this machine's says)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return self.machine() + self.offset


class ClockWatch:
    """Reads a scheduler's clock. The machine's clock (that SystemClock and RedisClock read) is read with the
    monotonic clock: the loop sleeps by the latter (asyncio does), and when the two moved apart by more than
    CLOCK_STEP since the last reading, the machine's clock was stepped (an operator, NTP, a resumed VM): `stepped`
    says so until the scheduler has read Redis's clock again (it sets it back). Judged by the stepped clock, ticks
    would be skipped, or held back, for as long as the step."""

    def __init__(self) -> None:
        self.stepped = False
        self._last: tuple[float, float] | None = None  # the machine's and the monotonic clock, read together
        self._mono: float | None = None  # the monotonic clock at the last read (None: an injected clock)

    def reset(self) -> None:
        """Forget the last reading (a start)."""
        self._last, self.stepped = None, False

    def read(self, clock: Clock, who: str) -> float:
        """Now, by clock (who: the scheduler, for the log)."""
        if not isinstance(clock, SystemClock):
            self._mono = None
            return clock.now()
        wall, mono = clock.machine(), time.monotonic()
        if self._last is not None:
            jump = (wall - self._last[0]) - (mono - self._last[1])
            if abs(jump) > CLOCK_STEP:
                log.warning("scheduler %s: this machine's clock was stepped by %+.1f s; reading Redis's clock again",
                            who, jump)
                self.stepped = True
        self._last, self._mono = (wall, mono), mono
        return wall + (clock.offset if isinstance(clock, RedisClock) else 0.0)

    def until(self, wake_at: float, now: float, clock: Clock) -> float:
        """Seconds from now to wake_at (now: the last read's): by the monotonic clock since that read, whatever
        happens to the machine's; by the clock itself when it is an injected one."""
        if self._mono is None:
            return wake_at - clock.now()
        return wake_at - now - (time.monotonic() - self._mono)
