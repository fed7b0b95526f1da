"""The dashboard's rough edges of issue 19 (items 11, 13, 17, 18), through real HTTP after a real login: the
favicon, redirect after a task-page POST, the scheduler history's count and pager, an Aggregating tab with no
groups, plurals, a unique task's lock, a typed task's call form beside its raw payload, confirmations that
carry the count, and the live-refresh control only on pages that refresh."""

from __future__ import annotations

import html
import re
import time
from typing import Any

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from asynqpy.wire import SchedulerEnqueueEvent
from tests.webui.authkit import form_token

mux = ServeMux()


@mux.task("web:edges:sync", queue="edges")
def sync_crm(account: int) -> None:
    """Only its payloads are read here."""


def _get(c: Any, path: str, status: int = 200) -> str:
    resp = c.get(path)
    assert resp.status_code == status, (path, resp.status_code, resp.get_data(as_text=True)[:500])
    return resp.get_data(as_text=True)


def test_favicon_is_served_and_linked(client: Any, as_role: Any) -> None:
    resp = client.get("/favicon.ico")  # before login too: browsers ask for it on the login page
    assert resp.status_code == 200 and resp.mimetype == "image/x-icon" and resp.data[:4] == b"\x00\x00\x01\x00"
    page = _get(as_role("viewer"), "/")
    assert re.search(r'<link rel="icon" href="/static/favicon.ico', page)
    assert client.get("/static/favicon.ico").status_code == 200


