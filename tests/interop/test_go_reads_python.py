"""Go's Inspector and Client read what asynqpy's Client wrote: every option, every field, the same locks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from asynqpy import Client, DuplicateTaskError, Task, TaskIDConflictError, TaskInfo

from .goasynq import GoPeer, b64, go_time

BINARY = bytes(range(256))  # every byte value: not UTF-8, has NULs
DEADLINE = datetime(2100, 1, 1, tzinfo=UTC)


def assert_same_task(go: dict[str, Any], py: TaskInfo) -> None:
    """Go's TaskInfo JSON equals asynqpy's TaskInfo field by field (callers check next_process_at)."""
    assert go["id"] == py.id
    assert go["queue"] == py.queue
    assert go["type"] == py.type
    assert go["state"] == str(py.state)
    assert go["payload_b64"] == b64(py.payload)
    assert (go["headers"] or {}) == dict(py.headers)
    assert go["max_retry"] == py.max_retry
    assert go["retried"] == py.retried
    assert go["last_err"] == py.last_err
    assert go_time(go["last_failed_at"]) == py.last_failed_at
    assert go["timeout_s"] == py.timeout
    assert go_time(go["deadline"]) == py.deadline
    assert go["group"] == py.group
    assert go["retention_s"] == py.retention
    assert go_time(go["completed_at"]) == py.completed_at
    assert go["is_orphaned"] is False


def by_id(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in tasks}


def test_go_inspector_reads_every_python_option(go_peer: GoPeer, redis_url: str) -> None:
    soon = datetime.now(UTC) + timedelta(hours=2)
    with Client(redis_url) as c:
        full = c.enqueue(Task("py:full", BINARY, {"k1": "v1", "ключ": "значение"}), queue="iq", max_retry=3,
                         timeout=45, retention=600, task_id="t-full")
        plain = c.enqueue(Task("py:plain", b"hello"), queue="iq")
        empty = c.enqueue(Task("py:empty"), queue="iq")
        dl = c.enqueue(Task("py:deadline", b"d"), queue="iq", deadline=DEADLINE)
        both = c.enqueue(Task("py:both", b"b"), queue="iq", timeout=30, deadline=DEADLINE)
        uniq = c.enqueue(Task("py:uniq", b"u"), queue="iq", unique=300)
        sched_in = c.enqueue(Task("py:in", b"i"), queue="iq", process_in=3600, max_retry=0)
        sched_at = c.enqueue(Task("py:at", b"a"), queue="iq", process_at=soon, unique=60)
        grouped = c.enqueue(Task("py:grp", b"g", {"h": "1"}), queue="iq", group="grp")
        other = c.enqueue(Task("py:other"), queue="other-q")

    got = go_peer.inspect()
    assert got["queues"] == ["iq", "other-q"]
    iq = got["per_queue"]["iq"]
    pending = by_id(iq["pending"])
    assert set(pending) == {full.id, plain.id, empty.id, dl.id, both.id, uniq.id}
    for py in (full, plain, empty, dl, both, uniq):
        assert_same_task(pending[py.id], py)
    # Go lists the oldest pending task first.
    assert [t["id"] for t in iq["pending"]] == [full.id, plain.id, empty.id, dl.id, both.id, uniq.id]

    scheduled = by_id(iq["scheduled"])
    assert set(scheduled) == {sched_in.id, sched_at.id}
    for py in (sched_in, sched_at):
        assert_same_task(scheduled[py.id], py)
        assert py.next_process_at is not None
        # Go reads the score as whole Unix seconds.
        go_at = go_time(scheduled[py.id]["next_process_at"])
        assert go_at is not None and go_at.microsecond == 0
        # The stored score is Redis's clock plus the delay, rounded up to a whole second for Go: up to 1 s after
        # the client's own estimate, plus the round trip between the client's clock and the script's TIME.
        assert -0.25 < (go_at - py.next_process_at).total_seconds() < 1.25

    (group,) = iq["groups"]
    assert (group["group"], group["size"]) == ("grp", 1)
    assert_same_task(group["tasks"][0], grouped)
    assert_same_task(got["per_queue"]["other-q"]["pending"][0], other)

    info = iq["info"]
    assert {k: info[k] for k in ("pending", "active", "scheduled", "retry", "archived", "completed",
                                 "aggregating", "groups", "size", "processed", "failed", "paused")} == {
        "pending": 6, "active": 0, "scheduled": 2, "retry": 0, "archived": 0, "completed": 0,
        "aggregating": 1, "groups": 1, "size": 9, "processed": 0, "failed": 0, "paused": False}
    assert info["latency_s"] >= 0 and info["memory_usage"] > 0


def test_go_inspector_lists_python_scheduled_tasks_at_any_time(go_peer: GoPeer, redis_url: str) -> None:
    """Go parses zset scores with cast.ToInt64E, which rejects exponent forms such as "1.7959996112859836e+9"
    that Valkey 8 (shortest round-trip doubles) replies for fractional scores with 17 significant digits.
    Go writes whole seconds; so must asynqpy, or Go's ListScheduledTasks/GetTaskInfo fail for the queue."""
    delays = [1.5, 59.25, 600, 3600.1234567, 7200, 86400.999, 3 * 86400 + 0.1, 12345.6789]
    with Client(redis_url) as c:
        infos = [c.enqueue(Task("py:later", str(d).encode()), queue="lq", process_in=d) for d in delays * 2]
    listed = by_id(go_peer.inspect(*(("lq", t.id) for t in infos))["per_queue"]["lq"]["scheduled"])
    assert set(listed) == {t.id for t in infos}
    got = go_peer.inspect(*(("lq", t.id) for t in infos))["tasks"]
    for py, go in zip(infos, got, strict=True):
        assert "error" not in go, go
        assert_same_task(go, py)
        go_at = go_time(go["next_process_at"])
        assert go_at is not None and py.next_process_at is not None
        # The stored score is Redis's clock plus the delay, rounded up to a whole second for Go: up to 1 s after
        # the client's own estimate, plus the round trip between the client's clock and the script's TIME.
        assert -0.25 < (go_at - py.next_process_at).total_seconds() < 1.25


