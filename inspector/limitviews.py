"""The `asynqpy limit` commands: set, list and remove flow-control limits (asynqpy.limits)."""

from __future__ import annotations

import argparse
from typing import Any

from asynqpy import cliargs
from asynqpy.backpressure import QueueLimit
from asynqpy.errors import AsynqError, InvalidArgumentError, UsageError
from asynqpy.limits import Limit, Usage, parse_rate
from inspector.api import Inspector
from inspector.display import span
from inspector.textout import table
from inspector.views import Out

GO_NOTE = "(only asynqpy workers obey limits; Go asynq workers do not read them)"


def register(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    from inspector.cli import run
    limit = subparsers.add_parser("limit", help="fleet-wide concurrency and rate limits per task type").add_subparsers(
        dest="limit_command", metavar="subcommand", required=True)
    help = "set a limit on task types matching PATTERN ('*' matches anything): --concurrency and/or --rate"
    p = limit.add_parser("set", help=help, description=help, parents=parents)
    p.add_argument("pattern", help="task type pattern, e.g. 'email:*' or sync:crm")
    p.add_argument("--concurrency", type=cliargs.positive, help="at most N running at once across the fleet")
    p.add_argument("--rate", help="at most this many starts, e.g. 100/s, 600/m, 5000/h")
    p.add_argument("--burst", type=cliargs.number(0.0), default=0.0, help="starts allowed at once after a quiet spell "
                                                            "(default: the rate per second, at least 1)")
    p.add_argument("--key", default="", help="hold the limit per value of header.NAME or payload.FIELD")
    p.set_defaults(func=lambda args: run(limit_set, args))
    help = "limits with their use now (running / limit, tokens, waiting tasks)"
    limit.add_parser("ls", help=help, description=help, parents=parents).set_defaults(
        func=lambda args: run(limit_ls, args))
    help = "remove a limit; tasks waiting on it go back to pending"
    p = limit.add_parser("rm", help=help, description=help, parents=parents)
    p.add_argument("pattern", help="the limit's pattern, as `asynqpy limit ls` shows it")
    p.set_defaults(func=lambda args: run(limit_rm, args))


def register_queue_limit(queue: Any, parents: list[argparse.ArgumentParser]) -> None:
    """`asynqpy queue limit QUEUE [--max-size N] [--max-latency 10m] [--clear]`."""
    from inspector.cli import QUEUE, run
    help = ("backpressure: refuse enqueues past a size and/or an oldest-task age (no option: show the limit)")
    p = queue.add_parser("limit", help=help, description=help + "; only asynqpy producers obey it", parents=parents)
    p.add_argument("queue", help=QUEUE)
    p.add_argument("--max-size", type=cliargs.positive,
                   help="at most this many tasks pending, scheduled, retry, active and aggregating (in groups)")
    p.add_argument("--max-latency", type=cliargs.duration(above_zero=True),
                   help="refuse while the oldest pending task has waited longer, e.g. 10m")
    p.add_argument("--clear", action="store_true", help="remove the queue's limit")
    p.set_defaults(func=lambda args: run(queue_limit, args))


def _queue_limit_text(ql: QueueLimit) -> str:
    parts = ([f"max size {ql.max_size}"] if ql.max_size is not None else []) + \
        ([f"max latency {ql.max_latency:g} s"] if ql.max_latency is not None else [])
    if not parts:
        return f"queue {ql.queue!r} has no limit"
    return f"queue {ql.queue!r}: {', '.join(parts)}; {ql.refused} enqueue(s) refused so far"


def queue_limit(insp: Inspector, args: argparse.Namespace) -> Out:
    if args.clear and (args.max_size is not None or args.max_latency is not None):
        raise UsageError("--clear removes the limit; --max-size and --max-latency set one: give one or the other")
    if args.clear:
        gone = insp.clear_queue_limit(args.queue)
        return Out({"queue": args.queue, "cleared": gone},
                   f"queue {args.queue!r}: limit removed" if gone else f"queue {args.queue!r} has no limit")
    if args.max_size is not None or args.max_latency is not None:
        insp.set_queue_limit(args.queue, max_size=args.max_size, max_latency=args.max_latency)
    ql = insp.queue_limit(args.queue)
    return Out(ql, _queue_limit_text(ql))


def limit_set(insp: Inspector, args: argparse.Namespace) -> Out:
    try:
        rate = parse_rate(args.rate) if args.rate else 0.0
        lim = Limit(args.pattern, concurrency=args.concurrency or 0, rate=rate, burst=args.burst, key=args.key)
    except InvalidArgumentError as exc:
        raise UsageError(str(exc)) from exc
    insp.set_limit(lim)
    return Out(lim, f"limit {lim.pattern}: {lim.describe()}\n{GO_NOTE}")


def usage_rows(usages: list[Usage]) -> str:
    rows = []
    for u in usages:
        running = f"{u.running}/{u.limit.concurrency}" if u.limit.concurrency else "-"
        if u.limit.concurrency and u.limit.key:
            running += f" in {u.partitions} key(s)"
        tokens = "-" if u.tokens is None else f"{u.tokens:.1f}/{u.limit.bucket:g}"
        waiting = f"{u.waiting} (oldest {span(u.oldest_wait)})" if u.waiting else "0"
        rows.append([u.limit.pattern, u.queue, u.limit.describe(), running, tokens, waiting, u.waits_total])
    return table(["LIMIT", "QUEUE", "RULE", "RUNNING", "TOKENS", "WAITING", "HELD BACK"], rows)


def go_consumers(insp: Inspector, usages: list[Usage]) -> list[str]:
    """Warnings for live servers that look like Go asynq servers (no clock offset in their heartbeat: see
    ServerInfo.clock_offset) and consume a queue holding limits: Go workers do not obey them."""
    limited = {u.queue for u in usages}
    return [f"server {s.host}:{s.pid} consumes {', '.join(sorted(limited & set(s.queues)))} and looks like a Go "
            "asynq server: Go workers do not obey these limits"
            for s in insp.servers() if s.clock_offset is None and limited & set(s.queues)]


def limit_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    lims = insp.limits()
    if not lims:
        return Out([], "no limits")
    usages = insp.limit_usage()
    held = {u.limit.pattern for u in usages}
    text = usage_rows(usages) if usages else ""
    idle = [lim for lim in lims if lim.pattern not in held]
    if idle:
        text += ("\n" if text else "") + "\n".join(f"{lim.pattern}: {lim.describe()} (no queue holds it yet; "
                                                   "servers copy it at start)" for lim in idle)
    warnings = go_consumers(insp, usages)
    text += "".join(f"\nwarning: {w}" for w in warnings)
    return Out({"limits": lims, "usage": usages, "warnings": warnings}, f"{text}\n{GO_NOTE}")


def limit_rm(insp: Inspector, args: argparse.Namespace) -> Out:
    if not insp.remove_limit(args.pattern):
        raise AsynqError(f"no limit {args.pattern!r} (`asynqpy limit ls` lists them)")
    return Out({"pattern": args.pattern, "removed": True}, f"limit {args.pattern} removed")
