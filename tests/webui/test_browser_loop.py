"""The browser fixture leaves no event loop marked running in the test's thread, so `asyncio.run` works after
a browser test, in the same module and in a later one, and inside a browser test between page calls.
(With Playwright's sync API driven from the main thread, the last two tests here failed: "asyncio.run() cannot
be called from a running event loop".) Tests in one module run in file order, so the first test opens a page."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.webui.browserkit import CHROMIUM, expect

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(apt-get install chromium)")


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_a_page_renders_in_the_shared_chromium(browser: Any) -> None:
    page = browser.new_page()
    try:
        page.set_content("<h1>loop</h1><button onclick=\"this.textContent='pressed'\">press</button>")
        page.get_by_role("button").click()
        expect(page.get_by_role("button")).to_have_text("pressed")
        assert page.locator("h1").inner_text() == "loop"
    finally:
        page.close()


def test_asyncio_run_after_a_browser_test_in_the_same_module() -> None:
    assert asyncio.run(_answer()) == 42


def test_asyncio_run_between_page_calls(browser: Any) -> None:
    page = browser.new_page()
    try:
        page.set_content("<p id='n'>1</p>")
        assert asyncio.run(_answer()) == 42
        expect(page.locator("#n")).to_have_text("1")
    finally:
        page.close()
