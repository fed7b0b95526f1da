"""Every queue name Go asynq accepts works on every page, over real HTTP: slashes, braces, spaces, Unicode, dots,
tildes and URL syntax in names; and one odd queue does not break the pages of the others (/charts/daily)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, go_enqueue, serve

NAMES = ["a/b", "{x}", "with space", "ünïcødé ☃", "..", "a~2Fb", "q?x=1#frag", "100%", " padded "]


@pytest.fixture
def live(redis_url: str, users_path: Path) -> Iterator[dict[str, Any]]:
    app = make_app(redis_url, users_path)
    ids = {q: go_enqueue(redis_url, q, "odd:type") for q in NAMES}
    go_enqueue(redis_url, "plain", "plain:type")
    with serve(app) as base:
        b = Browser(base)
        assert b.login("ada").status == 303
        yield {"b": b, "ids": ids}
    app.extensions["asynqpy.inspector"].close()


def _links(html: str, text: str) -> list[str]:
    return [unescape(h) for h, t in re.findall(r'<a href="([^"]+)"[^>]*>([^<]*)</a>', html) if unescape(t) == text]


@pytest.mark.parametrize("name", NAMES)
def test_every_page_of_an_oddly_named_queue_works(live: dict[str, Any], name: str) -> None:
    b, tid = live["b"], live["ids"][name]
    overview = b.open("/")
    assert overview.status == 200
    (link,) = _links(overview.text, name)  # the overview links to the queue by its name
    page = b.open(link)
    assert page.status == 200, (link, page.text[-500:])
    assert tid in page.text  # its pending tab lists the task
    for suffix in ("/pending", "/archived", f"/tasks/{tid}"):
        assert b.open(link + suffix).status == 200, link + suffix
    task_links = [h for h in re.findall(r'href="([^"]+)"', page.text) if tid in h]
    assert task_links and b.open(unescape(task_links[0])).status == 200
    tok = b.token()
    assert b.open(link + "/pause", {"csrf_token": tok, "state": "pending"}).status == 200
    assert b.open(f"{link}/tasks/{tid}/archive", {"csrf_token": tok}).status == 200
    assert b.open(link + "/archived").text.count(tid) >= 1
    for path in ("/charts/daily", "/charts/sizes", "/errors"):
        assert b.open(path).status == 200, path
    for path in ("/charts/daily", "/charts/sizes", "/errors"):
        assert b.open(f"{path}?queue={quote(name, safe='')}").status == 200, path
