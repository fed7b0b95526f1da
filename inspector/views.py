"""What each CLI command asks the Inspector and how it shows the answer, as a table or as JSON data."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asynqpy.errors import (
    AsynqError,
    QueueAlreadyPausedError,
    QueueNotEmptyError,
    QueueNotPausedError,
    TaskNotFoundError,
    UsageError,
)
from asynqpy.task import TaskInfo, TaskState
from asynqpy.terminal import printable
from inspector import bounds
from inspector.actions import ARCHIVE, DELETE, RUN
from inspector.api import Inspector
from inspector.display import preview, span
from inspector.models import Finding, QueueInfo, TaskRecord
from inspector.textout import cell, pairs, size, table, when

PAST = {"run": "moved to pending", "archive": "archived", "delete": "deleted"}
ACTIONS = {a.name: a for a in (RUN, ARCHIVE, DELETE)}
ORDER = ("pending", "active", "scheduled", "retry", "archived", "completed", "aggregating")


@dataclass(frozen=True)
class Out:
    """A command's answer: data for --json, text for people, and whether everything succeeded."""

    data: Any
    text: str
    ok: bool = True


class Aborted(AsynqError):
    """The user declined a confirmation prompt."""

    def __init__(self) -> None:
        super().__init__("aborted")


def confirm(question: str, args: argparse.Namespace) -> None:
    """Ask on the terminal unless --yes was given. Raises Aborted unless the answer is yes. The question goes to
    stderr, so stdout holds only the command's output (parseable with --json)."""
    if getattr(args, "yes", False):
        return
    sys.stderr.write(printable(f"{question} [y/N] "))
    sys.stderr.flush()
    try:
        answer = input("")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise Aborted()


def _masked(args: argparse.Namespace, what: str, obj: Any, *extra: Any) -> Any:
    """obj masked by the --redact policy (inspector.redact.Policy.<what>), or obj itself without one."""
    found = getattr(args, "redactor", None)
    if found is None:
        return obj
    policy, role = found
    return getattr(policy, what)(obj, role, *extra)


def _findings(items: list[Finding] | tuple[Finding, ...]) -> str:
    return "\n".join(f"[{f.level}] {f.message}" for f in items)


# -- queues --------------------------------------------------------------------------------------------------

def _queue_rows(infos: list[QueueInfo]) -> str:
    rows = [[bounds.name(i.queue), "paused" if i.paused else "run", i.size, i.pending, i.active, i.scheduled, i.retry,
             i.archived, i.completed, i.aggregating, span(i.latency), i.processed, i.failed, size(i.memory_usage)]
            for i in infos]
    return table(["QUEUE", "STATE", "SIZE", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "ARCHIVED", "COMPLETED",
                  "AGGREGATING", "LATENCY", "PROCESSED", "FAILED", "MEMORY"], rows)


def stats(insp: Inspector, args: argparse.Namespace) -> Out:
    infos = insp.queue_infos()
    ri = dataclasses.replace(insp.redis_info(), raw={})
    text = _queue_rows(infos) if infos else "no queues"
    maxmem = size(ri.maxmemory) if ri.maxmemory else "no limit"
    text += (f"\n\n{ri.server} {ri.version}, up {span(ri.uptime_seconds)}, {ri.connected_clients} clients, "
             f"memory {size(ri.used_memory)} (max {maxmem}, policy {ri.maxmemory_policy}), "
             f"persistence {ri.persistence}")
    if ri.warnings:
        text += "\n" + _findings(ri.warnings)
    usages = insp.limit_usage()
    if usages:
        from inspector.limitviews import usage_rows  # it builds on this module
        text += "\n\nlimits:\n" + usage_rows(usages)
    return Out({"queues": infos, "redis": ri, "limits": usages}, text + "\n(processed and failed: today, UTC)")


def queue_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    infos = insp.queue_infos(memory=False)
    rows = [[bounds.name(i.queue), "paused" if i.paused else "run", i.size, i.pending, span(i.latency)] for i in infos]
    return Out(infos, table(["QUEUE", "STATE", "SIZE", "PENDING", "LATENCY"], rows) if infos else "no queues")


