"""`asynqpy task enqueue`: store one task from the shell (with a Client, as a producer would), so that an operator
or a script can enqueue without writing Python. A queue past its backpressure limit refuses it: one line, exit 1
(or --block waits for room first)."""

from __future__ import annotations

import argparse
from typing import Any

from asynqpy import cliargs
from asynqpy.clicommon import add_common
from asynqpy.client import Client
from asynqpy.connection import cluster_url
from asynqpy.embedded import default_redis_url
from asynqpy.errors import UsageError
from asynqpy.task import Task
from asynqpy.terminal import say
from inspector.textout import dumps


def add_enqueue(task: Any) -> None:
    """The `task enqueue` subcommand on the task subparsers."""
    what = "enqueue one task (refused with exit 1 when the queue is past its `queue limit`)"
    p = task.add_parser("enqueue", help=what, description=what)
    add_common(p, top=False)
    p.add_argument("--cluster", action="store_true", help="the URL names Redis Cluster seed nodes")
    p.add_argument("type", help="the task type, e.g. email:send")
    p.add_argument("payload", nargs="?", default="", help="the payload, as text (default: empty)")
    p.add_argument("--queue", default="default", help="default: default")
    p.add_argument("--process-in", type=cliargs.duration(), metavar="DURATION",
                   help="run it after this long (10m, 90s)")
    p.add_argument("--unique", type=cliargs.duration(), metavar="DURATION",
                   help="refuse a duplicate (same type and payload in the queue) for this long")
    p.add_argument("--group", help="add it to this group, for the workers' aggregator")
    p.add_argument("--max-retry", type=cliargs.whole(0), metavar="N", help="retries before it is archived (default 25)")
    p.add_argument("--block", type=cliargs.duration(), default=0.0, metavar="DURATION",
                   help="when the queue is full, wait up to this long for room (default: refuse at once)")
    p.set_defaults(func=enqueue)


def enqueue(args: argparse.Namespace) -> int:
    url = getattr(args, "redis_url", None) or default_redis_url()
    if getattr(args, "cluster", False):
        url = cluster_url(url)
    fields: dict[str, Any] = {"queue": args.queue}
    for name in ("process_in", "unique", "group", "max_retry"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    try:
        client = Client(url)
    except ValueError as exc:  # a URL that cannot be used (InvalidArgumentError is a ValueError too)
        raise UsageError(str(exc)) from exc
    with client:
        info = client.enqueue(Task(args.type, args.payload.encode()), block=args.block, **fields)
    data = {"id": info.id, "queue": info.queue, "type": info.type, "state": info.state.value}
    say(dumps(data) if getattr(args, "json", False) else
        f"enqueued task {info.id} ({info.type}) in queue {info.queue}: {info.state.value}")
    return 0
