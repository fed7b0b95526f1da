"""A task due past what a datetime holds (a Go producer's ProcessAt in year 275817), through real HTTP after a
real login: the queue's pages and the task's page show it due at datetime's last moment; none fails."""

from __future__ import annotations

from typing import Any

import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys


def test_a_task_due_past_year_9999_shows_on_every_page(as_role: Any, redis_url: str) -> None:
    with Client(redis_url) as cl:
        tid = cl.enqueue(Task("far:away", b"{}"), queue="farweb", process_in=3600).id
    r = redis.Redis.from_url(redis_url)
    try:
        r.zadd(keys.scheduled("farweb"), {tid: 8_641_796_445_975})
    finally:
        r.close()
    c = as_role("viewer")
    for path in ("/", "/queues/farweb", "/queues/farweb/scheduled", f"/queues/farweb/tasks/{tid}",
                 "/queues/farweb/find?q=state:scheduled", "/types"):
        resp = c.get(path)
        assert resp.status_code == 200, (path, resp.status_code, resp.get_data(as_text=True)[:300])
    assert "9999-12-31" in c.get(f"/queues/farweb/tasks/{tid}").get_data(as_text=True)
