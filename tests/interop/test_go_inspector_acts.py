"""Go's Inspector acts on tasks an asynqpy Server holds or will run: what it refuses, what it changes, and
the Python worker going on from the state Go leaves (goapp act)."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys

from .goasynq import GoPeer
from .test_python_works_go_tasks import Recorder, running_server, wait_state

Q = "acts"


def test_go_inspector_acts_on_a_python_workers_tasks(go_peer: GoPeer, redis_url: str, r: redis.Redis) -> None:
    release = threading.Event()
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("py:hold")
    def hold(task: Any) -> None:
        rec.record(task)
        release.wait(30)

    @mux.handler("py:fail")
    def fail(task: Any) -> None:
        rec.record(task)
        raise RuntimeError(f"boom {task.id}")

    @mux.handler("py:ok")
    def ok(task: Any) -> None:
        rec.record(task)

    with Client(redis_url) as c:
        c.enqueue(Task("py:hold"), queue=Q, task_id="hold", max_retry=3)
        c.enqueue(Task("py:fail"), queue=Q, task_id="dead", max_retry=0)
        c.enqueue(Task("py:ok", b"s"), queue=Q, task_id="run-me", process_in=3600)
        c.enqueue(Task("py:ok", b"u"), queue=Q, task_id="locked", process_in=3600, unique=3600)
        c.enqueue(Task("py:ok"), queue=Q, task_id="bury", process_in=3600)
    try:
        with running_server(redis_url, mux, queues={Q: 1}, idle_poll_interval=0.1,
                            retry_delay=lambda n, e, t: 3600):
            rec.wait(2)
            wait_state(go_peer, Q, "dead", "archived")
            # A task the Python worker runs is refused as Go refuses its own workers' tasks; nothing changes.
            refused = go_peer.act({"op": "delete", "queue": Q, "id": "hold"},
                                  {"op": "archive", "queue": Q, "id": "hold"},
                                  {"op": "run", "queue": Q, "id": "hold"},
                                  {"op": "delete_queue", "queue": Q, "force": True})
            assert all("FAILED_PRECONDITION" in a.get("error", "") for a in refused), refused
            assert r.lrange(keys.active(Q), 0, -1) == [b"hold"]

            done = go_peer.act({"op": "archive", "queue": Q, "id": "bury"},
                               {"op": "delete", "queue": Q, "id": "locked"},
                               {"op": "pause", "queue": Q},
                               {"op": "run", "queue": Q, "id": "run-me"},
                               {"op": "run", "queue": Q, "id": "dead"})
            assert [a.get("n") for a in done] == [1] * 5, done
            assert r.keys("asynq:{acts}:unique:*") == []  # Go's delete released the lock our client took
            # Paused by Go: the Python worker takes nothing, neither what Go made pending nor what our client
            # enqueues now (which would otherwise be handed straight to the idle worker).
            with Client(redis_url) as c:
                c.enqueue(Task("py:ok", b"new"), queue=Q, task_id="new")
            time.sleep(0.5)
            assert len(rec.ids()) == 2
            assert go_peer.task_info(Q, "new")["state"] == "pending"
            assert go_peer.act({"op": "unpause", "queue": Q}) == [{"op": "unpause", "n": 1}]
            calls = rec.wait(5, "calls after the unpause")
            # Go's RunTask took the archived task back with its count: out of retries, it is archived again.
            assert sorted(c["id"] for c in calls[2:]) == ["dead", "new", "run-me"]
            wait_state(go_peer, Q, "dead", "archived")
            dead = go_peer.task_info(Q, "dead")
            assert (dead["retried"], dead["last_err"]) == (0, "RuntimeError: boom dead")

            # CancelProcessing reaches the Python worker: a failure with asynq's text, retried.
            assert go_peer.act({"op": "cancel", "id": "hold"}) == [{"op": "cancel", "n": 1}]
            wait_state(go_peer, Q, "hold", "retry")
            held = go_peer.task_info(Q, "hold")
            assert (held["retried"], held["last_err"]) == (1, "context canceled")
    finally:
        release.set()
    info = go_peer.inspect()["per_queue"][Q]["info"]
    assert {k: info[k] for k in ("pending", "active", "retry", "archived", "scheduled", "processed", "failed")} == {
        "pending": 0, "active": 0, "retry": 1, "archived": 2, "scheduled": 0, "processed": 5, "failed": 3}
    # Go's DeleteQueue now takes the queue (it has no active task left).
    assert go_peer.act({"op": "delete_queue", "queue": Q, "force": True}) == [{"op": "delete_queue", "n": 1}]
    assert Q not in go_peer.inspect()["queues"]
