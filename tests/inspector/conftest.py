"""Fixtures for the Inspector tests: a fake clock, an Inspector on it, our Client, and a stand-in worker."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from asynqpy import Client, Task
from inspector import Inspector
from tests.inspector.worker import Clock, Worker


@pytest.fixture
def clock() -> Clock:
    return Clock(time.time())


@pytest.fixture
def insp(redis_url: str, clock: Clock) -> Iterator[Inspector]:
    with Inspector(redis_url, clock=clock) as i:
        yield i


@pytest.fixture
def client(redis_url: str) -> Iterator[Client]:
    with Client(redis_url) as c:
        yield c


@pytest.fixture
def worker(r: redis.Redis, clock: Clock) -> Worker:
    return Worker(r, clock)


@pytest.fixture
def one_of_each(client: Client, worker: Worker) -> dict[str, str]:
    """Queue "q" with one task in every state (and one more pending), made by our client and worker scripts."""
    ids = {}
    for name in ("active", "retry", "archived", "completed", "done"):
        client.enqueue(Task(f"t:{name}", name.encode()), queue="q", task_id=name)
    client.enqueue(Task("t:pending", b'{"n": 1}'), queue="q", task_id="pending")
    client.enqueue(Task("t:pending", b"second"), queue="q", task_id="pending2")
    client.enqueue(Task("t:scheduled", b"later"), queue="q", task_id="scheduled", process_in=600)
    client.enqueue(Task("t:agg", b"g"), queue="q", task_id="aggregating", group="grp")
    taken = worker.take("q", 5)
    assert taken == ["active", "retry", "archived", "completed", "done"]
    worker.fail("q", "retry", "boom: try again")
    worker.kill("q", "archived", "fatal: gave up")
    worker.complete("q", "completed")
    worker.done("q", "done")
    for s in ("active", "pending", "scheduled", "retry", "archived", "completed", "aggregating"):
        ids[s] = s
    return ids
