"""How far this machine's clock is from the Redis server's (TIME), measured over one round trip.

Due times, ticks and the waits derived from them are judged by Redis's clock inside the scripts (see
lua/_clock.lua); the offset measured here is what a process adds to its own clock where it must estimate
Redis's time outside a script, and what it reports (a log warning, a metric, the servers page).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from asynqpy.rdb import state
from asynqpy.rdb.async_runner import AsyncRunner

# Offsets beyond this many seconds are reported (log warning, the servers page, `explain`).
WARN_OFFSET = 1.0
# A measurement over a longer round trip is not used (the last offset stays): its error, up to half the round trip,
# is as large as the offsets worth a warning. Seen in bench/chaos.py: a TIME held up by a 10 s partition came back
# after 5 s and said "2.6 s behind Redis" of a clock that was right.
MAX_ROUND_TRIP = 1.0


@dataclass(frozen=True)
class ClockOffset:
    """offset: Redis's time minus this machine's, in seconds (positive: this clock is behind), taken at the
    midpoint of the round trip; round_trip: seconds the TIME command took, which bounds the error (half of it)."""

    offset: float
    round_trip: float


async def measure(runner: AsyncRunner, *, local: Callable[[], float] = time.time) -> ClockOffset | None:
    """One TIME round trip (on a Redis Cluster, one node's clock stands for all: they should agree); None when it
    took longer than MAX_ROUND_TRIP (the offset is not to be used: callers keep the last one). local: this
    machine's clock. Raises redis-py's errors (the caller's loop treats them as Redis trouble)."""
    t0, p0 = local(), time.perf_counter()
    sec, usec = await runner.run(state.server_time())
    rtt = time.perf_counter() - p0
    if rtt > MAX_ROUND_TRIP:
        return None
    return ClockOffset(offset=sec + usec / 1e6 - (t0 + rtt / 2), round_trip=rtt)


def describe(offset: float) -> str:
    """"3.2 s ahead of Redis" / "5.0 s behind Redis": which way this machine's clock is off."""
    return f"{abs(offset):.1f} s {'behind' if offset > 0 else 'ahead of'} Redis"
