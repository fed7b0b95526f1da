"""Flow control's side of Redis: the fleet's limits and each queue's copy (read by the dequeue and hand-off
scripts), their current use, and the producers' backpressure limit of a queue (read by the enqueue scripts).

Every function takes a binary redis-py client; the Inspector and the server call them inside reaching(), so
what Redis answers comes out as asynqpy's errors.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import redis
from redis.exceptions import NoScriptError

from asynqpy.backpressure import QueueLimit
from asynqpy.errors import InvalidArgumentError
from asynqpy.limits import Limit, Usage
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, script

T = TypeVar("T")


def _queues(r: redis.Redis) -> list[str]:
    return sorted(q.decode() if isinstance(q, bytes) else str(q) for q in r.smembers(keys.QUEUES))


def set_limit(r: redis.Redis, limit: Limit, *, queues: Iterable[str] = ()) -> None:
    """Store the limit for the fleet and in every known queue (and the given ones); workers obey it at once."""
    r.hset(keys.LIMITS, limit.pattern, limit.encode())
    for q in sorted(set(_queues(r)) | set(queues)):
        run_call(r, write_queue_limits(q, {limit.pattern: limit.encode()}))


def limits(r: redis.Redis) -> list[Limit]:
    raw: dict[Any, Any] = r.hgetall(keys.LIMITS)
    out = [Limit.decode(_text(k), _text(v)) for k, v in raw.items()]
    return sorted(out, key=lambda lim: lim.pattern)


def remove_limit(r: redis.Redis, pattern: str) -> bool:
    """Drop the limit everywhere; its waiting tasks go back to pending. False when there was none."""
    existed = bool(r.hdel(keys.LIMITS, pattern))
    for q in _queues(r):
        existed = bool(run_call(r, write_queue_limits(q, {pattern: ""}))) or existed
        run_call(r, release(q, pattern))
    return existed


def write_queue_limits(q: str, changes: Mapping[Any, Any], *, replace: bool = False) -> Call[int]:
    """Queue q's copy of the limits: name -> encoded limit ('' removes it), all of them when replace. Its type
    index is dropped in the same step when the set of names changes (lua/write_limits.lua). Reply: how many of
    the given names q had."""
    args: list[Any] = ["1" if replace else ""]
    for name, raw in changes.items():
        args += [name, raw]
    return Call(script("write_limits"), [keys.queue_limits(q), keys.limit_types(q)], args, int)


def release(q: str, pattern: str) -> Call[int]:
    return Call(script("release_limit"), [keys.limit_waiting(q), keys.pending(q)],
                [f"asynqpy:{{{q}}}:", pattern, keys.task_prefix(q)], int)


def apply_defaults(r: redis.Redis, defaults: Sequence[Limit], queues: Iterable[str]) -> None:
    """At server start: code defaults go in unless a limit of that pattern is stored already (so that a
    change made with `asynqpy limit set` survives restarts); then the fleet's limits are copied to the
    server's queues (a queue created after `limit set` gets them here)."""
    for lim in defaults:
        r.hsetnx(keys.LIMITS, lim.pattern, lim.encode())
    raw: dict[Any, Any] = r.hgetall(keys.LIMITS)
    for q in queues:
        run_call(r, write_queue_limits(q, raw, replace=True))


def usage(r: redis.Redis, queue: str, limit: Limit, *, now: float | None = None) -> Usage:
    now = time.time() if now is None else now
    running, parts = 0, 0
    base = keys.limit_slots(queue, limit.pattern, "")
    # the slot keys of limit `email` begin as those of a limit `email:*` or `email:send` do: theirs are left out
    # (an unpartitioned limit has one key)
    others = [keys.limit_slots(queue, name, "") for name in map(_text, r.hkeys(keys.queue_limits(queue)))
              if name != limit.pattern and name.startswith(limit.pattern + ":")]
    for k in r.scan_iter(match=_glob(base) + "*", count=500):
        if (_text(k) != base and not limit.key) or any(_text(k).startswith(o) for o in others):
            continue
        n = holding(r.execute_command, queue, k, now)
        running += n
        parts += 1 if n else 0
    tokens: float | None = None
    if limit.rate and not limit.key:
        t, ms = r.hmget(keys.limit_bucket(queue, limit.pattern, ""), ["tokens", "ms"])
        refill = 0.0 if t is None else max(0.0, now * 1000 - float(ms or 0)) * limit.rate / 1000
        tokens = limit.bucket if t is None else min(limit.bucket, float(t) + refill)
    waiting, oldest = 0, 0.0
    head = limit.pattern + "\n"
    for m in r.zrange(keys.limit_waiting(queue), 0, -1):
        member = _text(m)
        if member.startswith(head):
            wl = keys.limit_wait_list(queue, member)
            waiting += int(r.llen(wl))
            oldest_id = r.lindex(wl, -1)
            since = r.hget(keys.task(queue, _text(oldest_id)), "pending_since") if oldest_id else None
            if since:
                oldest = max(oldest, now - int(since) / 1e9)
    total = int(r.hget(keys.limit_waits(queue), limit.pattern) or 0)
    return Usage(queue, limit, running, tokens, waiting, parts, total, max(0.0, oldest))


