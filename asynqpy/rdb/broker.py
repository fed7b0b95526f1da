"""Builds the script Calls for every task state transition and turns their reply codes into typed errors.

Each function returns a Call; a SyncRunner or AsyncRunner runs it (alone or pipelined), so the Client,
AsyncClient, Server and Inspector share one definition of every transition.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from asynqpy.errors import DuplicateTaskError, TaskIDConflictError, queue_full
from asynqpy.options import EnqueueOptions
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, Script, script
from asynqpy.wire import TaskMessage

STATS_TTL = 90 * 24 * 3600
ARCHIVE_MAX_AGE = 90 * 24 * 3600
ARCHIVE_MAX_SIZE = 10000
# The lease a task handed to an idle worker starts with (asynq's lease); the worker's heartbeat then keeps it.
HANDOFF_LEASE = 30.0
# An exact due time of ours this long past is dropped by the next schedule or retry (see lua/_due.lua).
STALE_EXACT = 60.0


def due(t: float) -> str:
    """A score in asynq's sorted sets for a due or expiry time: whole Unix seconds, rounded UP.

    Every asynq release writes whole seconds and releases before v0.26 (and asynqmon) cannot read anything
    else; rounding up means that no Go forwarder starts a task before its time. Our own forwarder reads the
    exact time from exact() (see lua/_due.lua).
    """
    return str(math.ceil(t))


def at(t: float) -> str:
    """A score in asynq's sorted sets for when something happened (archived, added to a group, completed):
    whole Unix seconds, truncated, as Go's time.Unix() writes it."""
    return str(math.floor(t))


def exact(t: float) -> str:
    """A score in our own sorted sets (asynqpy:...): Unix seconds rounded UP to the millisecond.

    Millisecond scores also print in plain decimal notation on every server: with 17 significant digits
    Valkey 8 prints some scores in exponent form (1.7959996474042661e+9).
    """
    return repr(math.ceil(t * 1000) / 1000)


def not_after(t: float) -> str:
    """A bound for "now" or a cutoff in a comparison: rounded DOWN to the millisecond, so it never runs ahead."""
    return repr(math.floor(t * 1000) / 1000)


def build_message(task_type: str, payload: bytes | None, headers: Mapping[str, str],
                  opts: EnqueueOptions, *, task_id: str | None = None) -> TaskMessage:
    """The TaskMessage asynq would write for a task with these checked options (and task_id, else theirs).

    payload None is Go's nil payload: stored as empty bytes, its unique key has no checksum.
    """
    msg = TaskMessage(
        type=task_type, payload=payload or b"", id=task_id or opts.task_id, queue=opts.queue, retry=opts.max_retry,
        timeout=opts.timeout, deadline=opts.deadline, retention=opts.retention, group_key=opts.group,
    )
    if opts.unique_ttl:
        msg.unique_key = keys.unique(opts.queue, task_type, payload)
    for k, v in headers.items():
        msg.headers[k] = v
    return msg


def enqueue_reply(queue: str, task_id: str) -> Callable[[Any], None]:
    def parse(raw: Any) -> None:
        if isinstance(raw, bytes | str) and raw[:5] in (b"full:", "full:"):  # backpressure (lua/_room.lua)
            raise queue_full(queue, raw, task_id)
        code = int(raw)
        if code == -1:
            raise DuplicateTaskError(f"task already exists in queue {queue!r} (unique lock held)",
                                     queue=queue, task_id=task_id)
        if code == 0:
            raise TaskIDConflictError(f"task id {task_id!r} conflicts with another task in queue {queue!r}",
                                      queue=queue, task_id=task_id)
    return parse


def enqueue(msg: TaskMessage, opts: EnqueueOptions, *, now: float, wake: bool = True,
            admitted: bool = False) -> Call[None]:
    """The Call that stores a new task in pending, scheduled or its group, as asynq routes it.

    The reply parser raises QueueFullError (past the queue's backpressure limit), DuplicateTaskError (unique
    lock held) or TaskIDConflictError (id exists). admitted: a plain task that is not checked against the
    backpressure limit (the aggregator's task, made of a group's tasks that were counted when added).
    """
    call = enqueue_call(msg.SerializeToString(), msg.id, msg.unique_key, opts, now=now, wake=wake)
    if admitted:
        if call.script.name != "enqueue":
            raise ValueError(f"admitted applies to a plain enqueue, not {call.script.name}")
        call = Call(call.script, call.keys, [*call.args, "1"], call.parse)
    return call


