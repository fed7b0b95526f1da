"""Reads the infos of many queues in few script calls: queue_infos.lua over chunks of queues (of one slot each on
a cluster, where a script's keys must share one), a queue whose fingerprint still holds answered with a 0 and not
read further (the incremental snapshot, inspector.snapshot)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from redis.crc import key_slot

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from inspector import records
from inspector.context import from_unix
from inspector.models import QueueInfo
from inspector.scripts import script

MEMORY_SAMPLES = 20
RETRY_SAMPLES = 20  # retry tasks (due soonest) whose last failure time gives the oldest retry age
# A chunk's cost in Redis, so that no script call holds the server long (~1 ms per chunk): a queue read only to
# confirm its fingerprint costs 1, one read in full 4, one whose memory is sampled (~100 MEMORY USAGE) 40.
CHUNK_COST = 400
COST_FINGERPRINT, COST_FULL, COST_MEMORY = 1, 4, 40
STATES = ("pending", "active", "scheduled", "retry", "archived", "completed")


def fingerprint(i: QueueInfo) -> str:
    """What queue_infos.lua compares to tell an unchanged queue: its six sizes, paused flag, group count and four
    processed/failed counters, as the script joins them."""
    return (f"{i.pending},{i.active},{i.scheduled},{i.retry},{i.archived},{i.completed},{int(i.paused)},{i.groups},"
            f"{i.processed},{i.failed},{i.processed_total},{i.failed_total}")


def queue_keys(q: str, now: float) -> list[str]:
    """The 13 keys queue_infos.lua reads of queue q, in its order (the daily counters of now's UTC day)."""
    return [*(keys.state_key(q, s) for s in STATES), keys.paused(q), keys.groups(q), keys.processed_daily(q, now),
            keys.failed_daily(q, now), keys.processed_total(q), keys.failed_total(q), keys.exact_due(q)]


# (queue, UTC day) -> its keys and its two key prefixes, encoded: made once a day per queue, not per snapshot
# (as bytes, they skip the packer's per-string cache, which 15,000 strings per snapshot would only churn).
_KEYS: dict[tuple[str, str], tuple[list[bytes], list[bytes]]] = {}
KEYS_KEPT = 20_000


def _encoded(q: str, day: str, now: float) -> tuple[list[bytes], list[bytes]]:
    known = _KEYS.get((q, day))
    if known is None:
        if len(_KEYS) >= KEYS_KEPT:
            _KEYS.clear()
        known = _KEYS[(q, day)] = ([k.encode() for k in queue_keys(q, now)],
                                   [keys.task_prefix(q).encode(), keys.group_prefix(q).encode()])
    return known


def calls(names: Sequence[str], now: float, *, memory: Collection[str], fingerprints: Mapping[str, str],
          cluster: bool) -> list[Call[list[tuple[str, QueueInfo | None]]]]:
    """The script calls that read names: each parses to its queues and their infos, None for a queue whose
    fingerprint (fingerprints.get(q), none: read in full) still holds. memory: the queues whose memory is
    sampled. cluster: chunks hold queues of one hash slot only (names in slot order then)."""
    order = sorted(names, key=lambda q: key_slot(keys.pending(q).encode())) if cluster else list(names)
    out: list[Call[list[tuple[str, QueueInfo | None]]]] = []
    chunk: list[str] = []
    cost, slot = 0, -1
    for q in order:
        fp = fingerprints.get(q, "")
        c = COST_MEMORY if q in memory else COST_FINGERPRINT if fp else COST_FULL
        s = key_slot(keys.pending(q).encode()) if cluster else 0
        if chunk and (cost + c > CHUNK_COST or s != slot):
            out.append(_call(chunk, now, memory, fingerprints))
            chunk, cost = [], 0
        chunk.append(q)
        cost, slot = cost + c, s
    if chunk:
        out.append(_call(chunk, now, memory, fingerprints))
    return out


def _call(qs: list[str], now: float, memory: Collection[str],
          fingerprints: Mapping[str, str]) -> Call[list[tuple[str, QueueInfo | None]]]:
    ks: list[bytes] = []
    args: list[bytes | str | int] = [MEMORY_SAMPLES, RETRY_SAMPLES]
    day = keys.utc_date(now)
    for q in qs:
        qkeys, prefixes = _encoded(q, day, now)
        ks += qkeys
        args += [*prefixes, int(q in memory), fingerprints.get(q, "")]

    def parse(raw: Sequence[Any]) -> list[tuple[str, QueueInfo | None]]:
        return [(q, None if r == 0 else parse_queue_info(q, r, now)) for q, r in zip(qs, raw, strict=True)]

    return Call(script("queue_infos"), ks, args, parse)


def int_or_zero(v: Any) -> int:
    return int(v) if v not in (b"", "", None) else 0


def parse_queue_info(q: str, raw: Sequence[Any], now: float) -> QueueInfo:
    pending, active, scheduled, retry, archived, completed, aggregating, groups, paused = (int(x) for x in raw[:9])
    processed, failed, processed_total, failed_total = (int_or_zero(x) for x in raw[9:13])
    since = records.ns_time(raw[13] or None)
    memory = int(raw[16])
    archived_at = from_unix(records.score(raw[17]))
    retry_failed_at = from_unix(int(raw[18]) or None)
    return QueueInfo(
        queue=q, size=pending + active + scheduled + retry + archived + completed + aggregating,
        pending=pending, active=active, scheduled=scheduled, retry=retry, archived=archived, completed=completed,
        aggregating=aggregating, groups=groups, processed=processed, failed=failed,
        processed_total=processed_total, failed_total=failed_total, paused=bool(paused),
        latency=max(0.0, now - since.timestamp()) if since else 0.0, oldest_pending_since=since,
        next_scheduled_at=from_unix(records.score(raw[14])), next_retry_at=from_unix(records.score(raw[15])),
        memory_usage=memory if memory >= 0 else None, timestamp=from_unix(now) or datetime.now(UTC),
        oldest_retry_failed_at=retry_failed_at, oldest_archived_at=archived_at,
        oldest_retry_age=age(now, retry_failed_at), oldest_archived_age=age(now, archived_at),
    )


def age(now: float, t: datetime | None) -> float:
    return max(0.0, now - t.timestamp()) if t else 0.0
