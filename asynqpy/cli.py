"""The `asynqpy` command: worker and dev here; other packages add theirs through asynqpy.plugins."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from asynqpy.errors import UsageError
from asynqpy.mux import ServeMux
from asynqpy.plugins import command_registrars


def load_mux(spec: str) -> ServeMux:
    """Import "package.module:attribute" and return the ServeMux there. Raises UsageError."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise UsageError(f"expected module:attribute (e.g. app.tasks:mux), got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {mod_name!r}: {exc}") from exc
    obj = getattr(mod, attr, None)
    if obj is None:
        raise UsageError(f"module {mod_name!r} has no attribute {attr!r}")
    if callable(obj) and not isinstance(obj, ServeMux):
        obj = obj()
    if not isinstance(obj, ServeMux):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a ServeMux")
    return obj


def parse_queues(text: str) -> dict[str, int]:
    """"critical=6,default=3,low" -> {"critical": 6, "default": 3, "low": 1}. Raises UsageError."""
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, prio = part.strip().partition("=")
        if not name:
            raise UsageError(f"empty queue name in --queues {text!r}")
        try:
            out[name] = int(prio) if prio else 1
        except ValueError as exc:
            raise UsageError(f"priority of queue {name!r} must be a whole number, got {prio!r}") from exc
    return out


def _add_worker(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("worker", help="run a worker server for a ServeMux")
    p.add_argument("mux", help="module:attribute of the ServeMux, e.g. app.tasks:mux")
    p.add_argument("--redis-url", help="default: ASYNQPY_REDIS_URL, REDIS_URL, or the `asynqpy dev` server")
    p.add_argument("--cluster", action="store_true",
                   help="the URL names Redis Cluster seed nodes (same as redis+cluster://host:port,...)")
    p.add_argument("--durable-acks", action="store_true",
                   help="acknowledgements wait for a replica (Redis WAIT) so a failover cannot undo them")
    p.add_argument("--concurrency", type=int, default=10, help="tasks at once per process (default 10)")
    p.add_argument("--queues", default="default=1", help="name=priority,... (default: default=1)")
    p.add_argument("--strict", action="store_true", help="strict priority: lower queues only when higher are empty")
    p.add_argument("--processes", type=int, default=1, help="worker processes, each its own server (default 1)")
    p.add_argument("--shutdown-timeout", type=float, default=8.0, help="seconds to finish tasks on stop (default 8)")
    p.set_defaults(func=_cmd_worker)


def _cmd_worker(args: argparse.Namespace) -> int:
    from asynqpy.connection import cluster_url, parse
    from asynqpy.embedded import default_redis_url
    from asynqpy.supervisor import WorkerSpec, run_workers

    url = args.redis_url or default_redis_url()
    url = cluster_url(url) if args.cluster else url
    parse(url)  # a bad URL: one line here, not a traceback in every child
    spec = WorkerSpec(mux=args.mux, redis_url=url, concurrency=args.concurrency,
                      queues=parse_queues(args.queues), strict=args.strict, shutdown_timeout=args.shutdown_timeout,
                      durable_acks=args.durable_acks)
    load_mux(args.mux)  # fail here, once, with one line, rather than in every child
    if args.processes < 1:
        raise UsageError("--processes must be at least 1")
    return run_workers(spec, args.processes)


def _add_dev(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("dev", help="embedded Valkey + demo worker + demo producer (+ dashboard when installed)")
    p.add_argument("--redis-url", help="use this server instead of starting the embedded one")
    p.add_argument("--port", type=int, default=0, help="port of the embedded server (default: a free one)")
    p.add_argument("--web-port", type=int, default=8080, help="dashboard port (default 8080)")
    p.add_argument("--rate", type=float, default=4.0, help="demo tasks per second (default 4)")
    p.add_argument("--no-demo", action="store_true", help="no demo producer")
    p.set_defaults(func=_cmd_dev)


def _cmd_dev(args: argparse.Namespace) -> int:
    from asynqpy.devserver import run_dev

    return run_dev(redis_url=args.redis_url, port=args.port, web_port=args.web_port, rate=args.rate,
                   demo=not args.no_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asynqpy", description="asynq-compatible task queue for Python")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="command")
    _add_worker(sub)
    _add_dev(sub)
    for _name, register in command_registrars():  # inspector, web, exporter, scheduler, ... (entry points)
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"asynqpy: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from asynqpy.errors import AsynqError, RedisUnavailableError

        if isinstance(exc, (AsynqError, RedisUnavailableError, ConnectionError, OSError, ValueError, TypeError)):
            print(f"asynqpy: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
