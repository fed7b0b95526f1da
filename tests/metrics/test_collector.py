"""The queue-state collector: asynq's names and ours, equal to what the Inspector reports for the same Redis
(state written by our client and worker scripts, and by Go asynq), and a scrape that answers when Redis is down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from asynqpy import Client, Task
from exporter.collector import ASYNQ_STATES, STATES, QueueStateCollector
from inspector import Inspector, QueueInfo, QueueSnapshot
from tests.inspector.vectors import VERSIONS, inspect_report, load_state, vectors_dir
from tests.inspector.worker import Clock, Worker
from tests.metrics.scrape import Samples, parse, series, value


def exposition(insp: Inspector, max_age: float = 0.0) -> Samples:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(QueueStateCollector(insp, max_age=max_age))
    return parse(generate_latest(reg).decode())


def assert_matches(s: Samples, infos: list[QueueInfo]) -> None:
    assert infos, "no queues to compare"
    for qi in infos:
        q = qi.queue
        for st in ASYNQ_STATES:
            assert value(s, "asynq_tasks_enqueued_total", queue=q, state=st) == qi.count(st), (q, st)
        assert value(s, "asynq_tasks_enqueued_total", queue=q, state="aggregating") is None  # as asynq
        for st in STATES:
            assert value(s, "asynqpy_queue_tasks", queue=q, state=st) == qi.count(st), (q, st)
        assert value(s, "asynq_queue_size", queue=q) == qi.size
        assert value(s, "asynq_queue_latency_seconds", queue=q) == pytest.approx(qi.latency)
        assert value(s, "asynq_queue_memory_usage_approx_bytes", queue=q) == pytest.approx(qi.memory_usage or 0,
                                                                                            rel=0.5)
        assert value(s, "asynq_tasks_processed_total", queue=q) == qi.processed_total
        assert value(s, "asynq_tasks_failed_total", queue=q) == qi.failed_total
        assert value(s, "asynq_queue_paused_total", queue=q) == int(qi.paused)
        assert value(s, "asynqpy_queue_paused", queue=q) == int(qi.paused)
        ages = {st: value(s, "asynqpy_queue_oldest_task_age_seconds", queue=q, state=st)
                for st in ("pending", "retry", "archived")}
        assert ages == pytest.approx({"pending": qi.latency, "retry": qi.oldest_retry_age,
                                      "archived": qi.oldest_archived_age})
    assert {dict(lbl)["queue"] for lbl in series(s, "asynq_queue_size")} == {qi.queue for qi in infos}


def test_numbers_equal_the_inspector_for_our_state(redis_url: str, r: redis.Redis) -> None:
    clock = Clock(1_800_000_000.0)
    c = Client(redis_url)
    w = Worker(r, clock)
    for i in range(6):
        c.enqueue(Task("t", b"x" * 50), queue="q", task_id=f"t{i}")
    c.enqueue(Task("t"), queue="q", task_id="later", process_in=600)
    c.enqueue(Task("agg"), queue="q", task_id="g1", group="grp")
    c.enqueue(Task("t"), queue="other")
    w.take("q", 4)
    w.fail("q", "t0", "boom")
    w.kill("q", "t1", "dead")
    w.complete("q", "t2")
    r.set("asynq:{other}:paused", "1")
    with Inspector(redis_url, clock=clock) as insp:
        clock.advance(30)
        s = exposition(insp)
        infos = insp.queue_infos()
    assert_matches(s, infos)
    assert value(s, "asynqpy_queue_oldest_task_age_seconds", queue="q", state="archived") == pytest.approx(30)
    assert value(s, "asynq_queue_paused_total", queue="other") == 1
    assert value(s, "asynqpy_redis_up") == 1 and value(s, "asynqpy_exporter_scrape_errors_total") == 0
    assert value(s, "asynqpy_servers") == 0 and value(s, "asynqpy_workers_busy", queue="q") == 0
    assert 0 < (value(s, "asynqpy_redis_latency_seconds") or 0) < 1
    assert 0 < (value(s, "asynqpy_exporter_scrape_duration_seconds") or 0) < 5


VECTORS = vectors_dir()


@pytest.fixture(params=VERSIONS)
def go_state(request: pytest.FixtureRequest, r: redis.Redis, redis_url: str) -> Iterator[Inspector]:
    if VECTORS is None:
        pytest.skip("golden vectors of Go asynq not found (ASYNQPY_VECTORS)")
    load_state(r, VECTORS / f"asynq-{request.param}-state.json")
    report = inspect_report(VECTORS / f"asynq-{request.param}-state.inspect.json")
    from tests.inspector.gocompare import first_time

    with Inspector(redis_url, clock=Clock(first_time(report))) as insp:
        yield insp


def test_numbers_equal_the_inspector_for_go_state(go_state: Inspector) -> None:
    s = exposition(go_state)
    assert_matches(s, go_state.queue_infos())
    assert value(s, "asynqpy_servers") is not None


def test_redis_down_still_answers_with_error_counters() -> None:
    insp = Inspector("redis://127.0.0.1:1/0")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(QueueStateCollector(insp))
    first = parse(generate_latest(reg).decode())
    second = parse(generate_latest(reg).decode())
    assert value(first, "asynqpy_redis_up") == 0 and value(second, "asynqpy_redis_up") == 0
    assert value(second, "asynqpy_exporter_scrape_errors_total") == 2
    assert value(second, "asynqpy_redis_connection_errors_total") == 2
    assert not series(second, "asynq_queue_size") and value(second, "asynqpy_redis_latency_seconds") is None


class _UnreadableState(Inspector):
    """An Inspector whose snapshot fails as on data it cannot read (not a Redis error): Redis itself is real and up."""

    def queue_snapshot(self, max_age: float = 2.0) -> QueueSnapshot:
        raise ValueError("a stored value this version cannot read")


def test_a_scrape_that_fails_on_data_does_not_say_redis_is_down(redis_url: str) -> None:
    Client(redis_url).enqueue(Task("t"), queue="q")
    with _UnreadableState(redis_url) as insp:
        s = exposition(insp)
    assert value(s, "asynqpy_redis_up") == 1 and not series(s, "asynqpy_redis_degraded")
    assert value(s, "asynqpy_exporter_scrape_errors_total") == 1
    assert value(s, "asynqpy_redis_connection_errors_total") == 0


def test_scrapes_share_the_snapshot(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue(Task("t"), queue="q")
    with Inspector(redis_url) as a, Inspector(redis_url) as b:
        first = exposition(a, max_age=30)
        Client(redis_url).enqueue(Task("t"), queue="q")
        cached = exposition(b, max_age=30)  # another exporter within max_age: the same numbers
        fresh = exposition(b, max_age=0)
    assert value(first, "asynq_queue_size", queue="q") == value(cached, "asynq_queue_size", queue="q") == 1
    assert value(fresh, "asynq_queue_size", queue="q") == 2


def test_fast_exposition_equals_prometheus_clients(redis_url: str) -> None:
    from dataclasses import replace

    from exporter import exposition
    from exporter.collector import queue_families

    c = Client(redis_url)
    c.enqueue(Task("t"), queue="q")
    with Inspector(redis_url) as insp:
        snap = insp.queue_snapshot(max_age=0)
    odd = replace(snap.queues[0], queue='we"ird\\q\nx', latency=0.125, oldest_archived_age=float("inf"))
    snap = replace(snap, queues=(snap.queues[0], odd))

    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return queue_families(snap)

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Fixed())  # type: ignore[arg-type]
    ours = exposition.render(queue_families(snap)).decode()
    theirs = parse(generate_latest(reg).decode())
    mine = parse(ours)
    age = ("asynqpy_snapshot_age_seconds", ())
    assert mine.pop(age) == pytest.approx(theirs.pop(age), abs=1)  # read a moment apart
    assert mine == theirs and len(mine) > 40
    assert value(parse(ours), "asynq_queue_latency_seconds", queue='we"ird\\q\nx') == 0.125


def _commands(r: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()}


def test_a_shared_snapshot_scrape_costs_no_command_per_queue(redis_url: str, r: redis.Redis) -> None:
    client = Client(redis_url)
    for i in range(150):
        client.enqueue(Task("t"), queue=f"many{i}")
    with Inspector(redis_url) as taker, Inspector(redis_url) as scraper:
        taken = exposition(taker, max_age=60)  # takes and stores the snapshot
        exposition(scraper, max_age=60)  # the scraper's connection made, the snapshot decoded once
        r.config_resetstat()
        shared = exposition(scraper, max_age=60)
        calls = _commands(r)
    calls.pop("config|resetstat", None)
    calls.pop("info", None)
    # A PING (the latency) and the GET of the stored snapshot: the flow-control counters come with it.
    assert calls == {"ping": 1, "get": 1}, calls
    assert series(shared, "asynqpy_queue_enqueue_refused_total") == series(taken, "asynqpy_queue_enqueue_refused_total")
    assert len(series(shared, "asynqpy_queue_enqueue_refused_total")) == 150
