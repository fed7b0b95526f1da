"""A plain `asynqpy worker` logs one line per failed task, rate limited (asynqpy.failurelog)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.failurelog import FailureLog
from asynqpy.outcome import TaskOutcome
from tests.core.procs import Proc

APP = '''
from asynqpy import ServeMux, SkipRetry

mux = ServeMux()

@mux.handler("fail:")
def fail(task):
    if task.type == "fail:skip":
        raise SkipRetry("bad input, not worth retrying")
    raise ConnectionError("SMTP server busy")
'''


def test_a_worker_logs_each_failure_with_what_happens_next(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "tasks.py").write_text(APP)
    with Client(redis_url) as client:
        retried = client.enqueue(Task("fail:retry", b"{}"), queue="default", max_retry=3).id
        archived = client.enqueue(Task("fail:skip", b"{}"), queue="default").id
    with Proc.asynqpy("worker", "app.tasks:mux", "--redis-url", redis_url, cwd=tmp_path) as worker:
        worker.wait_for(f"task {retried} failed")
        out = worker.wait_for(f"task {archived} failed")
        code, _ = worker.stop(signal.SIGINT)
    assert code == 0
    assert (f"task {retried} failed: fail:retry in queue default: ConnectionError: SMTP server busy; retried later "
            "(asynqpy task ls default --state retry)") in out
    assert f"task {archived} failed: fail:skip in queue default: " in out
    assert f"bad input, not worth retrying; archived, no more retries (asynqpy task info default {archived})" in out


def test_past_the_limit_failures_are_counted_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    hook = FailureLog(per_minute=3, clock=lambda: now[0])

    def fail(i: int, outcome: str = "retry") -> None:
        hook(TaskOutcome("q", "t", f"id{i}", outcome, 0.0, 0.1, None, "boom"))  # type: ignore[arg-type]

    with caplog.at_level(logging.WARNING, logger="asynqpy.failures"):
        hook(TaskOutcome("q", "t", "ok", "success", 0.0, 0.1, None))
        for i in range(10):
            fail(i)
        assert [r.getMessage().split(":")[0] for r in caplog.records] == ["task id0 failed", "task id1 failed",
                                                                            "task id2 failed"]
        now[0] = 61.0
        fail(10, "archived")
    assert caplog.records[3].getMessage().startswith("7 more task failures in the last minute were not logged")
    assert caplog.records[4].getMessage() == "task id10 failed: t in queue q: boom; archived, no more retries " \
                                             "(asynqpy task info q id10)"
