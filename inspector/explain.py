"""Diagnosis: why a task has not run (yet), and what is wrong with a queue, in the order an operator checks."""

from __future__ import annotations

from datetime import datetime

from asynqpy.limits import Limit
from asynqpy.rdb import flow, keys
from asynqpy.rdb.broker import ARCHIVE_MAX_SIZE
from asynqpy.rdb.clock import WARN_OFFSET, describe
from asynqpy.task import TaskState
from inspector import cluster, reader
from inspector.context import Ctx, check_id, check_queue_name, from_unix
from inspector.display import span
from inspector.models import Explanation, Finding, ServerInfo, TaskRecord

LPOS_MAX_SCAN = 100_000
RECOVER_AFTER = 30  # seconds a lease must have been expired before a recoverer takes the task back


def _when(t: datetime | None, now: float) -> str:
    if t is None:
        return "never"
    delta = t.timestamp() - now
    rel = f"in {span(delta)}" if delta >= 0 else f"{span(-delta)} ago"
    return f"{t.strftime('%Y-%m-%d %H:%M:%S')} UTC ({rel})"


def explain(ctx: Ctx, q: str, task_id: str) -> Explanation:
    """Findings on one task: existence and state, paused queue, consuming servers, then the state's own story."""
    check_queue_name(q)
    check_id(task_id)
    known, rec = reader.fetch_task(ctx, q, task_id)
    found: list[Finding] = []
    if not known:
        found.append(Finding("warn", "queue_not_registered",
                             f"queue {q!r} is not registered in asynq:queues, so inspectors and dashboards do not "
                             "list it (only producers register queues)"))
    if rec is None:
        found.append(Finding("error", "task_missing",
                             f"no task {task_id!r} in queue {q!r}: it never existed there, was deleted, or "
                             "finished without retention (finished tasks are deleted)"))
        return Explanation(q, task_id, None, tuple(found))
    state = rec.state
    found.append(Finding("info", "state", f"task {task_id!r} ({rec.info.type or 'unknown type'}) is {state.value}"))
    if rec.problem:
        found.append(Finding("error", "unreadable", rec.problem))
    now = ctx.now()
    servers = cluster.servers(ctx)
    if ctx.command("EXISTS", keys.paused(q)):
        found.append(Finding("warn", "paused", f"queue {q!r} is paused: no server takes its pending tasks"))
    found += consumers(ctx, q, servers)
    found += _by_state(ctx, q, rec, now, servers)
    return Explanation(q, task_id, state, tuple(found))


def consumers(ctx: Ctx, q: str, servers: list[ServerInfo]) -> list[Finding]:
    """Which live servers take tasks from q, with what share, and whether strict priority starves it."""
    mine = [s for s in servers if q in s.queues]
    if not mine:
        return [Finding("error", "no_consumer", f"no live server consumes queue {q!r}")]
    out = []
    for s in mine:
        total = sum(w for w in s.queues.values() if w > 0) or 1
        weight = s.queues[q]
        name = f"server {s.host}:{s.pid} ({s.status}, {len(s.active_workers)}/{s.concurrency} busy)"
        if s.status != "active":
            out.append(Finding("warn", "server_not_active", f"{name} consumes {q!r} but is not fetching tasks"))
        if s.clock_offset is not None and abs(s.clock_offset) > WARN_OFFSET:
            out.append(Finding("warn", "clock_off", f"{name}: its clock is {describe(s.clock_offset)} (at its last "
                                                    "heartbeat); its due times follow Redis's clock, but fix its "
                                                    "clock (NTP): logs and Go processes there go by it"))
        if s.strict_priority:
            out += _starvation(ctx, q, s, name, weight)
        else:
            out.append(Finding("ok", "consumer", f"{name} consumes {q!r} with weight {weight} of {total} "
                                                 f"(about {weight * 100 // total}% of its fetches)"))
    return out


