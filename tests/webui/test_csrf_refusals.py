"""POSTs the CSRF check refuses (no token, a wrong one, a cross-site Sec-Fetch-Site, a foreign Origin) are counted
with the other refused requests: user, verb, queue, path and reason, in /audit's refused table; a flood of them is
one aggregate, never a record in the chain."""

from __future__ import annotations

from collections import Counter

import redis
from flask.testing import FlaskClient

from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.webui.authkit import login, token


def test_each_kind_of_csrf_refusal_is_counted_with_user_path_and_reason(client: FlaskClient, r: redis.Redis) -> None:
    assert login(client, "otto").status_code == 303
    tok = token(client)
    tries = [
        ({}, "missing CSRF token"),
        ({"X-CSRF-Token": "not-the-token"}, "wrong CSRF token"),
        ({"X-CSRF-Token": tok, "Sec-Fetch-Site": "cross-site"}, "cross-site request (Sec-Fetch-Site: cross-site)"),
        ({"X-CSRF-Token": tok, "Origin": "http://evil.example"}, "foreign Origin"),
    ]
    for headers, _ in tries:
        assert client.post("/queues/mail/pause", headers=headers).status_code == 400
    rows = RefusedLog(r).list()
    assert sorted(c.detail for c in rows) == sorted(
        f"CSRF check: {reason} (POST /queues/mail/pause)" for _, reason in tries)
    assert {(c.action, c.outcome, c.user, c.queue, c.count) for c in rows} == {
        ("queue.pause", "csrf", "otto", "mail", 1)}
    assert AuditLog(r).list().records[-1].action == "login"  # nothing was chained but the login
    anon = client.application.test_client()
    assert anon.post("/login", data={"username": "ada", "password": "x"}).status_code == 400
    assert any(c.user == "" and c.action == "auth.login" and c.outcome == "csrf" for c in RefusedLog(r).list())
    assert login(anon, "ada").status_code == 303
    refused = anon.get("/audit").get_data(as_text=True).split('id="refused-table"')[1]
    assert "CSRF check: wrong CSRF token (POST /queues/mail/pause)" in refused and ">csrf<" in refused


def test_a_flood_of_csrf_refusals_is_one_aggregate(client: FlaskClient, r: redis.Redis) -> None:
    assert login(client, "otto").status_code == 303
    for _ in range(200):
        assert client.post("/queues/mail/pause", headers={"X-CSRF-Token": "forged"}).status_code == 400
    rows = RefusedLog(r).list()
    assert sum(c.count for c in rows) == 200
    assert set(Counter(c.window for c in rows).values()) == {1}  # one aggregate per window (it may straddle two)
    assert [x.action for x in AuditLog(r).list().records] == ["login"]
