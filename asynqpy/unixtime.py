"""Stored times (Unix seconds) as aware UTC datetimes, for everything that reads them back.

A score or timestamp in Redis may lie past what a datetime holds: a Go producer's ProcessAt in year 275817 is a
valid Go time, and a hand-written score may be anything, +inf included. Readers show such a time as datetime's
last (or first) moment instead of raising, so one task cannot break a listing, a stats page or a queue's info.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST_S = (LATEST - timedelta(days=1)).timestamp()  # (a day's margin: the platform's conversion near the edges)
_EARLIEST_S = (EARLIEST + timedelta(days=1)).timestamp()


def utc_from_unix(unix_s: float) -> datetime:
    """The aware UTC datetime of unix_s, clamped to datetime's range (NaN, which Redis never stores, as EARLIEST)."""
    if unix_s >= _LATEST_S:
        return LATEST
    if not unix_s > _EARLIEST_S or math.isnan(unix_s):
        return EARLIEST
    return datetime.fromtimestamp(unix_s, tz=UTC)
