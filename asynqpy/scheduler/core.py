"""The Scheduler: enqueues periodic tasks at their ticks; replicas share the work, each tick enqueued once.

A tick is an entry and its scheduled time. Whichever replica reaches it first (by the Redis server's clock,
never before that time: each replica measures its clock's offset to Redis's at every heartbeat, and the
claim script refuses a tick that Redis's clock has not reached) claims it and enqueues the task in one
script (rdb/lua/tick_claim.lua); the claim is the entry's latest claimed tick, kept in Redis with an expiry,
so a replica that comes late finds the tick taken, and when one replica dies the others carry on. Entries
are published in asynq:schedulers at start and at every heartbeat, with each enqueue in the entry's
history, exactly as Go asynq's scheduler does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aredis

from asynqpy import tracing
from asynqpy.connection import aconnect
from asynqpy.cron import zone
from asynqpy.embedded import default_redis_url
from asynqpy.errors import AsynqError, InvalidArgumentError, QueueFullError
from asynqpy.rdb import broker, keys, state
from asynqpy.rdb import clock as redis_clock
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import Degraded, TroubleLog
from asynqpy.rdb.ping import ping
from asynqpy.scheduler.clocks import Clock, ClockWatch, RedisClock
from asynqpy.scheduler.entries import Entry, encode_entry, make_entry, resolve
from asynqpy.task import Task
from asynqpy.wire import SchedulerEnqueueEvent, SchedulerEntry, timestamp

log = logging.getLogger("asynqpy.scheduler")

REFUSALS_LOGGED_EVERY = 100  # a tick refused by a full queue is logged at the first refusal, then every 100th
HISTORY_CAP = 1000  # enqueue events kept per entry (asynq's cap)
# Every tick is claimed with a key that lives at least late_grace + CLAIM_SLACK seconds (two periods for long
# ones): longer than any replica may be late for it. Each entry's latest claimed tick is kept far longer, so
# catch_up="last" knows after a downtime whether the entry ran before and which tick ran last.
CLAIM_SLACK = 60.0
LATEST_MIN_TTL = 7 * 86400
MAX_TICKS_PER_WAKE = 100  # ticks of one entry handled per wake-up; the loop comes straight back for more
RETRY_AFTER = 1.0  # seconds before a tick that met a Redis error is tried again
# Seconds a stop waits for the step under way (a claim, a heartbeat), then for the entries' removal, when Redis
# does not answer (frozen, a partition): without it, a stop would wait out the socket timeout twice.
STOP_GRACE = 2.0
EARLY_RETRY = 0.01  # seconds before a tick found early by Redis's clock (the offset was off) is tried again
@dataclass(frozen=True)
class EntryInfo:
    """A registered entry as the scheduler sees it: next and previous ticks are Unix seconds or None."""

    id: str
    spec: str
    task_type: str
    opts: tuple[str, ...]
    next_tick: float | None
    prev_tick: float | None
    enqueued: int


class Scheduler:
    """Enqueues registered tasks on their cron specs. Run several replicas for availability: each tick once.

    redis_url: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server. location: the IANA zone of specs
    without a CRON_TZ= prefix. catch_up: "none" (ticks missed while no replica ran are not replayed) or
    "last" (at start, the most recent missed tick of each entry is enqueued once). late_grace: a replica
    that fell behind (e.g. Redis was down) still enqueues due ticks at most this many seconds late; older
    ones are skipped, except the latest.
    """

    def __init__(self, redis_url: str | None = None, *, location: str = "UTC",
                 catch_up: Literal["none", "last"] = "none", heartbeat_interval: float = 10.0,
                 late_grace: float = 60.0, clock: Clock | None = None,
                 connection: aredis.Redis | None = None) -> None:
        zone(location)
        if catch_up not in ("none", "last"):
            raise InvalidArgumentError(f"catch_up must be 'none' or 'last', got {catch_up!r}", argument="catch_up")
        heartbeat_interval = _seconds("heartbeat_interval", heartbeat_interval)
        if heartbeat_interval <= 0:
            raise InvalidArgumentError("heartbeat_interval must be positive", argument="heartbeat_interval")
        late_grace = _seconds("late_grace", late_grace)
        if late_grace < 0:
            raise InvalidArgumentError("late_grace must be 0 or more seconds", argument="late_grace")
        self.redis_url = redis_url
        self.location = location
        self.catch_up = catch_up
        self.heartbeat_interval = float(heartbeat_interval)
        self.late_grace = float(late_grace)
        self.clock: Clock = clock or RedisClock()
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4()}"
        self.list_key = keys.scheduler_entries(self.id)
        self._conn = connection
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stop_requested: asyncio.Event | None = None
        self._stopping = False
        self._changed = True
        self._watch = ClockWatch()  # reads self.clock, noticing steps of the machine's clock
        self.failures = 0  # enqueue attempts that failed (Redis errors, refused enqueues)
        self.refused = 0  # ticks refused by their queue's backpressure limit (QueueFullError; among failures)
        self._refusals: dict[str, int] = {}  # entry id -> ticks refused in a row (logged at the first, then rarely)
        # Every Redis error of every step goes here: transient trouble logged once per kind per 10 s, a bug
        # with its trace as rarely; the step is tried again later, the scheduler never stops for it.
        self.trouble = TroubleLog("scheduler", logger=log)

    @property
    def degraded(self) -> Degraded | None:
        """The transient Redis trouble the scheduler meets now (None once a step succeeds again)."""
        return self.trouble.degraded

    # -- entries ---------------------------------------------------------------------------------------------

    def register(self, spec: str, task: Task, options: Any = None, *, entry_id: str | None = None,
                 **fields: Any) -> str:
        """Add a periodic task and return its entry id. fields are Client.enqueue's keywords (queue,
        max_retry, timeout, ...), options a mapping of them (fields win). The id is derived from the spec,
        task and options, so replicas agree on it, unless entry_id is given.

        Raises InvalidArgumentError naming a bad spec, time zone or option. Works while running, too.
        """
        entry = make_entry(spec, task, options, fields, location=self.location, entry_id=entry_id,
                           now=self.clock.now())
        with self._lock:
            if entry.id in self._entries:
                raise InvalidArgumentError(f"entry {entry.id} ({spec!r} {task.type}) is already registered",
                                           argument="entry_id")
            self._entries[entry.id] = entry
        self._poke()
        return entry.id

    def unregister(self, entry_id: str) -> None:
        """Remove an entry. Raises InvalidArgumentError when no entry has that id."""
        with self._lock:
            if self._entries.pop(entry_id, None) is None:
                raise InvalidArgumentError(f"no scheduler entry with id {entry_id!r}", argument="entry_id")
        self._poke()

    def entries(self) -> list[EntryInfo]:
        """The registered entries, with this replica's view of their ticks."""
        with self._lock:
            return [EntryInfo(e.id, e.spec, e.task.type, tuple(e.opts), e.next_tick, e.prev_tick, e.enqueued)
                    for e in self._entries.values()]

    def _poke(self) -> None:
        self._changed = True
        loop, wake, stop = self._loop, self._wake, self._stop_requested
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)
                if self._stopping and stop is not None:
                    loop.call_soon_threadsafe(stop.set)

    def _snapshot(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    # -- running ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (or stop()), then remove this scheduler's entries from Redis."""
        asyncio.run(self._run_with_signals())

    async def _run_with_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        await self.arun()

    def stop(self) -> None:
        """Ask a running scheduler to stop (from any thread or a signal handler)."""
        self._stopping = True
        self._poke()

    async def arun(self, *, until: Callable[[], bool] | None = None) -> None:
        """The asyncio form of run(): returns after stop() (or once until() is true), having cleaned up.

        Raises RedisUnavailableError when Redis cannot be reached at start; later outages are logged, and the
        ticks they delay are enqueued when Redis is back (up to late_grace seconds late).
        """
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stop_requested = asyncio.Event()
        if self._stopping:
            self._stop_requested.set()
        url = self.redis_url or default_redis_url()
        conn = self._conn or aconnect(url)
        runner = AsyncRunner(conn)
        serving = asyncio.ensure_future(self._serve(runner, conn, url, until))
        stop_wait = asyncio.ensure_future(self._stop_requested.wait())
        try:
            await asyncio.wait({serving, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not serving.done():  # stop(): the step under way (a claim, a heartbeat) gets STOP_GRACE to end
                await asyncio.wait({serving}, timeout=STOP_GRACE)
            if not serving.done():  # Redis does not answer (frozen, a partition): stop without it
                log.warning("scheduler %s: stopping without waiting further for Redis (the step under way had "
                            "not ended %.0f s after the stop)", self.id, STOP_GRACE)
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
            else:
                serving.result()  # what the loop raised (RedisUnavailableError at start)
        finally:
            stop_wait.cancel()
            if not serving.done():  # arun itself was cancelled
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
            try:
                await asyncio.wait_for(self._remove_entries(runner), STOP_GRACE)
            except Exception as exc:  # Redis away at stop: the entries expire with their TTL
                log.warning("scheduler %s: entries not removed at stop (%s); asynq:schedulers drops them within "
                            "%.0f s", self.id, _one_line(exc) if str(exc) else f"no answer in {STOP_GRACE:.0f} s",
                            2 * self.heartbeat_interval)
            if self._conn is None:
                await conn.aclose()
            self._loop = self._wake = self._stop_requested = None
            self._stopping = False

    async def _serve(self, runner: AsyncRunner, conn: Any, url: str, until: Callable[[], bool] | None) -> None:
        """Start the entries, then enqueue their ticks and write the heartbeat until stopped."""
        assert self._wake is not None
        await ping(conn, url)
        await self._sync_clock(runner)
        self._watch.reset()
        now = self._read()
        for e in self._snapshot():
            await self._start_entry(runner, e, now)
        log.info("scheduler %s started: %d entries, location %s", self.id, len(self._snapshot()), self.location)
        next_beat = now
        while not self._stopping and not (until and until()):
            self._wake.clear()
            now = self._read()
            if self._watch.stepped:  # no tick is judged by a stepped clock: Redis's is read again first
                if not await self._sync_clock(runner):
                    await self._pause(RETRY_AFTER)
                    continue
                self._watch.stepped = False
                now = next_beat = self._read()  # the entries' times and expiry were written by the old clock
            if self._changed or now >= next_beat:
                self._changed = False
                await self._beat(runner, now)
                now = self._read()  # the beat measured the offset again
                next_beat = now + self.heartbeat_interval
            if self._watch.stepped:
                continue
            wake_at = min(await self._fire_due(runner, now), next_beat)
            delay = self._watch.until(wake_at, now, self.clock)
            if delay > 0 and not self._changed and not self._stopping:
                await self._pause(delay)

    async def _pause(self, delay: float) -> None:
        assert self._wake is not None
        sleeper = asyncio.ensure_future(self.clock.sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()

    async def _start_entry(self, runner: AsyncRunner, e: Entry, now: float) -> None:
        if self.catch_up == "last" and e.next_tick is None:
            last = e.schedule.prev(now)
            if last is not None:
                await self._fire(runner, e, last, now, catch_up=True)
        e.next_tick = e.schedule.next(now)

    async def _fire_due(self, runner: AsyncRunner, now: float) -> float:
        """Enqueue every due tick (each one only if no replica claimed it yet). Returns when to wake next."""
        wake_at = now + 3600.0
        for e in self._snapshot():
            if e.next_tick is None:
                await self._start_entry(runner, e, now)
            for _ in range(MAX_TICKS_PER_WAKE):
                tick = e.next_tick
                if tick is None or tick > now:
                    break
                following = e.schedule.next(tick)
                if now - tick > self.late_grace and following is not None and following <= now:
                    e.next_tick = self._resume_at(e, now)
                    log.warning("scheduler: entry %s (%s) skipped its ticks from %s to before %s: more than "
                                "%.0f s late", e.id, e.spec, _iso(tick), _iso(e.next_tick or now), self.late_grace)
                    continue
                fired = await self._fire(runner, e, tick, now, catch_up=False)
                if fired != "done":  # tried again after a pause (not at once: its tick is in the past)
                    wake_at = min(wake_at, now + (EARLY_RETRY if fired == "early" else RETRY_AFTER))
                    break
                e.next_tick = following
                self._changed = True  # publish the new next and previous ticks at once
            else:
                wake_at = now  # more due ticks than one wake-up handles: come straight back
            if e.next_tick is not None and e.next_tick > now:
                wake_at = min(wake_at, e.next_tick)
        return wake_at

    def _resume_at(self, e: Entry, now: float) -> float | None:
        """The first due tick at most late_grace old, or else the latest due one."""
        t = e.schedule.next(now - self.late_grace - 0.001)
        if t is None or t > now:
            t = e.schedule.prev(now)
        return t

    async def _fire(self, runner: AsyncRunner, e: Entry, tick: float, now: float, *,
                    catch_up: bool) -> Literal["done", "retry", "early"]:
        """Claim and enqueue one tick: "done" (by this replica or another), "retry" when Redis could not be
        reached, "early" when Redis's clock has not reached the tick yet (both are tried again)."""
        tracer = tracing.current()
        span: tracing.PublishSpan | None = None
        try:
            opts = resolve(e.fields, now)
            span = tracer.publish(e.task.type, opts.queue, e.task.headers) if tracer is not None else None
            headers = dict(e.task.headers if span is None else span.headers)
            msg = broker.build_message(e.task.type, e.task.payload, headers, opts)
            period = (e.schedule.next(tick) or tick) - tick
            call = broker.claim_tick(
                broker.enqueue(msg, opts, now=now), opts.queue, e.id, tick=int(tick),
                claim_ttl=int(max(self.late_grace + CLAIM_SLACK, 2 * period)),
                latest_ttl=int(max(LATEST_MIN_TTL, 3 * period)), tolerance=int(self.late_grace + CLAIM_SLACK / 2),
                owner=self.id, catch_up=catch_up, now=None if isinstance(self.clock, RedisClock) else now)
            claimed = await runner.run(call, register_queue=opts.queue)
        except AsynqError as exc:  # a unique task still held, a task id taken, a full queue: this tick is spent
            self.failures += 1
            if span is not None:
                span.failed(exc)
            if isinstance(exc, QueueFullError):  # the workers are behind: this tick is dropped, the next one tries
                self.refused += 1
                n = self._refusals[e.id] = self._refusals.get(e.id, 0) + 1
                if n == 1 or n % REFUSALS_LOGGED_EVERY == 0:
                    log.warning("scheduler: entry %s (%s) skipped its tick at %s: %s (%d in a row)", e.id, e.spec,
                                _iso(tick), exc, n)
            else:
                log.warning("scheduler: entry %s (%s) did not enqueue at %s: %s", e.id, e.spec, _iso(tick), exc)
            return "done"
        except Exception as exc:  # Redis trouble, or a bug: logged (rarely), the tick is tried again soon
            self.failures += 1
            if span is not None:
                span.failed(exc)
            self.trouble.note(exc, f"cannot enqueue {e.task.type} for entry {e.id} ({e.spec})")
            return "retry"
        self.trouble.ok()
        if span is not None and claimed in ("early", "taken"):  # not due yet, or another replica's: nothing stored
            span.skipped(claimed)
        elif span is not None:
            span.sent(opts.task_id or "", opts.queue)
        if claimed == "early":
            await self._sync_clock(runner)
            return "early"
        if claimed in ("taken", "paused"):  # paused: an operator's flag in Redis; this tick is skipped
            return "done"
        e.prev_tick = tick
        e.enqueued += 1
        if self._refusals.pop(e.id, 0):
            log.info("scheduler: entry %s (%s) enqueues again: its queue has room", e.id, e.spec)
        event = SchedulerEnqueueEvent(task_id=opts.task_id, enqueue_time=timestamp(now)).SerializeToString()
        try:
            await runner.run(state.record_scheduler_event(e.id, event, at=int(now), cap=HISTORY_CAP))
        except Exception as exc:
            self.trouble.note(exc, f"enqueue history of entry {e.id} not written")
        log.info("scheduler: enqueued %s (%s) for %s: task %s", e.task.type, e.spec, _iso(tick), opts.task_id)
        return "done"

    def _read(self) -> float:
        """Now, by the scheduler's clock (see ClockWatch.read)."""
        return self._watch.read(self.clock, self.id)

    async def _sync_clock(self, runner: AsyncRunner) -> bool:
        """Measure this machine's clock against Redis's (when ticks are judged by Redis's clock); warn when
        it is more than a second off. A Redis error, or a round trip too long to judge by, leaves the last offset
        (False)."""
        if not isinstance(self.clock, RedisClock):
            return True
        try:
            measured = await redis_clock.measure(runner, local=self.clock.machine)
        except Exception as exc:  # Redis trouble, noted as every step's: the last offset stays
            self.trouble.note(exc, "cannot read Redis's clock")
            return False
        if measured is None:  # too long a round trip to judge the offset by (a partition, a long script)
            return False
        before, self.clock.offset = self.clock.offset, measured.offset
        warn = redis_clock.WARN_OFFSET
        if abs(measured.offset) > warn and abs(measured.offset - before) > warn / 2:
            log.warning("scheduler %s: this machine's clock is %s; ticks follow Redis's clock", self.id,
                        redis_clock.describe(measured.offset))
        return True

    async def _beat(self, runner: AsyncRunner, now: float) -> None:
        """Publish the entries where asynq's Inspector reads them (TTL two heartbeats)."""
        await self._sync_clock(runner)
        entries = self._snapshot()
        try:
            marks = await runner.run_many([state.read_tick_mark(e.queue, e.id) for e in entries]) if entries else []
            data = []
            for e, mark in zip(entries, marks, strict=True):
                if isinstance(mark, Exception):
                    raise mark
                if mark is not None and (e.prev_tick is None or mark > e.prev_tick):
                    e.prev_tick = mark  # a tick another replica enqueued
                data.append(encode_entry(e))
            ttl = max(2, int(2 * self.heartbeat_interval))
            await runner.run(broker.write_scheduler_entries(self.list_key, ttl=ttl, entries=data,
                                                             location=self.location))
            await runner.run(state.index_add(keys.SCHEDULERS, self.list_key, score=int(now + ttl)))
        except Exception as exc:
            self.trouble.note(exc, "heartbeat failed")
            return
        self.trouble.ok()

    async def _remove_entries(self, runner: AsyncRunner) -> None:
        """Take this scheduler out of asynq:schedulers, and drop the history of entries no live scheduler lists."""
        await runner.run(state.index_remove(keys.SCHEDULERS, self.list_key))
        await runner.run(broker.write_scheduler_entries(self.list_key, ttl=1, entries=[]))  # deletes the list
        mine = {e.id for e in self._snapshot()}
        for k in await runner.run(state.index_live(keys.SCHEDULERS, now=int(self.clock.now()))):
            for data in await runner.run(state.read_scheduler_entries(k)):
                other = SchedulerEntry()
                with contextlib.suppress(Exception):
                    other.ParseFromString(data)
                    mine.discard(other.id)
        for i in mine:
            await runner.run(state.delete_scheduler_history(i))


def _seconds(name: str, value: object) -> float:
    """value as a finite number of seconds. Raises InvalidArgumentError naming it (a nan or an infinite late_grace
    made every claim fail; a nan heartbeat_interval every heartbeat)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgumentError(f"{name} must be a finite number of seconds, got {value!r}", argument=name)
    return float(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
