"""The types pages and cron controls through real HTTP (werkzeug serving the app on a loopback port), and in
headless Chromium: the types page draws a deploy mark, an operator pauses a cron entry and the replicas skip it."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Task
from asynqpy.rdb import keys
from asynqpy.rdb.state import record_type_stats
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.scheduler import Scheduler
from asynqpy.typestats import bucket
from inspector import Inspector
from tests.helpers import wait_for
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import Browser, live_app

ODD = "odd/type~name"


def _record(r: redis.Redis, ttype: str, n: int, failed: int, seconds: float, at: float, queue: str = "default") -> None:
    fields = {"n": n, "f": failed, "rt": round(n * seconds * 1000), f"r{bucket(seconds)}": n, "wn": n,
              "wt": n * 10, f"w{bucket(0.01)}": n}
    SyncRunner(r).run(record_type_stats([(queue, ttype, int(at // 60), fields)]))


@pytest.fixture
def live(redis_url: str, users_path: Path) -> Iterator[str]:
    with live_app(redis_url, users_path) as base:
        yield base


@pytest.fixture
def scheduler(redis_url: str) -> Iterator[tuple[Scheduler, str]]:
    s = Scheduler(redis_url, heartbeat_interval=1)
    eid = s.register("@every 1s", Task("sync:orders", b"{}"), queue="cron")
    t = threading.Thread(target=lambda: asyncio.run(s.arun()))
    t.start()
    try:
        yield s, eid
    finally:
        s.stop()
        t.join(10)


def _post(b: Browser, path: str, **form: str) -> Any:
    return b.open(path, {**form, "csrf_token": b.token("/")})


def test_types_table_one_type_and_marks(live: str, r: redis.Redis, redis_url: str) -> None:
    now = time.time()
    _record(r, "email:send", 40, 2, 0.2, now)
    _record(r, ODD, 3, 0, 30.0, now - 120)
    with Inspector(redis_url) as insp:
        insp.mark("v1.4.2")
    viewer = Browser(live)
    viewer.login("vera")
    page = viewer.open("/types")
    assert page.status == 200
    rows = re.findall(r'<tr>\s*<td><a href="/types/([^"?]+)\?window=1h">', page.text)
    assert rows == ["odd~2Ftype~7Ename", "email:send"]  # 90 s of run time before 8 s
    assert "5.0%" in page.text and "v1.4.2" in page.text and 'class="mark"' in page.text
    assert "Go asynq workers record no per-type figures" in page.text
    one = viewer.open("/types/odd~2Ftype~7Ename?window=24h")
    assert one.status == 200 and "odd/type~name" in one.text and "Run-time histogram" in one.text
    assert viewer.open("/types?window=5m").status == 404
    assert viewer.open("/types/never-seen").status == 404  # an unknown type, as README says
    assert _post(viewer, "/types/marks", label="v2").status == 403  # viewers do not add marks
    op = Browser(live)
    op.login("otto")
    assert _post(op, "/types/marks", label="v2").status == 303
    assert _post(op, "/types/marks", label="  ").status == 400
    admin = Browser(live)
    admin.login("ada")
    assert "deploy mark &#39;v2&#39;" in admin.open("/audit?action=mark.add").text


def test_cron_pause_resume_and_enqueue_now_over_http(live: str, r: redis.Redis, redis_url: str,
                                                      scheduler: tuple[Scheduler, str]) -> None:
    _, eid = scheduler
    wait_for(lambda: r.zcard(keys.SCHEDULERS) == 1, what="the scheduler's entries")
    op = Browser(live)
    op.login("otto")
    page = op.open("/scheduler")
    assert "every 1 s" in page.text and "Pause" in page.text
    assert _post(op, f"/scheduler/{eid}/pause").status == 303
    assert r.exists(keys.cron_paused("cron", eid))
    assert '<span class="badge paused">paused</span>' in op.open("/scheduler").text
    n = r.llen("asynq:{cron}:pending")
    time.sleep(2.2)
    assert r.llen("asynq:{cron}:pending") == n  # ticks passed: none enqueued
    assert _post(op, f"/scheduler/{eid}/run").status == 303
    assert r.llen("asynq:{cron}:pending") == n + 1
    assert _post(op, f"/scheduler/{eid}/resume").status == 303
    wait_for(lambda: r.llen("asynq:{cron}:pending") > n + 1, what="ticks again")
    wait_for(lambda: 'href="/queues/cron/tasks/' in op.open("/scheduler").text, what="the last run's task linked")
    assert "<title>recent firings of" in op.open("/scheduler").text
    assert _post(op, "/scheduler/nope/pause").status == 400
    viewer = Browser(live)
    viewer.login("vera")
    assert _post(viewer, f"/scheduler/{eid}/pause").status == 403
    admin = Browser(live)
    admin.login("ada")
    audit = admin.open("/audit?action=cron.pause").text
    assert "sync:orders) paused" in audit and "otto" in audit


needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")


@needs_chromium
def test_browser_types_page_draws_a_deploy_mark(live: str, browser: Any, r: redis.Redis) -> None:
    now = time.time()
    for i in range(10):
        _record(r, "report:build", 5 + i, i % 2, 0.5, now - 60 * i)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    sign_in(page, live, "otto")
    page.get_by_role("link", name="Types").click()
    expect(page.locator("#types-table")).to_contain_text("report:build")
    page.get_by_label("Mark").fill("v1.4.2")
    page.get_by_role("button", name="Add mark").click()
    expect(page.locator("#marks")).to_contain_text("v1.4.2")
    expect(page.locator("#types-table svg.spark g.mark")).to_have_count(1)
    page.get_by_role("link", name="report:build").click()
    expect(page.locator("h1")).to_contain_text("report:build")
    expect(page.locator("svg.chart .mark-label")).to_have_text("v1.4.2")
    expect(page.locator("#type-summary")).to_contain_text("95")  # 5 + 6 + ... + 14 runs
    ctx.close()


@needs_chromium
def test_browser_operator_pauses_a_cron_entry(live: str, browser: Any, r: redis.Redis,
                                             scheduler: tuple[Scheduler, str]) -> None:
    _, eid = scheduler
    wait_for(lambda: r.zcard(keys.SCHEDULERS) == 1, what="the scheduler's entries")
    ctx = browser.new_context(viewport={"width": 1600, "height": 900})
    page = ctx.new_page()
    sign_in(page, live, "otto")
    page.get_by_role("link", name="Scheduler").click()
    expect(page.locator(".cron-when")).to_contain_text("every 1 s")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#messages")).to_contain_text("paused")
    expect(page.locator(".cron-state")).to_have_text("paused")
    assert r.exists(keys.cron_paused("cron", eid))
    page.get_by_role("button", name="Resume").click()
    expect(page.locator(".cron-state")).to_have_text("running")
    assert not r.exists(keys.cron_paused("cron", eid))
    ctx.close()


def test_a_type_never_recorded_is_a_404_that_says_so(live: str, r: redis.Redis) -> None:
    """README: an unknown type answers 404, as one recorded only in hidden queues does (it was an all-zero 200)."""
    _record(r, "email:send", 4, 0, 0.2, time.time())
    viewer = Browser(live)
    viewer.login("vera")
    assert viewer.open("/types/email:send").status == 200
    for path in ("/types/nosuch", "/types/nosuch?window=72h", "/types/email:sen"):
        page = viewer.open(path)
        assert page.status == 404, path
        assert "No task of this type ran in the last 72 hours" in page.text
