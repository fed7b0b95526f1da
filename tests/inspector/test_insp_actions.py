"""Actions: run, archive and delete for one task, a list, and a whole state (in chunks); queue deletion;
payload updates; cancel. Error codes as asynq's."""

from __future__ import annotations

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, Task
from asynqpy.rdb import keys
from inspector import (
    FailedPreconditionError,
    Inspector,
    QueueNotEmptyError,
    QueueNotFoundError,
    TaskAlreadyArchivedError,
    TaskNotFoundError,
)
from tests.inspector.worker import Clock, Worker

pytestmark = pytest.mark.cluster_too


def state_of(r: redis.Redis, q: str, tid: str) -> str | None:
    v = r.hget(keys.task(q, tid), "state")
    return (v.decode() if isinstance(v, bytes) else v) if v else None


@pytest.mark.parametrize("state", ["scheduled", "retry", "archived", "completed", "aggregating"])
def test_run_task_makes_it_pending(insp: Inspector, one_of_each: dict[str, str], r: redis.Redis,
                                   state: str) -> None:
    insp.run_task("q", state)
    assert state_of(r, "q", state) == "pending"
    assert r.lrange(keys.pending("q"), 0, 0) == [state.encode()]
    assert r.hget(keys.task("q", state), "pending_since") is not None
    if state == "aggregating":
        assert not r.exists(keys.group("q", "grp")) and not r.sismember(keys.groups("q"), "grp")
    else:
        assert r.zscore(keys.state_key("q", state), state) is None


def test_run_task_errors(insp: Inspector, one_of_each: dict[str, str]) -> None:
    with pytest.raises(FailedPreconditionError, match="active"):
        insp.run_task("q", "active")
    with pytest.raises(FailedPreconditionError, match="pending"):
        insp.run_task("q", "pending")
    with pytest.raises(TaskNotFoundError):
        insp.run_task("q", "nope")
    with pytest.raises(QueueNotFoundError):
        insp.run_task("nope", "pending")


@pytest.mark.parametrize("state", ["pending", "scheduled", "retry", "completed", "aggregating"])
def test_archive_task(insp: Inspector, one_of_each: dict[str, str], r: redis.Redis, state: str) -> None:
    insp.archive_task("q", state)
    assert state_of(r, "q", state) == "archived" and r.zscore(keys.archived("q"), state) is not None
    if state == "pending":
        assert state.encode() not in r.lrange(keys.pending("q"), 0, -1)


def test_archive_task_errors(insp: Inspector, one_of_each: dict[str, str]) -> None:
    with pytest.raises(TaskAlreadyArchivedError):
        insp.archive_task("q", "archived")
    with pytest.raises(FailedPreconditionError):
        insp.archive_task("q", "active")
    with pytest.raises(TaskNotFoundError):
        insp.archive_task("q", "nope")


@pytest.mark.parametrize("state", ["pending", "scheduled", "retry", "archived", "completed", "aggregating"])
def test_delete_task(insp: Inspector, one_of_each: dict[str, str], r: redis.Redis, state: str) -> None:
    before = insp.queue_info("q").count(state)
    insp.delete_task("q", state)
    assert not r.exists(keys.task("q", state))
    assert insp.queue_info("q").count(state) == before - 1


def test_delete_task_errors_and_unique_lock(insp: Inspector, one_of_each: dict[str, str], client: Client,
                                            r: redis.Redis) -> None:
    with pytest.raises(FailedPreconditionError, match="active"):
        insp.delete_task("q", "active")
    with pytest.raises(TaskNotFoundError):
        insp.delete_task("q", "nope")
    info = client.enqueue(Task("u", b"p"), queue="q", unique=3600, task_id="u1")
    lock = keys.unique("q", "u", b"p")
    assert r.get(lock) == b"u1"
    insp.delete_task("q", info.id)
    assert not r.exists(lock)


def test_batch_reports_each_id(insp: Inspector, one_of_each: dict[str, str]) -> None:
    res = insp.archive_tasks("q", ["pending", "archived", "active", "nope", "retry"])
    assert res.succeeded == ("pending", "retry")
    errors = {f.task_id: type(f.error) for f in res.failed}
    assert errors == {"archived": TaskAlreadyArchivedError, "active": FailedPreconditionError,
                      "nope": TaskNotFoundError}
    res = insp.run_tasks("q", ["pending2", "archived"])
    assert res.succeeded == ("archived",) and res.failed[0].task_id == "pending2"
    assert insp.delete_tasks("q", ["archived", "scheduled"]).succeeded == ("archived", "scheduled")
    with pytest.raises(InvalidArgumentError) as err:
        insp.delete_tasks("q", "archived")
    assert err.value.argument == "task_ids"


def test_batch_larger_than_a_chunk(redis_url: str, client: Client, clock: Clock, r: redis.Redis) -> None:
    client.enqueue_many([Task("t") for _ in range(25)], queue="q")
    ids = [i.decode() if isinstance(i, bytes) else i for i in r.lrange(keys.pending("q"), 0, -1)]
    with Inspector(redis_url, clock=clock, chunk=4) as small:
        assert len(small.archive_tasks("q", ids).succeeded) == 25
        assert small.queue_info("q").archived == 25


