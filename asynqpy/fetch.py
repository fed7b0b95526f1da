"""Fetch: one dequeue of up to `free` tasks across a server's queues, in strict or asynq's weighted order."""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any

from asynqpy.config import ServerConfig
from asynqpy.connection import is_cluster
from asynqpy.rdb import broker
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import TroubleLog
from asynqpy.rdb.scripts import Call

# queue, task id, msg bytes, pending_since (Unix s), the limit it waited on (None: it did not wait on one)
Dequeued = tuple[str, str, bytes, float | None, str | None]


@dataclass(frozen=True)
class Offer:
    """The fetching server's side of hand-offs: its id (what enqueue scripts handed to it comes first in its
    fetches), and whether its lane's registration on a queue stands as far as it knows (then a fetch leaves the
    slot of a hand-off that lane took to it; see lua/_dequeue.lua). Only the queues a fetch asks are looked at:
    on a server of many queues, a hand-off in another one may still find its slot taken (its lane gives it back
    to the front of its queue)."""

    server_id: str
    offering: Callable[[str], bool]


def _offer_args(offer: Offer | None, q: str) -> dict[str, Any]:
    """broker.dequeue_waited's / dequeue_queues's keyword arguments for a call on q (or whose first queue is q)."""
    return {} if offer is None else {"server_id": offer.server_id, "offered": offer.offering(q)}


@dataclass
class Riders:
    """Calls that travel in a dequeue's first round trip, ahead of its own (the processor's acknowledgements).
    results: each call's parsed reply or error, set once that round trip was answered or failed as a whole
    (then each holds that error); None while it was not sent."""

    calls: Sequence[Call[Any]]
    results: list[Any] | None = None


async def _trip(runner: AsyncRunner, calls: list[Call[Any]], riders: Riders | None) -> list[Any]:
    """run_many(calls), with the riders ahead of them when they have not travelled yet."""
    if riders is None or riders.results is not None:
        return await runner.run_many(calls)
    n = len(riders.calls)
    try:
        res = await runner.run_many([*riders.calls, *calls])
    except Exception as exc:
        riders.results = [exc] * n
        raise
    riders.results = res[:n]
    return res[n:]


async def dequeue_for(runner: AsyncRunner, cfg: ServerConfig, free: int, *, lease_expiry: float,
                      trouble: TroubleLog, riders: Riders | None = None,
                      offer: Offer | None = None) -> list[Dequeued]:
    """At most `free` tasks, leased to this server until lease_expiry. Tasks already dequeued are always
    returned, even when a later queue's dequeue fails (that failure is noted in trouble); raises the failure
    only when nothing was dequeued. riders: calls sent in the first round trip, ahead of the dequeue. offer: the
    fetching server's hand-off side: the tasks our enqueue scripts handed to it in the queues asked come first,
    and the slots of those its lanes took are left to them (they hold the slots it offered; see lua/_dequeue.lua).

    On one node (a plain or Sentinel client) the queues are asked in at most two script calls whatever their
    number: the first `free` queues of the order (each its share, then the rest of the slots from them), and only
    when those had nothing, all the others. Queues found dry lately are left out (see _QueueOrder). On a cluster,
    where queues live in different slots, one call per queue."""
    if len(cfg.queues) > 1 and not is_cluster(runner.redis):
        return await _dequeue_one_node(runner, cfg, free, lease_expiry, riders, offer)
    if len(cfg.queues) == 1:  # a busy drain's every fetch: one call, its rows as they are
        [q] = cfg.queues
        [rows] = await _trip(runner, [broker.dequeue_waited(q, lease_expiry=lease_expiry, count=free,
                                                            **_offer_args(offer, q))], riders)
        if isinstance(rows, Exception):
            raise rows
        return [(q, tid, data, since, limit) for tid, data, since, limit in rows]
    if cfg.strict_priority:
        got: list[Dequeued] = []
        for q in cfg.queue_order():
            try:
                [rows] = await _trip(runner, [broker.dequeue_waited(q, lease_expiry=lease_expiry,
                                                                    count=free - len(got), **_offer_args(offer, q))],
                                     riders)
                if isinstance(rows, Exception):
                    raise rows
            except Exception as exc:
                if not got:
                    raise
                trouble.note(exc, f"fetch from queue {q}")
                return got
            got += [(q, tid, data, since, limit) for tid, data, since, limit in rows]
            if len(got) >= free:
                break
        return got
    # Weighted: every queue gets a share of the free slots (at least one while slots last, in asynq's
    # weighted random order), all fetched in one pipelined round trip.
    order = cfg.queue_order()
    shares = _shares(free, order, cfg)
    out = await _dequeue_shares(runner, order, shares, lease_expiry, trouble, riders, offer)
    for q in order[free:] if not out else []:  # the queues that got no share, one at a time
        out = await _dequeue_shares(runner, [q], [free], lease_expiry, trouble, None, offer)
        if out:
            break
    return out


