"""The Active tab joined with the live servers (issue 19, items 10 and 18): a running task shows the server
that runs it and since when, for our servers and for Go's (WorkerInfo in asynq:workers:{host:pid:id}); a task
started since the last heartbeat is "running", not orphaned; the empty tab tells a busy server from none."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from asynqpy.wire import ServerInfo, WorkerInfo
from asynqpy.wire.asynq_pb2 import TaskMessage
from tests.helpers import running, wait_for


def _active_html(c: Any, queue: str) -> str:
    resp = c.get(f"/queues/{queue}/active")
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    return resp.get_data(as_text=True)


def test_a_task_running_on_our_server_shows_its_server_and_start(as_role: Any, redis_url: str) -> None:
    release = threading.Event()
    mux = ServeMux()
    mux.handle("slow", lambda task: release.wait(20))
    r = redis.Redis.from_url(redis_url)
    try:
        # a long heartbeat: the task starts after the server's first write, so no worker list names it yet
        with running(redis_url, mux, queues={"work": 1}, concurrency=1, heartbeat_interval=30,
                     lease_duration=60):
            wait_for(lambda: r.zcard(keys.SERVERS), what="the server's first heartbeat")
            with Client(redis_url) as cl:
                tid = cl.enqueue(Task("slow", b"{}"), queue="work").id
            wait_for(lambda: r.llen(keys.active("work")), what="the task to start")
            c = as_role("viewer")
            listed = any(r.hexists(k, tid) for k in r.scan_iter("asynq:workers:*"))
            html = _active_html(c, "work")
            assert "no server seen" not in html
            if listed:  # a loaded machine let the server's next beat in first: then its worker list names the task
                assert "running on" in html
            else:
                assert "running (started after the last heartbeat)" in html
            assert tid in html
            release.set()
    finally:
        release.set()
        r.close()


def _go_server(r: redis.Redis, queue: str, task_id: str, *, started: float, concurrency: int = 10) -> None:
    """A Go server's heartbeat as Go asynq writes it: ServerInfo, and one WorkerInfo per running task."""
    host, pid, sid = "go-host", 4242, str(uuid.uuid4())
    now = time.time()
    info = ServerInfo(host=host, pid=pid, server_id=sid, concurrency=concurrency, status="active",
                      active_worker_count=1)
    info.queues[queue] = 1
    info.start_time.FromSeconds(int(now - 60))
    w = WorkerInfo(host=host, pid=pid, server_id=sid, task_id=task_id, task_type="go:work", queue=queue)
    w.start_time.FromSeconds(int(started))
    w.deadline.FromSeconds(int(now + 1800))
    skey, wkey = keys.server_info(host, pid, sid), keys.workers(host, pid, sid)
    r.set(skey, info.SerializeToString(), ex=30)
    r.hset(wkey, task_id, w.SerializeToString())
    r.expire(wkey, 30)
    r.zadd(keys.SERVERS, {skey: now + 30})
    r.zadd(keys.WORKERS, {wkey: now + 30})


def _go_active(r: redis.Redis, queue: str) -> str:
    """An active task as a Go worker leaves it: in the active list and the lease set."""
    tid = str(uuid.uuid4())
    msg = TaskMessage(type="go:work", payload=b"{}", id=tid, queue=queue, retry=25, timeout=1800)
    r.hset(keys.task(queue, tid), mapping={"msg": msg.SerializeToString(), "state": "active"})
    r.lpush(keys.active(queue), tid)
    r.zadd(keys.lease(queue), {tid: time.time() + 30})
    r.sadd(keys.QUEUES, queue)
    return tid


def test_a_task_running_on_a_go_server_shows_its_server_and_start(as_role: Any, redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    try:
        tid = _go_active(r, "goq")
        _go_server(r, "goq", tid, started=time.time() - 75)
        html = _active_html(as_role("viewer"), "goq")
        assert "no server seen" not in html
        assert "running on" in html and "go-host:4242" in html
        assert "1m15s" in html or "1m16s" in html  # started 75 s ago
    finally:
        r.close()


def test_the_empty_active_tab_tells_a_busy_server_from_none(as_role: Any, redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    try:
        with Client(redis_url) as cl:
            cl.enqueue(Task("waiting", b"{}"), queue="idle")
        c = as_role("viewer")
        html = _active_html(c, "idle")
        assert "1 pending task waits" in html and "1 pending tasks" not in html
        assert "no live server serves this queue" in html
        other = _go_active(r, "elsewhere")
        _go_server(r, "idle", other, started=time.time(), concurrency=1)  # its one worker runs another queue's task
        html = _active_html(c, "idle")
        assert "1 live server serves this queue, all its workers busy" in html
        assert "is a worker running" not in html
    finally:
        r.close()
