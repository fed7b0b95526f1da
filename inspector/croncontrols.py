"""Cron controls: pause, resume and enqueue-now for scheduler entries, and each entry's status (paused, plain-
words schedule, next runs, last run's task and its state, recent firings).

Pause is a flag in Redis (asynqpy:{queue}:cronpaused:<entry id>) that every asynqpy scheduler replica's claim
script reads, so one operator action holds every replica. Go asynq's SchedulerEntry has no paused field and Go
schedulers never read our flag: their entries are read-only here (ours publish a marker beside their entry list).
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from asynqpy.cron import Schedule, parse_go_duration
from asynqpy.cron import parse as parse_cron
from asynqpy.cronwords import describe
from asynqpy.errors import InvalidArgumentError
from asynqpy.options import build_options
from asynqpy.rdb import broker, keys
from asynqpy.rdb.state import set_cron_paused
from asynqpy.rdb.syncdoor import Batch
from asynqpy.wire import SchedulerEnqueueEvent
from inspector import cluster
from inspector.context import Ctx, text
from inspector.models import SchedulerEntry

_OPT = re.compile(r'^(\w+)\((.*)\)$')
GO_READ_ONLY = ("a Go asynq scheduler's entry: Go schedulers do not read asynqpy's pause flag and asynq's "
                "SchedulerEntry has no paused field, so it is shown read-only")
HISTORY = 30


@dataclass(frozen=True)
class CronStatus:
    """An entry as the scheduler page shows it. ours: written by an asynqpy scheduler (pause honoured). when:
    the schedule in plain words. next_runs: the next few firings (Unix s). firings: enqueue times (Unix s) of
    the last HISTORY firings, oldest first. last_task_id / last_state: the newest firing's task and its state
    now ("" when it is gone: completed and not retained, or deleted)."""

    entry: SchedulerEntry
    queue: str
    ours: bool
    paused: bool
    when: str
    next_runs: tuple[float, ...]
    firings: tuple[float, ...]
    last_task_id: str
    last_state: str

    @property
    def read_only_reason(self) -> str:
        return "" if self.ours else GO_READ_ONLY


def _go_quoted(arg: str) -> str:
    """The value of a string Go's %q wrote (asynq's option texts: Queue("billing")); the text itself when it
    is not one. Go's escapes (\\a \\x7f \\u00e9 \\U0001f600 ...) are Python's, JSON's are fewer."""
    try:
        v = json.loads(arg)
    except ValueError:
        try:
            v = ast.literal_eval(arg) if len(arg) >= 2 and arg[0] == arg[-1] == '"' else arg
        except (ValueError, SyntaxError):
            v = arg
    return v if isinstance(v, str) else arg


def entry_queue(e: SchedulerEntry) -> str:
    """The queue an entry enqueues into: its Queue("...") option, else "default". The dashboard's per-queue
    roles judge an entry by this queue (webui.access.entry_queue), so it is the one the controls act on."""
    for o in e.opts:
        m = _OPT.match(o.strip())
        if m and m.group(1) == "Queue":
            return _go_quoted(m.group(2))
    return "default"


def statuses(ctx: Ctx, entries: list[SchedulerEntry] | None = None, *, runs: int = 3) -> list[CronStatus]:
    """The status of every live entry (or of the given ones), in two round trips."""
    found = cluster.scheduler_entries(ctx) if entries is None else entries
    if not found:
        return []
    queues = [entry_queue(e) for e in found]

    def fill(b: Batch) -> None:
        for e, q in zip(found, queues, strict=True):
            b.command("GET", keys.scheduler_ours(keys.scheduler_entries(e.scheduler_id)))
            b.command("EXISTS", keys.cron_paused(q, e.id))
            b.command("ZRANGE", keys.scheduler_history(e.id), -HISTORY, -1, "WITHSCORES")
    raw = ctx.read(fill)
    hist = [_pairs(raw[i * 3 + 2]) for i in range(len(found))]
    lasts = [_last_task(h) for h in hist]
    states = ctx.read(lambda b: [b.command("HGET", keys.task(q, tid), "state")
                                 for q, tid in zip(queues, lasts, strict=True) if tid])
    it = iter(states)
    out = []
    now = ctx.now()
    for i, (e, q) in enumerate(zip(found, queues, strict=True)):
        tid = lasts[i]
        state = text(next(it) or b"") if tid else ""
        ours = raw[i * 3]  # our scheduler's location; Go publishes none (its specs read as UTC unless CRON_TZ=)
        try:
            sched = parse_cron(e.spec, text(ours) if ours else "UTC")
            when, nxt = describe(sched), _next_runs(sched, now, runs)
        except InvalidArgumentError:
            when, nxt = f"spec {e.spec!r} (not understood here)", ()
        firings = tuple(float(score) for _, score in hist[i])
        out.append(CronStatus(e, q, bool(ours), bool(raw[i * 3 + 1]), when, nxt, firings, tid, state))
    return out