def holding(command: Callable[..., Any], queue: str, slots: Any, now: float) -> int:
    """How many tasks hold a slot of the zset `slots` now: those whose lease in the queue runs on, as the
    dequeue script counts them (lua/_limits.lua, room()). A finished task's entry stays in the zset, with the
    lease it had, until a fetch finds the limit full, so the zset's own scores would count it as running."""
    ids = command("ZRANGE", slots, 0, -1)
    if not ids:
        return 0
    return sum(1 for s in command("ZMSCORE", keys.lease(queue), *ids) if s is not None and float(s) > now)


def usages(r: redis.Redis) -> list[Usage]:
    """Each limit in each queue that has it, with its use now."""
    out = []
    for lim in limits(r):
        for q in _queues(r):
            if r.hexists(keys.queue_limits(q), lim.pattern):
                out.append(usage(r, q, lim))
    return out


def run_call(r: redis.Redis, call: Call[T]) -> T:
    """One script call through the client's own pool (a SyncRunner would keep a connection for itself: these are
    rare configuration writes, not a hot path)."""
    try:
        raw = r.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
    except NoScriptError:
        raw = r.eval(call.script.text, len(call.keys), *call.keys, *call.args)
    return call.parse(raw)


def _glob(s: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", s)


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def set_queue_limit(r: redis.Redis, queue: str, *, max_size: int | None = None,
                    max_latency: float | None = None) -> None:
    if max_size is None and max_latency is None:
        raise InvalidArgumentError("give max_size and/or max_latency (or clear the limit)")
    if max_size is not None and (isinstance(max_size, bool) or not isinstance(max_size, int)):
        raise InvalidArgumentError(f"max_size must be a whole number, got {max_size!r}", argument="max_size")
    if max_latency is not None and (isinstance(max_latency, bool) or not isinstance(max_latency, (int, float))
                                    or not math.isfinite(max_latency)):
        raise InvalidArgumentError(f"max_latency must be a finite number of seconds, got {max_latency!r}",
                                   argument="max_latency")
    if max_size is not None and max_size < 1:
        raise InvalidArgumentError(f"max_size must be at least 1, got {max_size!r}", argument="max_size")
    if max_latency is not None and not max_latency > 0:
        raise InvalidArgumentError(f"max_latency must be above 0 seconds, got {max_latency!r}", argument="max_latency")
    fields: dict[str, str] = {}
    if max_size is not None:
        fields["max_size"] = str(max_size)
    if max_latency is not None:
        fields["max_latency"] = repr(max_latency)
    pipe = r.pipeline(transaction=True)  # one key: a MULTI is fine in a cluster too
    pipe.delete(keys.queue_limit(queue))
    pipe.hset(keys.queue_limit(queue), mapping=fields)  # type: ignore[arg-type]
    pipe.execute()


def clear_queue_limit(r: redis.Redis, queue: str) -> bool:
    return bool(r.delete(keys.queue_limit(queue)))


def queue_limit(r: redis.Redis, queue: str) -> QueueLimit:
    size, latency = r.hmget(keys.queue_limit(queue), ["max_size", "max_latency"])
    refused = r.get(keys.queue_refused(queue))
    return QueueLimit(queue, int(size) if size is not None else None,
                      float(latency) if latency is not None else None, int(refused or 0))
