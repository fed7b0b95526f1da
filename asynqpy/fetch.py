"""Fetch: one dequeue of up to `free` tasks across a server's queues, in strict or asynq's weighted order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asynqpy.config import ServerConfig
from asynqpy.rdb import broker
from asynqpy.rdb.failures import TroubleLog
from asynqpy.rdb.scripts import AsyncRunner, Call

# queue, task id, msg bytes, pending_since (Unix s), the limit it waited on (None: it did not wait on one)
Dequeued = tuple[str, str, bytes, float | None, str | None]


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
                      trouble: TroubleLog, riders: Riders | None = None) -> list[Dequeued]:
    """At most `free` tasks, leased to this server until lease_expiry. Tasks already dequeued are always
    returned, even when a later queue's dequeue fails (that failure is noted in trouble); raises the failure
    only when nothing was dequeued. riders: calls sent in the first round trip, ahead of the dequeue."""
    if cfg.strict_priority or len(cfg.queues) == 1:
        got: list[Dequeued] = []
        for q in cfg.queue_order():
            try:
                [rows] = await _trip(runner, [broker.dequeue_waited(q, lease_expiry=lease_expiry,
                                                                    count=free - len(got))], riders)
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
    if free < len(order):
        shares = [1] * free + [0] * (len(order) - free)
    else:
        shares = [1 + x for x in _split(free - len(order), [cfg.queues[q] for q in order])]
    out = await _dequeue_shares(runner, order, shares, lease_expiry, trouble, riders)
    for q in order[free:] if not out else []:  # the queues that got no share, one at a time
        out = await _dequeue_shares(runner, [q], [free], lease_expiry, trouble, None)
        if out:
            break
    return out


async def _dequeue_shares(runner: AsyncRunner, order: list[str], shares: list[int], expiry: float,
                          trouble: TroubleLog, riders: Riders | None) -> list[Dequeued]:
    pairs = zip(order, shares, strict=True)
    calls = [(q, broker.dequeue_waited(q, lease_expiry=expiry, count=n)) for q, n in pairs if n > 0]
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
