"""Subscriber: listens on asynq:cancel (cancel a running task) and our wake-up channel (fetch now)."""

from __future__ import annotations

from collections.abc import Callable

from asynqpy.loop import Loop
from asynqpy.rdb import keys
from asynqpy.rdb.subscription import Subscription
from asynqpy.runtime import Runtime


class Subscriber(Loop):
    """One pub/sub connection; after every (re)subscribe it wakes the fetcher and forwarder in case a
    message was missed while the connection was down."""

    name = "subscriber"
    interval = 1.0
    reports_success = True  # once Redis confirms the subscription (sending it says nothing)

    def __init__(self, rt: Runtime, cancel: Callable[[str], object], wake: Callable[[], None]) -> None:
        super().__init__()
        self.rt = rt
        self.cancel = cancel
        self.wake_workers = wake
        self.queues = {q.encode() for q in rt.config.queues}

    async def stop(self) -> None:
        """End at once: a pass only reads (cancelling it writes nothing), and would otherwise wait out its poll."""
        await self.abort()

    async def run_once(self) -> float | None:
        async with Subscription(self.rt.aredis) as sub:
            await sub.subscribe(keys.CANCEL_CHANNEL, keys.WAKE_CHANNEL)
            self.wake_workers()
            answered = False
            while not self.stopping:
                m = await sub.next(timeout=0.5)
                if sub.confirmed and not answered:
                    answered = True
                    self.trouble.ok()  # the pass goes on while subscribed: being subscribed again ends the trouble
                if m is None:
                    continue
                channel, data = m
                if channel == keys.WAKE_CHANNEL.encode():
                    if data in self.queues:
                        self.wake_workers()
                elif isinstance(data, bytes):
                    self.cancel(data.decode(errors="replace"))
        return 0
