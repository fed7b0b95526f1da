"""The shared queue snapshot: queue_infos and live servers, taken at most once per interval and kept in Redis,
so every dashboard process, Prometheus scrape and exporter asking within that interval reads one GET."""

from __future__ import annotations

import contextlib
import json
import math
import operator
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from asynqpy.errors import InvalidArgumentError, RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.failures import refuses_writes
from asynqpy.rdb.scripts import Call
from inspector import cluster, queueread
from inspector.context import Ctx, from_unix, text
from inspector.models import QueueInfo
from inspector.scripts import script

KEEP = 60  # seconds the stored snapshot lives: askers with a longer max_age may still use it
LOCK_TTL_MS = 5000  # a taker that died mid-way blocks the others this long at most
WAIT_FOR_TAKER = 2.0  # seconds an asker waits for another process's snapshot before taking its own
POLL = 0.02
MEMORY_EVERY = 60.0  # seconds between two memory samples of one queue (documented: once a minute at most)
MEMORY_PER_SNAPSHOT = 25  # queues sampled per snapshot at most: many queues are sampled over many snapshots
# The stored snapshot's format: 2 added each queue's enqueue_refused and limit_waits (a snapshot without them is
# retaken, not read as zeros that a Prometheus counter would take for a reset).
VERSION = 2
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
    for the queues (queue_infos.lua over chunks of them: inspector.queueread), two for the servers.

    Incremental: with prev (the last snapshot), a queue whose counts, counters and paused flag are those of prev
    (the script compares them, and reads no further) keeps prev's info, its ages brought up to now, for FULL_EVERY
    seconds at most; a queue with groups is always read in full (a group's size can change unseen). So that the
    queues kept do not all come due together, each snapshot also reads in full the oldest kept ones, in
    proportion to the time since prev (a 5 s interval: a sixth of them, oldest first).

    Memory (MEMORY USAGE on ~100 keys per queue, most of a full read's cost) is sampled only for the queues whose
    stored sample is MEMORY_EVERY seconds old or more, oldest first, MEMORY_PER_SNAPSHOT at most; the others show
    their stored sample. The samples live in Redis, so every process and the exporter share them."""
    t0 = time.perf_counter()
    now = ctx.now()
    names_raw, stored_raw = ctx.read(lambda b: (b.command("SMEMBERS", keys.QUEUES),
                                                b.command("HGETALL", keys.SNAPSHOT_MEMORY)))
    names = sorted(text(q) for q in names_raw)
    stored = _memory_samples(stored_raw)
    due = set(sorted((q for q in names if now - stored.get(q, (0, -MEMORY_EVERY))[1] >= MEMORY_EVERY),
                     key=lambda q: stored.get(q, (0, -MEMORY_EVERY))[1])[:MEMORY_PER_SNAPSHOT])
    old = {i.queue: i for i in prev.queues} if prev is not None else {}
    read = _read(ctx, names, now, due, _fingerprints(prev, old, due, now) if prev is not None else {})
    infos = []
    for q in names:
        info = read[q]
        sample = stored.get(q) if q not in due else None
        if info is None:  # unchanged: prev's, as of now
            i = old[q]
            info = _copy(i, latency=queueread.age(now, i.oldest_pending_since),
                         oldest_retry_age=queueread.age(now, i.oldest_retry_failed_at),
                         oldest_archived_age=queueread.age(now, i.oldest_archived_at),
                         memory_usage=sample[0] if sample else i.memory_usage)
        elif sample is not None:
            info = _copy(info, memory_usage=sample[0])
        infos.append(info)
    registered = set(names)
    _store_memory(ctx, [i for i in infos if i.queue in due], now, [q for q in stored if q not in registered])
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


def _fingerprints(prev: QueueSnapshot, old: Mapping[str, QueueInfo], due: set[str], now: float) -> dict[str, str]:
    """The fingerprints of the queues prev's info may stand for (see take): without groups, memory not due, read
    in full less than FULL_EVERY ago; and of those, not the oldest, so that in all a share of the queues in
    proportion to the time since prev is read in full (those past FULL_EVERY count toward it): they come due a
    share at a time, not all at once every FULL_EVERY."""
    candidates = [q for q, i in old.items() if q not in due and not i.groups]
    prints = {q: queueread.fingerprint(old[q]) for q in candidates
              if now - old[q].timestamp.timestamp() < FULL_EVERY}
    # Rounded down (a hair up for float noise): no queue is read in full more often than every FULL_EVERY on
    # average, and a few queues, a share under one, just come due at FULL_EVERY.
    share = math.floor(len(candidates) * min(1.0, max(0.0, now - prev.taken_at) / FULL_EVERY) + 1e-9)
    for q in sorted(prints, key=lambda q: old[q].timestamp)[:max(0, share - (len(candidates) - len(prints)))]:
        del prints[q]
    return prints


def _read(ctx: Ctx, names: list[str], now: float, due: set[str],
          prints: Mapping[str, str]) -> dict[str, QueueInfo | None]:
    """Per queue: its info read now, or None where its fingerprint in prints still holds; one round trip (run_many:
    on a plain client the calls are packed by asynqpy.rdb.resp, faster than redis-py's pipeline at ~15,000
    arguments). Raises the first call's error."""
    calls = queueread.calls(names, now, memory=due, fingerprints=prints, cluster=ctx.door.cluster)
    out: dict[str, QueueInfo | None] = {}
    for result in ctx.door.run_many(calls) if calls else []:
        if isinstance(result, Exception):
            raise result
        out.update(result)
    return out


def _copy(i: QueueInfo, **changes: Any) -> QueueInfo:
    """dataclasses.replace(i, **changes) without its per-field __init__, which at 1,000 queues was most of an
    incremental snapshot's Python time (the fields are checked where they are read, in queueread)."""
    out = object.__new__(QueueInfo)
    out.__dict__.update(i.__dict__, **changes)
    return out


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
    snap = _stored(ctx)
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
            snap = _stored(ctx)
            if snap is not None and _fresh(ctx, snap, seen, max_age):  # the one taken while we waited
                return snap
            if _lock(ctx, token):
                break
        else:
            return take(ctx)  # the taker is stuck: read for ourselves, without storing
    try:
        # Another taker may have stored one between our GET and our lock: use it.
        stored = _stored(ctx)
        if stored is not None and _fresh(ctx, stored, seen, max_age):
            return stored
        snap = take(ctx, stored or prev)
        raw = _dump(snap)
        ctx.command("SET", keys.SNAPSHOT, raw, "EX", KEEP)
        ctx.stored_snapshot = (raw, replace(snap, took=0.0))  # what _load(raw) gives, without decoding it
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


def _stored(ctx: Ctx) -> QueueSnapshot | None:
    """The snapshot stored in Redis (one GET), decoded only when its bytes are not those this Inspector last read
    or wrote (ctx.stored_snapshot): at 1,000 queues decoding is tens of ms, and every asker of a process reads
    the same bytes until the next snapshot."""
    raw = ctx.command("GET", keys.SNAPSHOT)
    cached = ctx.stored_snapshot
    if raw and cached is not None and cached[0] == raw:
        snap: QueueSnapshot = cached[1]
        return snap
    snap_read = _load(raw)
    if snap_read is not None:
        ctx.stored_snapshot = (raw, snap_read)
    return snap_read


_TIMES = tuple(f.name for f in fields(QueueInfo) if "datetime" in str(f.type))
# What an unchanged queue's info changes from one snapshot to the next (take): these are encoded anew each time,
# the other fields' JSON is kept per queue (_FRAGMENTS), so encoding 1,000 mostly unchanged queues is a join.
_MOVING = ("latency", "memory_usage", "oldest_retry_age", "oldest_archived_age")
_STILL = tuple(f.name for f in fields(QueueInfo) if f.name not in _MOVING)
_still_of = operator.itemgetter(*_STILL)
_FRAGMENTS: dict[str, tuple[tuple[Any, ...], str]] = {}  # queue -> (its still fields, their JSON without "}")


def _number(v: int | float | None) -> str:
    return "null" if v is None else repr(v)  # as json.dumps writes an int, a float (never NaN here) or None


def _queue_json(q: QueueInfo, fragments: dict[str, tuple[tuple[Any, ...], str]]) -> str:
    """q as a JSON object of its fields (datetimes as Unix seconds), as json.dumps of that dict would write it."""
    d = q.__dict__  # the fields (a frozen dataclass without slots)
    still = _still_of(d)
    known = _FRAGMENTS.get(q.queue)
    if known is not None and known[0] == still:
        head = known[1]
    else:
        plain = {k: (v.timestamp() if k in _TIMES and v is not None else v) for k, v in zip(_STILL, still, strict=True)}
        head = json.dumps(plain, separators=(",", ":"))[:-1]
    fragments[q.queue] = (still, head)
    return (f'{head},"latency":{_number(d["latency"])},"memory_usage":{_number(d["memory_usage"])},'
            f'"oldest_retry_age":{_number(d["oldest_retry_age"])},'
            f'"oldest_archived_age":{_number(d["oldest_archived_age"])}}}')


def _dump(s: QueueSnapshot) -> bytes:
    fragments: dict[str, tuple[tuple[Any, ...], str]] = {}
    queues = ",".join([_queue_json(q, fragments) for q in s.queues])
    _FRAGMENTS.clear()  # only the queues of this snapshot are kept
    _FRAGMENTS.update(fragments)
    head = json.dumps({"v": VERSION, "taken_at": s.taken_at, "servers": s.servers,
                       "queue_servers": dict(s.queue_servers), "workers_busy": dict(s.workers_busy)},
                      separators=(",", ":"))
    doc = f'{head[:-1]},"queues":[{queues}]}}'
    return zlib.compress(doc.encode(), 1)  # ~10x smaller: every asker GETs it


def _fields(q: dict[str, Any]) -> dict[str, Any]:
    for k in _TIMES:
        if k in q:
            q[k] = from_unix(q[k])
    q["limit_waits"] = tuple((name, n) for name, n in q["limit_waits"])  # JSON lists back to the pairs
    return q


def _load(raw: bytes | None) -> QueueSnapshot | None:
    """The stored snapshot, or None when there is none or it is not of this version (then it is retaken)."""
    if not raw:
        return None
    try:
        d = json.loads(zlib.decompress(raw))
        if d.get("v") != VERSION:
            return None
        queues = tuple(QueueInfo(**_fields(q)) for q in d["queues"])
        return QueueSnapshot(float(d["taken_at"]), queues, int(d["servers"]),
                             MappingProxyType(dict(d["queue_servers"])), MappingProxyType(dict(d["workers_busy"])))
    except (ValueError, KeyError, TypeError, zlib.error):
        return None
