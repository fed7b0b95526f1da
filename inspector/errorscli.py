"""`asynqpy errors`: the last errors as a table (or JSON), from Inspector.recent_failures."""

from __future__ import annotations

import argparse
from typing import Any

from asynqpy import cliargs
from inspector.api import Inspector
from inspector.bounds import clip, name
from inspector.cli import _common, run
from inspector.failures import MAX_LIMIT, FailureGroup
from inspector.textout import table, when
from inspector.views import Out

ERROR_WIDTH = 100


def errors_view(insp: Inspector, args: argparse.Namespace) -> Out:
    found = insp.recent_failures(args.queue or None, limit=args.limit)
    if not found.groups:
        return Out(found, "no failures: no task waits for a retry and none is archived")
    now = insp.now()
    rows = [[name(g.queue), name(g.task_type) or "-", _error_cell(g), g.count, g.retry, g.archived,
             when(g.first_seen, now), when(g.last_seen, now), " ".join(t for t, _ in g.task_ids[:3])]
            for g in found.groups]
    text = table(["QUEUE", "TYPE", "ERROR", "COUNT", "RETRY", "ARCHIVED", "FIRST SEEN", "LAST SEEN", "TASKS"], rows)
    note = f"\n\nfrom the newest {args.limit} retry and archived tasks of each queue ({found.scanned} read)"
    if found.truncated:
        note += "; older failures are not counted (use `asynqpy task search`)"
    return Out(found, text + note)


def _error_cell(g: FailureGroup) -> str:
    """The group's fingerprint, and one real message when it differs (what the placeholders stood for)."""
    fp = " ".join(g.fingerprint.split())
    real = " ".join(g.error.split())
    return clip(fp if fp == real else f"{fp} (e.g. {real})", ERROR_WIDTH)


def register(subparsers: Any) -> None:
    """Add `errors` to asynqpy's subcommands."""
    e = subparsers.add_parser("errors", parents=[_common()],
                              help="the last errors, grouped by queue, type and error fingerprint",
                              description="The most recent failures (retry and archived tasks), grouped by queue, "
                                          "task type and error fingerprint (numbers, ids, addresses, quoted values "
                                          "and durations as placeholders); bounded: reads at most --limit retry and "
                                          "--limit archived tasks per queue.")
    e.add_argument("queue", nargs="*", help="only these queues (default: all)")
    e.add_argument("--limit", type=cliargs.whole(1, MAX_LIMIT), default=100,
                   help=f"tasks read per state and queue (default 100, at most {MAX_LIMIT})")
    e.set_defaults(func=lambda args: run(errors_view, args))
