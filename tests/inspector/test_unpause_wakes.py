"""Resuming a queue wakes its idle asynqpy workers: its pending tasks start then, not at the workers' next poll.
A wake-up Redis refuses does not undo or hide the resume."""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from inspector import Inspector
from tests.helpers import running, wait_for
from tests.redisfaults import fault_redis, fault_server, fault_url  # noqa: F401 (fixtures)

Q = "resumed"


def test_an_idle_worker_starts_the_pending_tasks_when_the_queue_is_resumed(redis_url: str, r: redis.Redis) -> None:
    ran = threading.Event()
    mux = ServeMux()
    mux.handle("t", lambda task: ran.set())
    insp = Inspector(connection=r)
    insp.pause(Q)
    # a poll 60 s apart: only the wake-up can start the task within the wait below
    with running(redis_url, mux, queues={Q: 1}, idle_poll_interval=60.0) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters(Q), sid), what="the idle worker's registration")
        wait_for(lambda: r.pubsub_numsub(keys.WAKE_CHANNEL)[0][1] >= 1, what="the worker listening for wake-ups")
        Client(redis_url).enqueue(Task("t"), queue=Q)
        assert not ran.wait(0.3) and r.llen(keys.pending(Q)) == 1  # paused: neither handed over nor fetched
        insp.unpause(Q)
        assert ran.wait(10), "the resumed queue's task did not start before the worker's next poll"


def test_a_refused_wake_up_still_resumes_the_queue(fault_url: str, fault_redis: redis.Redis,  # noqa: F811
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="asynqpy")
    fault_redis.acl_setuser("operator", enabled=True, passwords=["+pw"], keys=["~*"], channels=["*"],
                            commands=["+@all", "-publish"])
    u = urlsplit(fault_url)
    insp = Inspector(urlunsplit(u._replace(netloc=f"operator:pw@{u.hostname}:{u.port}")))
    Client(fault_url).enqueue(Task("t"), queue=Q)
    insp.pause(Q)
    insp.unpause(Q)
    assert not fault_redis.exists(keys.paused(Q)) and not insp.queue_info(Q).paused
    assert "were not woken" in caplog.text and "pw@" not in caplog.text