def _pairs(raw: list[Any]) -> list[tuple[bytes, float]]:
    """ZRANGE WITHSCORES as (member, score) pairs, whether the client paired them or left them flat."""
    if raw and isinstance(raw[0], (list, tuple)):
        return [(bytes(m), float(sc)) for m, sc in raw]
    return [(bytes(raw[i]), float(raw[i + 1])) for i in range(0, len(raw), 2)]


def _last_task(pairs: list[tuple[bytes, float]]) -> str:
    if not pairs:
        return ""
    ev = SchedulerEnqueueEvent()
    try:
        ev.ParseFromString(pairs[-1][0])
    except Exception:  # not a protobuf event: no last task to show
        return ""
    return str(ev.task_id)


def _next_runs(sched: Schedule, now: float, n: int) -> tuple[float, ...]:
    out: list[float] = []
    t: float | None = now
    while len(out) < n and t is not None:
        t = sched.next(t)
        if t is not None:
            out.append(t)
    return tuple(out)


def find(ctx: Ctx, entry_id: str) -> CronStatus:
    """One live entry's status. Raises InvalidArgumentError when no live scheduler has that entry."""
    if not isinstance(entry_id, str) or not entry_id:
        raise InvalidArgumentError("entry id must be a non-empty str", argument="entry_id")
    for e in cluster.scheduler_entries(ctx):
        if e.id == entry_id:
            return statuses(ctx, [e])[0]
    raise no_such_entry(entry_id)


class EntryNotFoundError(InvalidArgumentError):
    """No live scheduler has the entry: an InvalidArgumentError for the library and the dashboard (a 400), a "not
    found" for the CLI (exit 1)."""


def no_such_entry(entry_id: str) -> InvalidArgumentError:
    """The error for an entry no live scheduler has (the dashboard gives it for a hidden queue's entry too)."""
    return EntryNotFoundError(f"no live scheduler has an entry {entry_id!r} (`asynqpy cron ls` lists them)",
                                argument="entry_id")


def _ours(ctx: Ctx, entry_id: str) -> CronStatus:
    st = find(ctx, entry_id)
    if not st.ours:
        raise InvalidArgumentError(f"entry {entry_id} is {GO_READ_ONLY}", argument="entry_id")
    return st


def pause(ctx: Ctx, entry_id: str, *, by: str = "") -> bool:
    """Pause an asynqpy scheduler's entry: every replica skips its ticks until resume. True when it was running.
    Raises InvalidArgumentError for an unknown entry or a Go scheduler's."""
    st = _ours(ctx, entry_id)
    note = json.dumps({"by": by, "at": round(ctx.now(), 3)})
    return ctx.run(set_cron_paused(st.queue, entry_id, paused=True, note=note))


def resume(ctx: Ctx, entry_id: str) -> bool:
    """Resume a paused entry (its next tick is enqueued as usual). True when it was paused. Raises as pause."""
    st = _ours(ctx, entry_id)
    return ctx.run(set_cron_paused(st.queue, entry_id, paused=False))


def _options(e: SchedulerEntry, queue: str, now: float) -> dict[str, object]:
    """The enqueue options an enqueue-now keeps from the entry's: queue, max_retry, timeout, retention (times
    and ids are the entry's per tick, unique and group locks its own: an operator's run ignores them)."""
    fields: dict[str, object] = {"queue": queue}
    for o in e.opts:
        m = _OPT.match(o.strip())
        if not m:
            continue
        name, arg = m.groups()
        try:
            if name == "MaxRetry":
                fields["max_retry"] = int(arg)
            elif name in ("Timeout", "Retention"):
                fields[name.lower()] = parse_go_duration(arg)
        except ValueError:
            continue
    return fields


def enqueue_now(ctx: Ctx, entry_id: str) -> str:
    """Enqueue an entry's task now, outside its schedule (any scheduler's, Go's included: this is an ordinary
    enqueue). Returns the new task's id. Raises InvalidArgumentError for an unknown entry."""
    st = find(ctx, entry_id)
    now = ctx.now()
    opts = build_options(now=now, task_id=str(uuid.uuid4()), **_options(st.entry, st.queue, now))
    msg = broker.build_message(st.entry.task_type, st.entry.task_payload, {}, opts)
    ctx.door.run(broker.enqueue(msg, opts, now=now), register_queue=st.queue)
    return msg.id
