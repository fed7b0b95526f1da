"""The Inspector's read side beyond single queues: servers and their workers, scheduler entries and their
history, aggregation groups, and the Redis server's own health."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from google.protobuf.message import DecodeError

from asynqpy.errors import RedisCommandError
from asynqpy.options import check_text
from asynqpy.rdb import keys
from asynqpy.rdb.syncdoor import Batch
from asynqpy.wire import SchedulerEnqueueEvent as PbEvent
from asynqpy.wire import SchedulerEntry as PbEntry
from asynqpy.wire import ServerInfo as PbServer
from asynqpy.wire import TaskMessage as PbMessage
from asynqpy.wire import WorkerInfo as PbWorker
from asynqpy.wire import timestamp_to_datetime
from inspector.context import Ctx, check_page, check_queue_name, queue_missing, text
from inspector.models import (
    ActiveWorker,
    Finding,
    GroupInfo,
    RedisInfo,
    SchedulerEnqueueEvent,
    SchedulerEntry,
    ServerInfo,
    UniqueLock,
)

MEMORY_WARN_RATIO = 0.9
PRIMARIES = "primaries"  # redis-py's name for every primary of a cluster (target_nodes=)


def _parse(cls: Any, data: bytes | None) -> Any:
    """A decoded protobuf message, or None for missing or undecodable bytes (a bad entry is skipped)."""
    if data is None:
        return None
    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, ValueError):
        return None
    return msg


def _offset(raw: bytes | None) -> float | None:
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _worker(w: Any) -> ActiveWorker:
    return ActiveWorker(task_id=w.task_id, task_type=w.task_type, task_payload=bytes(w.task_payload),
                        queue=w.queue, started=timestamp_to_datetime(w.start_time),
                        deadline=timestamp_to_datetime(w.deadline))


def servers(ctx: Ctx) -> list[ServerInfo]:
    """Live servers (heartbeat not expired), with their running tasks, sorted by host and pid."""
    now = ctx.now()
    skeys, wkeys = ctx.read(lambda b: (b.command("ZRANGEBYSCORE", keys.SERVERS, now, "+inf"),
                                       b.command("ZRANGEBYSCORE", keys.WORKERS, now, "+inf")))
    if not skeys:
        return []

    def fill(b: Batch) -> None:
        for k in skeys:
            b.command("GET", k)
        for k in skeys:  # our own health note beside it (asynqpy servers; none for Go's)
            b.command("HMGET", keys.server_health_of(text(k)), "status", "clock_offset", "stuck_threads")
        for k in wkeys:
            b.command("HVALS", k)

    out = ctx.read(fill)
    n = len(skeys)
    notes = out[n:2 * n]
    by_server: dict[str, list[ActiveWorker]] = {}
    for vals in out[2 * n:]:
        for data in vals:
            w = _parse(PbWorker, data)
            if w is not None:
                by_server.setdefault(w.server_id, []).append(_worker(w))
    result = []
    for data, (status, offset, stuck) in zip(out[:n], notes, strict=True):
        s = _parse(PbServer, data)
        if s is None:
            continue
        workers = sorted(by_server.get(s.server_id, []), key=lambda w: (w.started is None, w.started, w.task_id))
        result.append(ServerInfo(
            id=s.server_id, host=s.host, pid=s.pid, concurrency=s.concurrency,
            queues=MappingProxyType(dict(s.queues)), strict_priority=s.strict_priority,
            started=timestamp_to_datetime(s.start_time), status=s.status, active_workers=tuple(workers),
            degraded=_degraded(text(status) if status else ""), clock_offset=_offset(offset),
            stuck_threads=int(stuck or 0)))
    return sorted(result, key=lambda s: (s.host, s.pid, s.id))


def _degraded(status: str) -> str:
    """What a server's health note says of Redis trouble ("degraded: Redis answers BUSY since 12 s"), "" when
    it says "ok" or there is none (Go asynq's servers, older asynqpy ones)."""
    return status if status.startswith("degraded") else ""


def _scheduler_id(key: str) -> str:
    prefix = keys.SCHEDULERS + ":{"
    return key[len(prefix):-1] if key.startswith(prefix) and key.endswith("}") else key


def scheduler_entries(ctx: Ctx) -> list[SchedulerEntry]:
    """Entries of live schedulers, sorted by spec and type."""
    now = ctx.now()
    skeys = ctx.command("ZRANGEBYSCORE", keys.SCHEDULERS, now, "+inf")
    if not skeys:
        return []
    lists = ctx.read(lambda b: [b.command("LRANGE", k, 0, -1) for k in skeys])
    out = []
    for k, items in zip(skeys, lists, strict=True):
        for data in items:
            e = _parse(PbEntry, data)
            if e is None:
                continue
            out.append(SchedulerEntry(
                id=e.id, spec=e.spec, task_type=e.task_type, task_payload=bytes(e.task_payload),
                opts=tuple(e.enqueue_options), next_enqueue_at=timestamp_to_datetime(e.next_enqueue_time),
                prev_enqueue_at=timestamp_to_datetime(e.prev_enqueue_time), scheduler_id=_scheduler_id(text(k))))
    return sorted(out, key=lambda e: (e.spec, e.task_type, e.id))


def scheduler_history(ctx: Ctx, entry_id: str, *, page: int, size: int) -> list[SchedulerEnqueueEvent]:
    """Enqueue events of a scheduler entry, newest first."""
    check_text(entry_id, "entry_id")
    start, stop = check_page(page, size)
    raw = ctx.command("ZREVRANGE", keys.scheduler_history(entry_id), start, stop)
    out = []
    for data in raw:
        ev = _parse(PbEvent, data)
        if ev is not None:
            out.append(SchedulerEnqueueEvent(ev.task_id, timestamp_to_datetime(ev.enqueue_time)))
    return out


def groups(ctx: Ctx, q: str) -> list[GroupInfo]:
    """The queue's aggregation groups with their sizes, sorted by name. Raises QueueNotFoundError."""
    check_queue_name(q)
    known, names = ctx.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, q), b.command("SMEMBERS", keys.groups(q))))
    if not known:
        raise queue_missing(q)
    ordered = sorted(text(g) for g in names)
    sizes = ctx.read(lambda b: [b.command("ZCARD", keys.group(q, g)) for g in ordered])
    return [GroupInfo(g, int(n)) for g, n in zip(ordered, sizes, strict=True)]