def test_go_get_task_info_matches_python(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        py = c.enqueue(Task("py:one", BINARY, {"a": "b"}), queue="gq", task_id="one", deadline=DEADLINE,
                       retention=30, max_retry=7)
    go = go_peer.task_info("gq", "one")
    assert_same_task(go, py)
    assert go["result"] is None
    assert go_peer.inspect(("gq", "missing"))["tasks"][0]["error"] == "asynq: task not found"


def test_unique_locks_are_shared_both_ways(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("u:py", b"same"), queue="uq", unique=300)
        c.enqueue(Task("u:empty", b""), queue="uq", unique=300)
        # Go refuses a task Python holds the lock for (same type, queue and payload bytes) ...
        go = go_peer.enqueue([
            {"type": "u:py", "payload_b64": b64(b"same"), "queue": "uq", "unique_s": 300},
            {"type": "u:empty", "payload_b64": "", "queue": "uq", "unique_s": 300},
            {"type": "u:py", "payload_b64": b64(b"other"), "queue": "uq", "unique_s": 300},
            {"type": "u:go", "payload_b64": b64(BINARY), "queue": "uq", "unique_s": 300},
        ])
        assert [g["event"] for g in go] == ["enqueue_error", "enqueue_error", "enqueued", "enqueued"]
        assert {g.get("kind") for g in go[:2]} == {"duplicate_task"}
        # ... and Python refuses one Go holds it for.
        with pytest.raises(DuplicateTaskError):
            c.enqueue(Task("u:go", BINARY), queue="uq", unique=60)
        with pytest.raises(DuplicateTaskError):
            c.enqueue(Task("u:py", b"other"), queue="uq", unique=60, process_in=600)


def test_a_task_without_payload_takes_gos_nil_unique_lock(go_peer: GoPeer, redis_url: str, r: redis.Redis) -> None:
    """Go's NewTask(type, nil) and Python's Task(type) lock the same key, asynq:{q}:unique:<type>: exactly."""
    (go,) = go_peer.enqueue([{"type": "nil:go", "queue": "nq", "unique_s": 300}])  # no payload_b64: nil
    assert go["event"] == "enqueued"
    assert r.get("asynq:{nq}:unique:nil:go:") == go["id"].encode()  # the form Go writes
    with Client(redis_url) as c:
        with pytest.raises(DuplicateTaskError):
            c.enqueue(Task("nil:go"), queue="nq", unique=60)
        py = c.enqueue(Task("nil:py"), queue="nq", unique=300)
        assert r.get("asynq:{nq}:unique:nil:py:") == py.id.encode()
        assert r.hget(f"asynq:{{nq}}:t:{py.id}", "unique_key") == b"asynq:{nq}:unique:nil:py:"
    (again,) = go_peer.enqueue([{"type": "nil:py", "queue": "nq", "unique_s": 300}])
    assert again["kind"] == "duplicate_task"


def test_task_id_conflicts_are_shared_both_ways(go_peer: GoPeer, redis_url: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("id:py"), queue="cq", task_id="py-id")
        (go,) = go_peer.enqueue([{"type": "id:go", "queue": "cq", "task_id": "py-id"}])
        assert go["kind"] == "task_id_conflict"
        go_peer.enqueue([{"type": "id:go", "queue": "cq", "task_id": "go-id", "process_in_s": 600}])
        with pytest.raises(TaskIDConflictError):
            c.enqueue(Task("id:py"), queue="cq", task_id="go-id")


def test_python_reads_go_enqueued_tasks(go_peer: GoPeer, r: redis.Redis) -> None:
    """The other direction of the field check: the raw hash Go wrote decodes with asynqpy's wire module."""
    from asynqpy.wire import TaskMessage

    (go,) = go_peer.enqueue([{"type": "g:opts", "payload_b64": b64(BINARY), "queue": "wq", "max_retry": 4,
                              "timeout_s": 90, "deadline_unix": DEADLINE.timestamp(), "retention_s": 120,
                              "task_id": "g-1", "headers": {"x": "y"}}])
    msg = TaskMessage.FromString(r.hget("asynq:{wq}:t:g-1", "msg"))
    state = r.hget("asynq:{wq}:t:g-1", "state")
    assert isinstance(state, bytes)
    info = TaskInfo.from_message(msg, state.decode())
    assert_same_task(go, info)
