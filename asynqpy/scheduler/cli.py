"""`asynqpy scheduler`: run a Scheduler (or PeriodicTaskManager) from an app module, or entries from a YAML file."""

from __future__ import annotations

import argparse
import inspect
import pkgutil
import sys
from typing import Any

from asynqpy import cliargs
from asynqpy.errors import UsageError
from asynqpy.scheduler.core import Scheduler
from asynqpy.scheduler.manager import ConfigError, PeriodicTaskManager, YamlFileProvider


def load_scheduler(spec: str) -> Scheduler | PeriodicTaskManager:
    """Import "package.module:attribute": a Scheduler, a PeriodicTaskManager, or a function returning one."""
    if ":" not in spec:
        raise UsageError(f"expected module:attribute (e.g. app.cron:scheduler), got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        obj: Any = pkgutil.resolve_name(spec)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"cannot load {spec!r}: {exc}") from exc
    if isinstance(obj, type):  # a class is not called: Scheduler itself would run with no entries
        raise UsageError(f"{spec} is a class, not a Scheduler or PeriodicTaskManager (name an instance, or a "
                         "function returning one)")
    if callable(obj) and not isinstance(obj, (Scheduler, PeriodicTaskManager)):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise UsageError(f"{spec} is a function that needs arguments; name a Scheduler or PeriodicTaskManager, "
                             "or a function of none returning one") from None
        except ValueError:  # no signature to inspect (some builtins): call it as it is
            pass
        obj = obj()
    if not isinstance(obj, (Scheduler, PeriodicTaskManager)):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a Scheduler or PeriodicTaskManager")
    return obj


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("scheduler", help="enqueue periodic tasks (cron); run as many replicas as you like",
                              description="Run a Scheduler from APP (module:attribute) or the entries of a YAML "
                                          "file (--config). SIGTERM stops it and removes its entries.")
    p.add_argument("app", nargs="?", help="module:attribute naming a Scheduler or PeriodicTaskManager")
    p.add_argument("--config", help="YAML file of entries (re-read every --sync-interval seconds)")
    p.add_argument("--sync-interval", type=cliargs.interval, default=180.0, help="seconds between config reads (180)")
    p.add_argument("--location", default="UTC", help="time zone of specs without CRON_TZ= (with --config)")
    p.add_argument("--catch-up", choices=("none", "last"), default="none",
                   help="at start, enqueue the last tick missed while no replica ran (with --config)")
    p.add_argument("--redis-url", default=argparse.SUPPRESS,
                   help="default: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, then localhost")
    p.set_defaults(func=_cmd_scheduler)


def _cmd_scheduler(args: argparse.Namespace) -> int:
    redis_url = getattr(args, "redis_url", None)
    if bool(args.app) == bool(args.config):
        raise UsageError("give either APP (module:attribute) or --config FILE")
    if args.config:
        runner: Scheduler | PeriodicTaskManager = PeriodicTaskManager(
            YamlFileProvider(args.config), args.sync_interval, redis_url=redis_url, location=args.location,
            catch_up=args.catch_up)
    else:
        runner = load_scheduler(args.app)
        sched = runner.scheduler if isinstance(runner, PeriodicTaskManager) else runner
        if redis_url:
            sched.redis_url = redis_url
    try:
        runner.run()
    except ConfigError as exc:  # a config file that cannot be used at start is a usage error (exit 2)
        raise UsageError(str(exc)) from None
    return 0
