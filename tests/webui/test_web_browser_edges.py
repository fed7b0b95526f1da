"""Issue 19 in a real browser (headless Chromium through the shared `browser` fixture, the app on loopback):
live refresh runs on every page that shows changing numbers and pauses while the tab is hidden (item 11);
deletes and archives of the selection ask first with the count, the bulk bar counts the selection (13); a
replay-all job's card comes into view by its button and shows only its own message (14); axe-core finds no
serious or critical violation on any page (19)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy.rdb import keys
from asynqpy.wire import SchedulerEnqueueEvent, SchedulerEntry
from tests.inspector.worker import Worker
from tests.webui.authkit import make_app
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import serve
from tests.webui.webkit import make_state

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")
AXE_DIR = Path(__file__).parent / "axe"


@pytest.fixture
def site(redis_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    """The dashboard (refresh every second, 5 rows a page) on loopback, with tasks in every state, a live
    scheduler entry with history and a live server."""
    ids = make_state(redis_url)
    r = redis.Redis.from_url(redis_url)
    now = time.time()
    entry = SchedulerEntry(id="entry-1", spec="@every 30s", task_type="report:daily", task_payload=b"{}")
    entry.next_enqueue_time.FromSeconds(int(now) + 30)
    skey = f"{keys.SCHEDULERS}:{{host:1:abc}}"
    r.rpush(skey, entry.SerializeToString())
    r.zadd(keys.SCHEDULERS, {skey: now + 60})
    ev = SchedulerEnqueueEvent(task_id="t-1")
    ev.enqueue_time.FromSeconds(int(now) - 30)
    r.zadd(keys.scheduler_history("entry-1"), {ev.SerializeToString(): now - 30})
    app = make_app(redis_url, users_path, ASYNQPY_POLL_SECONDS=1, ASYNQPY_PAGE_SIZE=5)
    try:
        with serve(app) as base:
            yield {"base": base, "ids": ids, "redis": r, "url": redis_url}
    finally:
        app.extensions["asynqpy.inspector"].close()
        r.close()


def test_every_changing_page_refreshes_and_pauses_while_hidden(site: dict[str, Any], browser: Any) -> None:
    base = site["base"]
    ctx = browser.new_context()
    page = ctx.new_page()
    polls: list[str] = []
    page.on("request", lambda req: polls.append(req.url) if req.headers.get("x-asynqpy-poll") else None)
    page.goto(base + "/login")
    assert not page.locator("#live-control").is_visible()  # the login page does not change
    sign_in(page, base, "ada")
    for path in ("/", "/scheduler?entry=entry-1", "/servers", "/errors", "/redis", "/queues/mail/pending",
                 f"/queues/mail/tasks/{site['ids']['pending']}"):
        page.goto(base + path)
        assert page.locator("#live-control").is_visible(), path
        polls.clear()
        page.wait_for_timeout(2300)
        assert any(u.startswith(base + path.split("?")[0]) for u in polls), (path, polls)
    page.goto(base + "/audit")
    assert not page.locator("#live-control").is_visible()  # the audit log does not refresh itself

    page.goto(base + "/queues/mail/pending")
    page.evaluate("""() => {
        Object.defineProperty(document, 'hidden', {value: true, configurable: true});
        Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.wait_for_timeout(300)
    polls.clear()
    page.wait_for_timeout(2500)
    assert polls == [], "refreshed while the tab was hidden"
    page.evaluate("""() => {
        Object.defineProperty(document, 'hidden', {value: false, configurable: true});
        Object.defineProperty(document, 'visibilityState', {value: 'visible', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    page.wait_for_timeout(2300)
    assert polls, "no refresh after the tab showed again"
    ctx.close()


def test_deletes_and_archives_ask_first_with_the_count(site: dict[str, Any], browser: Any) -> None:
    base, ids = site["base"], site["ids"]
    ctx = browser.new_context()
    page = ctx.new_page()
    dialogs: list[str] = []
    answer = {"accept": False}
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept() if answer["accept"] else d.dismiss()))
    sign_in(page, base, "otto")
    page.goto(base + "/queues/mail/archived")
    bar = page.locator("#bulk-bar")
    expect(bar).to_contain_text("Selected: none")
    first, second = ids["archived"][1], ids["archived"][2]
    page.locator(f'tr[data-task-id="{first}"] input[name=ids]').check()
    expect(bar).to_contain_text("Selected: 1 task")
    page.locator(f'tr[data-task-id="{second}"] input[name=ids]').check()
    expect(bar).to_contain_text("Selected: 2 tasks")
    bar.get_by_role("button", name="Delete").click()
    expect(page.locator("#queue-body")).to_be_visible()
    page.wait_for_timeout(300)
    assert dialogs == ["Delete 2 tasks of mail? This cannot be undone."]
    assert site["redis"].zcard(keys.archived("mail")) == 3  # dismissed: nothing deleted
    answer["accept"] = True
    bar.get_by_role("button", name="Delete").click()
    expect(page.locator("#queue-body .message")).to_contain_text("deleted 2 tasks")
    assert site["redis"].zcard(keys.archived("mail")) == 1

    answer["accept"] = False
    dialogs.clear()
    last = ids["archived"][0]
    page.locator(f'tr[data-task-id="{last}"]').get_by_role("button", name="Delete").click()
    page.wait_for_timeout(300)
    assert dialogs == [f"Delete task {last}? This cannot be undone."]
    assert site["redis"].zcard(keys.archived("mail")) == 1

    dialogs.clear()
    page.goto(base + "/queues/mail/pending")
    page.locator("input.select-all").check()
    page.locator("#bulk-bar").get_by_role("button", name="Archive").click()
    page.wait_for_timeout(300)
    assert dialogs == ["Archive 1 task of mail? They stop running until replayed."]
    assert site["redis"].llen(keys.pending("mail")) == 1
    ctx.close()


def test_replay_all_shows_its_job_by_the_button_with_its_own_message(site: dict[str, Any], browser: Any) -> None:
    base, r = site["base"], site["redis"]
    from asynqpy import Client, Task

    w = Worker(r, time.time)
    with Client(site["url"]) as c:
        tids = [c.enqueue(Task("bulk:t", b"{}"), queue="bulk").id for _ in range(40)]
    for tid in w.take("bulk", 40):
        w.kill("bulk", tid, "boom")
    assert len(tids) == 40
    ctx = browser.new_context(viewport={"width": 1280, "height": 700})
    page = ctx.new_page()
    page.on("dialog", lambda d: d.accept())
    sign_in(page, base, "ada")
    page.goto(base + "/queues/bulk/archived?size=40")
    form = page.locator(".all-actions form").filter(has=page.get_by_role("button", name="Replay all"))
    form.locator("input[name=rate]").fill("10")
    form.get_by_role("button", name="Replay all").scroll_into_view_if_needed()
    form.get_by_role("button", name="Replay all").click()
    expect(page.locator("#queue-body .message")).to_contain_text("started a background job to replay 40")
    card = page.locator(".job.card")
    expect(card).to_have_count(1)
    expect(card).to_be_in_viewport()
    expect(card).to_contain_text("of 40")
    expect(card).not_to_contain_text("started a background job")  # the page's message is not the card's
    ctx.close()


def _axe_script() -> Path:
    """axe.min.js from the npm package, installed once into the user's cache (keyed by package.json)."""
    if not shutil.which("npm"):
        pytest.skip("npm is needed to install axe-core (apt-get install npm)")
    source = AXE_DIR / "package.json"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    where = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "asynqpy-node" / f"axe-{digest}"
    script = where / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        where.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, where / "package.json")
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.skip(f"npm install of axe-core failed: {done.stderr.strip()[-500:]}")
    return script


def test_axe_finds_no_serious_violation_on_any_page(site: dict[str, Any], browser: Any) -> None:
    axe = _axe_script()
    base, ids = site["base"], site["ids"]
    # axe is injected as a script: the page's CSP (script-src 'self') would refuse it
    ctx = browser.new_context(bypass_csp=True)
    page = ctx.new_page()
    pages = ["/login"]
    found: dict[str, list[str]] = {}

    def check(path: str) -> None:
        page.goto(base + path)
        page.wait_for_timeout(150)  # the charts' first load
        page.add_script_tag(path=str(axe))
        result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
        bad = [f"{v['id']} ({v['impact']}): {v['nodes'][0]['html'][:120]}" for v in result["violations"]
               if v["impact"] in ("serious", "critical")]
        if bad:
            found[path] = bad

    check(pages[0])
    sign_in(page, base, "ada")
    for path in ("/", "/errors", "/servers", "/scheduler?entry=entry-1", "/redis", "/audit",
                 *[f"/queues/mail/{s}" for s in ("active", "pending", "scheduled", "retry", "archived", "completed",
                                                 "aggregating")],
                 f"/queues/mail/tasks/{ids['archived'][0]}", f"/queues/mail/tasks/{ids['scheduled']}",
                 "/queues/nope/tasks/x"):
        check(path)
    ctx.close()
    assert found == {}