def _starvation(ctx: Ctx, q: str, s: ServerInfo, name: str, weight: int) -> list[Finding]:
    higher = sorted((qq for qq, w in s.queues.items() if w > weight), key=lambda qq: -s.queues[qq])
    sizes = ctx.read(lambda b: [b.command("LLEN", keys.pending(qq)) for qq in higher])
    busy = [(qq, int(n)) for qq, n in zip(higher, sizes, strict=True) if int(n) > 0]
    if busy:
        lst = ", ".join(f"{qq!r} ({n} pending)" for qq, n in busy)
        return [Finding("warn", "starved", f"{name} uses strict priority: {q!r} (priority {weight}) is served only "
                                           f"when higher queues are empty, and {lst} are not")]
    return [Finding("ok", "consumer", f"{name} consumes {q!r} with strict priority {weight}; no higher queue "
                                      "has pending tasks")]


def _by_state(ctx: Ctx, q: str, rec: TaskRecord, now: float, servers: list[ServerInfo]) -> list[Finding]:
    info, st = rec.info, rec.state
    if st is TaskState.PENDING:
        return _pending(ctx, q, rec, now, servers)
    if st is TaskState.ACTIVE:
        return _active(rec, now, servers)
    out = []
    if st in (TaskState.RETRY, TaskState.ARCHIVED) and (info.last_err or info.last_failed_at):
        out.append(Finding("info", "last_error", f"last error ({_when(info.last_failed_at, now)}): "
                                                  f"{info.last_err or '(none recorded)'}"))
    attempts = f"retried {info.retried} of {info.max_retry} times"
    due = info.next_process_at
    if st is TaskState.RETRY:
        out.append(_due(f"it failed and will be retried ({attempts}); next attempt", due, now))
    elif st is TaskState.SCHEDULED:
        out.append(_due("it is scheduled; due", due, now))
    elif st is TaskState.ARCHIVED:
        at = from_unix(rec.score)
        out.append(Finding("error", "archived", f"it is archived ({attempts}, archived {_when(at, now)}): "
                                                "it will not run again unless run by hand"))
    elif st is TaskState.COMPLETED:
        out.append(Finding("ok", "completed", f"it completed {_when(info.completed_at, now)}; kept until "
                                              f"{_when(from_unix(rec.score), now)}"))
    elif st is TaskState.AGGREGATING:
        out.append(Finding("info", "aggregating", f"it waits in group {info.group!r} to be aggregated; this needs "
                                                  "a server with a group aggregator for the queue"))
    return out


def _due(what: str, due: datetime | None, now: float) -> Finding:
    if due is None:
        return Finding("warn", "no_due_time", f"{what}: unknown (it is not in its sorted set)")
    if due.timestamp() <= now:
        return Finding("warn", "overdue", f"{what} {_when(due, now)}: overdue, so no server's forwarder is moving "
                                          "it (is any server running for this queue?)")
    return Finding("info", "due", f"{what} {_when(due, now)}")


def _pending(ctx: Ctx, q: str, rec: TaskRecord, now: float, servers: list[ServerInfo]) -> list[Finding]:
    name = ctx.command("HGET", keys.task(q, rec.id), "limit_wait")
    if name is not None:
        out = _limited(ctx, q, rec.id, name.decode(), now)
        for s in servers:  # Go servers keep no clock offset in their heartbeat (see ServerInfo.clock_offset)
            if q in s.queues and s.clock_offset is None:
                out.append(Finding("warn", "limit_not_obeyed", f"server {s.host}:{s.pid} consumes {q!r} and looks "
                                   "like a Go asynq server: Go workers do not obey asynqpy's limits"))
        return out
    out = []
    pos, size = ctx.read(lambda b: (b.command("LPOS", keys.pending(q), rec.id, "RANK", -1, "MAXLEN", LPOS_MAX_SCAN),
                                    b.command("LLEN", keys.pending(q))))
    if pos is None:
        if int(size) > LPOS_MAX_SCAN:
            out.append(Finding("info", "position", f"more than {LPOS_MAX_SCAN} pending tasks are ahead of it"))
        else:
            out.append(Finding("error", "not_in_list", "its hash says pending, but its id is not in the pending "
                                                       "list, so no server will take it (run or delete it)"))
    else:
        ahead = int(size) - 1 - int(pos)
        out.append(Finding("info", "position", f"{ahead} pending task(s) are ahead of it"))
    if rec.pending_since:
        out.append(Finding("info", "waiting", f"pending since {_when(rec.pending_since, now)}"))
    return out


