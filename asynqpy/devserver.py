"""`asynqpy dev`: a private Valkey, a demo worker and a demo producer in one command; Ctrl-C stops them all."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

from asynqpy import demo as demo_app
from asynqpy.embedded import DEV_STATE_DIR, DEV_URL_FILE, EmbeddedServer
from asynqpy.plugins import DevContext, RunningAddon, dev_addons
from asynqpy.server import Server

log = logging.getLogger("asynqpy")


def run_dev(*, redis_url: str | None = None, port: int = 0, rate: float = 4.0, demo: bool = True,
            stop: threading.Event | None = None, args: argparse.Namespace | None = None) -> int:
    """Run until SIGINT/SIGTERM (or `stop` is set), with the installed add-ons (the dashboard...) started with
    `args` (the parsed command line, holding the add-ons' options). Returns the exit code."""
    stop = stop or threading.Event()
    embedded: EmbeddedServer | None = None
    if redis_url is None:
        embedded = EmbeddedServer(port=port or None, data_dir=DEV_STATE_DIR / "data").start()
        redis_url = embedded.url
        DEV_URL_FILE.write_text(redis_url + "\n")
    server = Server(redis_url, queues=demo_app.QUEUES, concurrency=20)
    threads: list[threading.Thread] = []
    addons: list[RunningAddon] = []
    try:
        server.start(demo_app.mux)
        if demo:
            t = threading.Thread(target=demo_app.produce, args=(redis_url, stop, rate), daemon=True)
            t.start()
            threads.append(t)
        addons = _start_addons(DevContext(redis_url, DEV_STATE_DIR, args or argparse.Namespace()))
        _print_banner(redis_url, embedded, [line for a in addons for line in a.banner], demo)
        _wait(stop)
    finally:
        stop.set()
        for a in reversed(addons):
            a.stop()
        server.shutdown()
        for t in threads:
            t.join(5)
        if embedded is not None:
            embedded.stop()
            DEV_URL_FILE.unlink(missing_ok=True)
    return 0


def _start_addons(ctx: DevContext) -> list[RunningAddon]:
    """Start every installed add-on; one that fails is reported and skipped (dev goes on without it)."""
    out = []
    for addon in dev_addons():
        try:
            out.append(addon.start(ctx))
        except Exception as exc:  # an add-on's failure must not take the worker down
            log.warning("asynqpy dev: %s could not start: %s", addon.name, exc)
    return out


def _print_banner(redis_url: str, embedded: EmbeddedServer | None, extra: list[str], with_demo: bool) -> None:
    lines = ["", "asynqpy dev is running (Ctrl-C stops everything)",
             f"  Redis:     {redis_url}" + (f"  (embedded Valkey, data in {embedded.data_dir})" if embedded else ""),
             f"  Worker:    queues {demo_app.QUEUES}, concurrency 20, demo handlers from asynqpy.demo"]
    if with_demo:
        lines.append("  Producer:  a demo mix of emails, reports, CRM syncs and scheduled cleanups")
    lines += [f"  {line}" for line in extra]
    lines += ["  Try:       asynqpy stats    |    asynqpy task ls --queue default --state archived", ""]
    print("\n".join(lines), flush=True)


def _wait(stop: threading.Event) -> None:
    def on_signal(signum: int, _frame: Any) -> None:
        log.info("asynqpy dev: %s received: stopping", signal.Signals(signum).name)
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    while not stop.wait(0.5):
        pass
