#!/usr/bin/env python3
"""Regenerate docs/screenshots/: every dashboard page at a desktop (1280 px) and a phone (390 px) width.

Starts a private Valkey (the embedded one, on a free port, in a temporary directory), a worker with the demo
handlers and a producer (asynqpy.demo), a scheduler with two cron entries, and the dashboard with a throwaway
admin user; lets the demo run for a while so every state has tasks and the charts have points; then drives
headless Chromium (Debian's chromium through Playwright) over every page and writes small JPEGs.

    .venv/bin/python scripts/screenshots.py            # about a minute
    .venv/bin/python scripts/screenshots.py --seconds 30 --out /tmp/shots
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asynqpy import Client, Server, Task, demo  # noqa: E402
from asynqpy.embedded import EmbeddedServer  # noqa: E402
from asynqpy.scheduler import Scheduler  # noqa: E402
from webui import create_app  # noqa: E402
from webui.users import create_user  # noqa: E402

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
MAX_HEIGHT = {"desktop": 1100, "phone": 1400}  # px of a full page kept: the top of a long table says enough
QUALITY = 40  # JPEG, at SCALE pixels per CSS pixel: the whole set stays around half a megabyte
SCALE = 0.75
PASSWORD = "screenshots-only-" + "p" * 8


def _serve(app: Any) -> tuple[Any, str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def _seed(url: str) -> None:
    """What the demo producer does not make on its own: a paused queue, a group, a unique and a long-named task."""
    with Client(url) as c:
        c.enqueue(Task("digest:weekly", b'{"week": 48}'), queue="low", unique=3600)
        for i in range(3):
            c.enqueue(Task("notify:batch", f'{{"user": {i}}}'.encode()), queue="default", group="newsletter")
        c.enqueue(Task("invoice:render", b'{"invoice": 981}'), queue="billing", process_in=7200)
        c.enqueue(Task("export:" + "warehouse-inventory-snapshot-" * 3, b"{}"),
                  queue="analytics-" + "long-queue-name-" * 4)


def _pages(url: str) -> dict[str, str]:
    from inspector import Inspector

    with Inspector(url) as insp:
        archived = insp.list_tasks("default", "retry", size=1).tasks or insp.list_tasks("default", "archived",
                                                                                         size=1).tasks
        typed = insp.list_tasks("low", "archived", size=20).tasks
        entries = sorted(insp.scheduler_entries(), key=lambda e: e.prev_enqueue_at is None)  # one with history
    pages = {
        "login": "/login", "overview": "/", "queue-pending": "/queues/default/pending",
        "queue-active": "/queues/default/active", "queue-archived": "/queues/low/archived",
        "queue-retry": "/queues/default/retry", "queue-aggregating": "/queues/default/aggregating",
        "errors": "/errors", "servers": "/servers", "scheduler": "/scheduler", "redis": "/redis", "audit": "/audit",
    }
    if archived:
        pages["task"] = f"/queues/{archived[0].info.queue}/tasks/{archived[0].id}"
    crm = next((t for t in typed if t.info.type == "sync:crm"), None)
    if crm:
        pages["task-typed"] = f"/queues/low/tasks/{crm.id}"
    if entries:
        pages["scheduler"] = f"/scheduler?entry={entries[0].id}"
    return pages


def _shoot(base: str, pages: dict[str, str], out: Path, kind: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        for label, (w, h) in WIDTHS.items():
            ctx = browser.new_context(viewport={"width": w, "height": h}, device_scale_factor=SCALE)
            page = ctx.new_page()
            page.goto(base + "/login")
            shot = {"type": "jpeg", "quality": QUALITY} if kind == "jpeg" else {"type": "png"}
            ext = "jpg" if kind == "jpeg" else "png"
            page.screenshot(path=str(out / f"login-{label}.{ext}"), **shot)
            written.append(out / f"login-{label}.{ext}")
            page.get_by_label("Username").fill("admin")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(base + "/")
            for name, path in pages.items():
                if name == "login":
                    continue
                page.goto(base + path)
                page.wait_for_timeout(700)  # the charts' first load
                height = min(MAX_HEIGHT[label], page.evaluate("document.documentElement.scrollHeight"))
                target = out / f"{name}-{label}.{ext}"
                page.screenshot(path=str(target), full_page=True, clip={"x": 0, "y": 0, "width": w, "height": height},
                                **shot)
                written.append(target)
            ctx.close()
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--seconds", type=float, default=45.0, help="how long the demo runs before the pictures")
    ap.add_argument("--png", action="store_true", help="PNG instead of JPEG (larger; for a close look)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    with tempfile.TemporaryDirectory(prefix="asynqpy-shots-") as tmp:
        valkey = EmbeddedServer(data_dir=Path(tmp) / "data").start()
        stop = threading.Event()
        worker = Server(valkey.url, queues={**demo.QUEUES, "billing": 1}, concurrency=4, heartbeat_interval=1,
                        lease_duration=30)
        sched = Scheduler(valkey.url)
        try:
            users = Path(tmp) / "users.toml"
            create_user(users, "admin", "admin", PASSWORD)
            app = create_app({"ASYNQPY_REDIS_URL": valkey.url, "ASYNQPY_USERS": str(users),
                              "SECRET_KEY": "screenshots-" + "s" * 40, "ASYNQPY_SAMPLE_SECONDS": 2})
            server, base = _serve(app)
            _seed(valkey.url)
            worker.start(demo.build_mux())
            sched.register("@every 30s", Task("report:build", b'{"customer": "acme"}'), queue="low")
            sched.register("0 3 * * *", Task("cleanup:nightly", b"{}"), queue="low")
            threading.Thread(target=sched.run, daemon=True).start()
            threading.Thread(target=demo.produce, args=(valkey.url, stop, 8.0), daemon=True).start()
            print(f"demo running for {args.seconds:g} s on {valkey.url} ...", file=sys.stderr)
            time.sleep(args.seconds)
            written = _shoot(base, _pages(valkey.url), args.out, "png" if args.png else "jpeg")
            server.shutdown()
        finally:
            stop.set()
            sched.stop()
            worker.shutdown()
            valkey.stop()
    total = sum(p.stat().st_size for p in written)
    print(f"{len(written)} screenshots, {total // 1024} KB in all, in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