def redis_info(ctx: Ctx) -> RedisInfo:
    """INFO and the persistence settings, with warnings for settings that can lose tasks."""
    if ctx.door.cluster:
        info, save = _cluster_info(ctx)
    else:
        info, save = ctx.command("INFO"), _config_save(ctx)
    server = "valkey" if "valkey_version" in info else "redis"
    version = str(info.get("valkey_version") or info.get("redis_version") or "")
    mode = str(info.get("redis_mode") or info.get("server_mode") or "standalone")
    aof = bool(int(info.get("aof_enabled", 0) or 0))
    persistence = _persistence(save, aof)
    used, maxmem = int(info.get("used_memory", 0) or 0), int(info.get("maxmemory", 0) or 0)
    policy = str(info.get("maxmemory_policy", ""))
    return RedisInfo(
        server=server, version=version, mode=mode,
        uptime_seconds=int(info.get("uptime_in_seconds", 0) or 0),
        connected_clients=int(info.get("connected_clients", 0) or 0), used_memory=used,
        used_memory_human=str(info.get("used_memory_human", "")),
        used_memory_peak=int(info.get("used_memory_peak", 0) or 0), maxmemory=maxmem, maxmemory_policy=policy,
        fragmentation_ratio=float(info.get("mem_fragmentation_ratio", 0) or 0), persistence=persistence,
        warnings=tuple(redis_warnings(policy, persistence, used, maxmem)), raw=MappingProxyType(dict(info)))


SUMMED = ("connected_clients", "used_memory", "used_memory_peak", "maxmemory")


