"""The admin-only /audit page: what it lists, its filters, its JSON-lines export, and that it is escaped."""

from __future__ import annotations

import json

import redis
from flask.testing import FlaskClient

from inspector.audit import AuditLog
from tests.webui.authkit import login, token


def _seed(r: redis.Redis) -> None:
    now = [1_767_225_600.0]  # 2026-01-01T00:00:00Z
    log = AuditLog(r, clock=lambda: now[0])
    for i in range(6):
        now[0] += 3600
        log.append("tasks.delete" if i % 2 else "queue.pause", outcome="ok", user="ann" if i < 3 else "bob",
                   role="operator", queue="mail" if i % 3 else "<script>alert(1)</script>", count=i,
                   task_ids=[f"id-{i}"], detail=f"detail {i}")


def test_login_logout_and_failures_are_listed(client: FlaskClient, r: redis.Redis) -> None:
    login(client, "ada", "wrong")
    login(client, "ada")
    html = client.get("/audit").get_data(as_text=True)
    assert "login.failed" in html and ">login<" in html and "ada" in html
    client.post("/logout", headers={"X-CSRF-Token": token(client)})
    recs = AuditLog(r).list().records
    assert [x.action for x in recs] == ["logout", "login", "login.failed"]
    assert {x.addr for x in recs} == {"127.0.0.1"} and all(x.request_id for x in recs)


def test_filters(client: FlaskClient, r: redis.Redis) -> None:
    _seed(r)
    login(client, "ada")
    html = client.get("/audit?user=bob").get_data(as_text=True)
    assert "detail 3" in html and "detail 4" in html and "detail 1" not in html
    html = client.get("/audit?action=tasks.delete&queue=mail").get_data(as_text=True)
    assert "detail 1" in html and "detail 5" in html and "detail 2" not in html and "detail 3" not in html
    html = client.get("/audit?since=2026-01-01T02:30&until=2026-01-01T04:30").get_data(as_text=True)
    assert "detail 2" in html and "detail 3" in html and "detail 1" not in html and "detail 4" not in html
    assert client.get("/audit?since=yesterday").status_code == 400
    assert client.get("/audit?before=1-2;drop").status_code == 400


def test_hostile_values_are_escaped(client: FlaskClient, r: redis.Redis) -> None:
    _seed(r)
    login(client, "ada")
    html = client.get("/audit").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_export_json_lines(client: FlaskClient, r: redis.Redis) -> None:
    _seed(r)
    login(client, "ada")
    resp = client.get("/audit.jsonl?user=ann")
    assert resp.status_code == 200 and resp.mimetype == "application/x-ndjson"
    assert "attachment" in resp.headers["Content-Disposition"]
    lines = [json.loads(x) for x in resp.get_data(as_text=True).splitlines()]
    ann = [x for x in lines if x["user"] == "ann"]
    assert len(ann) == len(lines) == 3 and [x["seq"] for x in lines] == [3, 2, 1]  # newest first
    assert {"time", "iso_time", "user", "role", "addr", "action", "queue", "task_ids", "count", "outcome",
            "request_id", "seq", "prev", "hash"} <= set(lines[0])


def test_only_admins_read_the_audit_log(app, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    _seed(r)
    for name, status in (("vera", 403), ("otto", 403), ("ada", 200)):
        c = app.test_client()
        login(c, name)
        assert c.get("/audit").status_code == status, name
        assert c.get("/audit.jsonl").status_code == status, name