@lru_cache(maxsize=256)
def _queue_keys(q: str) -> tuple[str, str, str, str, str, str, str, str, str]:
    return (keys.pending(q), keys.waiters(q), keys.paused(q), keys.active(q), keys.lease(q), keys.task_prefix(q),
            keys.handoff_prefix(q), keys.scheduled(q), keys.exact_due(q))


def enqueue_call(data: bytes, tid: str, unique_key: str, opts: EnqueueOptions, *, now: float,
                 wake: bool = True) -> Call[None]:
    """enqueue() from the message's bytes, id and unique key (rdb/packer.py fills in placeholders)."""
    q = opts.queue
    pending, waiters, paused, active, lease, task_prefix, handoff_prefix, scheduled, exact_due = _queue_keys(q)
    task_key = task_prefix + tid
    channel = keys.WAKE_CHANNEL if wake else ""
    parse = enqueue_reply(q, tid)
    if opts.process_in > 0 or opts.process_at > now:
        # process_in goes as the delay: the script adds it to Redis's clock, so the producer's clock does not
        # matter; process_at is absolute, as the user gave it.
        at_arg, in_arg = ("", math.ceil(opts.process_in * 1000)) if opts.process_in > 0 else (exact(opts.process_at), 0)
        if opts.unique_ttl:
            wait = opts.process_in if opts.process_in > 0 else opts.process_at - now
            ttl = max(1, int(wait + opts.unique_ttl))
            return Call(script("schedule_unique"), [unique_key, task_key, scheduled, exact_due],
                        [tid, ttl, at_arg, data, channel, q, in_arg, int(STALE_EXACT)], parse)
        return Call(script("schedule"), [task_key, scheduled, exact_due],
                    [data, at_arg, tid, channel, q, in_arg, int(STALE_EXACT)], parse)
    if opts.group:
        k = [task_key, keys.group(q, opts.group), keys.groups(q)]
        a: list[Any] = [data, tid, at(now), opts.group]
        if opts.unique_ttl:
            k.append(unique_key)
            a.append(opts.unique_ttl)
        return Call(script("add_to_group"), k, a, parse)
    hand_keys = [waiters, paused, active, lease]
    hand_args: list[Any] = [int(HANDOFF_LEASE), task_prefix, handoff_prefix]
    if opts.unique_ttl:
        return Call(script("enqueue_unique"), [unique_key, task_key, pending, *hand_keys],
                    [tid, opts.unique_ttl, data, channel, q, *hand_args], parse)
    return Call(script("enqueue"), [task_key, pending, *hand_keys], [data, tid, channel, q, *hand_args], parse)


def enqueue_many_call(tasks: Sequence[tuple[str, bytes]], opts: EnqueueOptions, *, now: float,
                      wake: bool = True) -> Call[list[int]]:
    """The Call that stores several new tasks (id, msg bytes) with plain options (no schedule, group or unique)
    in pending, then hands the oldest pending tasks to idle workers of ours or wakes workers. Reply: a code per
    task, as enqueue's script returns it (1 enqueued, 0 the id exists)."""
    q = opts.queue
    pending, waiters, paused, active, lease, task_prefix, handoff_prefix, _, _ = _queue_keys(q)
    args: list[Any] = [keys.WAKE_CHANNEL if wake else "", q, int(HANDOFF_LEASE), task_prefix, handoff_prefix]
    for tid, data in tasks:
        args += [tid, data]
    return Call(script("enqueue_many"), [pending, waiters, paused, active, lease], args, list)


def parse_handoff(item: bytes) -> tuple[str, bytes]:
    """(task id, msg bytes) from a hand-off list element "<id length>:<id><msg>"."""
    head, _, rest = item.partition(b":")
    n = int(head)
    return rest[:n].decode(), rest[n:]


