"""In headless Chromium against the app on real HTTP: a 1 MB task type renders at once, cut in its cell; a failed
action (404, 409) shows its message, and a proxy's error page keeps the page and says so; the Redis banner appears
when Redis goes away and clears when it is back;
under a URL prefix every request of a page (live refresh included, marked as background) carries the prefix, the
cookies are scoped to it, and no Content-Security-Policy violation happens."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asynqpy.embedded import EmbeddedServer
from inspector import Inspector
from inspector.bounds import CELL, NAME
from tests.webui.authkit import make_app
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import go_enqueue, serve
from webui.proxy import wrap

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")


@pytest.fixture
def quiet(redis_url: str, users_path: Path) -> Iterator[str]:
    """The app with a slow live refresh (nothing changes under the test's clicks)."""
    app = make_app(redis_url, users_path, ASYNQPY_POLL_SECONDS=300)
    with serve(app) as base:
        yield base
    app.extensions["asynqpy.inspector"].close()


def test_a_1mb_type_renders_at_once_cut_in_its_cell(quiet: str, browser: Any, redis_url: str) -> None:
    tid = go_enqueue(redis_url, "big", "T" * 1_000_000, b'{"x": 1}')
    ctx = browser.new_context()
    page = ctx.new_page()
    sign_in(page, quiet, "vera")
    page.goto(quiet + "/queues/big/pending")  # within Playwright's default timeout (30 s; it took 62-82 s before)
    cell = page.locator(f'tr[data-task-id="{tid}"] td.type')
    expect(cell).to_have_count(1)
    text = cell.inner_text()  # a type is cut to a name's width; its title holds a cell's worth
    assert len(text) == NAME and text.endswith("…")
    assert len(cell.locator(".name").get_attribute("title") or "") == CELL
    page.goto(f"{quiet}/queues/big/tasks/{tid}")
    expect(page.locator("table.kv")).to_contain_text("cut for display")
    ctx.close()


def test_a_failed_action_shows_its_message(quiet: str, browser: Any, redis_url: str) -> None:
    gone = go_enqueue(redis_url, "mail", "email:send")
    ctx = browser.new_context()
    page = ctx.new_page()
    sign_in(page, quiet, "otto")
    page.goto(quiet + "/queues/mail/pending")
    row = page.locator(f'tr[data-task-id="{gone}"]')
    expect(row).to_have_count(1)
    with Inspector(redis_url) as insp:
        insp.delete_task("mail", gone)  # someone else was quicker
        row.get_by_role("button", name="Archive").click()
        expect(page.locator("#messages")).to_contain_text("Not found")
        insp.pause("mail")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#messages")).to_contain_text("already paused")
    ctx.close()


def test_the_redis_banner_appears_when_redis_goes_away_and_clears_when_it_is_back(browser: Any, users_path: Path,
                                                                                  tmp_path: Path) -> None:
    server = EmbeddedServer(data_dir=tmp_path / "valkey").start()  # kept data: sessions survive the restart
    app = make_app(server.url, users_path, ASYNQPY_POLL_SECONDS=1)
    try:
        with serve(app) as base:
            go_enqueue(server.url, "mail", "email:send")
            ctx = browser.new_context()
            page = ctx.new_page()
            sign_in(page, base, "vera")
            page.goto(base + "/queues/mail/pending")
            banner = page.locator("#redis-banner")
            expect(banner).to_be_hidden()
            server.stop()
            expect(banner).to_be_visible(timeout=15_000)
            expect(banner).to_contain_text("Redis is unavailable")
            expect(page.locator("#messages")).to_contain_text("Redis is unavailable")
            server.start()
            expect(banner).to_be_hidden(timeout=15_000)
            expect(page.locator("#queue-body")).to_contain_text("email:send")  # the table is still there
            server.stop()
            page.reload()  # a whole page while Redis is away: the error page, which reloads itself
            expect(page.locator("main h1")).to_have_text("Redis is unavailable")
            server.start()
            expect(page.locator("#queue-body")).to_contain_text("email:send", timeout=15_000)
            expect(banner).to_be_hidden()
            ctx.close()
    finally:
        app.extensions["asynqpy.inspector"].close()
        server.stop()


def test_under_a_prefix_every_request_carries_it_and_polls_are_marked_background(browser: Any, redis_url: str,
                                                                                 users_path: Path) -> None:
    go_enqueue(redis_url, "mail", "email:send")
    app = make_app(redis_url, users_path, ASYNQPY_POLL_SECONDS=1)
    with serve(wrap(app, prefix="/asynq")) as root:
        base = root + "/asynq"
        ctx = browser.new_context()
        page = ctx.new_page()
        seen: list[tuple[str, dict[str, str]]] = []
        page.on("request", lambda r: seen.append((r.url, r.headers)))
        violations: list[str] = []
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
        sign_in(page, base, "vera")
        page.goto(base + "/queues/mail/pending")
        page.wait_for_timeout(2500)
        assert all(u.startswith(base + "/") for u, _ in seen), [u for u, _ in seen if not u.startswith(base + "/")]
        polls = [u for u, h in seen if h.get("x-asynqpy-poll") == "1"]
        assert any("/asynq/queues/mail/pending" in u for u in polls), seen
        clicks = [u for u, h in seen if h.get("hx-request") and "x-asynqpy-poll" not in h]
        assert all("/charts/" in u for u in clicks)  # only the charts' first load is not a poll
        assert {c["name"]: c["path"] for c in ctx.cookies()}["asynqpy_session"] == "/asynq"
        assert violations == []
        ctx.close()
    app.extensions["asynqpy.inspector"].close()


def test_a_proxy_error_page_keeps_the_page_and_says_so(browser: Any, redis_url: str, users_path: Path) -> None:
    go_enqueue(redis_url, "mail", "email:send")
    app = make_app(redis_url, users_path, ASYNQPY_POLL_SECONDS=1)
    broken = {"on": False}

    def proxy(environ: dict[str, Any], start_response: Any) -> Any:  # a reverse proxy whose upstream fails
        if broken["on"] and environ.get("HTTP_HX_REQUEST"):
            start_response("502 Bad Gateway", [("Content-Type", "text/html")])
            return [b"<html><body><h1>502 Bad Gateway</h1></body></html>"]
        return app(environ, start_response)

    with serve(proxy) as base:
        ctx = browser.new_context()
        page = ctx.new_page()
        sign_in(page, base, "vera")
        page.goto(base + "/queues/mail/pending")
        broken["on"] = True
        expect(page.locator("#messages")).to_contain_text("answered 502", timeout=10_000)
        expect(page.locator("#queue-body")).to_contain_text("email:send")  # the table was not replaced
        ctx.close()
    app.extensions["asynqpy.inspector"].close()
