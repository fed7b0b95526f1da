"""End to end in a real browser: Playwright driving Debian's chromium against `asynqpy web` under gunicorn.

An operator logs in through the form, opens a queue's archived tasks, presses Replay and sees the task leave
the tab; an admin finds the audit record; pages full of hostile task types and payloads fire no dialog and
inject no element. Screenshots of the overview, a queue page and a task page go to tests/artifacts/ (ignored).
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from inspector import Inspector
from tests.webui.browserkit import ARTIFACTS, CHROMIUM, expect, sign_in
from tests.webui.livekit import gunicorn_web
from tests.webui.webkit import make_state

BROWSER_DB = 14

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")


@pytest.fixture(scope="session")
def web(redis_server_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    """`asynqpy web` (gunicorn, 2 workers) on a free port, on database 14 of the session's server, started once."""
    url = redis_server_url.rsplit("/", 1)[0] + f"/{BROWSER_DB}"
    r = redis.Redis.from_url(url)
    r.flushdb()
    try:
        with gunicorn_web(url, users_path, workers=2, ASYNQPY_WEB_SECRET="browser-test-secret-" + "y" * 32,
                          ASYNQPY_SAMPLE_SECONDS="1") as base:
            yield {"base": base, "url": url, "redis": r}
    finally:
        r.flushdb()
        r.close()


@pytest.fixture
def data(web: dict[str, Any]) -> Iterator[dict[str, Any]]:
    web["redis"].flushdb()
    yield make_state(web["url"])
    web["redis"].flushdb()


def test_operator_replays_and_admin_finds_the_audit_record(web: dict[str, Any], browser: Any,
                                                           data: dict[str, Any]) -> None:
    base = web["base"]
    ARTIFACTS.mkdir(exist_ok=True)
    dialogs: list[str] = []
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, base, "otto")
    expect(page.locator("#overview")).to_contain_text("mail")
    page.screenshot(path=str(ARTIFACTS / "overview.png"), full_page=True)

    page.get_by_role("link", name="mail", exact=True).first.click()
    page.get_by_role("tab", name="Archived 3").click()
    tid = data["archived"][1]
    row = page.locator(f'tr[data-task-id="{tid}"]')
    expect(row).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "queue.png"), full_page=True)
    row.get_by_role("button", name="Replay").click()
    expect(page.locator("#queue-body .message")).to_contain_text(f"task {tid} replayed")
    expect(row).to_have_count(0)
    expect(page.get_by_role("tab", name="Archived 2")).to_be_visible()

    page.goto(f"{base}/queues/mail/tasks/{data['archived'][0]}")
    expect(page.locator("h1")).to_contain_text(data["archived"][0])
    page.screenshot(path=str(ARTIFACTS / "task.png"), full_page=True)

    page.get_by_role("button", name="Log out").click()
    sign_in(page, base, "ada")
    page.goto(base + "/audit?action=task.run")
    expect(page.locator("#audit-table")).to_contain_text(tid)
    expect(page.locator("#audit-table")).to_contain_text("otto")
    assert dialogs == []
    ctx.close()


def test_hostile_types_and_payloads_stay_inert(web: dict[str, Any], browser: Any, data: dict[str, Any]) -> None:
    base = web["base"]
    dialogs: list[str] = []
    ctx = browser.new_context()
    page = ctx.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, base, "ada")
    hostile = data["archived"][0]
    for path in ("/", "/queues/mail/archived", "/queues/mail/retry", f"/queues/mail/tasks/{hostile}", "/errors"):
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        assert page.locator("#pwn").count() == 0, path
        assert page.locator("main script").count() == 0, path
        assert page.locator("main img").count() == 0, path
    page.goto(base + "/queues/mail/archived")
    assert page.get_by_text("<img src=x onerror=", exact=False).count() >= 1  # shown as text
    assert dialogs == [] and errors == []
    ctx.close()


def test_size_samples_once_per_interval_across_gunicorn_workers(web: dict[str, Any]) -> None:
    r = web["redis"]
    r.flushdb()
    for _ in range(8):  # reach both workers, so each runs its sampler thread
        urllib.request.urlopen(web["base"] + "/login", timeout=5).read()
    time.sleep(4.5)
    samples = [json.loads(x)["t"] for x in r.lrange("asynqpy:{sizes}", 0, -1)]
    slots = [int(t) for t in samples]  # ASYNQPY_SAMPLE_SECONDS=1: one slot per second
    assert 3 <= len(samples) <= 6 and len(set(slots)) == len(slots), samples


