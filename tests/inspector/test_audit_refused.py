"""Refused requests are counted per window in bounded aggregates, apart from the audit chain."""

from __future__ import annotations

import pytest
import redis

from inspector.audit import STREAM
from inspector.auditrefused import RefusedLog


@pytest.mark.cluster_too
def test_one_aggregate_per_kind_per_window(r: redis.Redis) -> None:
    now = [1_767_225_600.0]
    log = RefusedLog(r, window=300, clock=lambda: now[0])
    for i in range(50):
        now[0] += 1
        log.count("login.failed", outcome="failed", user="victim", addr="10.0.0.9", detail="wrong username or password")
        log.count("tasks.delete", outcome="denied", user="vera", addr="10.0.0.2", queue="billing",
                  task_ids=[f"t{i}", f"t{i + 1}"], detail="this needs the operator role; vera is viewer")
    now[0] += 300  # the next window
    log.count("login.failed", outcome="failed", user="victim", addr="10.0.0.9", detail="wrong username or password")
    got = log.list()
    assert [(c.action, c.count) for c in got] == [("login.failed", 1), ("tasks.delete", 50), ("login.failed", 50)]
    delete = got[1]
    assert (delete.user, delete.addr, delete.queue, delete.outcome) == ("vera", "10.0.0.2", "billing", "denied")
    assert delete.task_ids[:3] == ("t0", "t1", "t2") and len(delete.task_ids) == 20  # bounded, first ones kept
    assert delete.first == 1_767_225_601.0 and delete.last == 1_767_225_650.0
    assert not r.exists(STREAM)  # nothing of it in the chain
    assert [c.action for c in log.list(since=1_767_225_900)] == ["login.failed"]


def test_a_window_holds_a_bounded_number_of_aggregates(r: redis.Redis) -> None:
    log = RefusedLog(r, max_aggregates=10, clock=lambda: 1_767_225_600.0)
    for i in range(200):
        log.count("login.failed", outcome="failed", user=f"guess-{i}", addr="10.0.0.9")
    got = log.list(limit=1000)
    assert len(got) == 11 and sum(c.count for c in got) == 200
    other = next(c for c in got if c.action == "(others)")
    assert other.count == 190 and "more than 10 kinds" in other.detail
    key = r.zrange("asynqpy:{audit}:refused", 0, -1)[0]
    assert 0 < r.ttl(key) <= 30 * 86400
