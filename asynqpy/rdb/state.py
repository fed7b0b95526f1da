"""Calls for what servers and schedulers publish about themselves, and the few plain commands of loops and clients.

Lease extensions, the asynq:servers / asynq:workers / asynq:schedulers indexes, a scheduler entry's history,
a server's health note, a task's result. Each is a small script run through the runners (rdb/sync_runner.py,
rdb/async_runner.py), so every command of every loop goes through asynqpy/rdb with one error handling; task state
transitions are broker.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, KeyOrArg, script

TYPE_STATS_TTL = 72 * 3600 + 3600  # 72 h of minutes, plus the hour a 72 h view starts in
MARKS_CAP = 1000
MARKS_KEEP = 30 * 86400


def _int(raw: Any) -> int:
    return int(raw)


def _texts(raw: Sequence[bytes | str]) -> list[str]:
    return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]


def extend_leases(q: str, task_ids: Sequence[str], *, score: str) -> Call[int]:
    """Set the lease score of the tasks of q this server holds (only leases still there). Reply: how many."""
    return Call(script("extend_leases"), [keys.lease(q)], [score, *task_ids], _int)


def index_add(index: str, member: str, *, score: str | int) -> Call[int]:
    """(Re)announce member in an index (keys.SERVERS, keys.WORKERS, keys.SCHEDULERS) until score (Unix s)."""
    return Call(script("index_add"), [index], [score, member], _int)


def index_remove(index: str, member: str) -> Call[int]:
    """Take member out of an index. Reply: 1 when it was there."""
    return Call(script("index_remove"), [index], [member], _int)


def index_live(index: str, *, now: int) -> Call[list[str]]:
    """The members of an index whose expiry is now or later."""
    return Call(script("index_live"), [index], [now], _texts)


def read_scheduler_entries(list_key: str) -> Call[list[bytes]]:
    """A scheduler's published entries (protobuf SchedulerEntry bytes)."""
    return Call(script("read_scheduler_entries"), [list_key], [], list)


def record_scheduler_event(entry_id: str, event: bytes, *, at: int, cap: int) -> Call[int]:
    """Add an enqueue event to an entry's history (score: enqueue time), keeping the newest cap."""
    return Call(script("record_scheduler_event"), [keys.scheduler_history(entry_id)], [event, at, cap], _int)


def delete_scheduler_history(entry_id: str) -> Call[int]:
    return Call(script("delete_scheduler_history"), [keys.scheduler_history(entry_id)], [], _int)


def _tick(raw: Any) -> float | None:
    return None if raw is None else float(raw)


def read_tick_mark(q: str, entry_id: str) -> Call[float | None]:
    """The latest tick (Unix s) of an entry that any scheduler replica claimed, or None."""
    return Call(script("read_tick_mark"), [keys.tick_mark(q, entry_id)], [], _tick)


def register_queue(q: str) -> Call[int]:
    """Register q in asynq:queues (a producer's duty). Reply: 1 when it was new."""
    return Call(script("register_queue"), [keys.QUEUES], [q], _int)


def list_groups(q: str) -> Call[list[str]]:
    """The groups of q that hold aggregating tasks."""
    return Call(script("list_groups"), [keys.groups(q)], [], _texts)


def write_result(q: str, task_id: str, data: bytes) -> Call[bool]:
    """Store a handler's result in its task hash. Reply: False when the task no longer exists."""
    return Call(script("write_result"), [keys.task(q, task_id)], [data], lambda raw: int(raw) == 1)


def write_server_health(health_key: str, *, ttl: int, status: str, kind: str, since: int,
                        clock_offset: float | None = None, stuck_threads: int = 0) -> Call[int]:
    """Rewrite a server's health note (keys.server_health) with a ttl; clock_offset: Redis's clock minus the
    server's, in seconds (None: not measured yet); stuck_threads: handler threads still running after their
    tasks were given up."""
    offset = "" if clock_offset is None else f"{clock_offset:.6f}"
    return Call(script("write_server_health"), [health_key], [ttl, status, kind, since, offset, stuck_threads],
                _int)


def server_time() -> Call[tuple[int, int]]:
    """The Redis server's clock (TIME): (Unix s, microseconds)."""
    return Call(script("server_time"), [], [], lambda raw: (int(raw[0]), int(raw[1])))


def clear_server_health(health_key: str) -> Call[int]:
    return Call(script("clear_server_health"), [health_key], [], _int)


def record_type_stats(groups: Sequence[tuple[str, str, int, Mapping[str, int]]], *,
                      ttl: int = TYPE_STATS_TTL) -> Call[int]:
    """One script call adding groups of (queue, task type, minute, fields) to their minute and hour hashes."""
    ks: list[KeyOrArg] = [keys.TYPE_QUEUE_INDEX, keys.TYPE_INDEX]
    args: list[KeyOrArg] = [ttl]
    for queue, ttype, minute, fields in groups:
        ks += [keys.type_queue_minute(queue, ttype, minute), keys.type_queue_hour(queue, ttype, minute // 60)]
        args += [keys.type_queue_member(queue, ttype), minute, len(fields)]
        for k, v in fields.items():
            args += [k, v]
    return Call(script("record_type_stats"), ks, args, int)


def add_mark(mark: str, *, at: float) -> Call[int]:
    """Record a deploy mark (JSON text) at Unix seconds at; the newest MARKS_CAP within MARKS_KEEP are kept."""
    return Call(script("add_mark"), [keys.MARKS], [mark, repr(float(at)), MARKS_CAP, repr(float(at - MARKS_KEEP))],
                _int)


def set_cron_paused(q: str, entry_id: str, *, paused: bool, note: str = "") -> Call[bool]:
    """Pause (or resume) a scheduler entry enqueueing into q. Reply: True when its state changed."""
    return Call(script("set_cron_paused"), [keys.cron_paused(q, entry_id)], ["1" if paused else "0", note or "1"],
                lambda raw: int(raw) == 1)
