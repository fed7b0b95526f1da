"""A real Go asynq.Server processes tasks asynqpy's Client enqueued; Python reads back what Go wrote."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import redis

from asynqpy import Client, Task
from asynqpy.wire import TaskMessage

from .goasynq import GoPeer, go_time, unb64

BINARY = b"\x00\xff\xfe payload \x80\xc3("  # not UTF-8
DEADLINE = datetime(2100, 1, 1, tzinfo=UTC)


def test_go_handler_sees_python_payload_headers_and_options(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        ok = c.enqueue(Task("ok:bytes", BINARY, {"trace": "abc", "ünï": "cødé"}), queue="wq", max_retry=5,
                       timeout=40, retention=600)
        dl = c.enqueue(Task("ok:deadline", b""), queue="wq", deadline=DEADLINE, timeout=20, task_id="dl-1")
    started = time.time()
    calls = {call["id"]: call for call in go_peer.work({"wq": 1}, expect=2)}
    assert set(calls) == {ok.id, dl.id}

    call = calls[ok.id]
    assert unb64(call["payload_b64"]) == BINARY
    assert call["headers"] == {"trace": "abc", "ünï": "cødé"}
    assert (call["type"], call["queue"], call["retry_count"], call["max_retry"]) == ("ok:bytes", "wq", 0, 5)
    # The Go worker's context deadline comes from the timeout Python stored (40 s) ...
    assert started + 39 <= call["deadline_unix"] <= time.time() + 41
    # ... or from the earlier of timeout and deadline.
    assert started + 19 <= calls[dl.id]["deadline_unix"] <= time.time() + 21

    (done,) = go_peer.inspect()["per_queue"]["wq"]["completed"]
    assert done["id"] == ok.id and done["result"] == f"ok:{ok.id}"
    assert done["headers"] == {"trace": "abc", "ünï": "cødé"}
    assert unb64(done["payload_b64"]) == BINARY


def test_go_failures_keep_python_fields_and_go_error_text(go_peer: GoPeer, redis_url: str,
                                                          r: redis.Redis) -> None:
    with Client(redis_url) as c:
        arch = c.enqueue(Task("fail:now", BINARY, {"h": "v"}), queue="fq", max_retry=0)
        retry = c.enqueue(Task("fail:later", b"r"), queue="fq", max_retry=3)
        skip = c.enqueue(Task("skip:it", b"s"), queue="fq", max_retry=9)
    calls = go_peer.work({"fq": 1}, expect=3)
    assert sorted((x["id"], x["retry_count"]) for x in calls) == sorted(
        (t.id, 0) for t in (arch, retry, skip)
    )

    fq = go_peer.inspect()["per_queue"]["fq"]
    archived = {t["id"]: t for t in fq["archived"]}
    assert archived[arch.id]["last_err"] == f"boom {arch.id}"
    assert (archived[arch.id]["retried"], archived[arch.id]["max_retry"]) == (0, 0)
    assert archived[arch.id]["headers"] == {"h": "v"}
    assert unb64(archived[arch.id]["payload_b64"]) == BINARY
    assert archived[skip.id]["last_err"] == f"skip {skip.id}: skip retry for the task"
    (retried,) = fq["retry"]
    assert (retried["id"], retried["retried"], retried["last_err"]) == (retry.id, 1, f"boom {retry.id}")
    assert go_time(retried["last_failed_at"]) is not None
    info = fq["info"]
    assert (info["processed"], info["failed"], info["processed_total"], info["failed_total"]) == (3, 3, 3, 3)

    # What Go re-encoded still decodes in Python, headers included.
    msg = TaskMessage.FromString(r.hget(f"asynq:{{fq}}:t:{arch.id}", "msg"))
    assert (msg.error_msg, dict(msg.headers), msg.payload) == (f"boom {arch.id}", {"h": "v"}, BINARY)


def test_go_retries_python_task_until_archived(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        t = c.enqueue(Task("fail:twice", b"x"), queue="rq", max_retry=1)
    calls = go_peer.work({"rq": 1}, expect=2, retry_delay=0)
    assert [(x["id"], x["retry_count"], x["max_retry"]) for x in calls] == [(t.id, 0, 1), (t.id, 1, 1)]
    got = go_peer.task_info("rq", t.id)
    assert (got["state"], got["retried"], got["last_err"]) == ("archived", 1, f"boom {t.id}")


def test_go_runs_python_scheduled_tasks_and_releases_unique_lock(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        a = c.enqueue(Task("ok:in", b"1"), queue="sq", process_in=1, unique=600)
        b = c.enqueue(Task("ok:at", b"2"), queue="sq", process_at=datetime.now(UTC) + timedelta(seconds=1))
        calls = go_peer.work({"sq": 1}, expect=2)
        assert {x["id"] for x in calls} == {a.id, b.id}
        # Go's Done released the lock Python took (its value is the task id), so the same task enqueues again.
        again = c.enqueue(Task("ok:in", b"1"), queue="sq", unique=600)
    assert go_peer.task_info("sq", again.id)["state"] == "pending"
    assert go_peer.inspect(("sq", a.id))["tasks"][0]["error"] == "asynq: task not found"
