"""The dashboard's login and role matrix through the real login form: anonymous, viewer, operator, admin;
CSRF; read-only mode; single sign-on from trusted proxies only."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from asynqpy import Client, Task
from inspector import Inspector
from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.webui.authkit import audit_verdict, login, make_app, token


@pytest.fixture
def queue(redis_url: str) -> str:
    """A queue "q" with one pending and one archived task."""
    with Client(redis_url) as c:
        c.enqueue(Task("email", b"{}"), queue="q")
        info = c.enqueue(Task("email", b"{}"), queue="q")
    with Inspector(redis_url) as insp:
        insp.archive_task("q", info.id)
    return "q"


def _paused(redis_url: str, q: str) -> bool:
    with Inspector(redis_url) as insp:
        return insp.queue_info(q, memory=False).paused


def _audit(r: redis.Redis) -> list:
    return list(AuditLog(r).list().records)


def test_anonymous_is_sent_to_the_login(client: FlaskClient, queue: str) -> None:
    for path in ("/", "/queues/q", "/queues/q/archived?page=2", "/audit", "/errors"):
        resp = client.get(path)
        assert resp.status_code == 303, path
        assert resp.headers["Location"].startswith("/login?next=")
    assert client.get("/queues/q/archived?page=2").headers["Location"] == "/login?next=/queues/q/archived?page%3D2"
    resp = client.post("/queues/q/pause")
    assert resp.status_code == 303 and resp.headers["Location"] == "/login"
    resp = client.get("/", headers={"HX-Request": "true"})
    assert resp.status_code == 401 and resp.headers["HX-Redirect"] == "/login"
    resp = client.get("/charts/daily", headers={"HX-Request": "true", "HX-Current-URL": "http://localhost/queues/q"})
    assert resp.status_code == 401 and resp.headers["HX-Redirect"] == "/login?next=/queues/q"
    resp = client.get("/", headers={"HX-Request": "true", "HX-Current-URL": "http://evil.example/x"})
    assert resp.headers["HX-Redirect"] == "/login"
    assert client.get("/login").status_code == 200
    assert client.get("/healthz").status_code == 200


def test_login_form_fields(client: FlaskClient) -> None:
    html = client.get("/login").get_data(as_text=True)
    assert 'name="username"' in html and 'name="password"' in html
    assert ">Username</label>" in html and ">Password</label>" in html


def test_viewer_reads_but_cannot_change(client: FlaskClient, queue: str, redis_url: str, r: redis.Redis) -> None:
    assert login(client, "vera").status_code == 303
    assert client.get("/").status_code == 200
    assert client.get("/queues/q").status_code == 200
    resp = client.post("/queues/q/pause", headers={"X-CSRF-Token": token(client)})
    assert resp.status_code == 403 and "this needs the operator role; vera is viewer" in resp.get_data(as_text=True)
    resp = client.post("/queues/q/pause", headers={"X-CSRF-Token": token(client), "HX-Request": "true"})
    assert resp.status_code == 403 and resp.headers["HX-Retarget"] == "#messages"
    assert not _paused(redis_url, "q")
    assert not [x for x in _audit(r) if x.outcome == "denied"]  # refusals are counted apart from the chain
    [denied] = RefusedLog(r).list()
    assert (denied.action, denied.user, denied.queue, denied.outcome, denied.count) == (
        "queue.pause", "vera", "q", "denied", 2)
    assert denied.detail == "this needs the operator role; vera is viewer"
    assert client.get("/audit").status_code == 403
    resp = client.post("/queues/q/archived/delete", data={"ids": "a1,b2"}, headers={"X-CSRF-Token": token(client)})
    assert resp.status_code == 403
    refused = {c.action: c for c in RefusedLog(r).list()}
    assert refused["tasks.delete"].task_ids == ("a1", "b2") and refused["tasks.delete"].queue == "q"


@pytest.mark.parametrize("sent", [None, "", "wrong-token"])
def test_missing_or_wrong_csrf_token_changes_nothing(client: FlaskClient, queue: str, redis_url: str,
                                                     r: redis.Redis, sent: str | None) -> None:
    login(client, "otto")
    before = len(_audit(r))
    headers = {} if sent is None else {"X-CSRF-Token": sent}
    resp = client.post("/queues/q/pause", headers=headers, data={"csrf_token": sent} if sent else {})
    assert resp.status_code == 400
    assert not _paused(redis_url, "q")
    assert len(_audit(r)) == before


def test_cross_site_post_is_refused_even_with_the_token(client: FlaskClient, queue: str, redis_url: str) -> None:
    login(client, "otto")
    tok = token(client)
    resp = client.post("/queues/q/pause", headers={"X-CSRF-Token": tok, "Origin": "https://evil.example"})
    assert resp.status_code == 400
    resp = client.post("/queues/q/pause", headers={"X-CSRF-Token": tok, "Sec-Fetch-Site": "cross-site"})
    assert resp.status_code == 400
    assert not _paused(redis_url, "q")
    # a browser saying same-origin is believed even when a proxy rewrote the Host the app sees
    resp = client.post("/queues/q/pause", headers={"X-CSRF-Token": tok, "Sec-Fetch-Site": "same-origin",
                                                   "Origin": "https://dash.example"})
    assert resp.status_code == 200 and _paused(redis_url, "q")


def test_operator_acts_and_the_audit_log_says_so(client: FlaskClient, queue: str, redis_url: str,
                                                 r: redis.Redis) -> None:
    login(client, "otto")
    resp = client.post("/queues/q/pause", data={"csrf_token": token(client)})  # a form's field works too
    assert resp.status_code == 200
    assert _paused(redis_url, "q")
    rec = next(x for x in _audit(r) if x.action == "queue.pause")
    assert (rec.user, rec.role, rec.queue, rec.outcome) == ("otto", "operator", "q", "ok")
    assert rec.addr == "127.0.0.1" and rec.request_id
    assert audit_verdict(client.application).ok


def test_admin_only_actions_are_refused_to_operators(client: FlaskClient, queue: str, redis_url: str,
                                                     r: redis.Redis) -> None:
    login(client, "otto")
    tok = token(client)
    assert client.post("/queues/q/archived/run", data={"all": "1"}, headers={"X-CSRF-Token": tok}).status_code == 403
    assert client.post("/queues/q/delete", headers={"X-CSRF-Token": tok}).status_code == 403
    assert client.get("/audit").status_code == 403
    with Inspector(redis_url) as insp:
        assert insp.queue_info("q", memory=False).archived == 1
    client.post("/logout", headers={"X-CSRF-Token": tok})
    login(client, "ada")
    resp = client.post("/queues/q/archived/run", data={"all": "1"}, headers={"X-CSRF-Token": token(client)})
    assert resp.status_code == 200
    with Inspector(redis_url) as insp:
        assert insp.queue_info("q", memory=False).archived == 0
    assert client.get("/audit").status_code == 200


def test_read_only_refuses_every_change(redis_url: str, users_path: Path, queue: str, r: redis.Redis) -> None:
    app = make_app(redis_url, users_path, ASYNQPY_READ_ONLY=True)
    c = app.test_client()
    login(c, "ada")
    html = c.get("/queues/q").get_data(as_text=True)
    assert "read-only" in html
    for path in ("/queues/q/pause", "/queues/q/delete", "/queues/q/archived/run"):
        assert c.post(path, data={"all": "1"}, headers={"X-CSRF-Token": token(c)}).status_code == 403, path
    assert not _paused(redis_url, "q")
    refused = {c.action: c for c in RefusedLog(r).list()}
    assert set(refused) == {"queue.pause", "queue.delete", "tasks.run_all"}  # finding 11: recorded, with the verb
    assert all(c.detail == "the dashboard is read-only: no changes can be made" and c.user == "ada"
               and c.queue == "q" for c in refused.values())
    assert c.get("/audit").status_code == 200  # reading stays allowed
    assert c.post("/logout", headers={"X-CSRF-Token": token(c)}).status_code == 303


def _sso_app(redis_url: str, users_path: Path, **extra: object) -> Flask:
    return make_app(redis_url, users_path, ASYNQPY_AUTH_HEADER="X-Forwarded-User",
                    ASYNQPY_TRUSTED_PROXIES="10.0.0.1, 10.9.0.0/16",
                    ASYNQPY_AUTH_GROUP_ROLES="ops=operator,admins=admin,staff=viewer", **extra)


def test_sso_header_from_a_trusted_proxy(redis_url: str, users_path: Path, queue: str, r: redis.Redis) -> None:
    c = _sso_app(redis_url, users_path).test_client()
    proxy = {"REMOTE_ADDR": "10.0.0.1"}
    hdrs = {"X-Forwarded-User": "sam@example.com", "X-Forwarded-Groups": "staff, ops",
            "X-Forwarded-For": "203.0.113.7, 10.9.1.1"}
    resp = c.get("/", headers=hdrs, environ_base=proxy)
    assert resp.status_code == 200 and "sam@example.com" in resp.get_data(as_text=True)
    tok = token_of(resp.get_data(as_text=True))
    resp = c.post("/queues/q/pause", headers={**hdrs, "X-CSRF-Token": tok}, environ_base=proxy)
    assert resp.status_code == 200 and _paused(redis_url, "q")
    rec = next(x for x in _audit(r) if x.action == "queue.pause")
    assert (rec.user, rec.role, rec.addr) == ("sam@example.com", "operator", "203.0.113.7")
    assert c.get("/audit", headers=hdrs, environ_base=proxy).status_code == 403
    admin = {**hdrs, "X-Forwarded-Groups": "admins"}
    assert c.get("/audit", headers=admin, environ_base=proxy).status_code == 200
    nobody = {**hdrs, "X-Forwarded-Groups": "interns"}
    assert c.get("/", headers=nobody, environ_base=proxy).status_code == 403


def test_sso_header_from_anyone_else_is_ignored(redis_url: str, users_path: Path, queue: str) -> None:
    c = _sso_app(redis_url, users_path).test_client()
    hdrs = {"X-Forwarded-User": "ada", "X-Forwarded-Groups": "admins", "X-Forwarded-For": "10.0.0.1"}
    for addr in ("10.0.0.2", "192.168.1.5", "127.0.0.1"):
        resp = c.get("/audit", headers=hdrs, environ_base={"REMOTE_ADDR": addr})
        assert resp.status_code == 303 and resp.headers["Location"].startswith("/login"), addr
    assert not _paused(redis_url, "q")


def test_sso_is_off_unless_configured(client: FlaskClient) -> None:
    resp = client.get("/", headers={"X-Forwarded-User": "ada"}, environ_base={"REMOTE_ADDR": "10.0.0.1"})
    assert resp.status_code == 303


def token_of(html: str) -> str:
    import re

    m = re.search(r'"X-CSRF-Token": "([^"]+)"', html)
    assert m
    return m.group(1)


PUBLIC = {"/login", "/healthz", "/metrics", "/favicon.ico"}
ARGS = {"queue": "q", "state": "archived", "action": "run", "task_id": "t1", "job_id": "j1", "filename": "app.css"}


def _routes(app: Flask) -> list[tuple[str, set[str]]]:
    out = []
    for rule in app.url_map.iter_rules():
        url = rule.rule
        for arg in rule.arguments:
            for form in (f"<{arg}>", f"<path:{arg}>", f"<queue:{arg}>", f"<typename:{arg}>"):
                url = url.replace(form, ARGS.get(arg, "x"))
        out.append((url, set(rule.methods or ()) - {"HEAD", "OPTIONS"}))
    return out


def test_every_route_needs_a_login(app: Flask, queue: str) -> None:
    c = app.test_client()
    routes = _routes(app)
    assert len(routes) > 15
    for url, methods in routes:
        if url in PUBLIC or url.startswith("/static/"):
            continue
        for method in methods:
            resp = c.open(url, method=method)
            assert resp.status_code in (303, 401), (method, url, resp.status_code)


def test_every_change_is_refused_to_a_viewer(app: Flask, queue: str, redis_url: str) -> None:
    c = app.test_client()
    login(c, "vera")
    tok = token(c)
    posts = [url for url, methods in _routes(app) if "POST" in methods and url not in ("/login", "/logout")]
    assert len(posts) >= 4
    for url in posts:
        resp = c.post(url, data={"all": "1", "ids": "t1"}, headers={"X-CSRF-Token": tok})
        assert resp.status_code == 403, (url, resp.status_code)
    assert not _paused(redis_url, "q")
    with Inspector(redis_url) as insp:
        assert insp.queue_info("q", memory=False).archived == 1
