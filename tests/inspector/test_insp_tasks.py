"""Task reads: list_tasks in asynq's order for every state, get_task, and damaged or odd tasks."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, Task
from asynqpy.rdb import keys
from inspector import Inspector, QueueNotFoundError, TaskNotFoundError, TaskState
from tests.inspector.worker import Clock, Worker

pytestmark = pytest.mark.cluster_too


@pytest.mark.parametrize("state", [s.value for s in TaskState])
def test_every_state_lists_its_task(insp: Inspector, one_of_each: dict[str, str], state: str) -> None:
    page = insp.list_tasks("q", state, group="grp" if state == "aggregating" else None)
    ids = [t.id for t in page.tasks]
    assert (ids[0] if state != "pending" else ids) == (state if state != "pending" else ["pending", "pending2"])
    assert all(t.state.value == state and not t.problem for t in page.tasks)
    assert page.total == len(ids)


def test_fields_of_each_state(insp: Inspector, one_of_each: dict[str, str], clock: Clock) -> None:
    retry = insp.get_task("q", "retry").info
    assert retry.retried == 1 and retry.last_err == "boom: try again" and retry.last_failed_at is not None
    assert retry.next_process_at and retry.next_process_at.timestamp() == pytest.approx(clock.t + 3600)
    archived = insp.get_task("q", "archived")
    assert archived.info.last_err == "fatal: gave up" and archived.score == pytest.approx(clock.t)
    completed = insp.get_task("q", "completed")
    assert completed.info.completed_at is not None and completed.score == pytest.approx(clock.t + 3600)
    active = insp.get_task("q", "active")
    assert active.lease_expires_at and not active.info.is_orphaned
    clock.advance(31)
    assert insp.get_task("q", "active").info.is_orphaned
    assert insp.list_tasks("q", "active").tasks[0].info.is_orphaned
    pending = insp.get_task("q", "pending")
    assert pending.payload.kind == "json" and json.loads(pending.payload.text) == {"n": 1}
    assert pending.info.next_process_at is not None and pending.pending_since is not None
    agg = insp.get_task("q", "aggregating")
    assert agg.info.group == "grp" and agg.score is not None


def test_pending_pages_run_oldest_first(insp: Inspector, client: Client) -> None:
    for i in range(7):
        client.enqueue(Task("t"), queue="q", task_id=f"t{i}")
    p1 = insp.list_tasks("q", "pending", page=1, size=3)
    p3 = insp.list_tasks("q", "pending", page=3, size=3)
    assert [t.id for t in p1.tasks] == ["t0", "t1", "t2"] and [t.id for t in p3.tasks] == ["t6"]
    assert p1.total == 7 and insp.list_tasks("q", "pending", page=4, size=3).tasks == ()


def test_sorted_sets_list_lowest_score_first(insp: Inspector, client: Client) -> None:
    for i, delay in enumerate((300, 100, 200)):
        client.enqueue(Task("t"), queue="q", task_id=f"s{i}", process_in=delay)
    assert [t.id for t in insp.list_tasks("q", "scheduled").tasks] == ["s1", "s2", "s0"]


def test_get_task_result_and_headers(insp: Inspector, client: Client, worker: Worker, r: redis.Redis) -> None:
    client.enqueue(Task("t", b"\xff\x00binary", headers={"k": "v"}), queue="q", task_id="x", retention=60)
    worker.take("q")
    r.hset(keys.task("q", "x"), "result", b'{"ok": true}')
    worker.complete("q", "x")
    rec = insp.get_task("q", "x")
    assert rec.info.headers == {"k": "v"} and rec.info.retention == 60
    assert rec.payload.kind == "hex" and rec.payload.size == 8
    assert rec.result is not None and rec.result.kind == "json" and rec.info.result == b'{"ok": true}'


def test_unknown_queue_and_unknown_task_differ(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("t"), queue="q")
    with pytest.raises(TaskNotFoundError) as e:
        insp.get_task("q", "missing")
    assert e.value.queue == "q" and e.value.task_id == "missing"
    with pytest.raises(QueueNotFoundError):
        insp.get_task("other", "missing")
    with pytest.raises(QueueNotFoundError):
        insp.list_tasks("other", "pending")


def test_task_hash_missing_from_its_list(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="q", task_id="gone")
    client.enqueue(Task("t"), queue="q", task_id="ok")
    r.delete(keys.task("q", "gone"))
    tasks = insp.list_tasks("q", "pending").tasks
    assert [t.id for t in tasks] == ["gone", "ok"]
    assert "gone" in tasks[0].problem and tasks[1].problem == ""
    with pytest.raises(TaskNotFoundError):
        insp.get_task("q", "gone")


def test_undecodable_message_is_listed_with_its_error(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="q", task_id="bad")
    r.hset(keys.task("q", "bad"), mapping={"msg": b"\xff\xff\xff not protobuf", "asynqpy_error": "cannot decode"})
    (row,) = insp.list_tasks("q", "pending").tasks
    assert row.id == "bad" and "cannot be decoded" in row.problem and row.info.last_err == "cannot decode"
    assert insp.get_task("q", "bad").problem == row.problem


def test_invalid_utf8_payload_shows_as_hex(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("t", b"ok \xc3\x28 bad"), queue="q", task_id="x")
    assert insp.get_task("q", "x").payload.kind == "hex"
    assert insp.list_tasks("q", "pending").tasks[0].payload.kind == "hex"


def test_aggregating_needs_a_group(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("t"), queue="q", group="g")
    with pytest.raises(InvalidArgumentError, match="group") as err:
        insp.list_tasks("q", "aggregating")
    assert err.value.argument == "group"
    assert len(insp.list_tasks("q", "aggregating", group="g").tasks) == 1
    with pytest.raises(InvalidArgumentError) as err:
        insp.list_tasks("q", "pending", page=0)
    assert err.value.argument == "page"
    with pytest.raises(InvalidArgumentError) as err:
        insp.list_tasks("q", "pending", size=100_000)
    assert err.value.argument == "size"


def test_deep_page_of_a_long_list(insp: Inspector, client: Client) -> None:
    client.enqueue_many([Task("t", str(i).encode()) for i in range(2000)], queue="q")
    last = insp.list_tasks("q", "pending", page=67, size=30)
    assert [t.info.payload for t in last.tasks] == [str(i).encode() for i in range(1980, 2000)]


def test_due_times_are_exact_though_scores_are_whole_seconds(insp: Inspector, client: Client,
                                                              r: redis.Redis) -> None:
    at = datetime.fromtimestamp(int(time.time()) + 600.25, UTC)
    client.enqueue(Task("t"), queue="q", task_id="s", process_at=at)
    assert r.zscore(keys.scheduled("q"), "s") == at.timestamp() + 0.75  # what asynq reads: the second after
    assert insp.get_task("q", "s").info.next_process_at == at  # what we show and run by
    assert insp.list_tasks("q", "scheduled").tasks[0].info.next_process_at == at
    assert insp.queue_info("q").next_scheduled_at == at
    r.zadd(keys.scheduled("q"), {"s": at.timestamp() + 60.75})  # scored again by Go: the score rules
    later = datetime.fromtimestamp(at.timestamp() + 60.75, UTC)
    assert insp.get_task("q", "s").info.next_process_at == later
    assert insp.list_tasks("q", "scheduled").tasks[0].info.next_process_at == later
