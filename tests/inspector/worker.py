"""A stand-in worker for tests: moves tasks through the same broker scripts the Server runs, under a fake clock."""

from __future__ import annotations

from collections.abc import Callable

import redis

from asynqpy.rdb import broker
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire import decode_task_message


class Clock:
    """A settable clock (Unix seconds), handed to the Inspector as clock=."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Worker:
    """Dequeues and finishes tasks exactly as the worker does, one script per transition."""

    def __init__(self, r: redis.Redis, clock: Callable[[], float]) -> None:
        self.run = SyncRunner(r)
        self.clock = clock
        self.held: dict[str, bytes] = {}

    def take(self, q: str, n: int = 1, lease: float = 30.0) -> list[str]:
        """Dequeue n tasks of q (oldest first); they become active with a lease."""
        got = self.run.run(broker.dequeue(q, lease_expiry=self.clock() + lease, count=n))
        for tid, msg in got:
            self.held[tid] = msg
        return [tid for tid, _ in got]

    def fail(self, q: str, tid: str, error: str, retry_in: float = 3600.0) -> None:
        """The handler failed: retry later, counting an attempt."""
        now = self.clock()
        msg = decode_task_message(self.held.pop(tid))
        msg.retried += 1
        msg.error_msg = error
        msg.last_failed_at = int(now)
        assert self.run.run(broker.retry(q, tid, msg.SerializeToString(), retry_at=now + retry_in, now=now,
                                         is_failure=True))

    def kill(self, q: str, tid: str, error: str) -> None:
        """The handler failed for good: archive."""
        now = self.clock()
        msg = decode_task_message(self.held.pop(tid))
        msg.error_msg = error
        msg.last_failed_at = int(now)
        assert self.run.run(broker.archive(q, tid, msg.SerializeToString(), now=now))

    def complete(self, q: str, tid: str, retention: float = 3600.0) -> None:
        """Success with retention: completed."""
        now = self.clock()
        msg = decode_task_message(self.held.pop(tid))
        msg.completed_at = int(now)
        item = (tid, now + retention, msg.SerializeToString(), "")
        assert self.run.run(broker.mark_complete(q, [item], now=now)) == []

    def done(self, q: str, tid: str) -> None:
        """Success without retention: deleted."""
        msg = decode_task_message(self.held.pop(tid))
        assert self.run.run(broker.done(q, [(tid, msg.unique_key)], now=self.clock())) == []
