"""Pausing a queue deleted after its page was loaded, through the dashboard: refused as not found, nothing written
(no pause key that a later enqueue would revive the queue with), and audited as an error, not "ok"."""

from __future__ import annotations

from typing import Any

import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys
from inspector import Inspector
from inspector.audit import AuditLog
from tests.webui.authkit import token


def test_pausing_a_queue_deleted_meanwhile_is_refused_and_writes_nothing(as_role: Any, redis_url: str,
                                                                        r: redis.Redis) -> None:
    with Client(redis_url) as cl:
        cl.enqueue(Task("x", b""), queue="gone-soon")
    c = as_role("operator")
    assert c.get("/queues/gone-soon").status_code == 200
    with Inspector(redis_url) as insp:
        insp.delete_queue("gone-soon", force=True)
    resp = c.post("/queues/gone-soon/pause", headers={"X-CSRF-Token": token(c), "HX-Request": "true"})
    assert resp.status_code == 404 and "gone-soon" in resp.get_data(as_text=True)
    assert not r.exists(keys.paused("gone-soon"))
    last = AuditLog(r).list().records[0]
    assert (last.action, last.queue, last.outcome) == ("queue.pause", "gone-soon", "error")
    # the library call keeps asynq's rule: any name may be paused ahead of its first task
    with Inspector(redis_url) as insp:
        insp.pause("gone-soon")
    assert r.exists(keys.paused("gone-soon"))