def _pairs(raw: Sequence[bytes]) -> list[tuple[str, bytes]]:
    return [(raw[i].decode(), raw[i + 1]) for i in range(0, len(raw), 2)]


def dequeue(q: str, *, lease_expiry: float, count: int) -> Call[list[tuple[str, bytes]]]:
    """Move up to count pending tasks of q to active with a lease. Reply: [(id, msg bytes)]."""
    return Call(script("dequeue"), [keys.pending(q), keys.paused(q), keys.active(q), keys.lease(q)],
                [due(lease_expiry), keys.task_prefix(q), count], _pairs)


def _triples(raw: Sequence[bytes]) -> list[tuple[str, bytes, float | None]]:
    return [(raw[i].decode(), raw[i + 1], int(raw[i + 2]) / 1e9 if raw[i + 2] else None)
            for i in range(0, len(raw), 3)]


def dequeue_timed(q: str, *, lease_expiry: float, count: int) -> Call[list[tuple[str, bytes, float | None]]]:
    """dequeue, with when each task became pending. Reply: [(id, msg bytes, pending_since Unix s or None)]."""
    return Call(script("dequeue"), [keys.pending(q), keys.paused(q), keys.active(q), keys.lease(q)],
                [due(lease_expiry), keys.task_prefix(q), count, "1"], _triples)


def _quads(raw: Sequence[bytes]) -> list[tuple[str, bytes, float | None, str | None]]:
    return [(raw[i].decode(), raw[i + 1], int(raw[i + 2]) / 1e9 if raw[i + 2] else None,
             raw[i + 3].decode() if raw[i + 3] else None) for i in range(0, len(raw), 4)]


def dequeue_waited(q: str, *, lease_expiry: float, count: int, server_id: str | None = None,
                   offered: bool = False) -> Call[list[tuple[str, bytes, float | None, str | None]]]:
    """dequeue_timed, with the limit each task waited on (see lua/_limits.lua). Reply: [(id, msg bytes,
    pending_since Unix s or None, the limit's name or None when it did not wait)].
    server_id: the fetching server's: what enqueue scripts handed to it comes first; offered: its registration on
    q stood as far as it knows (then the slot of a hand-off its lane took is left to the lane; see
    lua/_dequeue.lua)."""
    pending, paused, active, lease, prefix = _dequeue_keys(q)
    if server_id is None:
        return Call(script("dequeue"), [pending, paused, active, lease], [due(lease_expiry), prefix, count, "2"],
                    _quads)
    box, waiters = _offer_keys(q, server_id)
    return Call(script("dequeue"), [pending, paused, active, lease, box, waiters],
                [due(lease_expiry), prefix, count, "2", server_id, "1" if offered else "0"], _quads)


def dequeue_queues(shares: Sequence[tuple[str, int]], *, lease_expiry: float, count: int, server_id: str | None = None,
                   offered: bool = False) -> Call[list[tuple[str, str, bytes, float | None, str | None]]]:
    """dequeue_timed from several queues in one call: each (queue, share) takes up to its share, in the order
    given, then what is left of count comes from the queues in that order again. Only where every queue's keys
    live on one node (not on a cluster: their hash tags differ). Each queue is named by its key prefix alone (the
    script appends its keys' names), so a fetch over many queues sends two arguments per queue. server_id, offered:
    as dequeue_waited's, for every queue of the call (the script builds its hand-off list and waiters keys).
    Reply: [(queue, id, msg, pending_since or None, the limit the task waited on or None)]."""
    args: list[Any] = [due(lease_expiry), count, server_id or "", "1" if offered else "0"]
    for q, share in shares:
        args += [_queue_prefix(q), share]
    names = [q for q, _ in shares]

    def parse(raw: Sequence[Any]) -> list[tuple[str, str, bytes, float | None, str | None]]:
        return [(names[int(raw[i]) - 1], raw[i + 1].decode(), raw[i + 2], int(raw[i + 3]) / 1e9 if raw[i + 3] else None,
                 raw[i + 4].decode() if raw[i + 4] else None) for i in range(0, len(raw), 5)]
    return Call(script("dequeue_queues"), [], args, parse)


