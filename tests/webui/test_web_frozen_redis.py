"""A frozen Redis (SIGSTOP: connects and replies hang, no error) is a quick 503 with its reason, not a request
that hangs for the client's 10 s: /healthz answers within a probe's usual 1 s (ASYNQPY_HEALTH_TIMEOUT), pages and
the login within ASYNQPY_REDIS_TIMEOUT (3 s); and a live-refreshing page shows the Redis banner while it lasts."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from asynqpy.embedded import EmbeddedServer
from tests.redisfaults import fault_server, fault_url, frozen
from tests.webui.authkit import users_path
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import Browser, mail_app_over_fault_server

__all__ = ["fault_server", "fault_url", "mail_app_over_fault_server", "users_path"]  # fixtures


def _timed(fn: Any) -> tuple[Any, float]:
    t = time.monotonic()
    out = fn()
    return out, time.monotonic() - t


def test_healthz_pages_and_login_answer_503_quickly(base: str, fault_server: EmbeddedServer) -> None:
    viewer = Browser(base)
    assert viewer.login("vera").status == 303
    stranger = Browser(base)
    form = stranger.open("/login")
    assert form.status == 200
    with frozen(fault_server):
        with pytest.raises(urllib.error.HTTPError) as probe:  # a probe with a 1 s timeout gets the answer
            urllib.request.urlopen(base + "/healthz", timeout=1.0)
        assert probe.value.code == 503
        body = json.loads(probe.value.read())
        assert body["status"] == "unavailable" and "Timeout" in body["reason"]
        for path in ("/", "/redis", "/queues/mail"):
            page, took = _timed(lambda path=path: viewer.open(path))
            assert (page.status, took < 4.5) == (503, True), (path, took)
            assert "Redis is unavailable" in page.text
        sent, took = _timed(lambda: stranger.login("ada"))
        assert (sent.status, took < 4.5) == (503, True), took
    assert viewer.open("/").status == 200  # and back when Redis is


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")
def test_a_polling_page_shows_the_banner_while_redis_is_frozen(base: str, browser: Any,
                                                                fault_server: EmbeddedServer) -> None:
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        sign_in(page, base, "vera")
        page.goto(base + "/queues/mail")
        expect(page.locator("#queue-body")).to_contain_text("email")
        with frozen(fault_server):
            expect(page.locator("#messages .redis-down")).to_contain_text("Redis is unavailable", timeout=6000)
            expect(page.locator("#queue-body")).to_contain_text("email")  # the page keeps what it showed
        expect(page.locator("#messages .redis-down")).to_have_count(0, timeout=8000)
    finally:
        ctx.close()
