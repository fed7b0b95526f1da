"""Small test helpers: poll for a condition, run a Server for the length of a with-block, read a stored task's
message."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis

from asynqpy import ServeMux, Server
from asynqpy.rdb import keys
from asynqpy.wire import TaskMessage


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01, what: str = "condition") -> Any:
    """Poll cond until it returns a truthy value; fail the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def running(redis_url: str, mux: ServeMux, **settings: Any) -> Iterator[Server]:
    """A Server started in a thread for the block, shut down gracefully after it."""
    settings.setdefault("heartbeat_interval", 0.5)
    srv = Server(redis_url, **settings)
    srv.start(mux)
    try:
        yield srv
    finally:
        srv.shutdown()


def msg_of(r: redis.Redis, q: str, tid: str) -> TaskMessage:
    """The message stored in task tid's hash of queue q."""
    m = TaskMessage()
    m.ParseFromString(r.hget(keys.task(q, tid), "msg"))  # type: ignore[arg-type]
    return m
