"""Cancelling tasks so that they end: a cancellation that a task loses is sent again.

Python 3.11's asyncio.wait_for loses a cancellation that arrives as the awaitable it waits for finishes: it returns
that result instead of raising (python/cpython#86296, fixed in 3.12). redis-py awaits each write of a connection
so, the greeting's too (CLIENT SETINFO, AUTH, SELECT): a loop cancelled while it connects anew to a Redis that
answers nothing went on to read the greeting's reply for a whole socket timeout, and a stop that waited for it
overran its deadline by that much. A cancellation sent again lands at the task's next await.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

RECANCEL_EVERY = 0.05  # seconds between cancellations of a task that has not ended yet


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel each task (None and ended ones are skipped) and wait until all have ended, cancelling those still
    running again every RECANCEL_EVERY s. Their exceptions are taken (not raised, not logged as never retrieved).
    A task that ignores every cancellation is waited for as long as it runs."""
    left = {t for t in tasks if t is not None and not t.done()}
    ended: list[asyncio.Future[Any]] = []
    while left:
        for t in left:
            t.cancel()
        done, left = await asyncio.wait(left, timeout=RECANCEL_EVERY)
        ended += done
    for t in ended:
        if not t.cancelled():
            t.exception()
