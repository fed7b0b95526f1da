"""/metrics of `asynqpy exporter` and of the dashboard under real Redis error replies, through real HTTP: a scrape
always answers 200. OOM and READONLY (reads answered, writes refused): fresh queue series, asynqpy_redis_up 0 and
asynqpy_redis_degraded naming the kind. BUSY (nothing answered): the last snapshot, marked stale, with its age."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from asynqpy import Client, Task
from asynqpy.embedded import EmbeddedServer, free_port
from exporter.collector import QueueStateCollector
from inspector import Inspector
from tests.helpers import wait_for
from tests.metrics.scrape import Samples, get, parse, scrape, value
from tests.redisfaults import busy, fault_redis, fault_server, fault_url, frozen, out_of_memory, read_only_keeping_data
from tests.webui.authkit import users_path
from tests.webui.livekit import live_app

__all__ = ["fault_redis", "fault_server", "fault_url", "users_path"]  # fixtures

ASYNQPY = os.path.join(os.path.dirname(sys.executable), "asynqpy")
PROMETHEUS_SCRAPE_TIMEOUT = 10.0  # Prometheus's default scrape_timeout: a slower answer is the target down


@pytest.fixture
def exporter(fault_url: str) -> Iterator[str]:
    """`asynqpy exporter` on the fault server, each scrape asking for a new snapshot (--max-age 0)."""
    port = free_port()
    proc = subprocess.Popen([ASYNQPY, "exporter", "--bind", f"127.0.0.1:{port}", "--redis-url", fault_url,
                             "--max-age", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), what="the exporter to listen")
        yield base + "/metrics"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
        assert proc.returncode == 0 and "Traceback" not in out, out


@pytest.fixture
def dashboard(fault_url: str, users_path: Path) -> Iterator[str]:
    """The dashboard app (its /metrics blueprint) on the fault server, served over real HTTP."""
    with live_app(fault_url, users_path, METRICS_MAX_AGE=0) as base:
        yield base + "/metrics"


def _answers(base: str) -> bool:
    try:
        return get(base + "/livez", timeout=1)[0] == 200
    except OSError:
        return False


@pytest.fixture(params=["exporter", "dashboard"])
def metrics_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(request.param)
    return url


def _pending(s: Samples) -> float | None:
    return value(s, "asynq_tasks_enqueued_total", queue="mail", state="pending")


@pytest.mark.parametrize("fault", ["OOM", "READONLY"])
def test_writes_refused_scrapes_answer_with_fresh_series(metrics_url: str, fault_url: str, fault: str) -> None:
    with Client(fault_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    healthy = scrape(metrics_url)
    assert value(healthy, "asynqpy_redis_up") == 1 and _pending(healthy) == 1
    assert value(healthy, "asynqpy_snapshot_stale") == 0
    faulty: Callable[[str], contextlib.AbstractContextManager[None]] = (
        out_of_memory if fault == "OOM" else read_only_keeping_data)
    with faulty(fault_url):
        for _ in range(2):  # the second scrape too: nothing got stuck (a lock left behind, a dead thread)
            s = scrape(metrics_url)
            assert _pending(s) == 1 and value(s, "asynqpy_snapshot_stale") == 0
            assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_redis_degraded", kind=fault) == 1
    s = scrape(metrics_url)
    assert value(s, "asynqpy_redis_up") == 1 and value(s, "asynqpy_redis_degraded", kind=fault) is None


def test_busy_scrapes_answer_with_the_last_snapshot_marked_stale(metrics_url: str, fault_url: str) -> None:
    with Client(fault_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    assert _pending(scrape(metrics_url)) == 1
    with busy(fault_url):
        s = scrape(metrics_url)
        assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_redis_degraded", kind="BUSY") == 1
        assert _pending(s) == 1 and value(s, "asynqpy_snapshot_stale") == 1
        assert (value(s, "asynqpy_snapshot_age_seconds") or 0) >= 0
        assert value(s, "asynqpy_exporter_scrape_errors_total") == 1
    s = scrape(metrics_url)
    assert value(s, "asynqpy_redis_up") == 1 and value(s, "asynqpy_snapshot_stale") == 0


def test_a_fresh_exporter_under_busy_says_redis_is_down(exporter: str, fault_url: str) -> None:
    with busy(fault_url):
        s = scrape(exporter)
        assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_redis_degraded", kind="BUSY") == 1
        assert _pending(s) is None and value(s, "asynqpy_snapshot_stale") is None  # nothing to show yet


def test_frozen_redis_scrapes_answer_within_prometheus_scrape_timeout(exporter: str, fault_url: str,
                                                                       fault_server: EmbeddedServer) -> None:
    """Redis frozen (a hung host): a scrape answers 200 before Prometheus's default scrape_timeout (10 s), with
    Redis down and the last snapshot marked stale; it took the client's 10 s timeout, so Prometheus marked the
    exporter down and asynqpy_redis_up vanished instead of reading 0 (AsynqpyRedisDown never fired)."""
    with Client(fault_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    assert _pending(scrape(exporter)) == 1
    with frozen(fault_server):
        status, _, body = get(exporter, timeout=PROMETHEUS_SCRAPE_TIMEOUT)
        assert status == 200
        s = parse(body)
        assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_redis_degraded", kind="timeout") == 1
        assert _pending(s) == 1 and value(s, "asynqpy_snapshot_stale") == 1
    assert value(scrape(exporter), "asynqpy_redis_up") == 1


def test_scrapes_do_not_queue_behind_a_read_redis_does_not_answer(fault_url: str,
                                                                  fault_server: EmbeddedServer) -> None:
    """While one scrape waits on a frozen Redis, another answers without waiting for it (the last snapshot,
    stale, Redis down): scrapes queued on the collector's lock, each taking a Redis timeout in turn, so
    Prometheus's scrapes piled up (hundreds of open connections) and every one of them timed out."""
    with Client(fault_url) as c:
        c.enqueue(Task("t", b""), queue="mail")
    insp = Inspector(fault_url, timeout=60)  # the first scrape stays blocked for the whole test
    col = QueueStateCollector(insp, max_age=0)
    col.wait = 0.2  # seconds the second scrape waits for the first
    try:
        assert _pending(parse(col.render().decode())) == 1
        with frozen(fault_server):
            first = threading.Thread(target=col.render, daemon=True)
            first.start()
            wait_for(col._lock.locked, what="the first scrape to read Redis")
            got: list[Samples] = []
            second = threading.Thread(target=lambda: got.append(parse(col.render().decode())), daemon=True)
            second.start()
            second.join(30)
            assert got and first.is_alive()  # answered while the first still waits on Redis
            s = got[0]
            assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_redis_degraded", kind="timeout") == 1
            assert _pending(s) == 1 and value(s, "asynqpy_snapshot_stale") == 1
        first.join(70)
    finally:
        insp.close()
