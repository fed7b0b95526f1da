"""`asynqpy exporter`: the queue-state metrics on a port of their own, for deployments without the dashboard."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from asynqpy import cliargs
from asynqpy.embedded import default_redis_url
from asynqpy.errors import AsynqError, UsageError, mask_url
from asynqpy.metrics.http import MetricsHTTPServer, parse_bind
from exporter.collector import DEFAULT_MAX_STALE, QueueStateCollector
from exporter.exposition import CONTENT_TYPE
from inspector import Inspector

log = logging.getLogger("asynqpy.exporter")

DEFAULT_BIND = "0.0.0.0:9876"  # asynq's tools/metrics_exporter port
# Seconds a Redis reply (or connect) may take: a scrape of a frozen Redis answers well within Prometheus's
# default scrape_timeout (10 s) instead of after the client's 10 s, which Prometheus counted as the target down.
DEFAULT_REDIS_TIMEOUT = 3.0


def process_registry() -> CollectorRegistry:
    """The exporter process's own CPU, memory and file descriptors (as asynq's exporter registers its own)."""
    reg = CollectorRegistry()
    ProcessCollector(registry=reg)
    PlatformCollector(registry=reg)
    return reg


def make_server(inspector: Inspector, host: str, port: int, *, max_age: float = 2.0,
                max_stale: float = DEFAULT_MAX_STALE, token: str | None = None) -> MetricsHTTPServer:
    """/metrics from the shared snapshot (always answered: see QueueStateCollector), /livez (the process serves)
    and /readyz (Redis answers a PING)."""
    collector = QueueStateCollector(inspector, max_age=max_age, max_stale=max_stale)
    reg = process_registry()

    def ready() -> tuple[bool, str]:
        try:
            return True, f"redis answered in {inspector.ping() * 1000:.1f} ms"
        except AsynqError as exc:  # RedisUnavailableError, or RedisCommandError (PING refused: renamed, ACL)
            return False, str(exc)

    return MetricsHTTPServer(host, port, lambda: (collector.render() + generate_latest(reg), CONTENT_TYPE),
                             {"/livez": lambda: (True, "ok"), "/readyz": ready}, token=token)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("exporter", help="serve queue-state Prometheus metrics (asynq's x/metrics names)",
                              description="Serve /metrics (queue state from the shared snapshot), /livez, /readyz.")
    p.add_argument("--bind", default=DEFAULT_BIND, help=f"host:port to listen on (default {DEFAULT_BIND})")
    p.add_argument("--redis-url", default=argparse.SUPPRESS,
                   help="default: ASYNQPY_REDIS_URL, REDIS_URL, the `asynqpy dev` server, then localhost")
    p.add_argument("--redis-timeout", type=cliargs.interval, default=DEFAULT_REDIS_TIMEOUT,
                   help="seconds a Redis reply may take before a scrape shows Redis as down, with the last queue "
                        f"state marked stale (default {DEFAULT_REDIS_TIMEOUT:g}; keep it under the scrape_timeout)")
    p.add_argument("--max-age", type=cliargs.seconds, default=2.0,
                   help="seconds a shared queue snapshot may be reused by scrapes (default 2)")
    p.add_argument("--max-stale", type=cliargs.seconds, default=DEFAULT_MAX_STALE,
                   help="while Redis cannot answer, scrapes show the last queue state, marked stale, for this many "
                        f"seconds (default {DEFAULT_MAX_STALE:g})")
    p.add_argument("--metrics-token", default=None,
                   help="require `Authorization: Bearer <token>` on /metrics (default: ASYNQPY_METRICS_TOKEN if set)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    host, port = parse_bind(args.bind)
    token = args.metrics_token or os.environ.get("ASYNQPY_METRICS_TOKEN") or None
    if token is not None and not token.strip():
        raise UsageError("the metrics token (--metrics-token or ASYNQPY_METRICS_TOKEN) is blank: give a token, or "
                         "none to serve /metrics without one")
    url = getattr(args, "redis_url", None) or default_redis_url()
    insp = Inspector(url, timeout=args.redis_timeout)
    srv = make_server(insp, host, port, max_age=args.max_age, max_stale=args.max_stale, token=token).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("asynqpy exporter: serving http://%s:%d/metrics for %s", host, srv.port, mask_url(url))
    try:
        stop.wait()
    finally:
        srv.stop()
        insp.close()
    log.info("asynqpy exporter: stopped")
    return 0
