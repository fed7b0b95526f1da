"""Every Redis key asynqpy reads or writes, one function each; no key string is built anywhere else.

asynq's keys (asynq:...) follow docs/asynq-spec.md section 1 exactly. Keys of our own live under
asynqpy: so that Go asynq never trips over them; per-queue ones carry the same {queue} hash tag.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

QUEUES = "asynq:queues"
SERVERS = "asynq:servers"
WORKERS = "asynq:workers"
SCHEDULERS = "asynq:schedulers"
CANCEL_CHANNEL = "asynq:cancel"
# Our own wake-up channel: producers publish the queue name so idle workers fetch at once.
WAKE_CHANNEL = "asynqpy:wake"


def queue_prefix(q: str) -> str:
    """asynq:{q}: , the prefix of every key of queue q (the braces are a Redis Cluster hash tag).

    The scripts over several queues of one node (dequeue_queues, done_queues) take only this and append the keys'
    names below (pending, paused, active, lease, t:, processed, processed:<day>) themselves;
    tests/core/test_fetch.py checks they name the keys these functions do."""
    return f"asynq:{{{q}}}:"


def task_prefix(q: str) -> str:
    return f"asynq:{{{q}}}:t:"


def task(q: str, task_id: str) -> str:
    return f"asynq:{{{q}}}:t:{task_id}"


def pending(q: str) -> str:
    return f"asynq:{{{q}}}:pending"


def active(q: str) -> str:
    return f"asynq:{{{q}}}:active"


def lease(q: str) -> str:
    return f"asynq:{{{q}}}:lease"


def scheduled(q: str) -> str:
    return f"asynq:{{{q}}}:scheduled"


def retry(q: str) -> str:
    return f"asynq:{{{q}}}:retry"


def archived(q: str) -> str:
    return f"asynq:{{{q}}}:archived"


def completed(q: str) -> str:
    return f"asynq:{{{q}}}:completed"


def paused(q: str) -> str:
    return f"asynq:{{{q}}}:paused"


def state_key(q: str, state: str) -> str:
    """The list or sorted set holding tasks of a state (not aggregating, whose tasks sit in groups)."""
    return f"asynq:{{{q}}}:{state}"


def utc_date(t: float) -> str:
    """The UTC date of Unix time t, "2024-05-01" (each acknowledgement names the day's counters: strftime is
    slow, so the day's text is kept and reused while t stays within that day)."""
    global _day
    day = _day
    if day[0] <= t < day[1]:
        return day[2]
    start = t // 86400 * 86400
    text = datetime.fromtimestamp(start, tz=UTC).strftime("%Y-%m-%d")
    _day = (start, start + 86400, text)
    return text


_day: tuple[float, float, str] = (0.0, 0.0, "")


def processed_daily(q: str, t: float) -> str:
    return f"asynq:{{{q}}}:processed:{utc_date(t)}"


def failed_daily(q: str, t: float) -> str:
    return f"asynq:{{{q}}}:failed:{utc_date(t)}"


def processed_total(q: str) -> str:
    return f"asynq:{{{q}}}:processed"


def failed_total(q: str) -> str:
    return f"asynq:{{{q}}}:failed"


def unique(q: str, task_type: str, payload: bytes | None) -> str:
    """The uniqueness lock: md5 of the payload, or a bare trailing colon for a Go nil payload."""
    if payload is None:
        return f"asynq:{{{q}}}:unique:{task_type}:"
    return f"asynq:{{{q}}}:unique:{task_type}:{hashlib.md5(payload).hexdigest()}"


def groups(q: str) -> str:
    return f"asynq:{{{q}}}:groups"


def group_prefix(q: str) -> str:
    return f"asynq:{{{q}}}:g:"


def group(q: str, name: str) -> str:
    return f"asynq:{{{q}}}:g:{name}"


def aggregation_set(q: str, name: str, set_id: str) -> str:
    return f"asynq:{{{q}}}:g:{name}:{set_id}"


def aggregation_sets(q: str) -> str:
    return f"asynq:{{{q}}}:aggregation_sets"


def waiters(q: str) -> str:
    """Our own: workers idle on queue q (member = server id, score = registration expiry, Unix s)."""
    return f"asynqpy:{{{q}}}:waiters"


def exact_due(q: str) -> str:
    """Our own: the exact due times (Unix s, ms) of the scheduled and retry tasks we wrote (member = task id);
    asynq's sets hold them rounded up to whole seconds."""
    return f"asynqpy:{{{q}}}:due"


def handoff_prefix(q: str) -> str:
    return f"asynqpy:{{{q}}}:handoff:"


def handoff(q: str, server_id: str) -> str:
    """Our own: the list on which an idle worker blocks for tasks handed to it by enqueue scripts."""
    return f"asynqpy:{{{q}}}:handoff:{server_id}"


# Flow control (asynqpy/limits.py, lua/_limits.lua). The limits themselves: one hash for the fleet (what
# `asynqpy limit ls` shows) and a copy per queue under the queue's hash tag, which its dequeue script reads.
LIMITS = "asynqpy:limits"


def queue_limits(q: str) -> str:
    return f"asynqpy:{{{q}}}:limits"


def queue_limit(q: str) -> str:
    """Producer backpressure of queue q: max_size, max_latency (asynqpy/backpressure.py, lua/_room.lua)."""
    return f"asynqpy:{{{q}}}:qlimit"


def queue_refused(q: str) -> str:
    """How many enqueues the backpressure limit of q refused (a counter)."""
    return f"asynqpy:{{{q}}}:refused"


def limit_slots(q: str, name: str, part: str) -> str:
    """The tasks holding a concurrency slot of limit `name` (partition part), scored by lease expiry."""
    return f"asynqpy:{{{q}}}:lslot:{name}:{part}"


def limit_bucket(q: str, name: str, part: str) -> str:
    return f"asynqpy:{{{q}}}:ltok:{name}:{part}"


def limit_waiting(q: str) -> str:
    """The limit partitions (name \n part) with tasks waiting, scored by when to look at them again."""
    return f"asynqpy:{{{q}}}:lwaiting"


def limit_waits(q: str) -> str:
    """Limit name -> how many times a task was held back by it (a counter)."""
    return f"asynqpy:{{{q}}}:lwaits"


def limit_wait_list(q: str, member: str) -> str:
    return f"asynqpy:{{{q}}}:lwait:{member}"


def limit_types(q: str) -> str:
    """The type index of q's limits: task type -> the names of the limits it matches (filled by the dequeue
    and hand-off scripts, dropped when the queue's limits change: lua/_limits.lua, lua/write_limits.lua)."""
    return f"asynqpy:{{{q}}}:ltypes"


def server_info(host: str, pid: int, server_id: str) -> str:
    return f"asynq:servers:{{{host}:{pid}:{server_id}}}"


def workers(host: str, pid: int, server_id: str) -> str:
    return f"asynq:workers:{{{host}:{pid}:{server_id}}}"


def server_health(host: str, pid: int, server_id: str) -> str:
    """Our own: a server's health note (hash: status "ok" or "degraded: ...", kind, since, clock_offset),
    beside asynq's server info (whose protobuf we leave as Go writes it); same hash tag as the server's keys."""
    return f"asynqpy:health:{{{host}:{pid}:{server_id}}}"


def server_health_of(server_info_key: str) -> str:
    """The health note's key of the server whose asynq:servers:{host:pid:id} key this is (what the
    asynq:servers index lists), so a reader needs no decoded server info to find it."""
    return "asynqpy:health:" + server_info_key.removeprefix("asynq:servers:")


def scheduler_entries(scheduler_id: str) -> str:
    return f"asynq:schedulers:{{{scheduler_id}}}"


def scheduler_history(entry_id: str) -> str:
    return f"asynq:scheduler_history:{entry_id}"


def tick_mark(q: str, entry_id: str) -> str:
    """Our own: the latest tick of a scheduler entry that any replica claimed (Unix s), in the queue's slot."""
    return f"asynqpy:{{{q}}}:lasttick:{entry_id}"


def tick_claim(q: str, entry_id: str, tick: int) -> str:
    """Our own: the claim of one tick of a scheduler entry (value: the scheduler id), with an expiry."""
    return f"asynqpy:{{{q}}}:tick:{entry_id}:{tick}"


def cron_paused(q: str, entry_id: str) -> str:
    """Our own: present while an operator has paused a scheduler entry (every replica's claim script reads it)."""
    return f"asynqpy:{{{q}}}:cronpaused:{entry_id}"


def scheduler_ours(list_key: str) -> str:
    """Our own: a marker beside an asynqpy scheduler's entry list (asynq:schedulers:{id}), same slot and
    expiry, so readers tell our schedulers (which honour pause) from Go's."""
    return "asynqpy:" + list_key.removeprefix("asynq:")


# -- per-task-type aggregates written by the workers' outcome hook (asynqpy.typestats), one hash tag

# zset: JSON [queue, task type] -> the last minute (Unix min) that type was recorded in that queue
TYPE_QUEUE_INDEX = "asynqpy:{types}:qindex"
MARKS = "asynqpy:{types}:marks"  # zset: deploy marks (JSON members), scored by their Unix seconds


def type_queue_minute(queue: str, task_type: str, minute: int) -> str:
    """One task type's counters and histogram buckets in one queue for one minute (minute: Unix seconds // 60).
    The queue's length comes first, so no (queue, type) pair's key is another's."""
    return f"asynqpy:{{types}}:qm:{minute}:{len(queue)}:{queue}:{task_type}"


def type_queue_hour(queue: str, task_type: str, hour: int) -> str:
    """The same counters summed over one hour (hour: Unix seconds // 3600), for the 24 h and 72 h views."""
    return f"asynqpy:{{types}}:qh:{hour}:{len(queue)}:{queue}:{task_type}"


def type_queue_member(queue: str, task_type: str) -> str:
    """A (queue, task type) pair as a member of TYPE_QUEUE_INDEX: compact JSON, so any names round-trip."""
    return json.dumps([queue, task_type], separators=(",", ":"), ensure_ascii=False)


# Before per-queue roles the aggregates had no queue: workers of earlier versions still write these (readers
# count them only for users who may see every queue; they expire within 72 h of the last such worker).
TYPE_INDEX = "asynqpy:{types}:index"  # zset: task type -> the last minute (Unix min) it was recorded


def type_minute(task_type: str, minute: int) -> str:
    """Earlier workers' counters of one task type (every queue) for one minute."""
    return f"asynqpy:{{types}}:m:{minute}:{task_type}"


def type_hour(task_type: str, hour: int) -> str:
    """Earlier workers' counters of one task type (every queue) for one hour."""
    return f"asynqpy:{{types}}:h:{hour}:{task_type}"


# -- the Inspector's and the dashboard's own keys (each family under one hash tag: a cluster keeps it in one slot)

# The shared queue snapshot (compressed JSON) and the lock its one taker holds.
SNAPSHOT = "asynqpy:{snapshot}:queues"
SNAPSHOT_LOCK = "asynqpy:{snapshot}:queues:lock"
# Per queue, its last memory estimate and when it was taken ("bytes:unix seconds"): sampled once a minute at most,
# by whichever process takes the snapshot.
SNAPSHOT_MEMORY = "asynqpy:{snapshot}:memory"
# Queue-size samples for the dashboard's chart: per queue, and summed over queues.
SIZE_SAMPLES = "asynqpy:{sizes}"
SIZE_TOTALS = "asynqpy:{sizes}:total"
# Background jobs (replay, archive or delete every task of a state), newest last by start time.
JOBS = "asynqpy:{jobs}"


def size_slot(slot: int) -> str:
    """Our own: the claim of one sampling interval (SET NX), so one process of many writes its sample."""
    return f"asynqpy:{{sizes}}:slot:{slot}"


def job(job_id: str) -> str:
    """Our own: one background job's hash (action, queue, state, counts, status)."""
    return f"asynqpy:{{jobs}}:job:{job_id}"


def job_step(q: str, job_id: str) -> str:
    """Our own: the receipt of a background job's last chunk on queue q (its sequence number and reply), in the
    queue's slot so the chunk's own script writes it; a chunk sent again after a lost reply is answered from it."""
    return f"asynqpy:{{{q}}}:jobstep:{job_id}"


def web_session(digest: str) -> str:
    """Our own: a dashboard login session's hash, named by a digest of its id (never the cookie's id itself)."""
    return f"asynqpy:{{web}}:session:{digest}"


# Our own: a counter every end of a session bumps (logout, a user's sessions ended), so each app process, which
# keeps the sessions it checked in memory, learns with one GET that it must read them afresh.
WEB_SESSIONS_EPOCH = "asynqpy:{web}:sessions-epoch"


def web_user_sessions(user: str) -> str:
    """Our own: the set of a user's session keys, so a password change ends them all."""
    return f"asynqpy:{{web}}:user-sessions:{user}"


def login_throttle(kind: str, who: str) -> str:
    """Our own: a login-throttle counter: kind "pair" (account|address), "addr", "device" or "account"
    (see inspector.throttle)."""
    return f"asynqpy:{{web}}:throttle:{kind}:{who}"


# The dashboard's audit log (inspector.audit, inspector.auditrefused): one slot for all of it.
AUDIT_STREAM = "asynqpy:{audit}"
AUDIT_HEAD = "asynqpy:{audit}:head"
AUDIT_TRIM_LOCK = "asynqpy:{audit}:trimming"
# Refused requests: the index of windows (a sorted set by window start) and each window's aggregates.
AUDIT_REFUSED = "asynqpy:{audit}:refused"


def audit_refused_window(start: int) -> str:
    """Our own: the aggregates of refused requests of the window starting at start (Unix s)."""
    return f"asynqpy:{{audit}}:refused:{start}"
