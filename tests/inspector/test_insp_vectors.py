"""The Inspector over Redis state written by Go asynq (golden vectors of v0.26.0 and v0.25.1): the same
numbers and fields as the Go Inspector reported for that state."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from inspector import Inspector
from tests.inspector.gocompare import (
    at_queue_time,
    compare_queue,
    compare_scheduler_entries,
    compare_servers,
    first_time,
)
from tests.inspector.vectors import VERSIONS, inspect_report, load_state, vectors_dir
from tests.inspector.worker import Clock

VECTORS = vectors_dir()
GoState = tuple[Inspector, Clock, dict[str, Any]]


@pytest.fixture(params=VERSIONS)
def go_state(request: pytest.FixtureRequest, r: redis.Redis, redis_url: str) -> Iterator[GoState]:
    load_state(r, VECTORS / f"asynq-{request.param}-state.json")
    report = inspect_report(VECTORS / f"asynq-{request.param}-state.inspect.json")
    clock = Clock(first_time(report))
    with Inspector(redis_url, clock=clock) as insp:
        yield insp, clock, report


def test_queues_and_everything_in_them(go_state: GoState) -> None:
    insp, clock, report = go_state
    assert insp.queues() == sorted(report["queues"])
    for q in report["per_queue"]:
        compare_queue(insp, clock, report, q)


def test_servers_match(go_state: GoState) -> None:
    insp, _, report = go_state
    compare_servers(insp, report)


def test_scheduler_entries_match(go_state: GoState) -> None:
    insp, _, report = go_state
    compare_scheduler_entries(insp, report)


def test_explain_over_go_state(go_state: GoState) -> None:
    insp, clock, report = go_state
    at_queue_time(clock, report, "lq")
    codes = [f.code for f in insp.explain("lq", "t-active").findings]
    assert codes[0] == "state" and "consumer" in codes and "leased" in codes and "running" in codes
    assert [f.code for f in insp.explain("wq", "t-fail").findings][-2:] == ["last_error", "due"]
    assert insp.queue_warnings("vq")[0].code == "no_consumer"


def test_actions_over_go_state(go_state: GoState, r: redis.Redis) -> None:
    insp, _, report = go_state
    pending = len(report["per_queue"]["vq"]["pending"])
    insp.run_task("wq", "t-fail")
    assert insp.get_task("wq", "t-fail").state.value == "pending"
    insp.delete_task("vq", "t-uniq")
    assert r.keys("asynq:{vq}:unique:v:uniq:*") == []
    assert insp.run_all("wq", "archived") == 2
    assert insp.archive_all("vq", "pending") == pending - 1
    rec = insp.update_payload("vq", "t-sched", b"changed")
    assert rec.info.payload == b"changed" and rec.info.type == "v:sched"
