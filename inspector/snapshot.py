"""The shared queue snapshot: queue_infos and live servers, taken at most once per interval and kept in Redis,
so every dashboard process, Prometheus scrape and exporter asking within that interval reads one GET."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from asynqpy.errors import InvalidArgumentError, RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.failures import refuses_writes
from asynqpy.rdb.scripts import Call
from inspector import cluster, reader
from inspector.context import Ctx, from_unix, text
from inspector.models import QueueInfo
from inspector.scripts import script

KEEP = 60  # seconds the stored snapshot lives: askers with a longer max_age may still use it
LOCK_TTL_MS = 5000  # a taker that died mid-way blocks the others this long at most
WAIT_FOR_TAKER = 2.0  # seconds an asker waits for another process's snapshot before taking its own
POLL = 0.02
MEMORY_EVERY = 60.0  # seconds between two memory samples of one queue (documented: once a minute at most)
MEMORY_PER_SNAPSHOT = 25  # queues sampled per snapshot at most: many queues are sampled over many snapshots
FULL_EVERY = 30.0  # seconds a queue's info is carried over from the previous snapshot at most while unchanged


def _frozen() -> Mapping[str, int]:
    return MappingProxyType({})


@dataclass(frozen=True)
class QueueSnapshot:
    """Every registered queue's QueueInfo and the live servers, as of taken_at (Unix seconds).

    servers: live servers. queue_servers: per queue, the live servers that serve it. workers_busy: per queue,
    the tasks live servers are running. took: seconds the Redis reads took (0.0 when read from the cache).
    unshared: the kind of Redis trouble ("OOM", "READONLY", ...) that kept it from being shared through Redis
    (Redis answered the reads but refused the writes); "" when it was shared.
    """

    taken_at: float
    queues: tuple[QueueInfo, ...]
    servers: int = 0
    queue_servers: Mapping[str, int] = field(default_factory=_frozen)
    workers_busy: Mapping[str, int] = field(default_factory=_frozen)
    took: float = 0.0
    unshared: str = ""

    def queue(self, name: str) -> QueueInfo | None:
        return next((q for q in self.queues if q.queue == name), None)

    def age(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.taken_at)


def take(ctx: Ctx, prev: QueueSnapshot | None = None) -> QueueSnapshot:
    """Read a fresh snapshot from Redis: one round trip for the queue names and the stored memory samples, one
    pipelined for the queues, two for the servers.

    Incremental: with prev (the last snapshot), a queue whose counts, counters and paused flag are those of prev
    (one pipelined round of plain reads, no script) keeps prev's info, its ages brought up to now, for FULL_EVERY
    seconds at most; a queue with groups is always read in full (a group's size can change unseen).

    Memory (MEMORY USAGE on ~100 keys per queue, most of a snapshot's cost) is sampled only for the queues whose
    stored sample is MEMORY_EVERY seconds old or more, oldest first, MEMORY_PER_SNAPSHOT at most; the others show
    their stored sample. The samples live in Redis, so every process and the exporter share them."""
    t0 = time.perf_counter()
    now = ctx.now()
    names_raw, stored_raw = ctx.read(lambda b: (b.command("SMEMBERS", keys.QUEUES),
                                                b.command("HGETALL", keys.SNAPSHOT_MEMORY)))
    names = sorted(text(q) for q in names_raw)
    stored = _memory_samples(stored_raw)
    due = sorted((q for q in names if now - stored.get(q, (0, -MEMORY_EVERY))[1] >= MEMORY_EVERY),
                 key=lambda q: stored.get(q, (0, -MEMORY_EVERY))[1])[:MEMORY_PER_SNAPSHOT]
    kept = _unchanged(ctx, prev, [q for q in names if q not in due], now) if prev is not None else {}
    full = [q for q in names if q not in kept]
    read = {i.queue: i for i in (reader.queue_infos(ctx, full, memory=frozenset(due)) if full else [])}
    infos = [read[q] if q in read else kept[q] for q in names]
    infos = [i if i.queue in due or i.queue not in stored else replace(i, memory_usage=stored[i.queue][0])
             for i in infos]
    _store_memory(ctx, [i for i in infos if i.queue in due], now, [q for q in stored if q not in set(names)])
    live = cluster.servers(ctx)
    per_queue: dict[str, int] = {}
    busy: dict[str, int] = {}
    for s in live:
        for q in s.queues:
            per_queue[q] = per_queue.get(q, 0) + 1
        for w in s.active_workers:
            busy[w.queue] = busy.get(w.queue, 0) + 1
    return QueueSnapshot(now, tuple(infos), len(live), MappingProxyType(per_queue), MappingProxyType(busy),
                         time.perf_counter() - t0)


def _fingerprint(ctx: Ctx, names: list[str], now: float) -> list[tuple[int, ...]]:
    """Per queue: its six state sizes, paused flag, group count and the four processed/failed counters."""
    states = ("pending", "active", "scheduled", "retry", "archived", "completed")

    def fill(b: Any) -> None:
        for q in names:
            for st in states:
                b.command("LLEN" if st in ("pending", "active") else "ZCARD", keys.state_key(q, st))
            b.command("EXISTS", keys.paused(q))
            b.command("SCARD", keys.groups(q))
            b.command("MGET", keys.processed_daily(q, now), keys.failed_daily(q, now), keys.processed_total(q),
                      keys.failed_total(q))

    raw = ctx.read(fill) if names else []
    out = []
    for i in range(len(names)):
        part = raw[i * 9:(i + 1) * 9]
        out.append((*(int(x) for x in part[:8]), *(int(v) if v not in (None, b"") else 0 for v in part[8])))
    return out


def _unchanged(ctx: Ctx, prev: QueueSnapshot, names: list[str], now: float) -> dict[str, QueueInfo]:
    """The queues of names whose info in prev still holds (see take), as of now."""
    old = {i.queue: i for i in prev.queues}
    candidates = [q for q in names
                  if q in old and not old[q].groups and now - old[q].timestamp.timestamp() < FULL_EVERY]
    kept: dict[str, QueueInfo] = {}
    for q, fp in zip(candidates, _fingerprint(ctx, candidates, now), strict=True):
        i = old[q]
        if fp == (i.pending, i.active, i.scheduled, i.retry, i.archived, i.completed, int(i.paused), i.groups,
                  i.processed, i.failed, i.processed_total, i.failed_total):
            kept[q] = replace(i, latency=_age(now, i.oldest_pending_since),
                              oldest_retry_age=_age(now, i.oldest_retry_failed_at),
                              oldest_archived_age=_age(now, i.oldest_archived_at))
    return kept


def _age(now: float, t: datetime | None) -> float:
    return max(0.0, now - t.timestamp()) if t else 0.0


def _memory_samples(raw: Mapping[bytes, bytes]) -> dict[str, tuple[int, float]]:
    """The stored memory samples: queue -> (bytes, when sampled); malformed entries are left out (resampled)."""
    out: dict[str, tuple[int, float]] = {}
    for k, v in raw.items():
        size, _, when = text(v).partition(":")
        with contextlib.suppress(ValueError):
            out[text(k)] = (int(size), float(when))
    return out


def _store_memory(ctx: Ctx, sampled: list[QueueInfo], now: float, gone: list[str]) -> None:
    """Store the new samples (and forget queues no longer registered). While Redis refuses writes they are not
    stored: the next snapshot samples those queues again."""
    pairs = [x for i in sampled if i.memory_usage is not None for x in (i.queue, f"{i.memory_usage}:{now!r}")]
    if not pairs and not gone:
        return
    try:
        if pairs:
            ctx.command("HSET", keys.SNAPSHOT_MEMORY, *pairs)
        if gone:
            ctx.command("HDEL", keys.SNAPSHOT_MEMORY, *gone)
    except RedisUnavailableError as exc:
        if not refuses_writes(exc):
            raise


def queue_snapshot(ctx: Ctx, max_age: float) -> QueueSnapshot:
    """The stored snapshot when it is at most max_age seconds old; else a new one, taken by one asker at a time
    (the others wait up to WAIT_FOR_TAKER seconds for it).

    While Redis refuses writes but answers reads (OOM, READONLY: failures.refuses_writes) the snapshot cannot be
    shared: each Inspector takes its own, at most once per max_age, marked with the kind of trouble.
    Raises RedisUnavailableError when Redis cannot answer the reads, InvalidArgumentError for a bad max_age."""
    if isinstance(max_age, bool) or not isinstance(max_age, (int, float)) or not max_age >= 0:
        raise InvalidArgumentError(f"max_age must be a non-negative number of seconds, got {max_age!r}",
                                   argument="max_age")
    snap = _load(ctx.command("GET", keys.SNAPSHOT))
    if snap is not None and ctx.now() - snap.taken_at <= max_age:
        ctx.last_snapshot = snap
        return snap
    try:
        snap = _take_shared(ctx, float(max_age), snap)
    except RedisUnavailableError as exc:
        if not refuses_writes(exc):
            raise
        snap = _take_unshared(ctx, float(max_age), exc.kind)
    ctx.last_snapshot = snap
    return snap


def _fresh(ctx: Ctx, snap: QueueSnapshot | None, seen: float | None, max_age: float) -> bool:
    """Whether snap (read while waiting for a taker) will do: newer than the one seen first, or young enough."""
    return snap is not None and ((seen is None or snap.taken_at > seen) or ctx.now() - snap.taken_at <= max_age)


def _take_shared(ctx: Ctx, max_age: float, prev: QueueSnapshot | None) -> QueueSnapshot:
    """Take the lock (or wait for its holder's snapshot), take a snapshot and store it for every asker."""
    seen = prev.taken_at if prev is not None else None
    token = uuid.uuid4().hex
    if not _lock(ctx, token):
        deadline = time.monotonic() + WAIT_FOR_TAKER
        while time.monotonic() < deadline:
            time.sleep(POLL)
            snap = _load(ctx.command("GET", keys.SNAPSHOT))
            if snap is not None and _fresh(ctx, snap, seen, max_age):  # the one taken while we waited
                return snap
            if _lock(ctx, token):
                break
        else:
            return take(ctx)  # the taker is stuck: read for ourselves, without storing
    try:
        # Another taker may have stored one between our GET and our lock: use it.
        stored = _load(ctx.command("GET", keys.SNAPSHOT))
        if stored is not None and _fresh(ctx, stored, seen, max_age):
            return stored
        snap = take(ctx, stored or prev)
        ctx.command("SET", keys.SNAPSHOT, _dump(snap), "EX", KEEP)
    finally:
        with contextlib.suppress(RedisUnavailableError):  # not released: it expires after LOCK_TTL_MS
            ctx.run(Call(script("release_lock"), [keys.SNAPSHOT_LOCK], [token], int))
    return snap


def _lock(ctx: Ctx, token: str) -> bool:
    return bool(ctx.command("SET", keys.SNAPSHOT_LOCK, token, "NX", "PX", LOCK_TTL_MS))


def _take_unshared(ctx: Ctx, max_age: float, kind: str) -> QueueSnapshot:
    """This Inspector's own snapshot while Redis refuses writes: the last one it took when young enough."""
    last: QueueSnapshot | None = ctx.last_snapshot
    if last is not None and last.unshared and ctx.now() - last.taken_at <= max_age:
        return last
    return replace(take(ctx), unshared=kind)


def _plain(v: Any) -> Any:
    return v.timestamp() if isinstance(v, datetime) else v


def _dump(s: QueueSnapshot) -> bytes:
    queues = [{f.name: _plain(getattr(q, f.name)) for f in fields(QueueInfo)} for q in s.queues]
    doc = {"v": 1, "taken_at": s.taken_at, "servers": s.servers, "queue_servers": dict(s.queue_servers),
           "workers_busy": dict(s.workers_busy), "queues": queues}
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 1)  # ~10x smaller: every asker GETs it


_TIMES = {f.name for f in fields(QueueInfo) if "datetime" in str(f.type)}


def _fields(q: dict[str, Any]) -> dict[str, Any]:
    return {k: from_unix(v) if k in _TIMES else v for k, v in q.items()}


def _load(raw: bytes | None) -> QueueSnapshot | None:
    """The stored snapshot, or None when there is none or it is not of this version (then it is retaken)."""
    if not raw:
        return None
    try:
        d = json.loads(zlib.decompress(raw))
        if d.get("v") != 1:
            return None
        queues = tuple(QueueInfo(**_fields(q)) for q in d["queues"])
        return QueueSnapshot(float(d["taken_at"]), queues, int(d["servers"]),
                             MappingProxyType(dict(d["queue_servers"])), MappingProxyType(dict(d["workers_busy"])))
    except (ValueError, KeyError, TypeError, zlib.error):
        return None