def queue_info(insp: Inspector, args: argparse.Namespace) -> Out:
    i = insp.queue_info(args.queue)
    warnings = insp.queue_warnings(args.queue)
    now = i.timestamp.timestamp()
    items: list[tuple[str, Any]] = [("queue", i.queue), ("state", "paused" if i.paused else "running"),
                                    ("size", i.size)]
    items += [(s, i.count(s)) for s in ORDER]
    items += [("groups", i.groups), ("latency", span(i.latency)),
              ("oldest pending since", when(i.oldest_pending_since, now)),
              ("next scheduled", when(i.next_scheduled_at, now)), ("next retry", when(i.next_retry_at, now)),
              ("processed today", i.processed), ("failed today", i.failed),
              ("processed (all time)", i.processed_total), ("failed (all time)", i.failed_total),
              ("memory (approx.)", size(i.memory_usage))]
    text = pairs(items) + ("\n\n" + _findings(warnings) if warnings else "")
    return Out({"info": i, "warnings": warnings}, text)


def queue_history(insp: Inspector, args: argparse.Namespace) -> Out:
    days = insp.history(args.queue, args.days)
    return Out(days, table(["DATE (UTC)", "PROCESSED", "FAILED"], [[str(d.date), d.processed, d.failed]
                                                                    for d in days]))


def queue_pause(insp: Inspector, args: argparse.Namespace) -> Out:
    return _set_paused(insp, args.queue, True)


def queue_unpause(insp: Inspector, args: argparse.Namespace) -> Out:
    return _set_paused(insp, args.queue, False)


def _set_paused(insp: Inspector, queue: str, paused: bool) -> Out:
    """Pause or resume a known queue; one already in that state is reported as such, not as an error (scripts
    want this idempotent)."""
    insp.require_known(queue)  # (pausing a name nothing knows is almost always a typo, though asynq accepts it)
    try:
        (insp.pause if paused else insp.unpause)(queue)
        changed, text = True, f"queue {queue!r} {'paused' if paused else 'resumed'}"
    except (QueueAlreadyPausedError, QueueNotPausedError):
        changed, text = False, f"queue {queue!r} is {'already paused' if paused else 'not paused'}"
    return Out({"queue": queue, "paused": paused, "changed": changed}, text)


def queue_rm(insp: Inspector, args: argparse.Namespace) -> Out:
    if args.force:
        n = insp.queue_info(args.queue, memory=False).size
        confirm(f"delete queue {args.queue!r} and its {n} tasks?", args)
    try:
        insp.delete_queue(args.queue, force=args.force)
    except QueueNotEmptyError:  # the library's message names its keyword; the CLI's, its flag
        raise QueueNotEmptyError(f"queue {args.queue!r} is not empty: --force deletes it with its tasks",
                                 queue=args.queue) from None
    return Out({"queue": args.queue, "deleted": True}, f"queue {args.queue!r} deleted")


# -- tasks ---------------------------------------------------------------------------------------------------

def _type(t: TaskRecord) -> str:
    return f"! {t.problem}" if t.problem else t.info.type


def _columns(state: TaskState, now: float) -> tuple[list[str], Callable[[TaskRecord], list[Any]]]:
    def i(t: TaskRecord) -> TaskInfo:  # a one-letter accessor keeps the table below readable
        return t.info

    if state is TaskState.PENDING:
        return ["WAITING", "RETRIED"], lambda t: [when(t.pending_since, now), f"{i(t).retried}/{i(t).max_retry}"]
    if state is TaskState.ACTIVE:
        return ["LEASE UNTIL", "ORPHANED"], lambda t: [when(t.lease_expires_at, now), i(t).is_orphaned]
    if state is TaskState.SCHEDULED:
        return ["DUE"], lambda t: [when(i(t).next_process_at, now)]
    if state is TaskState.RETRY:
        return ["NEXT ATTEMPT", "RETRIED", "LAST ERROR"], lambda t: [
            when(i(t).next_process_at, now), f"{i(t).retried}/{i(t).max_retry}", i(t).last_err[:80]]
    if state is TaskState.ARCHIVED:
        return ["LAST FAILED", "LAST ERROR"], lambda t: [when(i(t).last_failed_at, now), i(t).last_err[:80]]
    if state is TaskState.COMPLETED:
        return ["COMPLETED", "RESULT"], lambda t: [when(i(t).completed_at, now), t.result.text if t.result else ""]
    return ["GROUP"], lambda t: [i(t).group]


def _task_table(tasks: tuple[TaskRecord, ...], state: TaskState, now: float) -> str:
    extra, values = _columns(state, now)
    rows = [[t.id, bounds.name(_type(t)), t.payload.text[:60], *values(t)] for t in tasks]
    return table(["ID", "TYPE", "PAYLOAD", *extra], rows)


