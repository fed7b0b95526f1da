"""Task ids and task types with URL syntax in them ("/", "..", "?", "#", "<script>") work on every page over real
HTTP: links and row actions write them as queue names are written (~2F), an address typed with %2F is sent to its
~2F form, and the types pages take such a type."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
import redis

from asynqpy import Client, Task
from inspector import Inspector
from tests.webui.livekit import Browser, live_app
from tests.webui.test_web_types import _record

ODD_ID = "a/b/../c?x=1#frag"
ODD_TYPES = ("odd/type/../x", '<script id="pwn">alert(1)</script>')


@pytest.fixture
def live(redis_url: str, users_path: Path) -> Iterator[Browser]:
    with Client(redis_url) as c:
        c.enqueue(Task("email:send", b"{}"), queue="mail", task_id=ODD_ID)
    with live_app(redis_url, users_path) as base:
        b = Browser(base)
        assert b.login("ada").status == 303
        yield b


def _hrefs(html: str, attr: str = "href") -> list[str]:
    return [unescape(h) for h in re.findall(rf'{attr}="([^"]+)"', html)]


def test_a_task_id_with_slashes_opens_and_takes_actions(live: Browser, redis_url: str) -> None:
    pending = live.open("/queues/mail/pending")
    assert pending.status == 200
    (link,) = [h for h in _hrefs(pending.text) if "/tasks/" in h]
    assert link == "/queues/mail/tasks/a~2Fb~2F..~2Fc%3Fx=1%23frag"  # one segment: nothing for a browser to resolve
    page = live.open(link)
    assert page.status == 200, page.text[-400:]
    assert ODD_ID in unescape(page.text)
    for typed in ("/queues/mail/tasks/a%2Fb%2F..%2Fc%3Fx=1%23frag", "/queues/mail/tasks/a%2fb%2f..%2fc%3Fx=1%23frag"):
        moved = live.open(typed)
        assert (moved.status, moved.headers["Location"]) == (308, link), typed
    (archive,) = [h for h in _hrefs(pending.text, "formaction") if "/tasks/" in h and h.endswith("/archive")]
    assert archive == link + "/archive"
    done = live.open(archive, {"csrf_token": live.token()})
    assert done.status == 200, done.text[-400:]
    assert "archived" in done.text
    with Inspector(redis_url) as insp:
        assert insp.get_task("mail", ODD_ID).state.value == "archived"


def test_types_with_slashes_and_markup_link_to_their_page(live: Browser, r: redis.Redis) -> None:
    for t in ODD_TYPES:
        _record(r, t, 3, 1, 0.5, time.time())
    table = live.open("/types")
    assert table.status == 200
    assert '<script id="pwn">' not in table.text
    links = [h for h in _hrefs(table.text) if h.startswith("/types/") and "?" in h]
    for t in ODD_TYPES:
        (link,) = [h for h in links if unescape(h).split("?")[0] == "/types/" + _encoded(t)]
        one = live.open(link)
        assert one.status == 200, (t, one.text[-300:])
        assert '<script id="pwn">' not in one.text
        assert "3 runs" in one.text or ">3<" in one.text


def _encoded(name: str) -> str:
    from webui.queuenames import encode

    return encode(name)