@lru_cache(maxsize=1024)
def _dequeue_keys(q: str) -> tuple[str, str, str, str, str]:
    """A queue's pending, paused, active and lease keys and its task key prefix (built once per queue, not per
    fetch: a busy drain's every dequeue names them)."""
    return keys.pending(q), keys.paused(q), keys.active(q), keys.lease(q), keys.task_prefix(q)


@lru_cache(maxsize=4096)
def _offer_keys(q: str, server_id: str) -> tuple[str, str]:
    """The server's hand-off list of q and q's waiters (built once per queue and server)."""
    return keys.handoff(q, server_id), keys.waiters(q)


@lru_cache(maxsize=4096)
def _queue_prefix(q: str) -> str:
    """keys.queue_prefix(q), built once per queue (a worker of 100 queues names them in every fetch and ack)."""
    return keys.queue_prefix(q)


def _ids(raw: Sequence[bytes]) -> list[str]:
    return [r.decode() for r in raw]


def done(q: str, items: Sequence[tuple[str, str]], *, now: float) -> Call[list[str]]:
    """Delete finished tasks (id, unique key or '') and count them. Reply: the ids this worker no longer held."""
    active, lease, total, prefix = _done_keys(q)
    args: list[Any] = [int(now) + STATS_TTL, prefix]
    for pair in items:
        args += pair
    return Call(script("done"), [active, lease, keys.processed_daily(q, now), total], args, _ids)


@lru_cache(maxsize=1024)
def _done_keys(q: str) -> tuple[str, str, str, str]:
    """A queue's active, lease and all-time processed keys and its task key prefix (once per queue, not per
    acknowledgement batch)."""
    return keys.active(q), keys.lease(q), keys.processed_total(q), keys.task_prefix(q)


def done_queues(batches: Sequence[tuple[str, Sequence[tuple[str, str]]]], *, now: float) -> Call[list[str]]:
    """done() for the tasks of several queues in one call (each (queue, [(id, unique key)])). Only where every
    queue's keys live on one node (not on a cluster). Each queue is named by its key prefix alone (the script
    appends its keys' names and the day's), so a batch over many queues sends two arguments per queue besides
    each task's two. Reply: the ids this worker no longer held."""
    args: list[Any] = [int(now) + STATS_TTL, keys.utc_date(now)]
    add = args.extend
    for q, items in batches:
        add((_queue_prefix(q), len(items)))
        for pair in items:
            add(pair)
    return Call(script("done_queues"), [], args, _ids)


def mark_complete(q: str, items: Sequence[tuple[str, float, bytes, str]], *, now: float) -> Call[list[str]]:
    """Move finished tasks (id, expiry, msg with completed_at, unique key) to completed. Reply: lost ids.

    The completed score is the expiry in whole seconds, truncated as Go writes completed_at + retention."""
    args: list[Any] = [int(now) + STATS_TTL, keys.task_prefix(q)]
    for tid, expiry, data, ukey in items:
        args += [tid, at(expiry), data, ukey]
    return Call(script("mark_complete"), [keys.active(q), keys.lease(q), keys.completed(q),
                                          keys.processed_daily(q, now), keys.processed_total(q)], args, _ids)


def _stat_keys(q: str, now: float) -> list[str]:
    return [keys.processed_daily(q, now), keys.failed_daily(q, now), keys.processed_total(q), keys.failed_total(q)]


def _held(raw: Any) -> bool:
    return int(raw) == 1


def retry(q: str, task_id: str, data: bytes, *, retry_at: float, now: float, is_failure: bool,
          lease_cutoff: float | None = None) -> Call[bool]:
    """Move an active task to retry. Reply: True, or False when the task was no longer held."""
    return Call(script("retry"),
                [keys.task(q, task_id), keys.active(q), keys.lease(q), keys.retry(q), *_stat_keys(q, now),
                 keys.exact_due(q)],
                [task_id, data, due(retry_at), int(now) + STATS_TTL, "1" if is_failure else "0",
                 "" if lease_cutoff is None else not_after(lease_cutoff), exact(retry_at),
                 not_after(now - STALE_EXACT)], _held)


