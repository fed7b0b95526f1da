"""The find page through real HTTP: the query in the URL (bookmarkable), a bad term as a 400 naming it, a scan
that goes further by its cursor, masked values that cannot be matched, per-queue roles, and replay of all that
match after a preview, as a background job audited with the query and its count."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from flask import Flask

from asynqpy import Client, Task
from inspector import Inspector
from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.helpers import wait_for
from tests.webui.authkit import PASSWORD, login, make_app, token


def _post(c: Any, path: str, data: dict[str, Any]) -> Any:
    return c.post(path, data=data, headers={"X-CSRF-Token": token(c), "HX-Request": "true"})


def _text(resp: Any) -> str:
    return html.unescape(resp.get_data(as_text=True))


def test_the_query_is_in_the_url(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    q = 'type:email:* error:"SMTP 550" -state:retry'
    resp = c.get(f"/queues/mail/find?q={quote(q)}")
    page = _text(resp)
    assert resp.status_code == 200
    assert f'value="{q}"' in page.replace("&#34;", '"')
    found = [tid for tid in state["archived"] if tid in page]
    assert found == state["archived"][1:]  # the first one's type is the hostile one, its error is a <script>
    assert state["retry"][0] not in page and "the end was reached" in page
    assert "All tasks that match" not in page  # a viewer gets no bulk buttons
    assert "<script id=\"pwn\">" not in resp.get_data(as_text=True)
    assert 'action="/queues/mail/find"' in c.get("/queues/mail").get_data(as_text=True)


def test_a_bad_term_is_a_400_naming_it(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("viewer")
    resp = c.get("/queues/mail/find?q=" + quote("type:email:* colour:red"))
    assert resp.status_code == 400 and "'colour:red'" in _text(resp) and 'id="query-error"' in _text(resp)
    resp = c.get("/queues/mail/find?q=type:x&cursor=elsewhere")
    assert resp.status_code == 400 and "bad cursor" in _text(resp)
    resp = c.get("/queues/mail/find?q=type:x&cursor=" + quote("pending:\u00b2"))  # a digit to isdigit(), not int()
    assert resp.status_code == 400 and "bad cursor" in _text(resp)
    assert c.get("/queues/nope/find?q=type:x").status_code == 404


def test_scan_further_follows_the_cursor(as_role: Any, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from webui import findviews

    monkeypatch.setattr(findviews, "PAGE_SCAN", 4)
    with Client(redis_url) as cl:
        for i in range(10):
            cl.enqueue(Task("t", b"{}"), queue="q", task_id=f"t{i}")
    c = as_role("viewer")
    page = _text(c.get("/queues/q/find?q=type:x"))
    assert "scanned 4 tasks this time, 4 of 10 in all" in page and "scan further" in page
    assert 'href="/queues/q/find?q=type%3Ax&amp;cursor=pending%3A4"' in c.get(
        "/queues/q/find?q=type:x").get_data(as_text=True)
    page = _text(c.get("/queues/q/find?q=type:x&cursor=pending:8"))
    assert "10 of 10 in all" in page and "the end was reached" in page


RULES = '[redaction]\n[redaction.types."pay:*"]\nfields = ["payload.card"]\nreveal_to = "admin"\n'


def test_masked_values_cannot_be_matched(redis_url: str, users_path: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "dashboard.toml"
    cfg.write_text(RULES)
    app = make_app(redis_url, users_path, ASYNQPY_CONFIG_FILE=str(cfg))
    with Client(redis_url) as cl:
        cl.enqueue(Task("pay:charge", json.dumps({"card": "4242", "amount": 5}).encode()), queue="bill",
                   task_id="c1")
    vera, ada = app.test_client(), app.test_client()
    assert login(vera, "vera").status_code == 303 and login(ada, "ada").status_code == 303
    assert "c1" in _text(ada.get("/queues/bill/find?q=payload.card:4242"))
    page = _text(vera.get("/queues/bill/find?q=payload.card:4242"))
    assert "c1" not in page and "4242" not in page.replace('value="payload.card:4242"', "")
    assert "No task matches" in page
    assert "c1" in _text(vera.get("/queues/bill/find?q=payload.amount:5"))
    app.extensions["asynqpy.inspector"].close()


def test_replay_all_that_match_after_a_preview(as_role: Any, state: dict[str, Any], redis_url: str,
                                                r: redis.Redis, app: Flask) -> None:
    op = app.test_client()
    assert login(op, "otto").status_code == 303
    q = "state:archived error:smtp"
    assert _post(op, "/queues/mail/find/preview", {"q": q, "action": "run"}).status_code == 403
    c = as_role("admin")
    assert "All tasks that match" in _text(c.get(f"/queues/mail/find?q={quote(q)}"))
    resp = _post(c, "/queues/mail/find/preview", {"q": q, "action": "run"})
    page = _text(resp)
    assert resp.status_code == 200 and "2 tasks match" in page and "Replay all that match" in page
    with Inspector(redis_url) as insp:
        assert insp.queue_info("mail", memory=False).archived == 3  # a preview changes nothing
    resp = _post(c, "/queues/mail/find/run", {"q": q, "rate": "50"})
    assert resp.status_code == 200 and "started a background job" in _text(resp)

    def finished() -> bool:
        with Inspector(redis_url) as insp:
            return bool(insp.jobs(queue="mail")) and insp.jobs(queue="mail")[0].finished

    wait_for(finished, timeout=10)
    with Inspector(redis_url) as insp:
        info = insp.queue_info("mail", memory=False)
        assert info.archived == 1 and info.pending == 3
    records = [x for x in AuditLog(r).list().records if x.action == "tasks.run_matching"]
    done = next(x for x in records if x.count is not None)
    assert (done.count, done.user, done.outcome) == (2, "ada", "ok") and q in (done.detail or "")
    denied = RefusedLog(r).list()  # refusals are counted apart from the chain of actions
    assert [(x.action, x.user, x.queue) for x in denied] == [("tasks.run_matching", "otto", "mail")]
    assert not [x for x in AuditLog(r).list().records if x.outcome == "denied"]


def test_bad_posts(as_role: Any, state: dict[str, Any], app: Flask) -> None:
    c = as_role("admin")
    assert _post(c, "/queues/mail/find/smash", {"q": "type:x"}).status_code == 404
    assert _post(c, "/queues/mail/find/run", {"q": ""}).status_code == 400
    assert _post(c, "/queues/mail/find/run", {"q": "type:x", "rate": "fast"}).status_code == 400
    resp = _post(c, "/queues/mail/find/run", {"q": "colour:red"})
    assert resp.status_code == 400 and "colour:red" in _text(resp)
    resp = _post(c, "/queues/mail/find/preview", {"q": "age:1y", "action": "delete"})
    assert resp.status_code == 400 and "age:1y" in _text(resp)


def test_the_preview_says_at_least_before_the_end(as_role: Any, redis_url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from webui import findviews

    monkeypatch.setattr(findviews, "PREVIEW_SCAN", 5)
    with Client(redis_url) as cl:
        for i in range(12):
            cl.enqueue(Task("t" if i % 2 else "u", b"{}"), queue="q", task_id=f"t{i:02d}", process_in=60 + i)
    page = _text(_post(as_role("admin"), "/queues/q/find/preview", {"q": "type:t", "action": "delete"}))
    assert "At least 2 tasks match so far" in page and "first 5 of 12" in page and "Delete all that match" in page


def test_a_hidden_queue_cannot_be_searched(redis_url: str, tmp_path: Path) -> None:
    from webui.users import UsersFile

    path = tmp_path / "users.toml"
    UsersFile(path).add("onlyb", "admin", PASSWORD, queue_roles={"billing:*": "admin", "*": "none"})
    app = make_app(redis_url, path)
    with Client(redis_url) as cl:
        cl.enqueue(Task("t", b"{}"), queue="hr")
        cl.enqueue(Task("t", b"{}"), queue="billing:eu")
    c = app.test_client()
    assert login(c, "onlyb", PASSWORD).status_code == 303
    assert c.get("/queues/hr/find?q=type:t").status_code == 404
    assert _post(c, "/queues/hr/find/delete", {"q": "type:t"}).status_code == 404
    assert c.get("/queues/billing:eu/find?q=type:t").status_code == 200
    with Inspector(redis_url) as insp:
        assert insp.queue_info("hr", memory=False).pending == 1
    app.extensions["asynqpy.inspector"].close()
