"""`asynqpy task find QUEUE 'QUERY'`: the tasks matching a query (inspector.query), and with --run, --archive or
--delete a background job acting on all of them, after a preview of how many match and a confirmation."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from asynqpy import cliargs
from asynqpy.errors import UsageError
from inspector.api import Inspector
from inspector.find import FindCount, Mask
from inspector.jobs import Job
from inspector.models import TaskRecord
from inspector.progress import bar
from inspector.redact import Policy
from inspector.textout import table, when
from inspector.views import PAST, Out, confirm

PREVIEW_SCAN = 200_000  # tasks the preview counts through before saying "at least"
HELP = ("the query: terms ANDed, a leading - negates: type:email:* state:retry,archived error:\"SMTP busy\" "
        "payload:acme payload.user_id:42 header.tenant:acme retried:>3 age:>1h failed:<10m id:3f2a* (a query of "
        "one negated term goes last, after --: task find Q --yes -- -type:x)")


def add_find(task: Any, make: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register `task find` on the task subcommands (make: cli._cmd)."""
    p = make(task, "find", find_tasks, "find tasks of any state by a query; act on all that match", parents)
    p.add_argument("queue", help="the queue's name (`asynqpy queue ls` lists them)")
    p.add_argument("query", help=HELP)
    p.add_argument("--limit", type=cliargs.positive, default=50, help="show at most this many matches (default 50)")
    p.add_argument("--cursor", default="", help="resume where a previous find stopped (it prints the cursor)")
    p.add_argument("--max-scan", type=cliargs.positive, default=10_000, help="tasks to scan at most (default 10000)")
    act = p.add_mutually_exclusive_group()
    for action, what in (("run", "move every match to pending, to run now"), ("archive", "archive every match"),
                         ("delete", "delete every match")):
        act.add_argument(f"--{action}", dest="action", action="store_const", const=action,
                         help=f"{what}, as a background job with a progress bar (asks first unless --yes)")
    p.add_argument("--rate", type=cliargs.job_rate, default=0.0,
                   help="with an action: tasks changed per second (default 0: as fast as bounded steps go)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def _mask(args: argparse.Namespace) -> Mask | None:
    found = getattr(args, "redactor", None)
    if found is None:
        return None
    policy: Policy = found[0]
    role: str = found[1]

    def mask(rec: TaskRecord) -> TaskRecord:
        return policy.task(rec, role, full=False)

    return mask


def find_tasks(insp: Inspector, args: argparse.Namespace) -> Out:
    if args.action:
        return _act(insp, args)
    if args.rate:
        raise UsageError("--rate goes with --run, --archive or --delete")
    res = insp.find(args.queue, args.query, limit=args.limit, cursor=args.cursor, max_scan=args.max_scan,
                    mask=_mask(args))
    now = insp.now()
    rows = [[t.id, t.state.value, t.info.type or "-", t.payload.text[:50], t.info.retried,
             t.info.last_err[:40] or "-", when(t.info.last_failed_at, now)] for t in res.tasks]
    text = table(["ID", "STATE", "TYPE", "PAYLOAD", "RETRIED", "LAST ERROR", "FAILED"], rows) if rows \
        else "no matches"
    where = "the end was reached" if res.done else f"resume with --cursor {res.next_cursor}"
    return Out(res, f"{text}\n\n{len(res.tasks)} matches; scanned {res.scanned} tasks, {res.position} of "
                    f"{res.total} in all; {where}")


def preview(c: FindCount) -> str:
    """"12 tasks match" or "at least 12 tasks match (among the first 200000 of 1000000)"."""
    noun = "task matches" if c.matched == 1 else "tasks match"
    if c.complete:
        return f"{c.matched} {noun}"
    return f"at least {c.matched} {noun} (among the first {c.scanned} of {c.total})"


def _act(insp: Inspector, args: argparse.Namespace) -> Out:
    if not args.query.strip():
        raise UsageError(f"--{args.action} needs a query (for a whole state: task {args.action} QUEUE --all --state S)")
    mask = _mask(args)
    count = insp.count_matches(args.queue, args.query, max_scan=PREVIEW_SCAN, mask=mask)
    if count.complete and count.matched == 0:
        return Out({"queue": args.queue, "query": args.query, "action": args.action, "count": 0},
                   "no tasks match: nothing to do")
    verb = {"run": "run now", "archive": "archive", "delete": "delete"}[args.action]
    confirm(f"{preview(count)} in queue {args.queue!r}: {verb} all that match?", args)
    job = insp.start_find_job(args.action, args.queue, args.query, rate=args.rate, user="cli")
    stream = sys.stderr
    tty = stream.isatty()

    def show(j: Job) -> None:
        stream.write(("\r" if tty else "") + bar(j) + ("" if tty else "\n"))
        stream.flush()

    try:
        final = insp.run_job(job.id, progress=show, mask=mask)
    except KeyboardInterrupt:
        insp.cancel_job(job.id)
        final = insp.run_job(job.id, mask=mask)
    if tty:
        stream.write("\n")
    return Out({"queue": args.queue, "query": args.query, "action": args.action, "count": final.changed,
                "at_least": final.uncounted, "scanned": final.done, "job": final.id, "status": final.status},
               f"{final.changed_text} tasks {PAST[args.action]} (job {final.id} {final.status}; {final.done} "
               "scanned)",
               ok=final.status == "done")