def archive(q: str, task_id: str, data: bytes, *, now: float, lease_cutoff: float | None = None,
            note: str = "") -> Call[bool]:
    """Move an active task to archived (trimmed by age and size). Reply: True, or False when not held."""
    return Call(script("archive"),
                [keys.task(q, task_id), keys.active(q), keys.lease(q), keys.archived(q), *_stat_keys(q, now)],
                [task_id, data, at(now), int(now) - ARCHIVE_MAX_AGE, ARCHIVE_MAX_SIZE, int(now) + STATS_TTL,
                 keys.task_prefix(q), "" if lease_cutoff is None else not_after(lease_cutoff), note], _held)


def requeue(q: str, task_id: str, *, now: float) -> Call[bool]:
    """Put an active task back at the front of pending (pending since now, so its latency and wait count from
    there). Reply: True, or False when not held."""
    return Call(script("requeue"), [keys.active(q), keys.lease(q), keys.pending(q), keys.task(q, task_id)],
                [task_id, int(now * 1e9)], _held)


def _handed_back(raw: Any) -> str | None:
    return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))


def requeue_handoff(q: str, server_id: str, *, now: float) -> Call[str | None]:
    """Give the first task of this server's hand-off list of q back to the front of pending (atomically: a
    refused call leaves it in the list). Reply: its id ('' when it was no longer leased), None when empty."""
    return Call(script("requeue_handoff"), [keys.handoff(q, server_id), keys.active(q), keys.lease(q), keys.pending(q)],
                [keys.task_prefix(q), int(now * 1e9)], _handed_back)


def _forward_reply(raw: Sequence[Any]) -> tuple[int, float | None, float]:
    nxt = raw[1]
    return int(raw[0]), (float(nxt) if nxt not in (b"", "", None) else None), float(raw[2])


def forward(q: str, *, now: float | None = None, batch: int = 100) -> Call[tuple[int, float | None, float]]:
    """Move due scheduled and retry tasks of q to pending (or their group), handing them to idle workers of ours
    when some wait. Due is judged by the Redis server's clock (TIME), or by now when a test gives one.
    Reply: (moved, next due or None, the now it judged by), times in Unix seconds by that clock."""
    return Call(script("forward"),
                [keys.scheduled(q), keys.retry(q), keys.pending(q), keys.waiters(q), keys.paused(q), keys.active(q),
                 keys.lease(q), keys.exact_due(q), keys.limit_waiting(q)],
                ["" if now is None else not_after(now), keys.task_prefix(q), keys.group_prefix(q), batch,
                 int(HANDOFF_LEASE), keys.handoff_prefix(q), keys.WAKE_CHANNEL, q], _forward_reply)


def list_lease_expired(q: str, *, cutoff: float, count: int = 100) -> Call[list[tuple[str, bytes]]]:
    """Active tasks whose lease ended at or before cutoff. Reply: [(id, msg bytes or b'')]."""
    return Call(script("list_lease_expired"), [keys.lease(q)], [not_after(cutoff), keys.task_prefix(q), count], _pairs)


def drop_lost_lease(q: str, task_id: str, *, cutoff: float) -> Call[bool]:
    """Forget an expired lease whose task hash is gone. Reply: True when dropped."""
    return Call(script("drop_lost_lease"), [keys.lease(q), keys.active(q)],
                [task_id, keys.task_prefix(q), not_after(cutoff)], _held)


def delete_expired_completed(q: str, *, now: float, batch: int = 100) -> Call[int]:
    """Delete completed tasks whose retention ran out. Reply: how many."""
    return Call(script("delete_expired_completed"), [keys.completed(q)],
                [not_after(now), keys.task_prefix(q), batch], int)


def write_server_state(server_key: str, workers_key: str, *, ttl: int, info: bytes,
                       workers: Sequence[tuple[str, bytes]]) -> Call[int]:
    args: list[Any] = [ttl, info]
    for tid, data in workers:
        args += [tid, data]
    return Call(script("write_server_state"), [server_key, workers_key], args, int)


def clear_server_state(server_key: str, workers_key: str) -> Call[int]:
    return Call(script("clear_server_state"), [server_key, workers_key], [], int)


