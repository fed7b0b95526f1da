"""The `asynqpy` command: worker, dev and redis here; other packages add theirs through asynqpy.plugins."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from asynqpy import __version__, cliargs
from asynqpy.clicommon import Parser, add_common_everywhere, debugging, parse_command_line, run_guarded
from asynqpy.errors import UsageError
from asynqpy.plugins import command_registrars, dev_addons

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

EXAMPLES = """\
examples:
  asynqpy redis                                  # just the server: the embedded Valkey, address printed
  asynqpy worker app.tasks:mux --queues critical=6,default=3,low=1
  asynqpy stats                                  # every queue at a glance
  asynqpy task ls default --state archived       # one page of a queue's archived tasks

`asynqpy COMMAND --help` describes a command. --redis-url, --json and --debug go before or after COMMAND.
"""


# The commands defined here: naming one (or only --version) needs no entry-point scan and no plug-in import,
# so `asynqpy --version` and `asynqpy worker` start fast.
BUILT_IN = ("worker", "dev", "redis")
_VALUED = ("--redis-url",)  # top-level options that take the next word as their value


def command_word(argv: Sequence[str]) -> str | None:
    """The command argv names (its first word that is no option nor an option's value), or None."""
    words = iter(argv)
    for word in words:
        if word in _VALUED:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _add_worker(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    help = "run a worker server for a ServeMux"
    p = sub.add_parser("worker", help=help, description=help + ", until SIGTERM or Ctrl-C (then it finishes or "
                       "requeues its running tasks within --shutdown-timeout)")
    p.add_argument("mux", help="module:attribute of the ServeMux, e.g. app.tasks:mux (imported from the current "
                               "directory or PYTHONPATH)")
    p.add_argument("--cluster", action="store_true",
                   help="the URL names Redis Cluster seed nodes (same as redis+cluster://host:port,...)")
    p.add_argument("--durable-acks", action="store_true",
                   help="acknowledgements wait for a replica (Redis WAIT) so a failover cannot undo them")
    p.add_argument("--concurrency", type=cliargs.positive, default=10, help="tasks at once per process (default 10)")
    p.add_argument("--queues", default="default=1", help="name=priority,... (default: default=1)")
    p.add_argument("--strict", action="store_true", help="strict priority: lower queues only when higher are empty")
    p.add_argument("--processes", type=cliargs.positive, default=1,
                   help="worker processes, each its own server (default 1)")
    p.add_argument("--shutdown-timeout", type=cliargs.seconds, default=8.0,
                   help="seconds to finish tasks on stop (default 8)")
    p.add_argument("--metrics-port", type=cliargs.port, default=None,
                   help="serve Prometheus metrics, /livez and /readyz on this port (with --processes N: the sum of "
                        "all processes, through prometheus_client's multiprocess mode)")
    p.add_argument("--metrics-host", default="0.0.0.0", help="address for --metrics-port (default 0.0.0.0)")
    p.add_argument("--max-task-types", type=cliargs.whole(0), default=100,
                   help="task_type label values per process before new types count as 'other' (default 100)")
    p.set_defaults(func=_cmd_worker)


def _cmd_worker(args: argparse.Namespace) -> int:
    from asynqpy.config import ServerConfig
    from asynqpy.connection import cluster_url, parse
    from asynqpy.embedded import default_redis_url
    from asynqpy.loader import load_mux, parse_queues
    from asynqpy.supervisor import WorkerSpec, run_workers

    config = ServerConfig(concurrency=args.concurrency, queues=parse_queues(args.queues),
                          strict_priority=args.strict, shutdown_timeout=args.shutdown_timeout,
                          durable_acks=args.durable_acks)
    url = args.redis_url or default_redis_url()
    url = cluster_url(url) if args.cluster else url
    parse(url)  # a bad URL: one line here, not a traceback in every child
    spec = WorkerSpec(mux=args.mux, redis_url=url, config=config, metrics_port=args.metrics_port,
                      metrics_host=args.metrics_host, max_task_types=args.max_task_types)
    load_mux(args.mux)  # fail here, once, rather than in every child
    return run_workers(spec, args.processes)


def _add_port(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=cliargs.port, default=None,
                   help="port of the embedded Valkey (default: 6379 when free, else a free one, printed); "
                        "0 for any free port")
    p.add_argument("--fresh", action="store_true", help="start with empty data (deletes what earlier runs kept)")


def _add_dev(sub: argparse._SubParsersAction, *, with_addons: bool = True) -> None:  # type: ignore[type-arg]
    """with_addons: look up the installed `asynqpy dev` add-ons (an entry-point scan) to offer their options."""
    addons = dev_addons() if with_addons else []
    extra = "".join(f" + {a.name}" for a in addons)
    help = f"embedded Valkey + demo worker + demo producer{extra}, for trying asynqpy out"
    p = sub.add_parser("dev", help=help, description=(
        "Start everything for local development in one command: an embedded Valkey (kept in ./.asynqpy/dev, at "
        "the address it prints, never shared with `asynqpy redis`; or the server of --redis-url), a worker with "
        "the demo handlers of asynqpy.demo and a producer that keeps a realistic mix of demo tasks flowing "
        "(successes, retries, failures that end archived, scheduled tasks)"
        + "".join(f", and {a.name}" for a in addons) + ". The banner says what runs where; a line every 10 s "
        "(--activity-every) says what the worker did. Ctrl-C, SIGTERM or closing the terminal stops it all. "
        "Other `asynqpy` commands find this server from any directory below "
        "this one."))
    _add_port(p)
    p.add_argument("--rate", type=cliargs.interval, default=4.0, help="demo tasks per second (default 4)")
    p.add_argument("--no-demo", action="store_true", help="no demo producer (the demo worker still runs)")
    p.add_argument("--activity-every", type=cliargs.interval, default=10.0, metavar="SECONDS",
                   help="how often to log what the worker did (default 10)")
    p.add_argument("--redis-only", action="store_true",
                   help="just the server: no worker, no producer, no add-ons (the same as `asynqpy redis`)")
    for addon in addons:
        addon.add_arguments(p)
    p.set_defaults(func=_cmd_dev)


def _add_redis(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    help = "just the server: the embedded Valkey, for your own producers and workers"
    p = sub.add_parser("redis", help=help, description=(
        "Run only the embedded Valkey (no worker, no demo tasks) on a fixed address it prints, with its data "
        "kept in ./.asynqpy/redis (never shared with `asynqpy dev`'s server; --fresh starts empty). Clients, "
        "workers and `asynqpy` commands started from this directory or below find it without --redis-url. "
        "Ctrl-C, SIGTERM or closing the terminal stops it."))
    _add_port(p)
    p.set_defaults(func=_cmd_redis)


def _cmd_dev(args: argparse.Namespace) -> int:
    from asynqpy.devserver import run_dev

    return run_dev(args)


def _cmd_redis(args: argparse.Namespace) -> int:
    from asynqpy.devserver import run_dev

    if args.redis_url:
        raise UsageError("`asynqpy redis` starts a server; --redis-url names one to use instead")
    args.redis_only = True
    return run_dev(args)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `asynqpy` parser. Given the argv it will parse, it leaves out what that argv cannot reach: the
    plug-in commands when argv names a built-in command or asks only for --version, the other plug-ins when
    it names a plug-in's command (asynqpy.plugins), and dev's add-ons unless it names dev or no command."""
    word = None if argv is None else command_word(argv)
    short = argv is not None and (word in BUILT_IN or (word is None and "--version" in argv))
    addons = word == "dev" or (word is None and not short)

    parser = Parser(prog="asynqpy", description="A Python task queue on Redis that speaks Go "
                                     "asynq's wire format: workers, a dev server, and tools to inspect queues.",
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"asynqpy {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="command")
    _add_worker(sub)
    _add_dev(sub, with_addons=addons)
    _add_redis(sub)
    if not short:
        for _name, register in command_registrars(word):  # inspector, web, exporter, ... (entry points)
            register(sub)
    add_common_everywhere(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words)
    args = parse_command_line(parser, words)
    logging.basicConfig(level=logging.DEBUG if args.verbose or debugging(args) else logging.INFO, format=LOG_FORMAT)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
