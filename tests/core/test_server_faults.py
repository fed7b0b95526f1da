"""A worker outlives Redis error replies (real BUSY and OOM): no loop dies, health() says it is degraded and
clears by itself, and tasks enqueued afterwards are processed. Also the aggregator's thread and the result
write's error type."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.errors import RedisOutOfMemoryError
from asynqpy.metrics.http import MetricsHTTPServer, health_probes
from asynqpy.runtime import Runtime
from tests.helpers import running, wait_for
from tests.redisfaults import busy, out_of_memory


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode().strip()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode().strip()


def _fault(kind: str, url: str):  # type: ignore[no-untyped-def]
    return busy(url) if kind == "BUSY" else out_of_memory(url)


@pytest.mark.parametrize("kind", ["BUSY", "OOM"])
def test_the_worker_outlives_an_error_reply_and_says_it_is_degraded(kind: str, redis_url: str, r: redis.Redis,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    mux = ServeMux()
    done: list[str] = []
    mux.handle("job", lambda t: done.append(t.payload.decode()))
    c = Client(redis_url)
    with caplog.at_level("INFO", logger="asynqpy"), \
            running(redis_url, mux, heartbeat_interval=0.2, idle_poll_interval=0.1) as srv:
        http = MetricsHTTPServer("127.0.0.1", 0, lambda: (b"", "text/plain"), health_probes(srv.health)).start()
        c.enqueue(Task("job", b"before"))
        wait_for(lambda: done == ["before"], what="the task before the fault")
        seen: list[tuple[bool, bool, str]] = []
        with _fault(kind, redis_url):
            wait_for(lambda: seen.append(srv.health()) or seen[-1][2].startswith("degraded: "),
                     what="health to say degraded")
            # past three heartbeat intervals without Redis: not ready, saying why (several passes of each loop)
            readyz = wait_for(lambda: (lambda got: got[0] == 503 and got)(_get(http.port, "/readyz")),
                              what="/readyz to answer 503")
            time.sleep(0.5)
            seen.append(srv.health())
        assert all(live for live, _, _ in seen), seen  # no loop died
        assert seen[-1][2].startswith(f"degraded: Redis answers {kind} since "), seen[-1]
        assert readyz[0] == 503 and readyz[1].startswith(f"degraded: Redis answers {kind} since "), readyz
        assert _get(http.port, "/livez")[0] == 200
        wait_for(lambda: srv.health() == (True, True, "ok"), what="health to clear by itself")
        assert _get(http.port, "/readyz") == (200, "ok")
        http.stop()
        for i in range(5):
            c.enqueue(Task("job", f"after{i}".encode()))
        wait_for(lambda: len(done) == 6, what="the five tasks enqueued after the fault")
        key = f"asynqpy:health:{{{srv.runtime.host}:{srv.runtime.pid}:{srv.runtime.server_id}}}"
        # the note is rewritten once per heartbeat: the five tasks may all be done before the next one
        wait_for(lambda: r.hget(key, "status") == b"ok", what="the health note to say ok")
    c.close()
    warnings = [rec for rec in caplog.records if f"answers {kind} (" in rec.getMessage()]
    assert warnings and not any(rec.exc_info for rec in warnings)  # transient: no traceback
    per_loop: dict[str, int] = {}
    for rec in warnings:
        if rec.filename != "failures.py":  # the loops' TroubleLogs (the processor keeps logs of its own)
            continue
        name = rec.getMessage().split(":", 1)[0]
        per_loop[name] = per_loop.get(name, 0) + 1
    assert max(per_loop.values()) == 1, per_loop  # once per kind per loop, not once per pass
    assert not r.zcard("asynq:servers")  # shut down cleanly afterwards


def test_a_result_write_raises_our_error_not_redis_pys(redis_url: str, r: redis.Redis) -> None:
    rt = Runtime(ServerConfig(), redis_url)
    try:
        r.hset("asynq:{default}:t:t1", "msg", b"x")
        rt.write_result("default", "t1", b"42")
        assert r.hget("asynq:{default}:t:t1", "result") == b"42"
        rt.write_result("default", "gone", b"1")  # a task deleted meanwhile gets no stray hash
        assert not r.exists("asynq:{default}:t:gone")
        with out_of_memory(redis_url), pytest.raises(RedisOutOfMemoryError) as info:
            rt.write_result("default", "t1", b"43")
        assert not isinstance(info.value, redis.RedisError)
    finally:
        asyncio.run(rt.close())


def test_a_plain_group_aggregator_runs_in_a_thread_while_the_loop_serves(redis_url: str) -> None:
    """A slow plain aggregator must not stop the event loop: a task is handled while it runs."""
    started, released = threading.Event(), threading.Event()
    outcome: list[bool] = []

    def aggregate(group: str, tasks: list[Task]) -> Task:
        started.set()
        outcome.append(released.wait(5))  # released by the handler below, which needs the event loop
        return Task("batch", b"")

    mux = ServeMux()
    mux.handle("batch", lambda t: None)

    async def ping(task: object) -> None:
        released.set()

    mux.handle("ping", ping)
    c = Client(redis_url)
    with running(redis_url, mux, group_aggregator=aggregate, group_grace_period=1, group_max_size=2):
        c.enqueue(Task("item", b"1"), group="g")
        c.enqueue(Task("item", b"2"), group="g")
        assert started.wait(15)
        c.enqueue(Task("ping", b""))
        wait_for(lambda: outcome, what="the aggregator to return")
    c.close()
    assert outcome == [True]


@pytest.fixture(autouse=True)
def _no_leftover_faults(r: redis.Redis) -> Iterator[None]:
    yield
    assert r.config_get("maxmemory")["maxmemory"] == "0"
