"""Shares round trips among concurrent asyncio callers: what they queue while one is in flight goes in the next.

AsyncClient's enqueue goes through one of these, so 100 coroutines enqueueing through one client cost a few
round trips, not 100. Each caller still gets its own reply (an error reply is its own exception); a broken
connection fails the callers of that round trip only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asynqpy.rdb.scripts import Script

MAX_ROUND_TRIP = 1000  # commands sent in one round trip at most

Sender = Callable[[Sequence[bytes], Sequence["Script | None"]], Awaitable[list[Any]]]


class AutoPipeline:
    """send(sender) is the runner's send_scripts: one round trip of pre-packed commands, NOSCRIPT handled."""

    def __init__(self, sender: Sender) -> None:
        self._send = sender
        self._queue: list[tuple[bytes, Script | None, asyncio.Future[Any] | None]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def run(self, packed: bytes, script: Script | None, *, before: bytes | None = None) -> Any:
        """Send packed (after before, a command whose reply nobody needs) in the next round trip; its raw reply,
        or the exception of an error reply (returned, not raised). Raises what broke the connection."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if before is not None:
            self._queue.append((before, None, None))
        self._queue.append((packed, script, fut))
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush(), name="asynqpy-autopipeline")
        return await fut

    async def _flush(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_ROUND_TRIP], self._queue[MAX_ROUND_TRIP:]
                try:
                    raws = await self._send([p for p, _, _ in batch], [s for _, s, _ in batch])
                except BaseException as exc:  # this round trip's callers get it; later ones get their own try
                    for _, _, fut in batch:
                        if fut is not None and not fut.done():
                            fut.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                for (_, _, fut), raw in zip(batch, raws, strict=True):
                    if fut is not None and not fut.done():
                        fut.set_result(raw)
        finally:
            self._flusher = None
            for _, _, fut in self._queue:  # cancelled meanwhile (the loop is closing): nobody sends these
                if fut is not None and not fut.done():
                    fut.cancel()
            self._queue = []
