"""In a real browser: an admin types a query into a queue's find box, shares the URL it lands on, previews how
many match, replays all that match as a background job, and finds its audit record with the query and count."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from inspector import Inspector
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import live_app
from tests.webui.webkit import make_state

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")


@pytest.fixture
def site(redis_url: str, users_path: Path) -> Iterator[str]:
    """The dashboard on a free port, served from a thread of this process (its jobs run in threads here too)."""
    with live_app(redis_url, users_path, TESTING=False) as base:
        yield base


def test_filter_then_replay_all_that_match_and_find_the_audit_record(site: str, browser: Any,
                                                                      redis_url: str) -> None:
    ids = make_state(redis_url)
    ctx = browser.new_context()
    page = ctx.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, site, "ada")

    page.goto(site + "/queues/mail")
    query = "state:archived error:smtp"
    page.get_by_label("Find by query").fill(query)
    page.get_by_label("Find by query").press("Enter")
    page.wait_for_url(f"{site}/queues/mail/find?q={quote(query).replace('%20', '+')}")
    rows = page.locator("table.found tbody tr")
    expect(rows).to_have_count(2)
    for tid in ids["archived"][1:]:
        expect(page.locator(f'tr[data-task-id="{tid}"]')).to_have_count(1)
    expect(page.locator("#find-progress")).to_contain_text("the end was reached")

    shared = ctx.new_page()  # the URL carries the query: another tab opening it sees the same view
    shared.goto(page.url)
    expect(shared.locator("table.found tbody tr")).to_have_count(2)
    expect(shared.get_by_label("Query")).to_have_value(query)
    shared.close()

    page.get_by_role("button", name="Replay all…").click()
    preview = page.locator("#find-preview")
    expect(preview).to_contain_text("2 tasks match")
    with Inspector(redis_url) as insp:
        assert insp.queue_info("mail", memory=False).archived == 3  # nothing moved before the confirmation
    preview.get_by_role("button", name="Replay all that match").click()
    expect(page.locator("#find-body .message")).to_contain_text("started a background job")
    job = page.locator(".job")
    expect(job).to_contain_text("done", timeout=10_000)
    expect(job).to_contain_text("2 changed")
    with Inspector(redis_url) as insp:
        info = insp.queue_info("mail", memory=False)
        assert (info.archived, info.pending) == (1, 3)

    page.goto(site + "/audit?action=tasks.run_matching")
    table = page.locator("#audit-table")
    expect(table).to_contain_text(query)
    expect(table).to_contain_text("2 of")
    expect(table).to_contain_text("ada")
    assert dialogs == []
    ctx.close()