def test_select_rows_and_replay_them_then_delete_all_after_confirming(web: dict[str, Any], browser: Any,
                                                                      data: dict[str, Any]) -> None:
    base = web["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    asked: list[str] = []
    page.on("dialog", lambda d: (asked.append(d.message), d.accept()))
    sign_in(page, base, "ada")
    page.goto(base + "/queues/mail/archived")
    bulk = page.locator("#bulk-bar").get_by_role("button", name="Replay")
    expect(bulk).to_be_disabled()  # nothing selected yet
    page.get_by_label("Select all on this page").check()
    expect(bulk).to_be_enabled()
    bulk.click()
    expect(page.locator("#queue-body .message")).to_contain_text("replayed 3 tasks")
    expect(page.get_by_role("tab", name="Archived 0")).to_be_visible()
    page.get_by_role("tab", name="Pending 4").click()
    page.get_by_role("button", name="Delete all").click()
    expect(page.locator("#queue-body .message")).to_contain_text("deleted 4 tasks")
    assert asked == ["Delete all 4 pending tasks in mail?"]
    ctx.close()


def test_a_slow_replay_shows_progress_across_a_reload_and_cancels(web: dict[str, Any], browser: Any) -> None:
    from asynqpy import Client, Task
    from inspector import Inspector

    web["redis"].flushdb()
    with Client(web["url"]) as cl:
        ids = [cl.enqueue(Task("t", b""), queue="slow").id for _ in range(60)]
    with Inspector(web["url"]) as insp:
        insp.archive_tasks("slow", ids)
    base = web["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    page.on("dialog", lambda d: d.accept())
    sign_in(page, base, "ada")
    page.goto(base + "/queues/slow/archived")
    page.get_by_label("Rate (tasks per second)").fill("10")
    page.get_by_role("button", name="Replay all").click()
    expect(page.locator("#queue-body .message")).to_contain_text("at 10 tasks/s")
    page.reload()  # the job's state is in Redis: any page load shows it
    job = page.locator(".job")
    expect(job.locator("progress")).to_have_count(1)
    expect(job).to_contain_text("running")
    page.wait_for_timeout(1500)  # the widget polls itself meanwhile
    expect(job).to_contain_text("running")
    job.get_by_role("button", name="Cancel").click()
    expect(job).to_contain_text("canceled", timeout=5000)
    with Inspector(web["url"]) as insp:
        left = insp.queue_info("slow", memory=False).archived
    assert 0 < left < 60
    ctx.close()
    web["redis"].flushdb()


def test_task_page_actions(web: dict[str, Any], browser: Any, data: dict[str, Any]) -> None:
    base = web["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    page.on("dialog", lambda d: d.accept())
    sign_in(page, base, "otto")
    retry, archived = data["retry"][0], data["archived"][1]
    page.goto(f"{base}/queues/mail/tasks/{retry}")
    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#messages")).to_contain_text(f"task {retry} archived")
    expect(page.locator("h1 .badge")).to_have_text("archived")
    page.goto(f"{base}/queues/mail/tasks/{archived}")
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url(f"{base}/queues/mail/archived")
    expect(page.locator("#messages")).to_contain_text(f"task {archived} deleted")
    expect(page.get_by_role("link", name="Errors")).to_be_visible()  # a whole page, not a fragment
    expect(page.locator(f'tr[data-task-id="{archived}"]')).to_have_count(0)
    ctx.close()


def test_a_stale_rows_failed_action_removes_the_row_and_shows_the_error(web: dict[str, Any], browser: Any,
                                                                        data: dict[str, Any]) -> None:
    """Rows another user deleted or replayed meanwhile: pressing their button shows the error and takes the row
    out of the table at once (live refresh is off, so only the action's answer can have done it)."""
    base = web["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    sign_in(page, base, "otto")
    page.evaluate("() => localStorage.setItem('asynqpy.live', 'off')")
    page.goto(f"{base}/queues/mail/archived")
    gone, moved, kept = data["archived"][1], data["archived"][2], data["archived"][0]
    rows = {t: page.locator(f'tr[data-task-id="{t}"]') for t in (gone, moved, kept)}
    expect(rows[gone]).to_have_count(1)
    with Inspector(web["url"]) as insp:
        insp.delete_task("mail", gone)
    page.wait_for_timeout(300)
    expect(rows[gone]).to_have_count(1)  # stale: nothing redraws the table by itself

    rows[gone].get_by_role("button", name="Replay").click()
    expect(page.locator("#messages .message.error")).to_contain_text(f"no task '{gone}' in queue 'mail'")
    expect(rows[gone]).to_have_count(0)
    expect(rows[kept]).to_have_count(1)
    expect(page.get_by_role("tab", name="Archived 2")).to_be_visible()

    with Inspector(web["url"]) as insp:
        insp.run_task("mail", moved)
    rows[moved].get_by_role("button", name="Replay").click()  # now pending: Replay does not apply
    expect(page.locator("#messages .message.error")).to_contain_text("does not apply to pending tasks")
    expect(rows[moved]).to_have_count(0)
    expect(rows[kept]).to_have_count(1)
    expect(page.get_by_role("tab", name="Archived 1")).to_be_visible()
    expect(page.get_by_role("tab", name="Pending 2")).to_be_visible()
    ctx.close()


def test_chart_range_and_live_refresh_pause(web: dict[str, Any], browser: Any, data: dict[str, Any]) -> None:
    base = web["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    sign_in(page, base, "otto")
    page.get_by_role("button", name="30 days").click()
    expect(page.locator("#daily-chart")).to_contain_text("in 30 days")
    expect(page.locator("#daily-chart svg")).to_have_count(1)
    page.get_by_label("Live refresh every 5 s").uncheck()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if urllib.parse.urlsplit(r.url).path == "/" else None)
    page.wait_for_timeout(6000)
    assert requests == []  # paused: no overview refresh
    page.get_by_label("Live refresh every 5 s").check()
    page.wait_for_timeout(6000)
    assert requests, "live refresh did not resume"
    ctx.close()
