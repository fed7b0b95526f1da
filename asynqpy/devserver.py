"""`asynqpy dev`: a private Valkey, a demo worker and a demo producer in one command; Ctrl-C stops them all."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from asynqpy import demo as demo_app
from asynqpy.embedded import DEV_STATE_DIR, DEV_URL_FILE, EmbeddedServer
from asynqpy.server import Server

log = logging.getLogger("asynqpy")


def run_dev(*, redis_url: str | None = None, port: int = 0, web_port: int = 8080, rate: float = 4.0,
            demo: bool = True, stop: threading.Event | None = None) -> int:
    """Run until SIGINT/SIGTERM (or `stop` is set). Returns the exit code."""
    stop = stop or threading.Event()
    embedded: EmbeddedServer | None = None
    if redis_url is None:
        embedded = EmbeddedServer(port=port or None, data_dir=DEV_STATE_DIR / "data").start()
        redis_url = embedded.url
        DEV_URL_FILE.write_text(redis_url + "\n")
    server = Server(redis_url, queues=demo_app.QUEUES, concurrency=20)
    threads: list[threading.Thread] = []
    web: Any = None
    try:
        server.start(demo_app.mux)
        if demo:
            t = threading.Thread(target=demo_app.produce, args=(redis_url, stop, rate), daemon=True)
            t.start()
            threads.append(t)
        web = _start_dashboard(redis_url, web_port)
        _print_banner(redis_url, embedded, web_port if web else None, demo)
        _wait(stop)
    finally:
        stop.set()
        if web is not None:
            web.shutdown()
        server.shutdown()
        for t in threads:
            t.join(5)
        if embedded is not None:
            embedded.stop()
            DEV_URL_FILE.unlink(missing_ok=True)
    return 0


def _start_dashboard(redis_url: str, port: int) -> Any:
    """The web dashboard, when the webui package is present (it arrives with a later issue)."""
    try:
        from webui.devserve import serve_in_thread  # type: ignore[import-not-found]
    except ImportError:
        return None
    return serve_in_thread(redis_url, port)


def _print_banner(redis_url: str, embedded: EmbeddedServer | None, web_port: int | None, with_demo: bool) -> None:
    lines = ["", "asynqpy dev is running (Ctrl-C stops everything)",
             f"  Redis:     {redis_url}" + (f"  (embedded Valkey, data in {embedded.data_dir})" if embedded else ""),
             f"  Worker:    queues {demo_app.QUEUES}, concurrency 20, demo handlers from asynqpy.demo"]
    if with_demo:
        lines.append("  Producer:  a demo mix of emails, reports, CRM syncs and scheduled cleanups")
    if web_port:
        lines.append(f"  Dashboard: http://127.0.0.1:{web_port}/")
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