def _limited(ctx: Ctx, q: str, task_id: str, name: str, now: float) -> list[Finding]:
    """A task waiting on a limit (see asynqpy/limits.py): which one, and how full it is for its partition."""
    raw = ctx.command("HGET", keys.queue_limits(q), name)
    if raw is None:
        return [Finding("warn", "limit_gone", f"it waited for limit {name}, which is no longer set; the next fetch "
                                              "starts it")]
    lim = Limit.decode(name, raw.decode())
    part = ""
    for m in ctx.command("ZRANGE", keys.limit_waiting(q), 0, -1):
        member = m.decode()
        if member.startswith(name + "\n") and ctx.command("LPOS", keys.limit_wait_list(q, member), task_id) is not None:
            part = member[len(name) + 1:]
    use = []
    if lim.concurrency:
        running = flow.holding(ctx.command, q, keys.limit_slots(q, name, part), now)
        use.append(f"{running}/{lim.concurrency} running")
    if lim.rate:
        use.append(f"rate {lim.rate:g}/s")
    of = f" for {lim.key} = {part!r}" if lim.key else ""
    return [Finding("warn", "limited", f"waiting for limit {name} ({', '.join(use)}){of}: it starts when a slot "
                                       "or token frees; this is not a retry")]


def _active(rec: TaskRecord, now: float, servers: list[ServerInfo]) -> list[Finding]:
    out = []
    lease = rec.lease_expires_at
    if lease is None:
        out.append(Finding("error", "no_lease", "it is active but has no lease: no worker holds it and no recoverer "
                                                "will find it"))
    elif lease.timestamp() <= now:
        out.append(Finding("warn", "orphaned", f"its lease expired {_when(lease, now)}: its worker is gone; a "
                                               f"server's recoverer retries it once the lease has been expired "
                                               f"for {RECOVER_AFTER}s"))
    else:
        out.append(Finding("ok", "leased", f"a worker holds it; lease valid until {_when(lease, now)}"))
    for s in servers:
        for w in s.active_workers:
            if w.task_id == rec.id:
                out.append(Finding("info", "running", f"running on {s.host}:{s.pid} since {_when(w.started, now)}, "
                                                      f"deadline {_when(w.deadline, now)}"))
    return out


def queue_warnings(ctx: Ctx, q: str, *, latency_threshold: float, archive_ratio: float) -> list[Finding]:
    """What is wrong with a queue: nobody consumes it, its oldest pending task is too old, its archive nears its
    cap, active tasks with expired leases, paused. Raises QueueNotFoundError."""
    check_queue_name(q)
    (qi,) = reader.queue_infos(ctx, [q], memory=False)
    now = ctx.now()
    out = [f for f in consumers(ctx, q, cluster.servers(ctx)) if f.level in ("warn", "error")]
    if qi.paused:
        out.append(Finding("warn", "paused", f"queue {q!r} is paused"))
    if qi.latency > latency_threshold:
        out.append(Finding("warn", "latency", f"the oldest pending task has waited {span(qi.latency)} "
                                              f"(threshold {span(latency_threshold)})"))
    if qi.archived >= archive_ratio * ARCHIVE_MAX_SIZE:
        out.append(Finding("warn", "archive_near_cap", f"{qi.archived} archived tasks: near the cap of "
                                                       f"{ARCHIVE_MAX_SIZE}, beyond which the oldest are dropped"))
    expired = int(ctx.command("ZCOUNT", keys.lease(q), "-inf", now))
    if expired:
        out.append(Finding("warn", "orphaned",
                           f"{expired} active task(s) have an expired lease (their worker is gone)"))
    return out
