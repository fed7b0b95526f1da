"""An async handler that calls blocking code stops the worker's event loop: no task starts, no lease is renewed.
The worker says so, with the blocking line, and reports not ready until the loop turns again."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from tests.helpers import running, wait_for


def test_a_blocked_event_loop_is_logged_with_its_line_and_makes_the_worker_not_ready(
        redis_url: str, r: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    mux = ServeMux()
    started, release = threading.Event(), threading.Event()

    @mux.handler("blocks")
    async def blocks(t):  # type: ignore[no-untyped-def]
        started.set()
        while not release.is_set():
            time.sleep(0.05)  # blocking code in an async handler: the mistake being caught

    caplog.set_level(logging.WARNING, logger="asynqpy")
    with running(redis_url, mux, queues={"blocking": 1}) as srv:
        try:
            wait_for(lambda: srv.health()[1], what="ready")
            with Client(redis_url) as c:
                c.enqueue(Task("blocks", b""), queue="blocking")
            wait_for(started.is_set, what="the handler")
            live, _, why = wait_for(lambda: h if not (h := srv.health())[1] else None, timeout=10,
                                        what="not ready while blocked")
            assert live and "event loop blocked" in why and "test_loop_watch.py" in why and "blocks()" in why
        finally:
            release.set()
        wait_for(lambda: srv.health()[1], what="ready again")
    text = caplog.text
    assert "has not turned for" in text and "test_loop_watch.py" in text and "turns again after" in text