async def _dequeue_one_node(runner: AsyncRunner, cfg: ServerConfig, free: int, lease_expiry: float,
                            riders: Riders | None, offer: Offer | None) -> list[Dequeued]:
    order = _order(cfg)
    now = time.monotonic()
    live = order.live(now)
    head = order.first(free, live)
    shares = [0] * len(head) if cfg.strict_priority else _shares(free, head, cfg)
    [got] = await _trip(runner, [broker.dequeue_queues(list(zip(head, shares, strict=True)),
                                                       lease_expiry=lease_expiry, count=free,
                                                       **_offer_args(offer, head[0]))], riders)
    if isinstance(got, Exception):
        raise got
    order.note_dry(head, shares, got, free, now)
    if got or len(head) == len(live):
        return list(got)
    rest = order.rest(head, live)
    got = await runner.run(broker.dequeue_queues([(q, 0) for q in rest], lease_expiry=lease_expiry, count=free,
                                                 **_offer_args(offer, rest[0])))
    order.note_dry(rest, [0] * len(rest), got, free, now)
    return list(got)


class _QueueOrder:
    """A server's queues, ready for drawing a fetch's order without touching every queue: the first k places of
    asynq's weighted random order (or the strict order), and the other queues only when a fetch needs them.

    It also remembers the queues a fetch found dry (empty, paused or held by limits) and leaves them out of the
    fetches of the next idle_poll_interval, so a worker whose tasks sit in few of many queues asks those, in
    one call taking several tasks each, rather than naming every queue again and again. A wake-up (our
    producers' enqueue, the forwarder) forgets them at once; Go producers send none, so a task they add to a
    dry queue waits at most idle_poll_interval, as it would for an idle worker's poll. When every queue is dry
    they are all asked again (an idle worker's poll)."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.strict = cfg.strict_priority
        self.names = cfg.queue_order() if self.strict else list(cfg.queues)
        self.cumulative = list(itertools.accumulate(cfg.queues[q] for q in self.names))
        self.dry: dict[str, float] = {}  # queue -> until when (monotonic s) fetches leave it out
        self.skip = cfg.idle_poll_interval

    def live(self, now: float) -> list[str]:
        """The queues a fetch now asks: all but those found dry lately (all when every one was)."""
        dry = self.dry
        if not dry:
            return self.names
        for q in [q for q, until in dry.items() if until <= now]:
            del dry[q]
        if len(dry) >= len(self.names) or not dry:
            dry.clear()
            return self.names
        return [q for q in self.names if q not in dry]

    def note_dry(self, asked: list[str], shares: list[int], got: Sequence[Dequeued], count: int,
                 now: float) -> None:
        """Remember the queues of one dequeue_queues call that gave nothing although the script reached them: a
        queue with a share (asked first), every one when the call got less than count (it went through all), and
        with no shares (strict order, or the second call) those before the last queue that gave tasks."""
        gave = {q for q, *_ in got}
        if len(gave) == len(asked):
            return
        until = now + self.skip
        if len(got) < count:
            reached = len(asked)
        elif any(shares):
            reached = 0
        else:
            reached = max(i for i, q in enumerate(asked) if q in gave)
        for i, q in enumerate(asked):
            if q not in gave and (i < reached or shares[i] > 0):
                self.dry[q] = until

    def forget_dry(self) -> None:
        self.dry.clear()

    def first(self, k: int, live: list[str] | None = None) -> list[str]:
        """The first k places of a fresh order of the live queues (all queues when live is None)."""
        if live is not None and live is not self.names:
            if self.strict:
                return live[:k]
            if 2 * k >= len(live) or 2 * len(live) < len(self.names):
                rnd, weights = random.random, self.cfg.queues
                return sorted(live, key=lambda q: rnd() ** (1.0 / weights[q]), reverse=True)[:k]
            return self._draw(k, self.dry.keys())  # most queues live: draws skipping the dry ones
        if self.strict:
            return self.names[:k]
        if 2 * k >= len(self.names):
            return self.cfg.queue_order()[:k]
        return self._draw(k, set())

    def _draw(self, k: int, skip: Container[str]) -> list[str]:
        # one weighted draw per place, drawing again a queue already placed: the same order as queue_order()'s
        # first k places, in O(k log n)
        total = self.cumulative[-1]
        picked: list[str] = []
        seen: set[int] = set()
        while len(picked) < k:
            i = bisect.bisect_right(self.cumulative, random.random() * total)
            if i not in seen:
                seen.add(i)
                if self.names[i] not in skip:
                    picked.append(self.names[i])
        return picked

    def rest(self, head: list[str], live: list[str] | None = None) -> list[str]:
        """The live queues (all when live is None) not in head, in strict order or a weighted random one."""
        taken = set(head)
        if live is not None and live is not self.names:
            ordered = live if self.strict else self.first(len(live), live)
        else:
            ordered = self.names if self.strict else self.cfg.queue_order()
        return [q for q in ordered if q not in taken]


_orders: dict[int, _QueueOrder] = {}


def forget_dry(cfg: ServerConfig) -> None:
    """A wake-up: the next fetch of cfg's server asks every queue again (see _QueueOrder)."""
    o = _orders.get(id(cfg))
    if o is not None and o.cfg is cfg:
        o.forget_dry()