def check_group(args: argparse.Namespace) -> None:
    """--group goes with --state aggregating, and aggregating tasks are listed one group at a time."""
    if args.group and args.state != TaskState.AGGREGATING.value:
        raise UsageError("--group goes with --state aggregating")
    if args.state == TaskState.AGGREGATING.value and not args.group:
        raise UsageError("--state aggregating needs --group (aggregating tasks are listed one group at a time)")


def task_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    check_group(args)
    page = _masked(args, "page", insp.list_tasks(args.queue, args.state, page=args.page, size=args.size,
                                                 group=args.group))
    now = insp.now()
    pages = max(1, -(-page.total // page.size))
    text = _task_table(page.tasks, page.state, now) if page.tasks else f"no {page.state.value} tasks on this page"
    noun = "task" if page.total == 1 else "tasks"
    return Out(page, f"{text}\n\npage {page.page} of {pages} ({page.total} {page.state.value} {noun})")


def task_info(insp: Inspector, args: argparse.Namespace) -> Out:
    t = _masked(args, "task", insp.get_task(args.queue, args.task_id))
    i, now = t.info, insp.now()
    items: list[tuple[str, Any]] = [("id", i.id), ("queue", i.queue), ("type", i.type or "-"), ("state", i.state.value)]
    if t.problem:
        items.append(("problem", t.problem))
    items += [("retried", f"{i.retried} of {i.max_retry}"), ("last error", i.last_err or "-"),
              ("last failed at", when(i.last_failed_at, now)), ("next process at", when(i.next_process_at, now)),
              ("timeout", span(i.timeout) if i.timeout else "-"), ("deadline", when(i.deadline, now)),
              ("group", i.group or "-"), ("retention", span(i.retention) if i.retention else "-"),
              ("completed at", when(i.completed_at, now))]
    if t.lease_expires_at:
        items += [("lease until", when(t.lease_expires_at, now)), ("orphaned", i.is_orphaned)]
    if i.headers:
        items.append(("headers", ", ".join(f"{k}={v}" for k, v in sorted(i.headers.items()))))
    if t.redacted:
        items.append(("masked", ", ".join(t.redacted)))
    cut = " (cut)" if t.payload.truncated else ""
    items.append((f"payload ({t.payload.kind}, {t.payload.size} bytes{cut})", "\n" + t.payload.text))
    if t.result is not None:
        items.append((f"result ({t.result.kind}, {t.result.size} bytes)", "\n" + t.result.text))
    return Out(t, pairs(items))


def task_explain(insp: Inspector, args: argparse.Namespace) -> Out:
    e = insp.explain(args.queue, args.task_id)
    if e.state is None:  # no such task: an error, on stderr like every other (exit 1)
        missing = sorted(e.findings, key=lambda f: f.code != "task_missing")
        raise TaskNotFoundError("; ".join(f.message for f in missing), queue=args.queue, task_id=args.task_id)
    return Out(e, _findings(e.findings))


def task_search(insp: Inspector, args: argparse.Namespace) -> Out:
    check_group(args)
    res = insp.search(args.queue, args.state, type=args.type, id_prefix=args.id_prefix, text=args.text,
                      error=args.error, limit=args.limit, cursor=args.cursor, max_scan=args.max_scan,
                      group=args.group)
    res = _masked(args, "search", res, args.text)
    text = _task_table(res.tasks, res.state, insp.now()) if res.tasks else "no matches"
    where = "the end was reached" if res.done else f"resume with --cursor {res.next_cursor}"
    return Out(res, f"{text}\n\nscanned {res.scanned} {res.state.value} tasks from position {res.cursor}; {where}")


def task_action(action: str) -> Callable[[Inspector, argparse.Namespace], Out]:
    """The handler of `task run|archive|delete`: given ids, or --all --state S."""

    def handle(insp: Inspector, args: argparse.Namespace) -> Out:
        if args.all:
            return _on_all(insp, args, action)
        if args.state or args.group or getattr(args, "rate", None) is not None:
            raise UsageError("--state, --group and --rate go with --all")
        if not args.task_ids:
            raise UsageError(f"give task ids to {action}, or --all --state STATE")
        if len(args.task_ids) == 1:
            (tid,) = args.task_ids
            getattr(insp, f"{action}_task")(args.queue, tid)
            return Out({"succeeded": [tid], "failed": []}, f"{tid}: {PAST[action]}")
        res = getattr(insp, f"{action}_tasks")(args.queue, args.task_ids)
        lines = [f"{tid}: {PAST[action]}" for tid in res.succeeded]
        lines += [f"{f.task_id}: failed: {f.error}" for f in res.failed]
        return Out(res, "\n".join(lines), ok=not res.failed)

    return handle


def _on_all(insp: Inspector, args: argparse.Namespace, action: str) -> Out:
    if args.task_ids:
        raise UsageError("give task ids or --all, not both")
    if not args.state:
        raise UsageError("--all needs --state")
    state = TaskState(args.state)
    if state not in ACTIONS[action].states:
        raise UsageError(f"cannot {action} all {state.value} tasks: --state must be one of "
                         f"{', '.join(s.value for s in ACTIONS[action].states)}")
    if args.group and state is not TaskState.AGGREGATING:
        raise UsageError("--group goes with --state aggregating")
    if state is TaskState.AGGREGATING and args.group:
        n = next((g.size for g in insp.groups(args.queue) if g.group == args.group), 0)
    else:
        n = insp.queue_info(args.queue, memory=False).count(state)
    where = f"group {args.group!r} of queue {args.queue!r}" if args.group else f"queue {args.queue!r}"
    confirm(f"{action} all {n} {state.value} tasks in {where}?", args)
    if getattr(args, "rate", None) is not None:
        from inspector.progress import run_with_progress

        job = run_with_progress(insp, action, args.queue, state, rate=args.rate, group=args.group or "")
        return Out({"queue": args.queue, "state": state.value, "action": action, "count": job.changed,
                    "at_least": job.uncounted, "job": job.id, "status": job.status},
                   f"{job.changed_text} {state.value} tasks {PAST[action]} (job {job.id} {job.status})",
                   ok=job.status == "done")
    moved = getattr(insp, f"{action}_all")(args.queue, state, group=args.group)
    return Out({"queue": args.queue, "state": state.value, "action": action, "count": moved},
               f"{moved} {state.value} tasks {PAST[action]}")


def task_cancel(insp: Inspector, args: argparse.Namespace) -> Out:
    n = insp.cancel(args.task_id)
    note = "" if n else " (no server is listening: is any running?)"
    return Out({"task_id": args.task_id, "receivers": n}, f"cancel request for {args.task_id!r} sent to {n} "
                                                           f"server(s){note}")


# -- servers and schedulers ----------------------------------------------------------------------------------

def server_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    servers = insp.servers()
    if getattr(args, "redactor", None) is not None:
        servers = [dataclasses.replace(s, active_workers=tuple(_masked(args, "worker", w) for w in s.active_workers))
                   for s in servers]
    if not servers:
        return Out(servers, "no live servers")
    now = insp.now()
    rows = [[f"{s.host}:{s.pid}", s.id, s.status,
             ", ".join(f"{bounds.name(q)}={w}" for q, w in sorted(s.queues.items()))
             + (" (strict)" if s.strict_priority else ""), f"{len(s.active_workers)}/{s.concurrency}",
             when(s.started, now)] for s in servers]
    text = table(["SERVER", "ID", "STATUS", "QUEUES", "BUSY", "STARTED"], rows)
    running = [[f"{s.host}:{s.pid}", w.task_id, bounds.name(w.task_type), bounds.name(w.queue), when(w.started, now),
                when(w.deadline, now)]
               for s in servers for w in s.active_workers]
    if running:
        text += "\n\n" + table(["SERVER", "TASK", "TYPE", "QUEUE", "STARTED", "DEADLINE"], running)
    return Out(servers, text)


def cron_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    entries = [_masked(args, "entry", e) for e in insp.scheduler_entries()]
    if not entries:
        return Out(entries, "no live scheduler entries")
    now = insp.now()
    rows = [[e.id, e.spec, bounds.name(e.task_type), cell(preview(e.task_payload, task_type=e.task_type).text)[:40],
             " ".join(e.opts), when(e.next_enqueue_at, now), when(e.prev_enqueue_at, now)] for e in entries]
    return Out(entries, table(["ID", "SPEC", "TYPE", "PAYLOAD", "OPTIONS", "NEXT", "PREVIOUS"], rows))


def cron_history(insp: Inspector, args: argparse.Namespace) -> Out:
    events = insp.scheduler_history(args.entry_id, page=args.page, size=args.size)
    now = insp.now()
    text = table(["TASK", "ENQUEUED"], [[e.task_id, when(e.enqueued_at, now)] for e in events]) if events \
        else "no enqueue events"
    return Out(events, text)
