"""Layout in a real browser (headless Chromium) at a phone's 375 px and a laptop's 1280 px: no page scrolls sideways
(wide tables scroll inside their own box), a 1000-character task type wraps in prose (the task page's "why hasn't it
run?" made it 5539 px wide), the overview's 7/30/90-day buttons do not widen the chart card, and the scheduler's
table fits 1280 px with rows of readable height (it was 1760 px wide, rows ~350 px tall). Screenshots of each page
go to tests/artifacts/layout-*.png."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys
from asynqpy.wire import SchedulerEntry
from tests.webui.authkit import make_app
from tests.webui.browserkit import ARTIFACTS, CHROMIUM, sign_in
from tests.webui.livekit import serve
from tests.webui.test_web_types import _record
from tests.webui.webkit import make_state
from webui.queuenames import encode

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")
LONG_TYPE = "t" * 1000  # Client allows task types up to 1024 bytes


@pytest.fixture
def site(redis_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    make_state(redis_url)
    r = redis.Redis.from_url(redis_url)
    now = time.time()
    skey = f"{keys.SCHEDULERS}:{{host:1:abc}}"
    for i in range(3):
        e = SchedulerEntry(id=f"entry-{i}", spec="CRON_TZ=Europe/Berlin 0 3 * * 1-5",
                           task_type="report:daily:" + "x" * 40, task_payload=b'{"a": 1, "b": "a longer payload"}')
        e.enqueue_options.extend(['Queue("default")', "MaxRetry(3)", "Timeout(30m)"])
        e.next_enqueue_time.FromSeconds(int(now) + 30)
        r.rpush(skey, e.SerializeToString())
    r.zadd(keys.SCHEDULERS, {skey: now + 60})
    _record(r, "email:send", 40, 2, 0.2, now)
    _record(r, LONG_TYPE, 3, 1, 0.5, now - 300)
    with Client(redis_url) as c:
        long_task = c.enqueue(Task(LONG_TYPE, b"{}"), queue="mail", process_in=600).id
    app = make_app(redis_url, users_path)
    try:
        with serve(app) as base:
            yield {"base": base, "task": long_task}
    finally:
        app.extensions["asynqpy.inspector"].close()
        app.extensions["asynqpy.health"].close()
        r.close()


def _pages(task_id: str) -> dict[str, str]:
    return {"overview": "/", "queue": "/queues/mail/pending", "find": "/queues/mail/find?q=type:email:*",
            "types": "/types", "type": "/types/" + encode(LONG_TYPE), "scheduler": "/scheduler",
            "task": f"/queues/mail/tasks/{task_id}", "errors": "/errors"}


@pytest.mark.parametrize("width", [375, 1280])
def test_no_page_scrolls_sideways(site: dict[str, Any], browser: Any, width: int) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        sign_in(page, site["base"], "ada")
        for name, path in _pages(site["task"]).items():
            page.goto(site["base"] + path)
            if name == "overview":  # the day buttons reload the chart card: it used to grow to 456 px
                page.get_by_role("button", name="90 days").click()
                page.wait_for_timeout(400)
            wide = page.evaluate("document.documentElement.scrollWidth")
            page.screenshot(path=str(ARTIFACTS / f"layout-{name}-{width}.png"), full_page=True)
            assert wide <= width, (name, width, wide)
        if width == 1280:
            page.goto(site["base"] + "/scheduler")
            table = page.evaluate("""() => { const t = document.querySelector('table.entries');
                return [t.offsetWidth, t.parentElement.clientWidth,
                        Math.max(...[...t.querySelectorAll('tbody tr')].map(r => r.offsetHeight))]; }""")
            width_, room, tallest = table
            assert width_ <= room and tallest < 200, table
    finally:
        ctx.close()
