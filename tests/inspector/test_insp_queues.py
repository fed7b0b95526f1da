"""Queue-level reads: queues, queue_info(s), history, groups, pause/unpause, against our client and worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, RedisUnavailableError, Task
from asynqpy.rdb import keys
from inspector import (
    Inspector,
    QueueAlreadyPausedError,
    QueueNotFoundError,
    QueueNotPausedError,
)
from tests.inspector.worker import Clock

pytestmark = pytest.mark.cluster_too


def test_counts_per_state(insp: Inspector, one_of_each: dict[str, str], clock: Clock) -> None:
    qi = insp.queue_info("q")
    assert (qi.pending, qi.active, qi.scheduled, qi.retry, qi.archived, qi.completed, qi.aggregating) == \
        (2, 1, 1, 1, 1, 1, 1)
    assert qi.size == 8 and qi.groups == 1 and not qi.paused
    assert (qi.processed, qi.failed, qi.processed_total, qi.failed_total) == (4, 2, 4, 2)
    assert qi.memory_usage and qi.memory_usage > 0
    assert qi.next_scheduled_at and qi.next_retry_at and qi.next_retry_at > qi.next_scheduled_at
    assert qi.count("retry") == 1
    assert qi.timestamp.timestamp() == pytest.approx(clock.t)


def test_latency_is_the_age_of_the_oldest_pending_task(insp: Inspector, client: Client, clock: Clock) -> None:
    client.enqueue(Task("a"), queue="q")
    clock.advance(42)
    client.enqueue(Task("b"), queue="q")
    qi = insp.queue_info("q")
    assert 41 < qi.latency < 60
    assert qi.oldest_pending_since is not None


def test_missing_pending_since_reads_as_zero_latency(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("a"), queue="q", task_id="x")
    r.hdel(keys.task("q", "x"), "pending_since")
    qi = insp.queue_info("q")
    assert qi.latency == 0 and qi.oldest_pending_since is None and qi.pending == 1


def test_queue_only_in_the_registry_is_empty(insp: Inspector, r: redis.Redis) -> None:
    r.sadd(keys.QUEUES, "ghost")
    qi = insp.queue_info("ghost")
    assert qi.size == 0 and qi.latency == 0 and qi.next_retry_at is None and qi.processed_total == 0
    assert insp.list_tasks("ghost", "pending").tasks == ()
    assert insp.history("ghost", 3)[0].processed == 0


def test_unknown_queue(insp: Inspector) -> None:
    with pytest.raises(QueueNotFoundError):
        insp.queue_info("nope")
    with pytest.raises(QueueNotFoundError):
        insp.history("nope", 1)
    with pytest.raises(QueueNotFoundError):
        insp.groups("nope")


def test_queue_infos_for_every_queue(insp: Inspector, client: Client) -> None:
    for q in ("b", "a", "c"):
        client.enqueue(Task("x"), queue=q)
    assert insp.queues() == ["a", "b", "c"]
    infos = insp.queue_infos()
    assert [i.queue for i in infos] == ["a", "b", "c"] and all(i.pending == 1 for i in infos)
    assert insp.queue_infos(["c"], memory=False)[0].memory_usage is None
    with pytest.raises(QueueNotFoundError):
        insp.queue_infos(["a", "zz"])


def test_queue_infos_is_one_round_trip(insp: Inspector, client: Client,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for q in ("a", "b", "c", "d"):
        client.enqueue(Task("x"), queue=q)
    insp.queue_infos()  # the scripts are loaded now
    pipelines: list[int] = []
    direct: list[object] = []
    real_pipeline, real_execute = insp.redis.pipeline, insp.redis.execute_command

    def pipeline(*a: Any, **kw: Any) -> Any:
        pipelines.append(1)
        return real_pipeline(*a, **kw)

    def execute_command(*a: Any, **kw: Any) -> Any:
        direct.append(a)
        return real_execute(*a, **kw)

    monkeypatch.setattr(insp.redis, "pipeline", pipeline)
    monkeypatch.setattr(insp.redis, "execute_command", execute_command)
    infos = insp.queue_infos(["a", "b", "c", "d"])
    assert len(infos) == 4 and len(pipelines) == 1 and direct == []


def test_history_per_utc_day(insp: Inspector, r: redis.Redis, clock: Clock, client: Client) -> None:
    client.enqueue(Task("x"), queue="q")
    r.set(keys.processed_daily("q", clock.t), 7)
    r.set(keys.failed_daily("q", clock.t), 2)
    r.set(keys.processed_daily("q", clock.t - 86400), 5)
    days = insp.history("q", 3)
    assert [(d.processed, d.failed) for d in days] == [(7, 2), (5, 0), (0, 0)]
    assert days[0].date - days[1].date == timedelta(days=1)
    with pytest.raises(InvalidArgumentError) as err:
        insp.history("q", 0)
    assert err.value.argument == "days"


def test_groups(insp: Inspector, client: Client) -> None:
    for i in range(3):
        client.enqueue(Task("x"), queue="q", group="g2" if i else "g1")
    assert [(g.group, g.size) for g in insp.groups("q")] == [("g1", 1), ("g2", 2)]


def test_pause_and_unpause(insp: Inspector, client: Client) -> None:
    client.enqueue(Task("x"), queue="q")
    insp.pause("q")
    assert insp.queue_info("q").paused
    with pytest.raises(QueueAlreadyPausedError):
        insp.pause("q")
    insp.unpause("q")
    assert not insp.queue_info("q").paused
    with pytest.raises(QueueNotPausedError):
        insp.unpause("q")


def test_bad_names_are_clear_errors(insp: Inspector) -> None:
    with pytest.raises(InvalidArgumentError, match="blank") as err:
        insp.queue_info(" ")
    assert err.value.argument == "queue"
    with pytest.raises(InvalidArgumentError, match="unknown task state") as err:
        insp.list_tasks("q", "sleeping")
    assert err.value.argument == "state"


def test_unreachable_redis_is_our_error_naming_the_server() -> None:
    insp = Inspector("redis://:hunter2@127.0.0.1:1/4")
    for call in (insp.queues, insp.queue_infos, insp.servers, lambda: insp.pause("q"),
                 lambda: insp.list_tasks("q", "pending")):
        with pytest.raises(RedisUnavailableError) as err:
            call()
        assert err.value.url == "redis://:***@127.0.0.1:1/4" and "hunter2" not in str(err.value)
        assert err.value.reason and not isinstance(err.value, redis.RedisError)


def test_every_read_script_loads_itself_on_a_fresh_server(insp: Inspector, client: Client, r: redis.Redis) -> None:
    """No list of scripts to preload: a pipeline that meets NOSCRIPT loads the scripts it used."""
    client.enqueue(Task("t", b"needle"), queue="q", task_id="a")
    for read in (lambda: insp.queue_infos()[0].pending == 1, lambda: len(insp.list_tasks("q", "pending").tasks) == 1,
                 lambda: insp.get_task("q", "a").info.payload == b"needle",
                 lambda: len(insp.search("q", "pending", text="needle").tasks) == 1,
                 lambda: insp.archive_all("q", "pending") == 1):
        r.script_flush()
        assert read()


def test_now_is_the_inspectors_clock(insp: Inspector, clock: Clock) -> None:
    assert insp.now() == clock.t
    clock.t += 60
    assert insp.now() == clock.t
