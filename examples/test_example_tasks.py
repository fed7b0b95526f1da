"""Tests of example_tasks with asynqpy's pytest plugin (pip install 'asynqpy[testing]'): no Redis to set up,
no sleeping through backoffs."""

import pytest

from asynqpy import Task
from asynqpy.testing import run_task
from example_tasks import charge, gateway, mux


@pytest.fixture(autouse=True)
def healthy_gateway():
    gateway.down_for = 0
    gateway.charged.clear()


def test_a_charge_is_retried_after_the_gateway_fails_once(asynqpy_client, asynqpy_worker):
    worker = asynqpy_worker(mux)  # a real Server on the test's empty database, stopped after the test
    gateway.down_for = 1
    info = charge.enqueue(asynqpy_client, "acme", cents=1200)
    run = worker.drain(advance_time=True)[info.id]  # the retry's backoff is skipped, not waited for
    assert run.outcomes == ["retry", "success"]
    assert run.attempts[0].error == "ConnectionError: gateway unreachable"
    assert gateway.charged == [("acme", 1200)]


def test_a_payload_that_does_not_fit_is_archived_naming_the_argument(asynqpy_client, asynqpy_worker):
    worker = asynqpy_worker(mux)
    info = asynqpy_client.enqueue(Task("invoice:charge", b'{"customer": "acme"}'))  # say, from an old producer
    run = worker.drain()[info.id]
    assert run.outcome == "archived"
    assert "cents" in run.error


def test_a_charge_scheduled_for_later_runs_once_the_clock_moves(asynqpy_client, asynqpy_worker):
    worker = asynqpy_worker(mux)
    charge.options(process_in=3600).enqueue(asynqpy_client, "acme", cents=5)
    assert len(worker.drain()) == 0  # not due yet
    worker.advance(3600)  # due times move an hour closer; nobody waits
    assert worker.drain().one("invoice:charge").outcome == "success"


def test_render_writes_its_result():  # run_task: one handler, in-process, no server, no Redis
    result = run_task(mux, Task("report:render", b"[1, 2, 3]"))
    assert result.outcome == "success"
    assert result.result == b"3 rows"


def test_nothing_to_charge_is_not_retried():
    result = run_task(charge, charge.to_task("acme", cents=0))
    assert result.outcome == "archived"


def test_the_last_attempt_is_archived():
    gateway.down_for = 1
    result = run_task(mux, charge.to_task("acme", cents=1), retry_count=5, max_retry=5)
    assert result.outcome == "archived"
    assert "unreachable" in result.error
