"""A Redis that answers nothing (SIGSTOPped: its connections stay open, no reply ever comes) is met within the
socket timeout: an async call raises our error then, and a worker stopped meanwhile keeps its shutdown_timeout,
cancelling its handlers at it, and exits within shutdown_timeout plus one socket timeout, leaving what it could not
requeue to the leases (another worker's recoverer), never finishing those tasks itself."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from asynqpy import AsyncClient, Client, ServeMux, Task
from asynqpy.connection import SOCKET_TIMEOUT
from asynqpy.embedded import EmbeddedServer
from asynqpy.errors import RedisUnavailableError
from asynqpy.rdb import keys
from tests.core.apps import EVENTS
from tests.helpers import running, wait_for
from tests.redisfaults import fault_server, fault_url, frozen

__all__ = ["fault_server", "fault_url"]  # the fixtures, imported for this module

ROOT = Path(__file__).resolve().parents[2]
SHUTDOWN_TIMEOUT = 2.0


def _events(path: Path) -> list[tuple[str, str, float]]:
    if not path.exists():
        return []
    return [(e, tid, float(t)) for e, tid, t in (line.split() for line in path.read_text().splitlines())]


def test_an_async_call_to_a_redis_that_answers_nothing_raises_within_the_socket_timeout(
        fault_server: EmbeddedServer, fault_url: str) -> None:
    async def enqueue() -> float:
        client = AsyncClient(fault_url + "?socket_timeout=1")
        await client.enqueue(Task("before", b""))  # connected, and the connection kept for the next call
        with frozen(fault_server):
            began = time.monotonic()
            with pytest.raises(RedisUnavailableError) as info:
                await asyncio.wait_for(client.enqueue(Task("during", b"")), 5)  # (a hang fails, not blocks)
            took = time.monotonic() - began
        assert info.value.kind == "timeout", info.value
        await client.close()
        return took

    assert asyncio.run(enqueue()) < 2.5


@pytest.mark.parametrize("socket_timeout", [None, 1.0], ids=["default socket timeout", "socket_timeout=1 in the URL"])
def test_a_worker_stopped_while_redis_answers_nothing_cancels_its_handlers_at_shutdown_timeout_and_exits(
        fault_server: EmbeddedServer, fault_url: str, tmp_path: Path, socket_timeout: float | None) -> None:
    # The bound is the socket timeout the worker's connections use: SOCKET_TIMEOUT, or the URL's socket_timeout=.
    url = fault_url if socket_timeout is None else f"{fault_url}?socket_timeout={socket_timeout:g}"
    timeout = SOCKET_TIMEOUT if socket_timeout is None else socket_timeout
    events = tmp_path / "events"
    ids = [Client(fault_url).enqueue(Task("sleepy", b"60"), retention=3600).id for _ in range(2)]
    settings = {"shutdown_timeout": SHUTDOWN_TIMEOUT, "heartbeat_interval": 1, "queues": {"default": 1}}
    p = subprocess.Popen([sys.executable, "-m", "tests.core.apps", url, "sleepy", json.dumps(settings)],
                         cwd=ROOT, env={**os.environ, EVENTS: str(events)})
    try:
        wait_for(lambda: len(_events(events)) == 2, timeout=20, what="both handlers to start")
        with frozen(fault_server):
            time.sleep(0.5)  # the loops' calls now wait for replies that do not come
            sent = time.time()
            p.send_signal(signal.SIGTERM)
            bound = SHUTDOWN_TIMEOUT + timeout + 3  # (3 s for a slow machine)
            try:
                p.wait(bound)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the worker was still running {bound:.0f} s after SIGTERM while Redis answered nothing")
            took = time.time() - sent
        cancelled = [t for e, _, t in _events(events) if e == "cancelled"]
        assert len(cancelled) == 2, _events(events)  # not run to their end
        assert all(SHUTDOWN_TIMEOUT - 0.2 < t - sent < SHUTDOWN_TIMEOUT + 1.5 for t in cancelled), (sent, cancelled)
        assert took < SHUTDOWN_TIMEOUT + timeout + 2, took
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    # Redis answers again: each task was requeued (if the requeue reached it after all) or is still active with its
    # lease, which another worker's recoverer honours once it lapses; the stopped worker finished neither.
    r = redis.Redis.from_url(fault_url)
    for tid in ids:
        state = r.hget(keys.task("default", tid), "state")
        assert state in (b"pending", b"active"), (tid, state)
    assert not any(e == "done" for e, _, _ in _events(events))
    r.close()


def test_answers_again_is_said_once_redis_answers_with_how_long_it_did_not(
        fault_server: EmbeddedServer, fault_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # A success acknowledged while Redis answers nothing: the acker's write and the syncer's replays time out (after
    # 1 s here). Neither says "answers again" after each failure (it said so, "for 0 s"); once Redis answers, each
    # loop that met the trouble says so once, with its length.
    freeze = threading.Event()
    mux = ServeMux()

    @mux.handler("quick")
    async def quick(task) -> None:  # type: ignore[no-untyped-def]
        while not freeze.is_set():
            await asyncio.sleep(0.02)

    tid = Client(fault_url).enqueue(Task("quick", b""), retention=3600).id
    r = redis.Redis.from_url(fault_url)
    with caplog.at_level("INFO", logger="asynqpy"), \
            running(fault_url + "?socket_timeout=1", mux, heartbeat_interval=0.5, syncer_interval=0.5) as srv:
        wait_for(lambda: r.hget(keys.task("default", tid), "state") == b"active", what="the task to start")
        with frozen(fault_server):
            freeze.set()
            time.sleep(4)
            thawed = time.time()
        wait_for(lambda: r.hget(keys.task("default", tid), "state") == b"completed", what="the held acknowledgement")
        # the acker, whose write the syncer replayed, asks Redis itself: the trouble ends without another task
        wait_for(lambda: srv.health() == (True, True, "ok"), what="health to clear by itself")
    r.close()
    msgs = [(rec.created, rec.getMessage()) for rec in caplog.records]
    assert any(m.startswith("acker: mark_complete held for the syncer: Redis times out") for _, m in msgs), msgs
    again = [(t, m) for t, m in msgs if "answers again" in m]
    assert any(m.startswith("acker: Redis answers again") for _, m in again), msgs
    for t, m in again:
        assert t >= thawed, (m, t - thawed)  # said only once Redis answered a call
        secs = float(m.rsplit(" for ", 1)[1].split(" s)")[0])
        assert secs >= 2.5, m  # how long it did not (the loops met it from about the freeze on)
