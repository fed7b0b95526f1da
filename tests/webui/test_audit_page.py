"""The admin-only /audit page: what it lists, its filters, its JSON-lines export, and that it is escaped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient

from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.webui.authkit import audit_verdict, form_token, login, make_app, token


def _seed(r: redis.Redis) -> None:
    now = [1_767_225_600.0]  # 2026-01-01T00:00:00Z
    log = AuditLog(r, key=b"a key of the seed's own", clock=lambda: now[0])
    for i in range(6):
        now[0] += 3600
        log.append("tasks.delete" if i % 2 else "queue.pause", outcome="ok", user="ann" if i < 3 else "bob",
                   role="operator", queue="mail" if i % 3 else "<script>alert(1)</script>", count=i,
                   task_ids=[f"id-{i}"], detail=f"detail {i}")


def test_login_logout_and_failures_are_listed(client: FlaskClient, r: redis.Redis) -> None:
    login(client, "ada", "wrong")
    login(client, "ada")
    html = client.get("/audit").get_data(as_text=True)
    assert ">login<" in html and "ada" in html
    refused = html.split('id="refused-table"')[1]
    assert ">login.failed<" in refused and "wrong username or password" in refused
    client.post("/logout", headers={"X-CSRF-Token": token(client)})
    recs = AuditLog(r).list().records
    assert [x.action for x in recs] == ["logout", "login"]  # a failed login is counted apart, not chained
    assert {x.addr for x in recs} == {"127.0.0.1"} and all(x.request_id for x in recs)
    [failed] = RefusedLog(r).list()
    assert (failed.action, failed.outcome, failed.user, failed.addr, failed.count) == (
        "login.failed", "failed", "ada", "127.0.0.1", 1)


def test_a_flood_of_failed_logins_evicts_no_action(redis_url: str, users_path: Path, r: redis.Redis) -> None:
    """Finding 1: anonymous failed and throttled logins used to fill the capped stream and push actions out."""
    app = make_app(redis_url, users_path, ASYNQPY_AUDIT_CAP=20)
    otto = app.test_client()
    login(otto, "otto")
    assert otto.post("/queues/billing/pause", headers={"X-CSRF-Token": token(otto)}).status_code in (200, 404)
    mallory = app.test_client()
    page = mallory.get("/login").get_data(as_text=True)
    tok = form_token(page)
    for i in range(150):
        resp = mallory.post("/login", data={"username": f"victim{i % 3}", "password": "guess", "csrf_token": tok})
        assert resp.status_code in (401, 429)
    actions = [x.action for x in AuditLog(r).list().records]
    assert actions[-1] == "login" and "login.failed" not in actions and len(actions) <= 3
    assert any(a.startswith("queue.") for a in actions), actions
    rows = RefusedLog(r).list()
    assert sum(c.count for c in rows) == 150
    # One aggregate per user and outcome in each 5-minute window (the 150 logins may straddle two windows).
    per_window = Counter((c.window, c.user, c.outcome) for c in rows)
    assert set(per_window.values()) == {1} and len({(c.user, c.outcome) for c in rows}) <= 6
    assert audit_verdict(app).ok
    app.extensions["asynqpy.inspector"].close()


def test_a_full_log_trims_through_a_checkpoint_and_the_page_says_so(redis_url: str, users_path: Path,
                                                                    r: redis.Redis) -> None:
    app = make_app(redis_url, users_path, ASYNQPY_AUDIT_CAP=10)
    c = app.test_client()
    login(c, "ada")
    for _ in range(8):
        c.post("/logout", headers={"X-CSRF-Token": token(c)})
        login(c, "ada")
    html = c.get("/audit").get_data(as_text=True)
    assert 'id="audit-trimmed"' in html and "trimmed by the cap" in html and "asynqpy-audit-trimmed.jsonl" in html
    spilled = (Path(app.config["ASYNQPY_AUDIT_DIR"]) / "asynqpy-audit-trimmed.jsonl").read_text().splitlines()
    assert spilled and json.loads(spilled[0])["seq"] == 1
    assert audit_verdict(app).ok
    app.extensions["asynqpy.inspector"].close()


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


@pytest.mark.parametrize("before", ["0-0", "0", "99999999999999999999999-0", "1-18446744073709551616", "abc"])
def test_a_bad_before_is_a_400_that_says_why(client: FlaskClient, before: str) -> None:
    """Finding 8: ?before=0-0 passed the digit check and Redis refused the range: a 500."""
    login(client, "ada")
    resp = client.get("/audit", query_string={"before": before})
    assert resp.status_code == 400 and "before:" in resp.get_data(as_text=True)
    resp = client.get("/audit", query_string={"before": before}, headers={"HX-Request": "true"})
    assert resp.status_code == 400


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
            "request_id", "seq", "prev", "mac"} <= set(lines[0])
    assert resp.headers["Cache-Control"] == "no-store"


def test_only_admins_read_the_audit_log(app, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    _seed(r)
    for name, status in (("vera", 403), ("otto", 403), ("ada", 200)):
        c = app.test_client()
        login(c, name)
        assert c.get("/audit").status_code == status, name
        assert c.get("/audit.jsonl").status_code == status, name
