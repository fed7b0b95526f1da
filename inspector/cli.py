"""The Inspector's commands of `asynqpy`: stats, queue, task, server and cron; tables for people, --json for scripts."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from asynqpy import cliargs, typed
from asynqpy.clicommon import Parser, add_common, mask, parse_command_line, run_guarded
from asynqpy.connection import cluster_url
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError, UsageError
from asynqpy.task import TaskState
from asynqpy.terminal import say
from inspector import enqueuecli, findcli, limitviews, powercli, views
from inspector.api import Inspector
from inspector.context import MAX_PAGE_SIZE
from inspector.reader import MAX_HISTORY_DAYS
from inspector.redact import ROLES as REDACT_ROLES
from inspector.redact import Policy
from inspector.textout import dumps

Handler = Callable[[Inspector, argparse.Namespace], views.Out]
STATES = [s.value for s in TaskState]
QUEUE = "the queue's name (`asynqpy queue ls` lists them)"
TASK_ID = "the task's id (`asynqpy task ls QUEUE --state STATE` lists them)"
ENV_REDACT = "ASYNQPY_REDACT"
ENV_REDACTION = "ASYNQPY_REDACTION"




def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    add_common(p, top=False)
    p.add_argument("--cluster", action="store_true", default=argparse.SUPPRESS,
                   help="the URL names Redis Cluster seed nodes (same as redis+cluster://)")
    p.add_argument("--tasks", default=argparse.SUPPRESS, metavar="MODULES",
                   help="modules (a,b) whose typed tasks' payloads are shown as calls (default: $ASYNQPY_TASKS)")
    p.add_argument("--redact", nargs="?", const="viewer", choices=REDACT_ROLES, default=argparse.SUPPRESS,
                   metavar="ROLE", help="mask payload, header and result values as the dashboard does for ROLE "
                                        f"(default viewer; or set ${ENV_REDACT}=ROLE)")
    p.add_argument("--no-redact", dest="redact", action="store_const", const="", default=argparse.SUPPRESS,
                   help=f"show every value, whatever ${ENV_REDACT} says")
    p.add_argument("--redaction", default=argparse.SUPPRESS, metavar="FILE",
                   help="redaction rules: a TOML file, or the dashboard config with a [redaction] table "
                        f"(default: ${ENV_REDACTION}; without one, keys named like secrets are masked); "
                        "implies --redact")
    return p


def redaction(args: argparse.Namespace) -> tuple[Policy, str] | None:
    """The policy and role to mask output for (None: show everything). --redaction FILE implies --redact (as
    viewer, or the role $ASYNQPY_REDACT names). Raises UsageError for bad rules or --redaction with --no-redact."""
    role = getattr(args, "redact", None)
    if role == "" and getattr(args, "redaction", None):
        raise UsageError("--redaction FILE masks output; --no-redact shows everything: give one of them")
    if role is None:
        role = os.environ.get(ENV_REDACT, "").strip()
        role = "viewer" if role.lower() in ("1", "true", "yes", "on") else role
    off = not role or role.lower() in ("0", "false", "no", "off")
    if off and getattr(args, "redaction", None):
        role, off = "viewer", False  # rules given on the command line are meant to be used
    if off:
        return None
    if role not in REDACT_ROLES:
        raise UsageError(f"${ENV_REDACT}: expected a role ({', '.join(REDACT_ROLES)}) or 1, got {role!r}")
    path = getattr(args, "redaction", None) or os.environ.get(ENV_REDACTION) or None
    try:
        return Policy.from_setting(path), role
    except InvalidArgumentError as exc:
        raise UsageError(str(exc)) from exc


def _cmd(sub: Any, name: str, handler: Handler, help: str, parents: list[argparse.ArgumentParser]) -> Any:
    p = sub.add_parser(name, help=help, description=help, parents=parents)
    p.set_defaults(func=lambda args: run(handler, args))
    return p


def _confirm(p: argparse.ArgumentParser) -> None:
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def register(subparsers: Any) -> None:
    """Add the stats, queue, task, server and cron commands to an argparse subparsers object.

    Each leaf command sets func(args) -> exit code (0 ok, 1 error; errors print one line to stderr).
    """
    c = [_common()]
    p = _cmd(subparsers, "stats", _stats, "queues at a glance, with Redis health; --types: per task type", c)
    p.add_argument("--types", action="store_true", help="per task type: processed, failed, run time and wait "
                                                        "percentiles, total run time (from asynqpy workers)")
    p.add_argument("--window", choices=("1h", "24h", "72h"), default="1h", help="with --types (default 1h)")
    p.add_argument("--queue", action="append", metavar="GLOB", help="with --types: count only the queues matching "
                                                                     "GLOB (repeatable, e.g. 'billing:*')")
    _cmd(subparsers, "mark", powercli.mark, "record a deploy mark the dashboard's charts draw", c).add_argument(
        "label", help='what happened, e.g. "v1.4.2"')

    queue = subparsers.add_parser("queue", help="list, inspect, pause and remove queues").add_subparsers(
        dest="queue_command", metavar="subcommand", required=True)
    _cmd(queue, "ls", views.queue_ls, "list queues", c)
    _cmd(queue, "info", views.queue_info, "counts, latency and warnings of a queue", c).add_argument(
        "queue", help=QUEUE)
    p = _cmd(queue, "history", views.queue_history, "processed and failed per UTC day", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("--days", type=cliargs.whole(1, MAX_HISTORY_DAYS), default=7,
                   help=f"how many days back, today first (default 7, at most {MAX_HISTORY_DAYS})")
    _cmd(queue, "pause", views.queue_pause, "stop servers from taking the queue's tasks (already paused: "
         "says so, exit 0)", c).add_argument("queue", help=QUEUE)
    _cmd(queue, "unpause", views.queue_unpause, "resume a paused queue (not paused: says so, exit 0)",
         c).add_argument("queue", help=QUEUE)
    p = _cmd(queue, "rm", views.queue_rm, "remove a queue (an empty one, or any with --force)", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("--force", action="store_true", help="also delete its tasks (not possible while any is active)")
    _confirm(p)

    limitviews.register_queue_limit(queue, c)
    _register_task(subparsers, c)
    limitviews.register(subparsers, c)

    server = subparsers.add_parser("server", help="live worker servers").add_subparsers(
        dest="server_command", metavar="subcommand", required=True)
    _cmd(server, "ls", views.server_ls, "live servers and their running tasks", c)

    cron = subparsers.add_parser("cron", help="scheduler entries").add_subparsers(
        dest="cron_command", metavar="subcommand", required=True)
    _cmd(cron, "ls", powercli.cron_ls, "cron entries of live schedulers, in plain words, with their state", c)
    for action, what in (("pause", "pause an entry on every replica (asynqpy schedulers only)"),
                         ("resume", "resume a paused entry"), ("run", "enqueue an entry's task now")):
        _cmd(cron, action, powercli.cron_action(action), what, c).add_argument(
            "entry_id", help="the scheduler entry's id (`asynqpy cron ls` lists them)")
    p = _cmd(cron, "history", views.cron_history, "enqueue events of an entry, newest first", c)
    p.add_argument("entry_id", help="the scheduler entry's id (`asynqpy cron ls` lists them)")
    _paging(p)


def _stats(insp: Any, args: argparse.Namespace) -> Any:
    return powercli.stats_types(insp, args) if args.types else views.stats(insp, args)


def _paging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--page", type=cliargs.positive, default=1, help="page number, from 1 (default 1)")
    p.add_argument("--size", type=cliargs.whole(1, MAX_PAGE_SIZE), default=30,
                   help=f"rows per page (default 30, at most {MAX_PAGE_SIZE})")


def _register_task(subparsers: Any, c: list[argparse.ArgumentParser]) -> None:
    task = subparsers.add_parser("task", help="list, find, inspect and act on tasks").add_subparsers(
        dest="task_command", metavar="subcommand", required=True)
    p = _cmd(task, "ls", views.task_ls, "one page of a state's tasks, next to run first", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("--state", choices=STATES, default="pending", help="default: pending")
    p.add_argument("--group", help="the group, for --state aggregating")
    _paging(p)
    p = _cmd(task, "info", views.task_info, "everything about a task", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("task_id", help=TASK_ID)
    p = _cmd(task, "explain", views.task_explain, "why a task has not run (yet)", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("task_id", help=TASK_ID)
    p = _cmd(task, "search", views.task_search, "find tasks by type, id, payload or error (bounded scan)", c)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("--state", choices=STATES, default="pending", help="default: pending")
    p.add_argument("--group", help="the group, for --state aggregating")
    p.add_argument("--type", help="task type prefix")
    p.add_argument("--id", dest="id_prefix", help="task id prefix")
    p.add_argument("--text", help="substring of the payload (ASCII case-insensitive)")
    p.add_argument("--error", help="substring of the last error (ASCII case-insensitive)")
    p.add_argument("--limit", type=cliargs.positive, default=50, help="stop after this many matches (default 50)")
    p.add_argument("--cursor", type=cliargs.whole(0), default=0, help="resume where a previous search stopped")
    p.add_argument("--max-scan", type=cliargs.positive, default=10_000, help="tasks to scan at most (default 10000)")
    for action, what in (("run", "move tasks to pending, to run now"), ("archive", "archive tasks"),
                         ("delete", "delete tasks")):
        p = _cmd(task, action, views.task_action(action), f"{what}: the given ids, or --all --state S", c)
        p.add_argument("queue", help=QUEUE)
        p.add_argument("task_ids", nargs="*", metavar="task_id", help="ids of tasks of the queue (or --all --state S)")
        p.add_argument("--all", action="store_true", help="every task in --state (asks first unless --yes)")
        p.add_argument("--state", choices=STATES, help="the state, with --all")
        p.add_argument("--group", help="one group only, with --all --state aggregating")
        p.add_argument("--rate", type=cliargs.job_rate,
                       help="with --all: tasks per second (0: as fast as bounded steps go), as a background job with "
                            "a progress bar (the dashboard shows it too; Ctrl-C cancels)")
        _confirm(p)
    findcli.add_find(task, _cmd, c)
    enqueuecli.add_enqueue(task)
    _cmd(task, "cancel", views.task_cancel, "ask servers to cancel a running task", c).add_argument(
        "task_id", help="the id of a running task")


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run one command: connect, call the handler, print its result (0 ok, 1 when something failed).

    Errors are raised to the caller (asynqpy.clicommon.run_guarded turns them into one line and an exit code).
    """
    url = getattr(args, "redis_url", None) or default_redis_url()
    typed.import_tasks(getattr(args, "tasks", ""))
    args.redactor = redaction(args)
    try:
        if getattr(args, "cluster", False):
            url = cluster_url(url)
        insp = Inspector(url)
    except InvalidArgumentError as exc:  # a URL connection.parse refuses: its message names the URL
        raise UsageError(str(exc)) from exc
    except ValueError as exc:  # redis-py cannot parse the URL
        raise UsageError(f"bad Redis URL {mask(url)}: {exc}") from exc
    with insp:
        out = handler(insp, args)
        say(dumps(out.data) if getattr(args, "json", False) else out.text)
        return 0 if out.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="asynqpy", description="inspect and manage asynq queues")
    register(parser.add_subparsers(dest="command", metavar="command", required=True))
    add_common(parser, top=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one Inspector command alone (the full `asynqpy` command also has worker and dev)."""
    parser = build_parser()
    args = parse_command_line(parser, sys.argv[1:] if argv is None else argv)
    return run_guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
