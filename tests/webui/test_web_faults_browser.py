"""In a real browser (Playwright, Debian's chromium): while Redis answers BUSY a polling page shows the Redis-down
message in #messages (htmx swaps no error answer by itself: static/app.js does, for those addressed to
#messages), keeps its own content, and drops the message once Redis answers again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.redisfaults import busy, fault_redis, fault_server, fault_url
from tests.webui.authkit import users_path
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import mail_app_over_fault_server

__all__ = ["fault_redis", "fault_server", "fault_url", "mail_app_over_fault_server", "users_path"]  # fixtures

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")


@pytest.fixture
def page(base: str, browser: Any) -> Iterator[Any]:
    """A page of the session's browser (tests.webui.browserkit), logged in as vera."""
    ctx = browser.new_context()
    pg = ctx.new_page()
    sign_in(pg, base, "vera")
    yield pg
    ctx.close()


def test_a_polling_page_shows_redis_down_and_recovers(page: Any, base: str, fault_url: str) -> None:
    page.goto(base + "/queues/mail")
    body = page.locator("#queue-body")
    expect(body).to_contain_text("email")
    with busy(fault_url):
        expect(page.locator("#messages .redis-down")).to_contain_text("Redis is unavailable", timeout=5000)
        expect(page.locator("#messages .redis-down")).to_contain_text("answers BUSY")
        expect(page.locator("#redis-banner")).to_contain_text("answers BUSY")
        expect(body).to_contain_text("email")  # the page keeps what it showed
    expect(page.locator("#messages .redis-down")).to_have_count(0, timeout=5000)
    expect(page.locator("#redis-banner")).to_be_hidden()
    expect(body).to_contain_text("email")
