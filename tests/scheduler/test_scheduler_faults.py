"""The scheduler outlives Redis error replies (real BUSY, OOM, READONLY): it says it is degraded, logs the
trouble once, and enqueues the ticks that came due once Redis answers again; and it stops promptly when Redis
is frozen."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from asynqpy import Task
from asynqpy.connection import SOCKET_TIMEOUT
from asynqpy.embedded import EmbeddedServer, free_port
from asynqpy.scheduler import Scheduler
from asynqpy.scheduler.core import RETRY_AFTER
from tests.redisfaults import busy, frozen, out_of_memory, read_only

from .clocks import wait_for
from .test_scheduler import Running


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    """Two servers of this module's own: the scheduler's, and a primary it is made a replica of (READONLY)."""
    a = EmbeddedServer(data_dir=Path(tmp_path_factory.mktemp("sched-a"))).start()
    b = EmbeddedServer(data_dir=Path(tmp_path_factory.mktemp("sched-b"))).start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def _fault(kind: str, url: str, primary: str) -> contextlib.AbstractContextManager[None]:
    if kind == "BUSY":
        return busy(url)
    if kind == "OOM":
        return out_of_memory(url)
    return read_only(url, primary)


@pytest.mark.parametrize("kind", ["BUSY", "OOM", "READONLY"])
def test_the_scheduler_outlives_an_error_reply(kind: str, servers: tuple[EmbeddedServer, EmbeddedServer],
                                               caplog: pytest.LogCaptureFixture) -> None:
    a, b = servers
    r = redis.Redis.from_url(a.url)
    r.flushall()
    run = Running(a.url)
    run.s.register("@every 1s", Task("tick", b""), queue="cron")
    try:
        with caplog.at_level("INFO", logger="asynqpy.scheduler"):
            run.start()
            wait_for(lambda: r.zcard("asynq:schedulers"), "start")
            kinds: set[str] = set()
            with _fault(kind, a.url, b.url):
                run.base.value += 2  # two ticks come due while Redis refuses
                wait_for(lambda: run.s.degraded is not None and kinds.add(run.s.degraded.kind) is None
                         and kind in kinds, f"the scheduler to say {kind}")
                assert run.s.degraded is not None
                assert run.s.degraded.describe().startswith(f"degraded: Redis answers {kind} since ")
                wait_for(lambda: run.s.failures >= 3, "several failed attempts")
            assert run.thread.is_alive()
            wait_for(lambda: r.llen("asynq:{cron}:pending") == 2, "the two ticks, once Redis answers")
            wait_for(lambda: run.s.degraded is None, "the trouble to clear")
            run.base.value += 1
            wait_for(lambda: r.llen("asynq:{cron}:pending") == 3, "the next tick")
    finally:
        run.stop()
        r.close()
    assert not run.thread.is_alive()
    logged = [rec for rec in caplog.records if f"answers {kind} (" in rec.getMessage()]
    assert 1 <= len(logged) <= 2 and not any(rec.exc_info for rec in logged)  # once per kind, not per try


def test_a_bug_reply_is_logged_with_its_trace_once_and_the_scheduler_goes_on(
        servers: tuple[EmbeddedServer, EmbeddedServer], caplog: pytest.LogCaptureFixture) -> None:
    """WRONGTYPE (a key of ours holding the wrong type) is no transient trouble: logged with its trace, rarely,
    and not 'degraded'; the scheduler keeps trying and enqueues once the data is right again."""
    a, _ = servers
    r = redis.Redis.from_url(a.url)
    r.flushall()
    run = Running(a.url)
    entry = run.s.register("@every 1s", Task("tick", b""), queue="cron")
    try:
        with caplog.at_level("INFO", logger="asynqpy.scheduler"):
            run.start()
            wait_for(lambda: r.zcard("asynq:schedulers"), "start")
            r.lpush(f"asynqpy:{{cron}}:lasttick:{entry}", "not a tick")
            run.base.value += 1
            wait_for(lambda: run.s.failures >= 5, "several failed attempts")
            assert run.thread.is_alive() and run.s.degraded is None
            r.delete(f"asynqpy:{{cron}}:lasttick:{entry}")
            wait_for(lambda: r.llen("asynq:{cron}:pending") == 1, "the tick, once the key is right")
    finally:
        run.stop()
        r.close()
    bugs = [rec for rec in caplog.records if "unexpected error" in rec.getMessage()]
    assert len(bugs) == 1 and bugs[0].exc_info is not None


def test_a_stop_while_redis_is_frozen_does_not_wait_out_the_socket_timeout(
        servers: tuple[EmbeddedServer, EmbeddedServer], caplog: pytest.LogCaptureFixture) -> None:
    """SIGSTOPped Redis (a hung host): the claim under way and the entries' removal would each wait for the
    socket timeout (10 s); the stop gives them STOP_GRACE each, and the entries expire with their TTL."""
    a, _ = servers
    r = redis.Redis.from_url(a.url)
    r.flushall()
    s = Scheduler(a.url, heartbeat_interval=1)  # Redis's clock, as users run it
    s.register("@every 1s", Task("tick", b""), queue="cron")
    thread = threading.Thread(target=lambda: asyncio.run(s.arun()))
    thread.start()
    try:
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= 1, "a tick")
        with caplog.at_level("INFO", logger="asynqpy.scheduler"), frozen(a):
            time.sleep(1.5)  # the next tick's claim (or a heartbeat) is sent and waits for an answer
            s.stop()
            thread.join(SOCKET_TIMEOUT)  # without the bound: the rest of one socket timeout, then another
            stopped_while_frozen = not thread.is_alive()
    finally:
        s.stop()
        thread.join(30)
        r.close()
    assert stopped_while_frozen
    assert "entries not removed at stop" in caplog.text


def test_a_tick_that_meets_redis_down_is_tried_again_after_a_pause_not_in_a_busy_loop(tmp_path: Path) -> None:
    """Connection refused fails at once: the due tick is tried again every RETRY_AFTER (1 s), and enqueued when
    Redis is back; it is not tried thousands of times a second (a past tick used to wake the loop at once)."""
    port = free_port()
    server = EmbeddedServer(port=port, data_dir=tmp_path).start()
    s = Scheduler(server.url)  # the real clock: the pause between tries is real
    s.register("@every 1s", Task("tick", b""), queue="cron")
    thread = threading.Thread(target=lambda: asyncio.run(s.arun()))
    thread.start()
    r = redis.Redis.from_url(server.url)
    try:
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= 1, "a tick")
        server.stop()
        wait_for(lambda: s.failures >= 1, "a tick that meets Redis down")
        before = s.failures
        time.sleep(3)
        assert s.failures - before <= 3 / RETRY_AFTER + 3  # about one try a second; without the pause, thousands
        server = EmbeddedServer(port=port, data_dir=tmp_path).start()
        count = r.llen("asynq:{cron}:pending")
        wait_for(lambda: r.llen("asynq:{cron}:pending") > count, "ticks once Redis is back")
    finally:
        s.stop()
        thread.join(10)
        r.close()
        server.stop()
    assert not thread.is_alive()
