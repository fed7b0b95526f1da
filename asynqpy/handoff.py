"""Hand-off listener: while the processor has free slots, registers this server as an idle waiter on its
queues and blocks on its hand-off lists, where our producers' enqueue scripts put tasks already leased to it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from redis.crc import key_slot

from asynqpy.cancelling import cancel_and_wait
from asynqpy.connection import aconnect, is_cluster
from asynqpy.rdb import broker, handoff_io, keys
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import TroubleLog
from asynqpy.runtime import Runtime

if TYPE_CHECKING:
    from asynqpy.processor import Processor

log = logging.getLogger("asynqpy")

# A dead worker's registration lapses this fast, so few tasks can be handed to it (they come back by lease
# recovery). Renewing it is one ZADD per queue each half TTL: the bulk of an idle worker's cost to Redis.
REGISTRATION_TTL = 4.0
BLOCK = 1.0  # seconds per BLPOP (one command a second while idle); stopping waits at most this long
PRUNE_EVERY = 60.0  # seconds between removals of long-dead registrations from the waiters sets


class HandoffListener:
    """Gives an idle worker its next task in one network hop from the producer (see rdb/lua/_handoff.lua).

    Registration is one ZADD per queue, renewed each half-TTL while slots are free, and removed when the
    processor is full or stopping; the enqueue script consumes it when it hands a task over. At stop, any
    task still in a hand-off list is put back at the front of its queue.

    On one server (or Sentinel) a single lane BLPOPs every queue's hand-off list at once. On a Redis Cluster a
    blocking call may not cross slots, so there is one lane per slot (in practice one per queue), each with its
    own BLPOP, all sharing one client whose per-node connections they hold while they block.
    """

    def __init__(self, rt: Runtime, processor: Processor) -> None:
        self.rt = rt
        self.processor = processor
        # BLPOP holds its connection while it blocks: a client of its own keeps the shared pool free.
        self.conn = aconnect(rt.redis_url)
        self.runner = AsyncRunner(self.conn)  # its registrations (scripts) use that client's pool too
        queues = list(rt.config.queues)
        if is_cluster(self.conn):
            by_slot: dict[int, list[str]] = {}
            for q in queues:
                by_slot.setdefault(key_slot(keys.handoff(q, rt.server_id).encode()), []).append(q)
            groups = list(by_slot.values())
        else:
            groups = [queues]
        self.lanes = [_Lane(self, g, direct=not is_cluster(self.conn)) for g in groups]
        self._lane_of = {q: lane for lane in self.lanes for q in lane.queues}
        self._stop = False
        self._closed = False
        self._tasks: list[asyncio.Task[None]] = []
        self._withdrawing: set[asyncio.Task[None]] = set()
        self.trouble = TroubleLog("handoff")

    def start(self) -> None:
        self._tasks = [asyncio.create_task(lane.run(), name=f"asynqpy-handoff-{i}")
                       for i, lane in enumerate(self.lanes)]

    def offering(self, q: str) -> bool:
        """True while the registration of q's lane stands as far as this server knows (sent, and neither consumed
        by a hand-off it received nor withdrawn): a fetch then leaves the slot of a hand-off that consumed it
        meanwhile to the lane (see rdb/lua/_dequeue.lua)."""
        lane = self._lane_of.get(q)
        return lane is not None and lane.offering

    def withdraw(self) -> None:
        """The processor just filled up: withdraw the registration now, on the runtime's connection, rather than
        when a lane's BLPOP returns (up to BLOCK later), so producers stop handing tasks over that would go back
        to their queue. A lane registers again once a slot is free."""
        registered = [lane for lane in self.lanes if lane._registered_until]
        if not registered or self._stop:
            return
        for lane in registered:
            lane._registered_until = 0.0
            lane.offering = False
        task = asyncio.create_task(self._withdraw([q for lane in registered for q in lane.queues]))
        self._withdrawing.add(task)
        task.add_done_callback(self._withdrawing.discard)

    async def _withdraw(self, queues: list[str]) -> None:
        try:  # one round trip whatever the number of queues (a busy drain fills up again and again)
            _raise_first(await self.rt.runner.run_many([handoff_io.unregister_waiter(q, self.rt.server_id)
                                                        for q in queues]))
        except Exception as exc:  # it lapses by itself (REGISTRATION_TTL); the lanes give back what comes meanwhile
            self.trouble.note(exc, "withdrawing the registration")
        else:
            self.trouble.ok()

    async def stop(self) -> None:
        """Stop listening, withdraw the registration, and requeue whatever was handed over meanwhile."""
        self._stop = True
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for lane in self.lanes:
                try:
                    await lane.unregister()
                except Exception as exc:
                    log.warning("handoff: could not withdraw at stop (%s); it lapses in %.0f s", exc, REGISTRATION_TTL)
                try:
                    await lane.requeue_leftovers()
                except Exception as exc:
                    log.warning("handoff: could not requeue tasks handed over at stop (%s); they are recovered once "
                                "their leases lapse", exc)
        finally:  # also when the processor gives the stop up (Redis does not answer)
            await self.close()

    async def close(self) -> None:
        """End the lanes at once (a pop in flight is dropped: what it took comes back by its lease) and close the
        connections, without a word to Redis; stop() ends so, and the processor calls it when it gives stop() up."""
        self._stop = True
        await cancel_and_wait(self._tasks)
        if self._closed:
            return
        self._closed = True
        for lane in self.lanes:
            await lane.popper.aclose()
        await self.conn.aclose()


class _Lane:
    """One blocking call over the hand-off lists of queues whose lists share a slot."""

    def __init__(self, owner: HandoffListener, queues: list[str], *, direct: bool) -> None:
        self.owner = owner
        self.rt = owner.rt
        self.processor = owner.processor
        self.conn = owner.conn
        self.runner = owner.runner
        self.queues = queues
        self.boxes = {keys.handoff(q, self.rt.server_id): q for q in queues}
        self.box_keys = list(self.boxes)
        self.popper = handoff_io.HandedPop(self.conn, direct=direct)
        self._registered_until = 0.0
        self.offering = False  # see HandoffListener.offering
        # Until when producers may hand us tasks (0: none can): a registration we could not withdraw lasts to its
        # expiry; until a drain after that has succeeded, a full lane gives back what its boxes hold.
        self._live_until = 0.0
        self._pruned_at = 0.0
        self.trouble = TroubleLog(f"handoff lane {','.join(queues)}")

    async def run(self) -> None:
        while not self.owner._stop:
            try:
                answered = await self._once()
                if not answered and self.trouble.degraded is not None:
                    await self.conn.ping()  # a full worker's pass makes no call: ask whether the trouble is over
                    answered = True
            except Exception as exc:  # transient trouble or a bug: the lane goes on after a back-off
                self.trouble.note(exc)
                self._registered_until = 0.0
                self.offering = False
                await asyncio.sleep(self.trouble.delay())
            else:
                if answered:
                    self.trouble.ok()

    async def _once(self) -> bool:
        """One pass; True when it made a call Redis answered (a full worker's pass may make none)."""
        if not await self.processor.room_after_fetch():  # (a dequeue in flight may leave slots free)
            answered = False
            if self._registered_until:
                await self.unregister()
                answered = True
            if self._live_until:  # full, yet tasks may come: give them back to their queue
                lapsed = time.time() > self._live_until + 1  # (a producer's script may run a moment late)
                await self.requeue_leftovers()
                answered = True
                if lapsed:  # drained after the registration lapsed: nothing more can come
                    self._live_until = 0.0
            await self.processor.wait_for_slot(BLOCK)
            return answered
        now = self.rt.redis_now()  # the scripts judge registrations by Redis's clock
        if not self.offering or self._registered_until - now < REGISTRATION_TTL / 2:  # (refused: see _register)
            await self._register(now + REGISTRATION_TTL)
        item = await self.popper.pop(self.box_keys, BLOCK, self._take)
        if item is None or item is handoff_io.TAKEN:
            return True
        box, value = item
        q, tid, data = self._received(box, value)
        # The task is leased to us already and holds the slot we offered: fetches leave it that slot (claimed here,
        # and in Redis by the dequeue script, which sees the registration consumed while we still offered it),
        # rather than a fetch taking a task enqueued after it and this one going back behind it.
        self.processor.claim_handed()
        try:
            room = await self.processor.room_for_handed()
            if room:
                self.processor.start_task(q, tid, data)
        finally:
            self.processor.unclaim_handed()
        if not room:
            # Another lane, a pause or a stop filled or closed the last slot meanwhile: back to the front of its queue.
            try:
                await self.rt.runner.run(broker.requeue(q, tid, now=time.time()))
            except Exception:
                await handoff_io.push_back(self.conn, box.decode(), value)  # where the next drain finds it
                self._live_until = self._live_until or time.time()
                raise
            return True
        await asyncio.sleep(0)  # let the handler start before this loop registers again
        return True

    def _received(self, box: bytes, value: bytes) -> tuple[str, str, bytes]:
        """A task was handed over (hand-off list, element): the script consumed our registration for its queue.
        Returns its queue, id and message."""
        self._registered_until = 0.0
        self.offering = False
        tid, data = broker.parse_handoff(value)
        return self.boxes[box.decode()], tid, data

    def _take(self, box: bytes, value: bytes) -> bool:
        """The pop's take (see HandedPop.pop): start the task handed over as its reply is read, when a slot is sure
        without a wait (no dequeue in flight); False leaves it to _once, which waits for that dequeue or gives the
        task back."""
        if not self.processor.room_for_handed_now():
            return False
        self.processor.start_task(*self._received(box, value))
        return True

    async def _register(self, until: float) -> None:
        prune = until - self._pruned_at > PRUNE_EVERY
        calls = [handoff_io.register_waiter(q, self.rt.server_id, until=until,
                                            prune_before=until - 60 if prune else None)  # long-dead ones
                 for q in self.queues]
        self._live_until = max(self._live_until, until)  # counts from sending: the ZADD may apply unanswered
        res = await self.runner.run_many(calls)
        _raise_first(res)
        if prune:
            self._pruned_at = until
        self._registered_until = until
        # Only once it stands for sure: a fetch that found it absent while it travelled would leave a slot free
        # for a hand-off that never came (in a busy drain, at every freed slot). A queue whose hand-off list still
        # holds a task refused (a registration stands only over an empty list: see register_waiter.lua): the pop
        # below takes that task at once (or a fetch does, the lane's pop refused), and the next pass registers
        # again, as offering stays False.
        self.offering = all(res)
        if not self.processor.wants_tasks():
            # It filled up while the registration travelled (withdraw() found nothing to withdraw yet): withdraw
            # it now rather than at the next pass, so that producers stop handing over tasks it would give back.
            await self.unregister()

    async def unregister(self) -> None:
        self.offering = False
        _raise_first(await self.runner.run_many([handoff_io.unregister_waiter(q, self.rt.server_id)
                                                  for q in self.queues]))
        self._registered_until = 0.0
        self._live_until = min(self._live_until, time.time()) if self._live_until else 0.0

    async def requeue_leftovers(self) -> None:
        """Give every task in this lane's hand-off lists back to the front of its queue, one script call each, the
        calls of all its queues in one round trip (again for the queues that still gave one back)."""
        queues = self.queues
        while queues:
            now = time.time()
            res = await self.rt.runner.run_many([broker.requeue_handoff(q, self.rt.server_id, now=now)
                                                 for q in queues])
            _raise_first(res)
            queues = [q for q, r in zip(queues, res, strict=True) if r is not None]


def _raise_first(results: Sequence[object]) -> None:
    """run_many's per-call results: the first error among them is raised (the lane's loop judges it)."""
    for res in results:
        if isinstance(res, Exception):
            raise res