@pytest.mark.parametrize("chunk", [1, 3, 500])
def test_all_in_a_state_in_chunks(redis_url: str, client: Client, clock: Clock, r: redis.Redis,
                                  chunk: int) -> None:
    client.enqueue_many([Task("t", str(i).encode()) for i in range(10)], queue="q")
    with Inspector(redis_url, clock=clock, chunk=chunk) as insp:
        assert insp.archive_all("q", "pending") == 10
        qi = insp.queue_info("q")
        assert (qi.pending, qi.archived) == (0, 10)
        assert insp.run_all("q", "archived") == 10
        qi = insp.queue_info("q")
        assert (qi.pending, qi.archived) == (10, 0)
        assert all(state_of(r, "q", t.id) == "pending" for t in insp.list_tasks("q", "pending").tasks)
        assert insp.delete_all("q", "pending") == 10
        assert insp.queue_info("q").size == 0 and r.dbsize() == 1  # only asynq:queues is left


def test_all_aggregating_spans_groups(insp: Inspector, client: Client, r: redis.Redis) -> None:
    for i in range(6):
        client.enqueue(Task("t"), queue="q", group=f"g{i % 3}")
    assert insp.run_all("q", "aggregating", group="g0") == 2
    assert r.scard(keys.groups("q")) == 2
    assert insp.archive_all("q", "aggregating") == 4
    assert not r.exists(keys.groups("q"))
    assert insp.queue_info("q").archived == 4


def test_all_rejects_states_the_action_does_not_fit(insp: Inspector, one_of_each: dict[str, str]) -> None:
    with pytest.raises(FailedPreconditionError):
        insp.delete_all("q", "active")
    with pytest.raises(FailedPreconditionError):
        insp.run_all("q", "pending")
    with pytest.raises(FailedPreconditionError):
        insp.archive_all("q", "archived")
    with pytest.raises(QueueNotFoundError):
        insp.delete_all("nope", "pending")


def test_all_skips_ids_whose_hash_is_gone(insp: Inspector, client: Client, r: redis.Redis) -> None:
    for i in range(3):
        client.enqueue(Task("t"), queue="q", task_id=f"s{i}", process_in=60)
    r.delete(keys.task("q", "s1"))
    assert insp.run_all("q", "scheduled") == 2
    assert r.llen(keys.pending("q")) == 2 and not r.exists(keys.scheduled("q"))


def test_delete_all_releases_unique_locks(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("u", b"1"), queue="q", unique=600)
    insp.delete_all("q", "pending")
    assert not r.exists(keys.unique("q", "u", b"1"))


def test_delete_queue(insp: Inspector, one_of_each: dict[str, str], worker: Worker, r: redis.Redis) -> None:
    with pytest.raises(QueueNotEmptyError):
        insp.delete_queue("q")
    with pytest.raises(FailedPreconditionError, match="active"):
        insp.delete_queue("q", force=True)
    worker.done("q", "active")
    insp.delete_queue("q", force=True)
    assert insp.queues() == []
    left = {k.decode() if isinstance(k, bytes) else k for k in r.keys("*")}
    assert not any(":t:" in k or k.endswith((":pending", ":scheduled", ":retry", ":archived", ":completed"))
                   for k in left), left
    with pytest.raises(QueueNotFoundError):
        insp.delete_queue("q")


def test_delete_empty_queue_without_force_takes_completed_along(insp: Inspector, client: Client,
                                                                worker: Worker, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="q", task_id="c", retention=600)
    worker.take("q")
    worker.complete("q", "c")
    insp.delete_queue("q")
    assert insp.queues() == [] and not r.exists(keys.task("q", "c"))


def test_force_delete_of_a_big_queue_goes_in_chunks(redis_url: str, client: Client, clock: Clock,
                                                    r: redis.Redis) -> None:
    client.enqueue_many([Task("t") for _ in range(50)], queue="q")
    client.enqueue_many([Task("t") for _ in range(20)], queue="q", process_in=100)
    with Inspector(redis_url, clock=clock, chunk=8) as insp:
        insp.delete_queue("q", force=True)
    assert r.keys("asynq:{q}:t:*") == [] and not r.sismember(keys.QUEUES, "q")


def test_update_payload_of_a_scheduled_task(insp: Inspector, one_of_each: dict[str, str]) -> None:
    rec = insp.update_payload("q", "scheduled", b'{"new": 1}')
    assert rec.info.payload == b'{"new": 1}' and rec.info.type == "t:scheduled" and rec.state.value == "scheduled"
    with pytest.raises(FailedPreconditionError, match="scheduled"):
        insp.update_payload("q", "pending", b"x")
    with pytest.raises(TaskNotFoundError):
        insp.update_payload("q", "nope", b"x")


def test_cancel_publishes_the_id(insp: Inspector, r: redis.Redis) -> None:
    sub = r.pubsub()
    sub.subscribe(keys.CANCEL_CHANNEL)
    sub.get_message(timeout=1)
    assert insp.cancel("t-1") == 1
    msg = sub.get_message(timeout=1)
    assert msg is not None and msg["data"] == b"t-1"
    sub.close()