def aggregation_check(q: str, group: str, set_id: str, *, now: float, max_size: int, max_delay: float,
                      grace: float, set_deadline: float) -> Call[bool]:
    """Move a ready group into a new aggregation set. Reply: True when the set keys.aggregation_set(...) was made."""
    return Call(script("aggregation_check"),
                [keys.group(q, group), keys.aggregation_set(q, group, set_id), keys.aggregation_sets(q),
                 keys.groups(q)],
                [max_size, repr(max_delay), repr(grace), due(set_deadline), not_after(now), group], _held)


def _aggregation_set_reply(raw: Sequence[bytes]) -> tuple[float | None, list[bytes]]:
    return (float(raw[0]) if raw[0] else None), list(raw[1:])


def read_aggregation_set(q: str, set_key: str) -> Call[tuple[float | None, list[bytes]]]:
    """Reply: (set deadline or None, [msg bytes])."""
    return Call(script("read_aggregation_set"), [set_key, keys.aggregation_sets(q)], [keys.task_prefix(q)],
                _aggregation_set_reply)


def delete_aggregation_set(q: str, set_key: str) -> Call[int]:
    return Call(script("delete_aggregation_set"), [set_key, keys.aggregation_sets(q)], [keys.task_prefix(q)], int)


def reclaim_stale_aggregation_sets(q: str, *, now: float) -> Call[int]:
    return Call(script("reclaim_stale_aggregation_sets"), [keys.aggregation_sets(q), keys.groups(q)],
                [not_after(now), keys.group_prefix(q)], int)


# What a claimed tick's reply means when the tick was not this replica's to enqueue.
TICK_TAKEN = -2
TICK_NOTHING_MISSED = -3
TICK_EARLY = -4
TICK_PAUSED = -5


@cache
def _tick_script(inner: str) -> Script:
    text = script("tick_claim").text.replace("-- #body\n", script(inner).text)
    return Script(f"tick_claim+{inner}", text, hashlib.sha1(text.encode()).hexdigest())


def claim_tick(call: Call[object], q: str, entry_id: str, *, tick: int, claim_ttl: int, latest_ttl: int,
               tolerance: int, owner: str, catch_up: bool = False, now: float | None = None) -> Call[str]:
    """Wrap an enqueue Call (from enqueue()) so that it runs only if this tick of a scheduler entry is unclaimed
    and due by the Redis server's clock (or by now, a test's fake clock).

    The claim and the enqueue are one script. Reply: "enqueued" when this call enqueued the task, "taken" when
    the tick was taken already (or, with catch_up, the entry never ran before), "early" when the tick is still
    ahead by Redis's clock (nothing written: try again), "paused" when an operator paused the entry (nothing
written: the tick is skipped); the enqueue's own errors (QueueFullError, DuplicateTaskError,
    TaskIDConflictError) raise, and the tick stays claimed.
    """
    def parse(raw: Any) -> str:
        if isinstance(raw, bytes | str) and raw[:5] in (b"full:", "full:"):
            call.parse(raw)  # raises QueueFullError (the queue's backpressure limit, lua/_room.lua)
        code = int(raw)
        if code == TICK_EARLY:
            return "early"
        if code == TICK_PAUSED:
            return "paused"
        if code in (TICK_TAKEN, TICK_NOTHING_MISSED):
            return "taken"
        call.parse(raw)
        return "enqueued"
    return Call(_tick_script(call.script.name),
                [keys.tick_mark(q, entry_id), keys.tick_claim(q, entry_id, tick), keys.cron_paused(q, entry_id),
                 *call.keys],
                [tick, claim_ttl, latest_ttl, "1" if catch_up else "0", tolerance, owner,
                 "" if now is None else repr(float(now)), *call.args], parse)


def write_scheduler_entries(list_key: str, *, ttl: int, entries: Sequence[bytes], location: str = "UTC") -> Call[int]:
    """Rewrite a scheduler's entry list (asynq:schedulers:{id}) with a ttl, and the marker that says it is ours
    (keys.scheduler_ours, holding the scheduler's location: the zone of specs without CRON_TZ=). Reply: how
    many entries."""
    return Call(script("write_scheduler_entries"), [list_key, keys.scheduler_ours(list_key)],
                [ttl, location, *entries], int)
