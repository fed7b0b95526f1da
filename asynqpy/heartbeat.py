"""Heartbeat: extends the leases of held tasks and publishes server and worker info where Go's Inspector reads it."""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable

from asynqpy.loop import Loop
from asynqpy.rdb import broker, keys, state
from asynqpy.rdb import clock as redis_clock
from asynqpy.rdb.failures import Degraded
from asynqpy.rdb.scripts import Call
from asynqpy.runtime import Runtime
from asynqpy.wire import ServerInfo, WorkerInfo, timestamp

log = logging.getLogger("asynqpy")


class Heartbeat(Loop):
    """Every heartbeat_interval: ZADD XX new lease expiries, rewrite the server and workers keys (TTL 2 beats),
    and cancel handlers whose lease lapsed because Redis could not be reached to extend it."""

    name = "heartbeat"

    def __init__(self, rt: Runtime, cancel: Callable[[str, str], bool], held: Callable[[], set[str]],
                 degraded: Callable[[], Degraded | None] | None = None) -> None:
        super().__init__()
        self.degraded_now = degraded or (lambda: self.degraded)  # the server's trouble, for its health note
        self.rt = rt
        self.interval = rt.config.heartbeat_interval
        self.cancel = cancel
        self.held = held  # ids acknowledged in memory but not yet written
        self._warned_offset: float | None = None  # the clock offset last warned about

    async def run_once(self) -> float | None:
        self._cancel_lapsed()
        await self._measure_clock()
        now = time.time()
        expiry = now + self.rt.config.lease_duration
        ttl = max(2, math.ceil(2 * self.rt.config.heartbeat_interval))
        by_queue: dict[str, list[str]] = defaultdict(list)
        for tid, at in self.rt.active.items():
            by_queue[at.queue].append(tid)
        calls: list[Call[int]] = [state.extend_leases(q, ids, score=broker.due(expiry)) for q, ids in by_queue.items()]
        # Inspectors judge liveness by their clocks, which should agree with Redis's: the expiry is by Redis's.
        alive_until = broker.due(self.rt.redis_now() + ttl)
        calls += [state.index_add(keys.SERVERS, self.rt.server_key, score=alive_until),
                  state.index_add(keys.WORKERS, self.rt.workers_key, score=alive_until)]
        for res in await self.rt.runner.run_many(calls):
            if isinstance(res, Exception):
                raise res
        for ids in by_queue.values():
            for tid in ids:
                held = self.rt.active.get(tid)
                if held is not None:
                    held.lease_expiry = expiry
        await self.rt.runner.run(broker.write_server_state(
            self.rt.server_key, self.rt.workers_key, ttl=ttl, info=self.server_info(now), workers=self.worker_infos()))
        await self.rt.runner.run(self._health_call(now, ttl))
        return None

    def _health_call(self, now: float, ttl: int) -> Call[int]:
        """Our health note: "ok", or what trouble a loop of this server meets (e.g. a cluster node that is down
        for some queues while the heartbeat's own keys answer)."""
        d = self.degraded_now()
        status, kind, since = ("ok", "", 0) if d is None else \
            (d.describe(), d.kind, int(now - (time.monotonic() - d.since)))
        return state.write_server_health(self.rt.health_key, ttl=ttl, status=status, kind=kind, since=since,
                                         clock_offset=self.rt.clock_offset, stuck_threads=len(self.rt.stuck))

    async def write_state(self) -> None:
        """Write the server and workers info now (at start), not at the first beat; Redis trouble is logged."""
        try:
            await self.run_once()
            self.last_ok = time.monotonic()
        except Exception as exc:
            self.trouble.note(exc, "could not write server state")

    async def _measure_clock(self) -> None:
        """Measure this machine's clock against Redis's (one TIME round trip) and keep it in the runtime (the
        health note publishes it); warn when it is more than a second off, once, and again when it has changed
        by more than half a second since. A measurement over a long round trip is not used (the last offset stays)."""
        measured = await redis_clock.measure(self.rt.runner)
        if measured is None:
            return
        self.rt.clock_offset = measured.offset
        warned = self._warned_offset
        if abs(measured.offset) > redis_clock.WARN_OFFSET and (
                warned is None or abs(measured.offset - warned) > redis_clock.WARN_OFFSET / 2):
            self._warned_offset = measured.offset
            log.warning("server %s: this machine's clock is %s (measured over a %.0f ms round trip); due times "
                        "follow Redis's clock, but fix the clock (NTP)", self.rt.server_id,
                        redis_clock.describe(measured.offset), measured.round_trip * 1000)

    def _cancel_lapsed(self) -> None:
        now = time.time()
        for tid, at in list(self.rt.active.items()):
            if now > at.lease_expiry and tid not in self.held():
                self.cancel(tid, "lease")

    def server_info(self, now: float) -> bytes:
        rt = self.rt
        info = ServerInfo(host=rt.host, pid=rt.pid, server_id=rt.server_id, concurrency=rt.config.concurrency,
                          strict_priority=rt.config.strict_priority, status=rt.status,
                          active_worker_count=len(rt.active))
        info.queues.update(rt.config.queues)
        info.start_time.CopyFrom(timestamp(rt.started))
        return info.SerializeToString()

    def worker_infos(self) -> list[tuple[str, bytes]]:
        rt = self.rt
        out = []
        for tid, at in rt.active.items():
            w = WorkerInfo(host=rt.host, pid=rt.pid, server_id=rt.server_id, task_id=tid, task_type=at.msg.type,
                           task_payload=at.msg.payload, queue=at.queue)
            w.start_time.CopyFrom(timestamp(at.started))
            w.deadline.CopyFrom(timestamp(at.deadline))
            out.append((tid, w.SerializeToString()))
        return out

    async def clear(self) -> None:
        """Remove this server from the indexes and delete its keys (at shutdown)."""
        for res in await self.rt.runner.run_many([state.index_remove(keys.SERVERS, self.rt.server_key),
                                                  state.index_remove(keys.WORKERS, self.rt.workers_key),
                                                  state.clear_server_health(self.rt.health_key)]):
            if isinstance(res, Exception):
                raise res
        await self.rt.runner.run(broker.clear_server_state(self.rt.server_key, self.rt.workers_key))
