"""The limits page: viewer and operator see limits with their use; admin sets and removes them, audited."""

from __future__ import annotations

import time

import redis
from flask.testing import FlaskClient

from asynqpy import Client, Limit, Task
from asynqpy.rdb import broker
from asynqpy.rdb.flow import limits, set_limit
from asynqpy.rdb.sync_runner import SyncRunner
from inspector.audit import AuditLog
from tests.webui.authkit import app, client, login, token, users_path  # noqa: F401 (fixtures)


def test_viewer_sees_operator_cannot_change_admin_sets_and_removes(client: FlaskClient, redis_url: str,  # noqa: F811
                                                                    r: redis.Redis) -> None:
    c = Client(redis_url)
    for _ in range(2):
        c.enqueue(Task("email:send", b""))
    set_limit(r, Limit("email:*", concurrency=1))
    SyncRunner(r).run(broker.dequeue_timed("default", lease_expiry=time.time() + 30, count=10))
    login(client, "vera")
    html = client.get("/limits").get_data(as_text=True)
    assert "email:*" in html and "1 / 1" in html and "Go asynq workers do not read them" in html
    assert "Set limit" not in html
    client.post("/logout", headers={"X-CSRF-Token": token(client)})
    login(client, "otto")
    resp = client.post("/limits", data={"pattern": "sync:*", "concurrency": "2"},
                       headers={"X-CSRF-Token": token(client)})
    assert resp.status_code == 403 and [lim.pattern for lim in limits(r)] == ["email:*"]
    client.post("/logout", headers={"X-CSRF-Token": token(client)})
    login(client, "ada")
    tok = token(client)
    resp = client.post("/limits", data={"pattern": "sync:*", "rate": "10/s"}, headers={"X-CSRF-Token": tok})
    assert resp.status_code == 200 and "limit sync:* set: rate 10/s burst 10" in resp.get_data(as_text=True)
    resp = client.post("/limits", data={"pattern": "bad pattern!", "concurrency": "1"}, headers={"X-CSRF-Token": tok})
    assert resp.status_code == 400 and "limit not set" in resp.get_data(as_text=True)
    resp = client.post("/limits/remove", data={"pattern": "email:*"}, headers={"X-CSRF-Token": tok})
    assert "limit email:* removed" in resp.get_data(as_text=True)
    assert [lim.pattern for lim in limits(r)] == ["sync:*"]
    actions = [(a.action, a.detail) for a in AuditLog(r).list().records]
    assert ("limit.set", "sync:*: rate 10/s burst 10") in actions and ("limit.remove", "email:*") in actions
