"""Every page of the dashboard through real HTTP (the Flask test client) after a real login: content, columns,
escaping of hostile strings, bounded payloads, 404 pages, and a banner (never a 500) when Redis is down."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from asynqpy import Client, Task
from asynqpy.embedded import EmbeddedServer
from tests.webui.authkit import login, make_app

COLUMNS = {
    "active": ["ID", "Type", "Payload", "Status", "Started", "Lease until", "Deadline"],
    "pending": ["ID", "Type", "Payload", "Waiting since", "Retried", "Max retry"],
    "scheduled": ["ID", "Type", "Payload", "Process in"],
    "retry": ["ID", "Type", "Payload", "Retry in", "Last error", "Retried", "Max retry"],
    "archived": ["ID", "Type", "Payload", "Last failed", "Last error"],
    "completed": ["ID", "Type", "Payload", "Completed", "Result", "TTL"],
}


def _html(client: FlaskClient, path: str, status: int = 200) -> str:
    resp = client.get(path)
    assert resp.status_code == status, (path, resp.status_code, resp.get_data(as_text=True)[:800])
    return resp.get_data(as_text=True)


def _headers(html: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", html)]


def test_overview_lists_every_queue_with_counts(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    html = _html(c, "/")
    assert ">mail</a>" in html and ">low</a>" in html
    for col in ("Queue", "State", "Size", "Latency", "Processed", "Failed", "Error rate", "Memory"):
        assert col in _headers(html), col
    assert 'href="/queues/mail/archived">3</a>' in html
    assert "processed today" in html
    # the htmx refresh gets the partial only, with the same data
    part = c.get("/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert part.lstrip().startswith('<section id="overview"') and "<html" not in part


def test_overview_empty_state_says_what_to_do(as_role: Any, redis_url: str) -> None:
    html = _html(as_role("viewer"), "/")
    assert "No queues yet" in html and "enqueue" in html


def test_queue_pages_show_each_states_columns(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    for st, cols in COLUMNS.items():
        html = _html(c, f"/queues/mail/{st}")
        heads = _headers(html)
        for col in cols:
            assert col in heads, (st, col, heads)
        tid = state[st][0] if isinstance(state[st], list) else state[st]
        assert f"/queues/mail/tasks/{tid}" in html, st
    assert "timeout talking to smtp" in _html(c, "/queues/mail/retry")
    # the queue page opens the first non-empty tab and shows the counts of all of them
    html = _html(c, "/queues/mail")
    assert re.search(r"Archived <span class=\"count\">3</span>", html)
    assert _html(c, "/queues/mail/aggregating").count("No aggregating groups") == 1


def test_pagination_and_bounds(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    html = _html(c, "/queues/mail/archived?page=2&size=2")
    assert "page 2 of 2 (3 archived tasks)" in html
    assert html.count('name="ids"') == 0  # a viewer gets no checkboxes
    assert "page 1 of 1" in _html(c, "/queues/mail/archived?size=200")  # the largest size taken
    _html(c, "/queues/mail/archived?page=0", status=400)
    assert "past the end" in _html(c, "/queues/mail/archived?page=9")


def test_search_by_error_text_and_type(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    html = _html(c, "/queues/mail/archived?error=mailbox")
    assert html.count('name="ids"') == 0 and html.count("/queues/mail/tasks/") == 2
    html = _html(c, "/queues/mail/archived?type=nothing-like-this")
    assert "No archived task matches" in html


def test_task_page_shows_everything_and_why(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    html = _html(c, f"/queues/mail/tasks/{state['scheduled']}")
    assert "Why hasn&#39;t it run?" in html or "Why hasn't it run?" in html
    assert "<time datetime=" in html and "UTC" in html
    html = _html(c, f"/queues/mail/tasks/{state['retry'][0]}")
    assert "timeout talking to smtp" in html and "Retried" in html
    html = _html(c, f"/queues/mail/tasks/{state['completed']}")
    assert "TTL" in html and "Completed at" in html


def test_unknown_queue_task_or_state_is_a_404_page(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    for path in ("/queues/nope", "/queues/nope/pending", "/queues/mail/tasks/nope", "/queues/mail/bogus",
                 "/no/such/page"):
        html = _html(c, path, status=404)
        assert "Not found" in html and '<nav aria-label="Main">' in html, path


def test_errors_page_groups_recent_failures(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    html = _html(c, "/errors")
    assert "SMTP 550: &lt;b&gt;mailbox&lt;/b&gt; unavailable" in html
    assert "timeout talking to smtp" in html
    row = next(r for r in html.split("<tr>") if "timeout talking to smtp" in r)
    assert re.search(r'<td class="num">2</td><td class="num">2</td><td class="num">0</td>', row)
    assert "No failures" in _html(c, "/errors?queue=low")


def test_tasks_archived_by_hand_are_no_errors(as_role: Any, state: dict[str, Any], redis_url: str) -> None:
    """/errors listed a task an operator archived as "(no error message)", first and last seen "-"."""
    from inspector import Inspector

    with Inspector(redis_url) as insp:
        insp.archive_task("mail", state["pending"])
        insp.archive_task("low", insp.list_tasks("low", "pending").tasks[0].id)
        assert insp.get_task("mail", state["pending"]).state.value == "archived"
    c = as_role("viewer")
    html = _html(c, "/errors")
    assert "(no error message)" not in html and state["pending"][:8] not in html
    assert "timeout talking to smtp" in html  # the real failures stay
    low = _html(c, "/errors?queue=low")
    assert "No failures" in low and "tasks archived by hand are not errors" in low


def test_servers_scheduler_redis_and_charts(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    assert "No live worker servers" in _html(c, "/servers")
    assert "No live scheduler entries" in _html(c, "/scheduler")
    html = _html(c, "/redis")
    assert "Eviction policy" in html and "Raw INFO" in html
    html = _html(c, "/charts/daily?days=30")
    assert "<svg" in html and "30 days" in html
    assert "the chart appears after the second sample" in _html(c, "/charts/sizes")


def test_servers_page_shows_stuck_handler_threads(as_role: Any, redis_url: str) -> None:
    import time

    import redis

    from asynqpy.rdb import keys
    from asynqpy.wire import ServerInfo

    r = redis.Redis.from_url(redis_url)
    key = keys.server_info("h", 7, "sid")  # as a worker's heartbeat writes them
    r.set(key, ServerInfo(host="h", pid=7, server_id="sid", concurrency=2, status="active").SerializeToString())
    r.zadd(keys.SERVERS, {key: time.time() + 30})
    r.hset(keys.server_health("h", 7, "sid"), "stuck_threads", 2)
    html = _html(as_role("viewer"), "/servers")
    assert "2 stuck threads</span>" in html
    r.close()


def test_hostile_strings_are_escaped_everywhere(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("admin")
    hostile_tid = state["archived"][0]
    for path in ("/", "/queues/mail/archived", f"/queues/mail/tasks/{hostile_tid}", "/errors"):
        html = _html(c, path)
        assert "<script>alert" not in html and '<script id="pwn"' not in html and "<img src=x" not in html, path
    html = _html(c, "/queues/mail/archived")
    assert "&lt;img src=x onerror=" in html
    assert "&lt;script&gt;alert(&#34;err&#34;)&lt;/script&gt;" in html


def test_big_and_binary_payloads_render_bounded(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        big = cl.enqueue(Task("big", b"x" * (10 * 1024 * 1024)), queue="blobs").id
        raw = cl.enqueue(Task("raw", b"\xff\xfe\x00<script>" * 50), queue="blobs").id
    c = as_role("viewer")
    html = _html(c, "/queues/blobs/pending")
    assert len(html) < 200_000
    html = _html(c, f"/queues/blobs/tasks/{big}")
    assert len(html) < 500_000 and "10485760 bytes, cut for display" in html
    html = _html(c, f"/queues/blobs/tasks/{raw}")
    assert "(hex," in html and "<script>" not in html.split("<main>")[1]


def test_healthz_needs_no_login(client: FlaskClient, redis_url: str) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json()["status"] == "ok"


def test_redis_down_shows_a_banner_never_a_500(users_path: Path) -> None:
    server = EmbeddedServer().start()
    app = make_app(server.url, users_path)
    c = app.test_client()
    try:
        assert login(c, "vera").status_code == 303
        with Client(server.url) as cl:
            cl.enqueue(Task("t", b""), queue="q")
    finally:
        server.stop()
    for path in ("/", "/queues/q", "/queues/q/pending", "/queues/q/tasks/x", "/errors", "/servers", "/scheduler",
                 "/redis", "/charts/daily", "/login"):
        resp = c.get(path)
        html = resp.get_data(as_text=True)
        if path == "/login" and resp.status_code == 302:
            # this worker keeps the session it checked (webui sessions cache): a signed-in user is sent on
            assert resp.headers["Location"].endswith("/"), resp.headers["Location"]
            continue
        assert resp.status_code in (200, 503), (path, resp.status_code)
        if resp.status_code == 503:
            assert 'id="redis-banner"' in html and "Redis is unavailable" in html, path
    resp = c.get("/healthz")
    assert resp.status_code == 503 and "127.0.0.1" in resp.get_json()["reason"]
    resp = c.get("/", headers={"HX-Request": "true"})
    assert resp.status_code == 503 and "Redis is unavailable" in resp.get_data(as_text=True)
    app.extensions["asynqpy.inspector"].close()


@pytest.mark.parametrize("path", ["/", "/queues/mail/archived"])
def test_pages_load_only_local_assets(as_role: Any, state: dict[str, Any], path: str) -> None:
    html = _html(as_role("viewer"), path)
    assert "/static/htmx-2.0.11.min.js" in html
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline script"
    # an attribute named on*= (not the escaped text of a quoted attribute value, e.g. a long type's title)
    assert not re.search(r"""<[a-zA-Z](?:[^>"']|"[^"]*"|'[^']*')*\son[a-z]+\s*=""", html), "inline event handler"
    assert "https://" not in html.split("<main>")[0]


def test_servers_page_shows_what_each_worker_runs(as_role: Any, redis_url: str) -> None:
    import threading

    from asynqpy import ServeMux
    from tests.helpers import running, wait_for

    release = threading.Event()
    mux = ServeMux()

    @mux.handler("slow")
    def slow(task: Any) -> None:
        release.wait(10)

    c = as_role("viewer")
    with running(redis_url, mux, queues={"work": 1}, concurrency=2):
        with Client(redis_url) as cl:
            tid = cl.enqueue(Task("slow", b'{"n": 1}'), queue="work").id
        def listed() -> str | None:
            page = _html(c, "/servers")
            return page if tid in page else None

        html = wait_for(listed, what="the running task listed")
        active = _html(c, "/queues/work/active")
        release.set()
    row = active.split(f'data-task-id="{tid}"')[1].split("</tr>")[0]
    assert "<td>running on " in row and row.count("<time") == 2  # started (from the server) and lease
    assert "work</a>=1" in html and "1 / 2" in html and "slow" in html
    offset = html.split("1 / 2</td>")[1].split("</td>")[0]  # the clock offset column: this machine's clock
    assert re.search(r"[+-]0\.\d{3} s", offset) and "clock off" not in offset


def test_size_chart_draws_the_samples(as_role: Any, state: dict[str, Any], redis_url: str) -> None:
    from inspector import Inspector

    with Inspector(redis_url) as insp:
        for _ in range(2):
            insp.record_size_sample(insp.queue_infos(memory=False))
    c = as_role("viewer")
    for path in ("/charts/sizes", "/charts/sizes?queue=mail"):
        html = _html(c, path)
        assert html.count("<polyline") == 5 and "archived" in html, path


def test_pages_use_the_shared_snapshot_when_the_inspector_has_it(as_role: Any, state: dict[str, Any],
                                                                 app: Any) -> None:
    from types import SimpleNamespace

    insp = app.extensions["asynqpy.inspector"]
    real = insp.queue_infos(memory=False)
    calls: list[float] = []

    def queue_snapshot(max_age: float = 2.0) -> Any:
        calls.append(max_age)
        return SimpleNamespace(taken_at=0.0, queues=tuple(real))

    insp.queue_snapshot = queue_snapshot  # what issue 12 adds to the Inspector
    try:
        c = as_role("viewer")
        assert ">mail</a>" in _html(c, "/") and "Archived <span" in _html(c, "/queues/mail/archived")
        assert len(calls) == 2
    finally:
        del insp.queue_snapshot


def test_every_malformed_or_out_of_range_paging_parameter_is_a_400_that_says_why(as_role: Any,
                                                                                  state: dict[str, Any]) -> None:
    """One rule for ?page=, ?size=, ?cursor= and the scheduler's ?page=/?hpage=: page=abc used to show page 1,
    size=-1 and size=0 the default size, size=1000000 200 rows, all silently."""
    c = as_role("viewer")
    for query, says in (("page=abc", "page must be a whole number 1 or more, not 'abc'"),
                        ("page=-5", "page must be a whole number 1 or more, not -5"),
                        ("page=1.5", "page must be a whole number 1 or more, not '1.5'"),
                        ("size=-1", "size must be a whole number from 1 to 200, not -1"),
                        ("size=0", "size must be a whole number from 1 to 200, not 0"),
                        ("size=1000000", "size must be a whole number from 1 to 200, not 1000000"),
                        ("size=x", "size must be a whole number from 1 to 200, not 'x'"),
                        ("type=email&cursor=-3", "cursor must be a whole number 0 or more, not -3")):
        assert says in unescape(_html(c, f"/queues/mail/archived?{query}", status=400)), query
    for query in ("page=abc", "hpage=0"):
        assert "must be a whole number 1 or more" in _html(c, f"/scheduler?{query}", status=400), query
    assert "page 1 of 2" in _html(c, "/queues/mail/archived?page=&size=2")  # blank: the default
