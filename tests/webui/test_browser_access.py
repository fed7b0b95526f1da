"""In a real browser (Playwright driving Debian's chromium, `asynqpy web` under gunicorn with a config file of
redaction rules): a viewer sees a card number masked; an operator of billing:* sees it, replays a task there,
and finds no Replay button elsewhere, where a forged POST from the page is refused with 403."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from tests.inspector.worker import Worker
from tests.webui.authkit import PASSWORD, queue_roles_file
from tests.webui.browserkit import ARTIFACTS, CHROMIUM, expect, sign_in
from tests.webui.livekit import gunicorn_web

DB = 13
CARD = "4242424242424242"
USERS = {"bill": ("viewer", {"billing:*": "operator"}), "vera": ("viewer", {})}
RULES = '[redaction.types."payment:*"]\nfields = ["payload.card.number"]\nreveal_to = "operator"\n'

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed "
                                "(.ci/run installs it: apt-get install chromium)")


@pytest.fixture(scope="module")
def site(redis_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`asynqpy web` (gunicorn, 1 worker) on database 13 with bill (viewer, operator on billing:*) and vera."""
    tmp = tmp_path_factory.mktemp("access-web")
    users = queue_roles_file(tmp / "users.toml", USERS, PASSWORD)
    (tmp / "dashboard.toml").write_text(RULES)
    url = redis_server_url.rsplit("/", 1)[0] + f"/{DB}"
    r = redis.Redis.from_url(url)
    r.flushdb()
    try:
        with gunicorn_web(url, users, "--config", str(tmp / "dashboard.toml"),
                          ASYNQPY_WEB_SECRET="access-test-secret-" + "z" * 32, ASYNQPY_SAMPLE_SECONDS="0") as base:
            yield {"base": base, "url": url, "redis": r}
    finally:
        r.flushdb()
        r.close()


def archived(url: str) -> dict[str, str]:
    """One archived payment:charge task in billing:eu and one archived task in mail."""
    ids = {}
    with Client(url) as c:
        ids["billing"] = c.enqueue(Task("payment:charge", json.dumps({"card": {"number": CARD}}).encode()),
                                   queue="billing:eu").id
        ids["mail"] = c.enqueue(Task("email:send", b'{"to": "ada@example.com"}'), queue="mail").id
    r = redis.Redis.from_url(url)
    w = Worker(r, time.time)
    for q in ("billing:eu", "mail"):
        for tid in w.take(q, 1):
            w.kill(q, tid, "boom")
    r.close()
    return ids


def test_masked_card_for_a_viewer_and_replay_only_where_operator(site: dict[str, Any], browser: Any) -> None:
    base = site["base"]
    ids = archived(site["url"])
    ctx = browser.new_context()
    page = ctx.new_page()
    sign_in(page, base, "vera", PASSWORD)
    page.goto(f"{base}/queues/billing:eu/tasks/{ids['billing']}")
    expect(page.locator("pre.payload")).to_contain_text("[redacted]")
    assert CARD not in page.content()
    expect(page.locator(".banner.redacted")).to_contain_text("payload.card.number")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "task-redacted.png"), full_page=True)
    assert page.get_by_role("button", name="Replay").count() == 0  # a viewer everywhere
    page.get_by_role("button", name="Log out").click()

    sign_in(page, base, "bill", PASSWORD)
    page.goto(f"{base}/queues/billing:eu/tasks/{ids['billing']}")
    expect(page.locator("pre.payload")).to_contain_text(CARD)  # operator on billing:*: the rule's reveal_to
    page.goto(f"{base}/queues/billing:eu/archived")
    row = page.locator(f'tr[data-task-id="{ids["billing"]}"]')
    row.get_by_role("button", name="Replay").click()
    expect(page.locator("#queue-body .message")).to_contain_text(f"task {ids['billing']} replayed")
    expect(row).to_have_count(0)

    page.goto(f"{base}/queues/mail/archived")
    expect(page.locator(f'tr[data-task-id="{ids["mail"]}"]')).to_have_count(1)
    assert page.get_by_role("button", name="Replay").count() == 0
    status = page.evaluate("""async ([url]) => {
        const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token'];
        const resp = await fetch(url, {method: 'POST', headers: {'X-CSRF-Token': token}});
        return resp.status;
    }""", [f"{base}/queues/mail/tasks/{ids['mail']}/run"])
    assert status == 403
    assert site["redis"].zcard("asynq:{mail}:archived") == 1
    ctx.close()
