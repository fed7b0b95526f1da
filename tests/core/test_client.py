"""Client: the keys and messages each enqueue writes, asynq's defaults, and clear errors for bad arguments."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
import time
from datetime import UTC, datetime, timedelta

import pytest
import redis

from asynqpy import (
    AsyncClient,
    Client,
    DuplicateTaskError,
    InvalidArgumentError,
    RedisUnavailableError,
    Task,
    TaskIDConflictError,
    TaskOptions,
    TaskState,
)
from tests.helpers import msg_of


def test_enqueue_writes_pending_task_with_asynq_defaults(redis_url: str, r: redis.Redis) -> None:
    info = Client(redis_url).enqueue(Task("email:send", b'{"to":"a@b"}', {"trace": "1"}))
    assert info.state is TaskState.PENDING and info.queue == "default" and info.max_retry == 25
    assert info.timeout == 1800 and info.deadline is None and len(info.id) == 36
    assert r.smembers("asynq:queues") == {b"default"}
    assert r.lrange("asynq:{default}:pending", 0, -1) == [info.id.encode()]
    h = r.hgetall(f"asynq:{{default}}:t:{info.id}")
    assert h[b"state"] == b"pending"
    assert abs(int(h[b"pending_since"]) / 1e9 - info.next_process_at.timestamp()) < 1  # nanoseconds
    m = msg_of(r, "default", info.id)
    assert (m.type, m.payload, m.queue, m.retry, m.timeout, m.deadline) == (
        "email:send", b'{"to":"a@b"}', "default", 25, 1800, 0)
    assert dict(m.headers) == {"trace": "1"}


def test_deadline_alone_leaves_timeout_zero_and_options_land_in_message(redis_url: str, r: redis.Redis) -> None:
    dl = datetime(2100, 1, 1, tzinfo=UTC)
    info = Client(redis_url).enqueue(Task("t", b"x"), queue="critical", max_retry=3, deadline=dl,
                                     retention=timedelta(minutes=10), task_id="my-id")
    m = msg_of(r, "critical", "my-id")
    assert info.id == "my-id" and m.timeout == 0 and m.deadline == int(dl.timestamp())
    assert m.retry == 3 and m.retention == 600


def _redis_now(r: redis.Redis) -> float:
    sec, usec = r.time()
    return float(sec + usec / 1e6)


def test_process_in_schedules_whole_second_score_and_keeps_exact_time(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    before = _redis_now(r)
    info = c.enqueue(Task("t", b""), process_in=90.25)
    after = _redis_now(r)
    assert info.state is TaskState.SCHEDULED
    assert info.next_process_at.timestamp() == pytest.approx(time.time() + 90.25, abs=1)  # this clock's estimate
    exact = r.zscore("asynqpy:{default}:due", info.id)  # ours, exact: by Redis's clock, 90.25 s after the enqueue
    # the delay counts from Redis's now rounded up to the millisecond (so a task is never early)
    assert math.floor((before + 90.25) * 1000) / 1000 <= exact <= math.ceil(after * 1000) / 1000 + 90.25 + 1e-6
    score = r.zscore("asynq:{default}:scheduled", info.id)
    assert score == math.ceil(exact)  # whole seconds as every asynq release reads them, rounded up: never early
    assert r.hget(f"asynq:{{default}}:t:{info.id}", "state") == b"scheduled"
    assert r.hget(f"asynq:{{default}}:t:{info.id}", "pending_since") is None


def test_process_at_in_the_past_enqueues_now(redis_url: str, r: redis.Redis) -> None:
    info = Client(redis_url).enqueue(Task("t", b""), process_at=datetime(2000, 1, 1, tzinfo=UTC))
    assert info.state is TaskState.PENDING and r.llen("asynq:{default}:pending") == 1


def test_group_goes_to_aggregating(redis_url: str, r: redis.Redis) -> None:
    info = Client(redis_url).enqueue(Task("t", b"1"), group="daily")
    assert info.state is TaskState.AGGREGATING
    assert r.smembers("asynq:{default}:groups") == {b"daily"}
    assert r.zrange("asynq:{default}:g:daily", 0, -1) == [info.id.encode()]
    assert r.hget(f"asynq:{{default}}:t:{info.id}", "group") == b"daily"
    assert msg_of(r, "default", info.id).group_key == "daily"


def test_unique_rejects_duplicates_within_ttl(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    first = c.enqueue(Task("report", b"p"), unique=60)
    with pytest.raises(DuplicateTaskError) as err:
        c.enqueue(Task("report", b"p"), unique=60)
    assert err.value.queue == "default"
    lock = "asynq:{default}:unique:report:" + hashlib.md5(b"p").hexdigest()
    assert r.get(lock) == first.id.encode() and 55 <= r.ttl(lock) <= 60
    assert r.hget(f"asynq:{{default}}:t:{first.id}", "unique_key") == lock.encode()
    assert msg_of(r, "default", first.id).unique_key == lock
    c.enqueue(Task("report", b"other"), unique=60)  # another payload is another task
    r.delete(lock)  # the TTL ran out
    c.enqueue(Task("report", b"p"), unique=60)


def test_scheduled_unique_lock_lasts_until_process_at_plus_ttl(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("r", b""), unique=60, process_in=600)
    lock = "asynq:{default}:unique:r:" + hashlib.md5(b"").hexdigest()
    assert 655 <= r.ttl(lock) <= 660


def test_task_id_conflict(redis_url: str) -> None:
    c = Client(redis_url)
    c.enqueue(Task("t", b""), task_id="x")
    with pytest.raises(TaskIDConflictError) as err:
        c.enqueue(Task("t", b""), task_id="x")
    assert err.value.task_id == "x"


@pytest.mark.parametrize(("kwargs", "word"), [
    ({"queue": ""}, "queue"),
    ({"queue": "a}b"}, "queue"),
    ({"queue": 5}, "queue"),
    ({"process_in": -1}, "process_in"),
    ({"process_at": datetime(2030, 1, 1)}, "process_at"),
    ({"deadline": datetime(2030, 1, 1)}, "deadline"),
    ({"process_in": 5, "process_at": datetime.now(UTC)}, "process_in"),
    ({"max_retry": -2}, "max_retry"),
    ({"max_retry": "3"}, "max_retry"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": "5s"}, "timeout"),
    ({"unique": 0.5}, "unique"),
    ({"task_id": "  "}, "task_id"),
    ({"group": ""}, "group"),
    ({"retention": -5}, "retention"),
    ({"retries": 3}, "retries"),  # an unknown keyword is named too
    # no UTF-8 form (a lone surrogate, as json.loads makes of a string cut inside an emoji): a protobuf string
    # cannot hold it; it was a bare UnicodeEncodeError naming nothing
    ({"queue": "q\ud83d"}, "queue"),
    ({"task_id": "id-\udce9"}, "task_id"),
    ({"group": "g\ud800"}, "group"),
])
def test_bad_arguments_name_themselves(redis_url: str, r: redis.Redis, kwargs, word) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match=word) as err:
        Client(redis_url).enqueue(Task("t", b""), **kwargs)
    assert err.value.argument == word and isinstance(err.value, ValueError)
    with pytest.raises(InvalidArgumentError, match=word):
        Client(redis_url).enqueue_many([Task("t", b"")], **kwargs)
    assert r.dbsize() == 0  # nothing half-written


def test_bad_tasks() -> None:
    with pytest.raises(InvalidArgumentError, match="blank"):
        Task("  ", b"")
    with pytest.raises(InvalidArgumentError, match="bytes") as err:
        Task("t", "a string")  # type: ignore[arg-type]
    assert err.value.argument == "payload"
    with pytest.raises(InvalidArgumentError, match="headers"):
        Task("t", b"", {"k": 1})  # type: ignore[dict-item]
    for bad in (lambda: Task("t\ud83d"), lambda: Task("t", b"", {"k": "\udce9"}),
                lambda: Task("t", b"", {"\ud800": "v"})):
        with pytest.raises(InvalidArgumentError, match="not valid UTF-8"):
            bad()
    with pytest.raises(InvalidArgumentError, match="Task") as err:
        Client("redis://127.0.0.1:1/0").enqueue("t")  # type: ignore[arg-type]
    assert err.value.argument == "task"


def test_absurd_task_types_are_refused_before_anything_is_written(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    with Client(redis_url) as c:
        assert c.enqueue(Task("t" * 1024, b"")).queue == "default"  # the limit itself is fine
        for enqueue in (lambda t: c.enqueue(t), lambda t: c.enqueue_many([t])):
            with pytest.raises(InvalidArgumentError, match="the limit is 1024 bytes") as err:
                enqueue(Task("é" * 513, b""))  # 1026 bytes in UTF-8
            assert err.value.argument == "type"
    assert r.llen("asynq:{default}:pending") == 1
    r.close()


def test_invisible_types_and_payloads_past_redis_limit_are_refused(redis_url: str, r: redis.Redis) -> None:
    with Client(redis_url) as c:
        assert c.enqueue(Task("a\u200bb", b""), queue="visible").queue == "visible"  # something shows: fine
        for enqueue in (lambda t: c.enqueue(t, queue="invisible"), lambda t: c.enqueue_many([t], queue="invisible")):
            with pytest.raises(InvalidArgumentError, match="nothing visible") as err:
                enqueue(Task(" \u200b\u2060 ", b""))
            assert err.value.argument == "type"
            # Redis closes the connection on a value past 512 MB: that read as "cannot reach Redis"
            with pytest.raises(InvalidArgumentError, match="512 MB") as err:
                enqueue(Task("big", bytes(513 * 1024 * 1024)))
            assert err.value.argument == "payload"
    assert not r.exists("asynq:{invisible}:pending")


def test_queue_names_are_capped_at_enqueue_with_the_limit_said(redis_url: str, r: redis.Redis) -> None:
    from inspector import Inspector
    from tests.webui.livekit import go_enqueue

    with Client(redis_url) as c:
        assert c.enqueue(Task("t", b""), queue="q" * 256).queue == "q" * 256  # the limit itself is fine
        for enqueue in (lambda q: c.enqueue(Task("t", b""), queue=q),
                        lambda q: c.enqueue_many([Task("t", b"")], queue=q)):
            with pytest.raises(InvalidArgumentError, match="is 257 bytes long; the limit is 256 bytes") as err:
                enqueue("q" * 257)
            assert err.value.argument == "queue"
    long = "g" * 400  # Go accepts any name: a longer Go-written queue is still read
    tid = go_enqueue(redis_url, long, "go:t")
    with Inspector(redis_url) as insp:
        assert insp.queue_info(long, memory=False).pending == 1 and insp.get_task(long, tid).id == tid


def test_task_options_are_one_reusable_checked_object(redis_url: str, r: redis.Redis) -> None:
    opts = TaskOptions(queue="reports", max_retry=2, retention=timedelta(minutes=5), process_in=60)
    with pytest.raises(InvalidArgumentError) as err:
        TaskOptions(max_retry=-1)
    assert err.value.argument == "max_retry"
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.queue = "x"  # type: ignore[misc]
    c = Client(redis_url)
    a = c.enqueue(Task("t", b"a"), opts)
    assert (a.queue, a.max_retry, a.retention, a.state) == ("reports", 2, 300, TaskState.SCHEDULED)
    # Keywords win over the options object; a process_at keyword replaces its process_in.
    b = c.enqueue(Task("t", b"b"), opts, queue="urgent", process_at=datetime.now(UTC) - timedelta(seconds=1))
    assert (b.queue, b.max_retry, b.state) == ("urgent", 2, TaskState.PENDING)
    many = c.enqueue_many([Task("t", b"c"), Task("t", b"d")], opts, max_retry=7)
    assert [(m.queue, m.max_retry, m.state) for m in many] == [("reports", 7, TaskState.SCHEDULED)] * 2  # type: ignore[union-attr]
    assert r.zcard("asynq:{reports}:scheduled") == 3 and r.llen("asynq:{urgent}:pending") == 1
    with pytest.raises(InvalidArgumentError) as err:
        c.enqueue_many([Task("t", b"e")], opts, task_id="same-for-all")
    assert err.value.argument == "task_id"
    with pytest.raises(InvalidArgumentError) as err:
        c.enqueue(Task("t", b"e"), {"queue": "x"})  # type: ignore[arg-type]
    assert err.value.argument == "options"


def test_none_for_an_option_with_a_default_means_not_given(redis_url: str) -> None:
    # queue=None, max_retry=None and durable=None reached the broker as None (a TypeError from the script call)
    assert TaskOptions(queue=None, max_retry=None).queue == "default"  # type: ignore[arg-type]
    opts = TaskOptions(queue="reports", max_retry=2)
    assert (opts.merge({"queue": None, "max_retry": None}).queue, opts.merge({"max_retry": None}).max_retry) == (
        "reports", 2)
    with Client(redis_url) as c:
        assert c.enqueue(Task("t", b""), queue=None).queue == "default"  # type: ignore[arg-type]
        assert c.enqueue(Task("t", b""), opts, queue=None, max_retry=None).max_retry == 2  # type: ignore[arg-type]
        [many] = c.enqueue_many([Task("t", b"")], queue=None, durable=None)  # type: ignore[arg-type]
        assert many.queue == "default"  # type: ignore[union-attr]


def test_enqueue_many_takes_unique_per_task(redis_url: str) -> None:
    c = Client(redis_url)
    out = c.enqueue_many([Task("t", b"1"), Task("t", b"2"), Task("t", b"1")], unique=60)
    assert [type(o).__name__ for o in out] == ["TaskInfo", "TaskInfo", "DuplicateTaskError"]


def test_unreachable_redis_raises_our_error_with_the_url_masked() -> None:
    url = "redis://user:s3cret@127.0.0.1:1/3"
    with pytest.raises(RedisUnavailableError) as err:
        Client(url).enqueue(Task("t"))
    assert err.value.url == "redis://user:***@127.0.0.1:1/3" and "s3cret" not in str(err.value)
    assert "127.0.0.1:1" in str(err.value) and err.value.reason
    with pytest.raises(RedisUnavailableError):
        Client(url).enqueue_many([Task("t")])

    async def go() -> None:
        async with AsyncClient(url) as c:
            await c.enqueue(Task("t"))
    with pytest.raises(RedisUnavailableError) as err:
        asyncio.run(go())
    assert "s3cret" not in str(err.value)


def test_task_without_payload_takes_gos_nil_unique_key(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    nil = c.enqueue(Task("report:daily"), unique=60)
    empty = c.enqueue(Task("report:daily", b""), unique=60)  # Go's []byte{}: a lock of its own
    assert r.get("asynq:{default}:unique:report:daily:") == nil.id.encode()
    assert r.get("asynq:{default}:unique:report:daily:d41d8cd98f00b204e9800998ecf8427e") == empty.id.encode()
    assert Task("report:daily").payload == b"" and Task("report:daily").nil_payload
    assert not Task("report:daily", b"").nil_payload


def test_enqueue_many_pipelines_and_reports_each(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    c.enqueue(Task("t", b""), task_id="taken")
    tasks = [Task("t", str(i).encode()) for i in range(2500)]
    out = c.enqueue_many(tasks, queue="bulk", max_retry=1)
    assert len(out) == 2500 and all(not isinstance(o, Exception) for o in out)
    assert r.llen("asynq:{bulk}:pending") == 2500 and b"bulk" in r.smembers("asynq:queues")
    assert msg_of(r, "bulk", out[7].id).payload == b"7"  # type: ignore[union-attr]


def test_async_client(redis_url: str, r: redis.Redis) -> None:
    async def go() -> list:  # type: ignore[type-arg]
        async with AsyncClient(redis_url) as c:
            one = await c.enqueue(Task("a", b"1"), queue="aq", process_in=timedelta(seconds=30))
            many = await c.enqueue_many([Task("a", b"2"), Task("a", b"3")], queue="aq")
            with pytest.raises(TaskIDConflictError):
                await c.enqueue(Task("a", b""), queue="aq", task_id=one.id)
            return [one, *many]
    infos = asyncio.run(go())
    assert infos[0].state is TaskState.SCHEDULED and r.zcard("asynq:{aq}:scheduled") == 1
    assert r.llen("asynq:{aq}:pending") == 2


# The message Go asynq v0.26.0 wrote for NewTask("v:nilpayload", nil) with TaskID("t-empty") in queue "vq"
# (golden vector asynq-v0.26.0-state.json, key asynq:{vq}:t:t-empty): no payload field at all.
GO_NIL_PAYLOAD_MSG = bytes.fromhex("0a0c763a6e696c7061796c6f61641a07742d656d70747922027671281940880e")


def test_task_without_payload_is_the_message_go_writes_for_nil(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("v:nilpayload"), queue="vq", task_id="t-empty")
    assert r.hget("asynq:{vq}:t:t-empty", "msg") == GO_NIL_PAYLOAD_MSG
