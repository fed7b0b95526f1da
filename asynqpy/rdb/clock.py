"""How far this machine's clock is from the Redis server's (TIME), measured over one round trip.

Due times, ticks and the waits derived from them are judged by Redis's clock inside the scripts (see
lua/_clock.lua); the offset measured here is what a process adds to its own clock where it must estimate
Redis's time outside a script, and what it reports (a log warning, a metric, the servers page).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aredis

from asynqpy.connection import is_cluster

# Offsets beyond this many seconds are reported (log warning, the servers page, `explain`).
WARN_OFFSET = 1.0


@dataclass(frozen=True)
class ClockOffset:
    """offset: Redis's time minus this machine's, in seconds (positive: this clock is behind), taken at the
    midpoint of the round trip; round_trip: seconds the TIME command took, which bounds the error (half of it)."""

    offset: float
    round_trip: float


def _time_args(conn: Any) -> dict[str, Any]:
    # A cluster client would ask every node; one node's clock stands for all (they should agree: see the README).
    return {"target_nodes": "random"} if is_cluster(conn) else {}


def _offset(t0: float, p0: float, p1: float, reply: Any) -> ClockOffset:
    if isinstance(reply, dict):  # a cluster reply keyed by node
        reply = next(iter(reply.values()))
    sec, usec = reply
    rtt = p1 - p0
    return ClockOffset(offset=int(sec) + int(usec) / 1e6 - (t0 + rtt / 2), round_trip=rtt)


async def measure(conn: aredis.Redis) -> ClockOffset:
    """One TIME round trip. Raises redis-py's errors (the caller's loop treats them as Redis trouble)."""
    t0, p0 = time.time(), time.perf_counter()
    reply = await conn.time(**_time_args(conn))
    return _offset(t0, p0, time.perf_counter(), reply)


def describe(offset: float) -> str:
    """"3.2 s ahead of Redis" / "5.0 s behind Redis": which way this machine's clock is off."""
    return f"{abs(offset):.1f} s {'behind' if offset > 0 else 'ahead of'} Redis"
