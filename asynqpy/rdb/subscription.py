"""A pub/sub subscription on a connection of its own (the worker's to asynq:cancel and the wake-up channel): what
the subscriber loop (asynqpy/subscriber.py) reads, one message at a time."""

from __future__ import annotations

from typing import Any, Self


class Subscription:
    """SUBSCRIBE to channels on a new pub/sub connection from an asyncio redis-py client; next() gives each message
    as (channel, data): the channel's name in bytes, its data as redis-py reads it (bytes for a message). Use it in
    an `async with` block (its connection goes back when the block ends).

    Raises redis-py's errors, as the runners do: the loop that reads it classifies them (failures.kind_of) and
    subscribes again after its back-off.
    """

    def __init__(self, client: Any) -> None:
        self._ps = client.pubsub()
        self.confirmed = False  # True once Redis confirmed a SUBSCRIBE (it answers on this connection)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def subscribe(self, *channels: str) -> None:
        """SUBSCRIBE: returns once it is sent (its confirmations are skipped by next())."""
        await self._ps.subscribe(*channels)

    async def next(self, timeout: float) -> tuple[bytes, object] | None:
        """The next message within timeout s; None when none came, or what came was a confirmation of SUBSCRIBE
        (then `confirmed` is True): a reader asks again."""
        m = await self._ps.get_message(timeout=timeout)
        if m is None:
            return None
        if m["type"] not in ("message", b"message"):
            self.confirmed = self.confirmed or m["type"] in ("subscribe", b"subscribe")
            return None
        return m["channel"], m["data"]

    async def aclose(self) -> None:
        await self._ps.aclose()