def test_a_task_page_button_redirects_after_the_post(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        tid = cl.enqueue(Task("later", b"{}"), queue="redir", process_in=3600).id
    c = as_role("operator")
    page = _get(c, f"/queues/redir/tasks/{tid}")
    resp = c.post(f"/queues/redir/tasks/{tid}/run", data={"csrf_token": form_token(page), "back": "task"})
    assert resp.status_code == 303 and resp.headers["Location"].endswith(f"/queues/redir/tasks/{tid}")
    after = _get(c, f"/queues/redir/tasks/{tid}")
    assert f"task {tid} queued to run now" in after and "state-pending" in after


def test_scheduler_history_says_how_many_and_pages(as_role: Any, redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    try:
        now = time.time()
        for i in range(45):
            ev = SchedulerEnqueueEvent(task_id=f"t-{i:02d}")
            ev.enqueue_time.FromSeconds(int(now) - 60 * (45 - i))
            r.zadd(keys.scheduler_history("entry-1"), {ev.SerializeToString(): now - 60 * (45 - i)})
    finally:
        r.close()
    c = as_role("viewer")
    first = _get(c, "/scheduler?entry=entry-1")
    assert "Events 1-30 of 45 kept, newest first." in first and "t-44" in first and "t-14" not in first
    assert "page 1 of 2" in first and "Older ›" in first
    second = _get(c, "/scheduler?entry=entry-1&hpage=2")
    assert "Events 31-45 of 45 kept" in second and "t-14" in second and "t-44" not in second


def test_aggregating_tab_with_no_groups_has_no_empty_dropdown(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        cl.enqueue(Task("x", b"{}"), queue="nogroups")
    page = _get(as_role("viewer"), "/queues/nogroups/aggregating")
    assert "No aggregating groups" in page and '<select name="group">' not in page


def test_counts_say_task_or_tasks(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        cl.enqueue(Task("x", b"{}"), queue="one")
    page = _get(as_role("admin"), "/queues/one/pending")
    assert "1 pending task)" in page and "All 1 pending task:" in page and "1 pending tasks" not in page


def test_a_unique_task_page_says_so_with_its_lock_time_left(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        tid = cl.enqueue(Task("report", b'{"day": 1}'), queue="uniq", unique=600).id
        plain = cl.enqueue(Task("report", b'{"day": 2}'), queue="uniq").id
    c = as_role("viewer")
    page = html.unescape(_get(c, f"/queues/uniq/tasks/{tid}"))
    m = re.search(r"<th>Unique</th><td>yes: its lock is held for (\d+)m", page)
    assert m and 9 <= int(m.group(1)) <= 10, page[page.find("Unique") - 100:page.find("Unique") + 300]
    assert "asynq:{uniq}:unique:" in page
    assert "<th>Unique</th>" not in _get(c, f"/queues/uniq/tasks/{plain}")


def test_typed_task_page_shows_the_call_and_the_raw_payload_with_copy(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        info = sync_crm.enqueue(cl, 42)
    c = as_role("viewer")
    page = html.unescape(_get(c, f"/queues/edges/tasks/{info.id}"))
    call = page.index('<pre class="payload call">')
    raw = page.index('<div id="payload-copy"><pre class="payload json">')
    assert call < raw and "sync_crm(account=42)" in page and '"account": 42' in page
    assert "<summary>Show the raw payload (JSON)</summary>" in page and 'data-copy="#payload-copy"' in page


def test_a_payload_mismatch_shows_the_raw_json_first(as_role: Any, redis_url: str, r: redis.Redis) -> None:
    from tests.inspector.worker import Worker

    with Client(redis_url) as cl:
        tid = cl.enqueue(Task("web:edges:sync", b'{"account": "acme-42"}'), queue="edges").id
    w = Worker(r, time.time)
    assert w.take("edges", 1) == [tid]
    w.kill("edges", tid, "payload of 'web:edges:sync' does not fit sync_crm(): account: 'acme-42' is not an int")
    page = _get(as_role("viewer"), f"/queues/edges/tasks/{tid}")
    raw = page.index('<div id="payload-copy"><pre class="payload json">')
    assert raw < page.index('<pre class="payload call">') and "does not fit the function" in page
    assert "<summary>Show as the call</summary>" in page


def test_deletes_and_archives_ask_first_with_the_count(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("operator")
    page = html.unescape(_get(c, "/queues/mail/archived"))
    assert re.search(r'data-needs-selection data-confirm="Delete \{tasks\} of mail\? This cannot be undone\."', page)
    assert "data-selected-count" in page
    rows = re.findall(r'hx-confirm="Delete task ([^"?]+)\? This cannot be undone\."', page)
    assert sorted(rows) == sorted(state["archived"])
    pending = html.unescape(_get(c, "/queues/mail/pending"))
    assert re.search(r'data-confirm="Archive \{tasks\} of mail\?', pending)
    task = html.unescape(_get(c, f"/queues/mail/tasks/{state['archived'][0]}"))
    assert f'hx-confirm="Delete task {state["archived"][0]}? This cannot be undone."' in task


def test_live_refresh_control_only_on_pages_that_refresh(client: Any, as_role: Any, state: dict[str, Any]) -> None:
    assert 'id="live-control"' not in _get(client, "/login")
    c = as_role("admin")
    assert 'id="live-control"' not in _get(c, "/audit")
    for path in ("/", "/servers", "/scheduler", "/errors", "/redis", "/queues/mail/pending",
                 f"/queues/mail/tasks/{state['pending']}"):
        page = _get(c, path)
        polls = re.search(r'class="[^"]*\bpoll\b[^"]*" hx-get="[^"]*" hx-trigger="every', page)
        assert 'id="live-control"' in page and polls, path
    overview = _get(c, "/charts/daily?days=30")
    assert 'hx-trigger="every 60s"' in overview and "days=30" in overview  # the daily chart keeps its days


def test_long_queue_names_and_types_are_cut_with_the_full_name_on_hover(as_role: Any, redis_url: str) -> None:
    from tests.webui.livekit import go_enqueue

    queue = "q" + "u" * 299  # Go accepts any name: a 300-character queue written by Go is still shown
    typ = "report:" + "x" * 200
    tid = go_enqueue(redis_url, queue, typ)
    c = as_role("viewer")
    for path in ("/", f"/queues/{queue}/pending", f"/queues/{queue}/tasks/{tid}"):
        page = _get(c, path)
        assert f'<span class="name cut" title="{queue[:159]}…">{queue[:59]}…</span>' in page, path
    listing = _get(c, f"/queues/{queue}/pending")
    assert f'<span class="name cut" title="{typ[:159]}…">{typ[:59]}…</span>' in listing
    assert f"<td class=\"long\">{queue}</td>" in _get(c, f"/queues/{queue}/tasks/{tid}")  # in full on its page
    with Client(redis_url) as cl:
        cl.enqueue(Task("email:welcome", b"{}"), queue="short")
    assert '<td class="type">email:welcome</td>' in _get(c, "/queues/short/pending")


def test_replay_all_answers_with_its_job_card_by_the_button_showing_only_its_own_message(
        as_role: Any, state: dict[str, Any]) -> None:
    from tests.webui.authkit import token

    c = as_role("admin")
    resp = c.post("/queues/mail/archived/run", data={"all": "1", "rate": "1"},
                  headers={"X-CSRF-Token": token(c), "HX-Request": "true"})
    body = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "started a background job to replay 3 archived tasks at 1 tasks/s" in body
    card = body[body.index('<div class="job card'):]
    card = card[:card.index("</div>\n</div>") if "</div>\n</div>" in card else len(card)]
    assert "data-just-started" in card and "started a background job" not in card  # the page's message is not its
    assert body.index('class="all-actions"') < body.index('<div class="job card')  # by the button, not at the top
    page = _get(c, "/queues/mail/archived")
    assert "data-just-started" not in page  # only the answer that started it scrolls to it