def _order(cfg: ServerConfig) -> _QueueOrder:
    """The _QueueOrder of cfg, made once per config (a server keeps one config for its life)."""
    o = _orders.get(id(cfg))
    if o is None or o.cfg is not cfg:
        if len(_orders) > 64:  # configs of servers long gone (tests make many)
            _orders.clear()
        o = _orders[id(cfg)] = _QueueOrder(cfg)
    return o


async def _dequeue_shares(runner: AsyncRunner, order: list[str], shares: list[int], expiry: float,
                          trouble: TroubleLog, riders: Riders | None, offer: Offer | None) -> list[Dequeued]:
    pairs = zip(order, shares, strict=True)
    calls = [(q, broker.dequeue_waited(q, lease_expiry=expiry, count=n, **_offer_args(offer, q)))
             for q, n in pairs if n > 0]
    results = await _trip(runner, [c for _, c in calls], riders)
    out: list[Dequeued] = []
    failed: Exception | None = None
    for (q, _), res in zip(calls, results, strict=True):
        if isinstance(res, Exception):
            failed = res
            continue
        out += [(q, tid, data, since, limit) for tid, data, since, limit in res]
    if failed is not None:
        if not out:
            raise failed
        trouble.note(failed, "fetch")
    return out


def _shares(free: int, order: list[str], cfg: ServerConfig) -> list[int]:
    """Every queue's share of the free slots: at least one each while slots last, in the weighted order given."""
    if free <= len(order):  # (the common case of a busy worker of many queues: a share of one each)
        return [1] * free + [0] * (len(order) - free)
    return [1 + x for x in _split(free - len(order), [cfg.queues[q] for q in order])]


def _split(n: int, weights: list[int]) -> list[int]:
    """n slots shared by weight (largest remainder)."""
    total = sum(weights)
    if n <= 0:
        return [0] * len(weights)
    exact = [n * w / total for w in weights]
    shares = [int(x) for x in exact]
    left = n - sum(shares)
    for i in sorted(range(len(weights)), key=lambda i: shares[i] - exact[i])[:left]:
        shares[i] += 1
    return shares
