"""Every asynq release in the matrix (v0.23.0 to v0.26.0) and asynqpy share one Redis, each way round.

For each release: Go enqueues and we work; we enqueue and Go works; Go's Inspector lists every state of a
queue we wrote, reads every task of it with GetTaskInfo, and reads our server and the scheduler entries.
Task headers exist from v0.26.0 only: on older releases the tests say so and check everything else.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from tests.helpers import running, wait_for

from .every_state import HEADERS, every_state
from .goasynq import GoPeer, b64, go_time

STATES = ("pending", "active", "scheduled", "retry", "archived", "completed")


def _headers_note(peer: GoPeer) -> bool:
    """True when this release has task headers; otherwise says, once per test, that they are not checked."""
    v = peer.version()
    if not v["headers"]:
        print(f"asynq {v['asynq']} has no task headers (they came with v0.26.0): headers not checked")
    return bool(v["headers"])


def test_the_peer_is_built_against_its_release(go_any: GoPeer, go_release: tuple[str, Any]) -> None:
    assert go_any.version()["asynq"] == go_release[0]


def test_go_enqueues_and_we_work(go_any: GoPeer, redis_url: str, r: redis.Redis) -> None:
    headers = _headers_note(go_any)
    specs: list[dict[str, Any]] = [
        {"type": "ok:plain", "payload_b64": b64(b"one"), "task_id": "g1"},
        {"type": "ok:kept", "payload_b64": b64(b"two"), "task_id": "g2", "retention_s": 600},
        {"type": "fail:dead", "payload_b64": b64(b"three"), "task_id": "g3", "max_retry": 0},
        {"type": "ok:later", "payload_b64": b64(b"four"), "task_id": "g4", "process_in_s": 1.5},
    ]
    if headers:
        specs.append({"type": "ok:hdr", "payload_b64": b64(b"five"), "task_id": "g5", "headers": HEADERS})
    enqueued_at = time.time()
    out = go_any.enqueue(specs)
    assert [o["event"] for o in out] == ["enqueued"] * len(specs), out
    seen: dict[str, tuple[bytes, dict[str, str], float]] = {}
    mux = ServeMux()

    @mux.handler("ok:")
    def ok(task) -> None:  # type: ignore[no-untyped-def]
        seen[task.id] = (task.payload, dict(task.headers), time.time())

    @mux.handler("fail:")
    def fail(task) -> None:  # type: ignore[no-untyped-def]
        seen[task.id] = (task.payload, dict(task.headers), time.time())
        raise RuntimeError("boom")

    with running(redis_url, mux):
        wait_for(lambda: len(seen) == len(specs) and r.zcard(keys.archived("default")) == 1, timeout=20,
                 what="every Go task worked")
    assert seen["g1"][0] == b"one" and seen["g4"][0] == b"four"
    go_next = go_time(out[3]["next_process_at"])
    assert go_next is not None
    go_due = go_next.timestamp()
    assert go_due >= enqueued_at + 1.5
    # Go scores it truncated to the second (a Go worker may start it up to 1 s early): we never run it before that.
    assert seen["g4"][2] >= math.floor(go_due)
    assert r.zscore(keys.completed("default"), "g2") is not None
    assert r.hget(keys.task("default", "g3"), "state") == b"archived"
    if headers:
        assert seen["g5"][1] == HEADERS


def test_we_enqueue_and_go_works(go_any: GoPeer, redis_url: str, r: redis.Redis) -> None:
    headers = _headers_note(go_any)
    with Client(redis_url) as c:
        c.enqueue(Task("ok:p", b"one", headers=HEADERS), task_id="p1", retention=600)
        c.enqueue(Task("skip:p", b"two"), task_id="p2")
        due = time.time() + 1.3
        c.enqueue(Task("ok:later", b"three"), task_id="p3", process_at=datetime.fromtimestamp(due, UTC))
    assert r.zscore(keys.scheduled("default"), "p3") == math.ceil(due)
    calls = {c["id"]: c for c in go_any.work(expect=3, duration=20)}
    assert set(calls) == {"p1", "p2", "p3"}
    assert calls["p1"]["payload_b64"] == b64(b"one")
    if headers:
        assert calls["p1"]["headers"] == HEADERS
    assert calls["p3"]["started_unix"] >= due  # Go's forwarder reads our rounded-up score: never early
    info = go_any.task_info("default", "p1")
    assert info["state"] == "completed" and info["result"] == "ok:p1"
    assert go_any.task_info("default", "p2")["state"] == "archived"


def test_go_inspector_reads_every_state_we_write(go_any: GoPeer, redis_url: str, r: redis.Redis) -> None:
    headers = _headers_note(go_any)
    with every_state(redis_url) as world:
        q = world.queue
        seen = go_any.inspect(*[(q, tid) for _, tid in world.all_ids()])
        rows = seen["per_queue"][q]
        for state in STATES:
            assert [t["id"] for t in rows[state]] == world.ids[state], state
        (group,) = rows["groups"]
        assert group["group"] == world.group and [t["id"] for t in group["tasks"]] == world.ids["aggregating"]
        info = rows["info"]
        assert (info["pending"], info["active"], info["scheduled"], info["retry"], info["archived"],
                info["completed"], info["aggregating"]) == (2, 1, 1, 1, 1, 1, 1)
        by_id = {t["id"]: t for t in seen["tasks"]}
        for state, tid in world.all_ids():
            task = by_id[tid]
            assert "error" not in task, f"GetTaskInfo({tid}) failed on asynq {go_any.version()['asynq']}: {task}"
            assert task["state"] == state and task["queue"] == q
        sched = by_id["sched-1"]
        go_next = go_time(sched["next_process_at"])  # Go reads the whole-second score: rounded up, never early
        assert go_next is not None and go_next.timestamp() == math.ceil(world.scheduled_at)
        assert by_id["done-1"]["result"] == "done:done-1" and by_id["done-1"]["retention_s"] == 3600
        assert by_id["dead-1"]["last_err"] == "RuntimeError: boom dead-1"
        assert by_id["retry-1"]["retried"] == 1 and by_id["retry-1"]["last_err"] == "RuntimeError: boom retry-1"
        assert by_id["wait-2"]["payload"] == "with headers"
        if headers:
            assert by_id["wait-2"]["headers"] == HEADERS
        (srv,) = [s for s in seen["servers"] if s["pid"] == world.server_pid]
        assert srv["queues"] == {q: 1} and srv["concurrency"] == 1 and srv["status"] == "active"
        assert [w["task_id"] for w in srv["active_workers"]] == world.ids["active"]
        (entry,) = seen["scheduler_entries"]
        assert entry["id"] == world.scheduler_entry and entry["spec"] == "@every 30s"
        assert [e["task_id"] for e in entry["enqueue_events"]] == ["from-cron"]