def _cluster_info(ctx: Ctx) -> tuple[dict[str, Any], bool | None]:
    """One INFO for the cluster: the first primary's fields, memory and clients summed over the primaries,
    the shortest uptime, AOF only when every primary has it; `nodes` counts the primaries."""
    per_node: dict[str, Any] = ctx.command("INFO", target_nodes=PRIMARIES)
    infos = [per_node[k] for k in sorted(per_node)]
    out = dict(infos[0])
    for k in SUMMED:
        out[k] = sum(int(i.get(k, 0) or 0) for i in infos)
    out["uptime_in_seconds"] = min(int(i.get("uptime_in_seconds", 0) or 0) for i in infos)
    out["aof_enabled"] = int(all(int(i.get("aof_enabled", 0) or 0) for i in infos))
    out["redis_mode"] = "cluster"
    out["nodes"] = len(infos)
    try:
        cfgs = ctx.command("CONFIG GET", "save", target_nodes=PRIMARIES)
        save: bool | None = all(_save_set(c) for c in cfgs.values())
    except RedisCommandError:  # CONFIG refused (managed services): unknown
        save = None
    return out, save


def _persistence(save: bool | None, aof: bool) -> str:
    """rdb, aof, rdb+aof, none, or unknown (when the snapshot setting cannot be read and AOF is off)."""
    parts = [name for name, on in (("rdb", save), ("aof", aof)) if on]
    if parts:
        return "+".join(parts)
    return "unknown" if save is None else "none"


def _config_save(ctx: Ctx) -> bool | None:
    """Whether RDB snapshots are configured; None when CONFIG is not allowed (managed services)."""
    try:
        cfg = ctx.command("CONFIG GET", "save")
    except RedisCommandError:  # CONFIG refused (managed services, renamed commands): unknown
        return None
    return _save_set(cfg)


def _save_set(cfg: Any) -> bool:
    vals: dict[Any, Any] = dict(cfg)
    return bool(text(vals.get("save", vals.get(b"save", b""))).strip())


def redis_warnings(policy: str, persistence: str, used: int, maxmem: int) -> list[Finding]:
    out = []
    if policy and policy != "noeviction":
        out.append(Finding("warn", "eviction_policy",
                           f"maxmemory-policy is {policy!r}: under memory pressure Redis evicts keys, and with them "
                           "tasks; asynq needs 'noeviction'"))
    if persistence == "none":
        out.append(Finding("warn", "no_persistence",
                           "neither RDB snapshots nor AOF are enabled: a Redis restart loses every task"))
    if maxmem and used >= MEMORY_WARN_RATIO * maxmem:
        out.append(Finding("warn", "memory_near_limit",
                           f"used memory is {used * 100 // maxmem}% of maxmemory: new tasks will be refused "
                           "(noeviction) or keys evicted"))
    return out


def scheduler_history_size(ctx: Ctx, entry_id: str) -> int:
    """How many enqueue events of the entry are kept (the history's pager says "30 of N")."""
    check_text(entry_id, "entry_id")
    (n,) = ctx.read(lambda b: b.command("ZCARD", keys.scheduler_history(entry_id)))
    return int(n)


def unique_lock(ctx: Ctx, queue: str, task_id: str) -> UniqueLock | None:
    """The uniqueness lock of a task enqueued with unique= (Go's Unique option), or None for a task without
    one. The lock key is the one the task's message names, so Go-written tasks are read the same way."""
    check_queue_name(queue)
    (data,) = ctx.read(lambda b: b.command("HGET", keys.task(queue, task_id), "msg"))
    msg = _parse(PbMessage, data)
    if msg is None or not msg.unique_key:
        return None
    holder, ttl_ms = ctx.read(lambda b: b.command("GET", msg.unique_key).command("PTTL", msg.unique_key))
    return UniqueLock(key=msg.unique_key, held_by=text(holder) if holder is not None else None,
                      ttl=ttl_ms / 1000 if isinstance(ttl_ms, int) and ttl_ms >= 0 else None)
