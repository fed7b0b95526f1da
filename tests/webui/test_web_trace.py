"""The task page shows the trace id of a task's W3C traceparent header and, with ASYNQPY_TRACE_URL, links to
the trace; a bad ASYNQPY_TRACE_URL is refused when the app starts."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.errors import InvalidArgumentError
from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, serve

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


def page_of(redis_url: str, users_path: Path, task_id: str, **config: str) -> str:
    app = make_app(redis_url, users_path, **config)
    try:
        with serve(app) as base:
            b = Browser(base)
            assert b.login("ada").status == 303
            return b.open(f"/queues/default/tasks/{task_id}").text
    finally:
        app.extensions["asynqpy.inspector"].close()


def test_trace_id_and_link(redis_url: str, users_path: Path) -> None:
    with Client(redis_url) as c:
        traced = c.enqueue(Task("t", b"", {"traceparent": PARENT})).id
        plain = c.enqueue(Task("t", b"")).id
    text = page_of(redis_url, users_path, traced, ASYNQPY_TRACE_URL="https://tempo.example/explore?t={trace_id}&x=1")
    assert f'<code class="trace-id">{TRACE}</code>' in text
    assert 'href="' + html.escape(f"https://tempo.example/explore?t={TRACE}&x=1") + '"' in text
    no_link = page_of(redis_url, users_path, traced)
    assert TRACE in no_link and "trace-link" not in no_link
    assert "trace-id" not in page_of(redis_url, users_path, plain)


@pytest.mark.parametrize("url", ["javascript:alert(1)//{trace_id}", "https://jaeger.example/trace/"])
def test_a_bad_trace_url_is_refused_at_start(redis_url: str, users_path: Path, url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="ASYNQPY_TRACE_URL"):
        make_app(redis_url, users_path, ASYNQPY_TRACE_URL=url)
