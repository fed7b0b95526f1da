"""Worker metrics on the outcome hook: histogram counts equal the tasks processed by outcome, bounded labels,
in-progress, health; and `asynqpy worker --metrics-port` with one process and with --processes 2."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from asynqpy import Client, ServeMux, Server, Task
from asynqpy.embedded import free_port
from asynqpy.metrics.worker import DEFAULT_MAX_TASK_TYPES, WorkerMetrics
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb import keys
from tests.helpers import running, wait_for
from tests.metrics.apps import mux
from tests.metrics.scrape import Samples, get, parse, scrape, series, value

ASYNQPY = os.path.join(os.path.dirname(sys.executable), "asynqpy")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def samples(reg: CollectorRegistry) -> Samples:
    return parse(generate_latest(reg).decode())


def counts_by_outcome(s: Samples) -> dict[str, float]:
    out: dict[str, float] = {}
    for lbl, v in series(s, "asynqpy_task_duration_seconds_count").items():
        o = dict(lbl)["outcome"]
        out[o] = out.get(o, 0) + v
    return out


def test_histogram_counts_equal_tasks_by_outcome(redis_url: str, r: redis.Redis) -> None:
    reg = CollectorRegistry()
    m = WorkerMetrics(reg)
    c = Client(redis_url)
    plan = {"ok": 7, "fail": 3, "skip": 2, "revoke": 1}
    for name, n in plan.items():
        for _ in range(n):
            c.enqueue(Task(name, b""), max_retry=1)
    with running(redis_url, mux, outcome_hooks=(m.observe,), retry_delay=lambda n, e, t: 3600):
        wait_for(lambda: r.get(keys.processed_total("default")) == b"13", what="13 processed")
    s = samples(reg)
    assert counts_by_outcome(s) == {"success": 7, "retry": 3, "archived": 2, "revoked": 1}
    assert value(s, "asynqpy_task_duration_seconds_count", queue="default", task_type="ok", outcome="success") == 7
    assert value(s, "asynqpy_task_wait_seconds_count", queue="default") == 13
    assert value(s, "asynqpy_task_failures_total", queue="default", task_type="fail") == 3
    assert value(s, "asynqpy_task_failures_total", queue="default", task_type="skip") == 2
    assert value(s, "asynqpy_task_failures_total", queue="default", task_type="revoke") is None
    # durations of 10 ms land at or under the 25 ms bucket edge; the +Inf bucket holds all
    ok = {"queue": "default", "task_type": "ok", "outcome": "success"}
    assert value(s, "asynqpy_task_duration_seconds_bucket", le="+Inf", **ok) == 7
    assert (value(s, "asynqpy_task_duration_seconds_bucket", le="0.005", **ok) or 0) == 0
    for lbl in series(s, "asynqpy_task_duration_seconds_count"):  # never a task id or error text in a label
        assert set(dict(lbl)) == {"queue", "task_type", "outcome"}


def test_label_cardinality_stays_bounded_over_a_thousand_types(redis_url: str, r: redis.Redis) -> None:
    reg = CollectorRegistry()
    m = WorkerMetrics(reg, max_task_types=20)
    c = Client(redis_url)
    for i in range(1000):
        c.enqueue(Task(f"type:{i}", b""))
    with running(redis_url, mux, outcome_hooks=(m.observe,), concurrency=50):
        wait_for(lambda: r.get(keys.processed_total("default")) == b"1000", timeout=60, what="1000 processed")
    s = samples(reg)
    types = {dict(lbl)["task_type"] for lbl in series(s, "asynqpy_task_duration_seconds_count")}
    assert len(types) == 21 and "other" in types
    assert sum(series(s, "asynqpy_task_duration_seconds_count").values()) == 1000
    assert len(series(s, "asynqpy_task_duration_seconds_bucket")) == 21 * 19  # 18 bounds and +Inf
    assert DEFAULT_MAX_TASK_TYPES == 100


def test_the_label_table_stays_bounded_over_5000_distinct_types() -> None:
    # The labelled children were kept per task type, so a worker fed ids in its types grew without end.
    m = WorkerMetrics(CollectorRegistry(), max_task_types=20)
    for i in range(5000):
        m.observe(TaskOutcome("default", f"type:{i}", f"id{i}", "success" if i % 2 else "retry", 0.0, 0.01, 0.0))
    assert len(m._children) <= 21 * 2  # (20 types and "other") x (the two outcomes seen)
    assert m.task_type("type:4999") == "other"


def test_in_progress_and_health_follow_the_server(redis_url: str) -> None:
    reg = CollectorRegistry()
    m = WorkerMetrics(reg)
    slow = ServeMux()
    release = threading.Event()

    @slow.handler("slow")
    async def hold(t):  # type: ignore[no-untyped-def]
        while not release.is_set():
            await asyncio.sleep(0.01)

    for _ in range(3):
        Client(redis_url).enqueue(Task("slow"), queue="q")
    srv = Server(redis_url, queues={"q": 1}, outcome_hooks=(m.observe,), shutdown_timeout=3,
                 heartbeat_interval=0.5)
    assert srv.health() == (True, False, "starting")
    srv.start(slow)
    m.watch(srv, interval=0.05)
    wait_for(lambda: value(samples(reg), "asynqpy_tasks_in_progress", queue="q") == 3, what="3 in progress")
    assert srv.health()[:2] == (True, True)
    assert value(samples(reg), "asynqpy_worker_ready") == 1 and value(samples(reg), "asynqpy_worker_live") == 1
    # The same machine's clock as the test server's: the offset is the round trip's error, a few ms at most.
    assert abs(value(samples(reg), "asynqpy_worker_clock_offset_seconds")) < 0.5
    stopper = threading.Thread(target=srv.shutdown)
    stopper.start()
    wait_for(lambda: not srv.health()[1], what="not ready while shutting down")
    assert "stopped" in srv.health()[2] or "closed" in srv.health()[2]
    wait_for(lambda: value(samples(reg), "asynqpy_worker_ready") == 0, what="the ready gauge at 0")
    release.set()
    stopper.join(10)
    m.stop()
    assert value(samples(reg), "asynqpy_tasks_in_progress", queue="q") in (0, 3)


def test_a_process_not_yet_sampled_is_live_and_not_ready() -> None:
    """Until its first sample a worker is starting, which Server.health() calls live: the live gauge began at 0,
    so a supervisor's /livez answered 503 "worker process(es) [pid] have stopped loops" each time it started a
    child (after a crash, at every start of the host), and a liveness probe could restart the pod for it."""
    reg = CollectorRegistry()
    WorkerMetrics(reg)
    s = samples(reg)
    assert value(s, "asynqpy_worker_live") == 1 and value(s, "asynqpy_worker_ready") == 0


class _Bug(BaseException):
    """Escapes a loop's own error handling (which catches Exception), as a bug in it would."""


def test_livez_fails_when_a_loop_dies(redis_url: str) -> None:
    srv = Server(redis_url, heartbeat_interval=0.5)
    srv.start(ServeMux())
    try:
        wait_for(lambda: srv.health()[1], what="ready")
        janitor = srv._loops[-1]

        async def broken() -> float | None:
            raise _Bug("a bug")

        janitor.run_once = broken  # type: ignore[method-assign]
        assert srv._loop is not None
        srv._loop.call_soon_threadsafe(janitor.wake)
        wait_for(lambda: not srv.health()[0], what="not live")
        assert srv.health() == (False, False, f"loops stopped: {janitor.name}")
    finally:
        srv.shutdown()


def _worker(redis_url: str, port: int, *extra: str, tmp: str | None = None) -> subprocess.Popen:  # type: ignore[type-arg]
    env = {**os.environ, "TMPDIR": tmp} if tmp else None
    return subprocess.Popen([ASYNQPY, "worker", "tests.metrics.apps:mux", "--redis-url", redis_url,
                             "--metrics-port", str(port), "--metrics-host", "127.0.0.1", *extra],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def _ready(base: str) -> bool:
    try:
        return get(base + "/readyz", timeout=1)[0] == 200
    except OSError:
        return False


def _stop(p: subprocess.Popen) -> None:  # type: ignore[type-arg]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def test_worker_command_serves_metrics_and_probes(redis_url: str, r: redis.Redis) -> None:
    port = free_port()
    p = _worker(redis_url, port)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base), timeout=20, what="/readyz")
        assert get(base + "/livez")[0] == 200
        c = Client(redis_url)
        for _ in range(5):
            c.enqueue(Task("ok", b"0"))
        c.enqueue(Task("fail", b""), max_retry=0)
        wait_for(lambda: r.get(keys.processed_total("default")) == b"6", what="6 processed")
        s = wait_for(lambda: (x := scrape(base + "/metrics")) and sum(counts_by_outcome(x).values()) == 6 and x)
        assert counts_by_outcome(s) == {"success": 5, "archived": 1}
    finally:
        _stop(p)
    assert p.returncode == 0, p.stderr.read().decode() if p.stderr else ""


def test_processes_share_one_port_through_multiprocess_mode(redis_url: str, r: redis.Redis, tmp_path: Path) -> None:
    port = free_port()
    p = _worker(redis_url, port, "--processes", "2", "--concurrency", "2", tmp=str(tmp_path))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base), timeout=30, what="/readyz of both processes")
        [made] = [d for d in tmp_path.iterdir() if d.name.startswith("asynqpy-metrics-")]
        assert any(f.suffix == ".db" for f in made.iterdir())  # the children's metric files
        assert "2 of 2" in get(base + "/readyz")[2] and get(base + "/livez")[0] == 200
        c = Client(redis_url)
        for _ in range(40):
            c.enqueue(Task("ok", b"0.05"))
        wait_for(lambda: r.get(keys.processed_total("default")) == b"40", timeout=30, what="40 processed")
        s = wait_for(lambda: (x := scrape(base + "/metrics")) and counts_by_outcome(x).get("success") == 40 and x)
        assert value(s, "asynqpy_task_wait_seconds_count", queue="default") == 40
        assert len(series(s, "asynqpy_worker_ready")) == 2  # one per live process (pid label)
    finally:
        _stop(p)
    assert p.returncode == 0, p.stderr.read().decode() if p.stderr else ""
    assert not made.exists()  # the supervisor removed the multiprocess directory it made


@pytest.mark.slow
def test_a_frozen_process_fails_the_probes(redis_url: str, tmp_path: Path) -> None:
    """A child that stops (SIGSTOP, or wedged holding the GIL) is not live and not ready: the supervisor read the
    gauges it wrote before it froze, so /livez and /readyz answered 200 for a process that did nothing."""
    from asynqpy.supervisor import FROZEN_AFTER
    port = free_port()
    p = _worker(redis_url, port, "--processes", "2", tmp=str(tmp_path))
    base = f"http://127.0.0.1:{port}"
    child = 0
    try:
        wait_for(lambda: _ready(base), timeout=30, what="/readyz of both processes")
        child = int(dict(next(iter(series(scrape(base + "/metrics"), "asynqpy_worker_ready"))))["pid"])
        os.kill(child, signal.SIGSTOP)
        live = wait_for(lambda: (g := get(base + "/livez"))[0] == 503 and g, timeout=FROZEN_AFTER + 30,
                        interval=0.5, what="/livez to answer 503")
        assert f"[{child}]" in live[2] and "frozen" in live[2], live
        status, _, body = get(base + "/readyz")
        assert status == 503 and body.startswith("1 of 2 worker processes ready") and "frozen" in body, body
        os.kill(child, signal.SIGCONT)
        wait_for(lambda: _ready(base) and get(base + "/livez")[0] == 200, timeout=30, what="both probes at 200")
    finally:
        if child:
            os.kill(child, signal.SIGCONT)
        _stop(p)
    assert p.returncode == 0, p.stderr.read().decode() if p.stderr else ""


@pytest.mark.parametrize("bad", [["--metrics-port", "70000"], ["--metrics-port", "1", "--max-task-types", "-1"]])
def test_bad_metrics_options_are_usage_errors(bad: list[str]) -> None:
    out = subprocess.run([ASYNQPY, "worker", "tests.metrics.apps:mux", *bad], capture_output=True, text=True,
                         cwd=REPO, timeout=30)
    assert out.returncode == 2 and "Traceback" not in out.stderr


@pytest.mark.parametrize("processes", ["1", "2"])
@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_a_bad_multiproc_dir_is_a_usage_error(tmp_path: Path, processes: str, where: str) -> None:
    """PROMETHEUS_MULTIPROC_DIR naming a file (or a path below one): one line naming it and exit 2; it was a
    traceback (FileExistsError from the supervisor, FileNotFoundError from prometheus_client in one process)."""
    (tmp_path / "a-file").write_text("")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / where)}
    out = subprocess.run([ASYNQPY, "worker", "tests.metrics.apps:mux", "--redis-url", "redis://127.0.0.1:1/0",
                          "--processes", processes, "--metrics-port", "0", "--metrics-host", "127.0.0.1"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"PROMETHEUS_MULTIPROC_DIR={str(tmp_path / where)!r}" in out.stderr.strip().splitlines()[-1]


def test_a_metrics_port_in_use_leaves_no_directory_behind(tmp_path: Path) -> None:
    """--processes 2 with a --metrics-port it cannot listen on: one line, exit 1, and the multiprocess directory
    it had made is gone (one was left in the temporary directory at each such start)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = subprocess.run([ASYNQPY, "worker", "tests.metrics.apps:mux", "--redis-url", "redis://127.0.0.1:1/0",
                              "--processes", "2", "--metrics-port", str(taken.getsockname()[1]),
                              "--metrics-host", "127.0.0.1"], capture_output=True, text=True, cwd=REPO,
                             env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=60)
    assert out.returncode == 1 and "cannot listen" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_worker_counts_tasks_that_waited_on_a_limit(redis_url: str, r: redis.Redis) -> None:
    """A real worker's /metrics: tasks held back by a concurrency limit are counted per limit, with their wait;
    a type under no limit is not."""
    from asynqpy import Limit
    from asynqpy.rdb.flow import set_limit
    set_limit(r, Limit("ok", concurrency=1), queues=["default"])
    port = free_port()
    p = _worker(redis_url, port, "--concurrency", "4")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base), timeout=20, what="/readyz")
        c = Client(redis_url)
        c.enqueue_many([Task("ok", b"0.3") for _ in range(4)])  # one runs, three wait for its slot
        c.enqueue(Task("type:free", b""))
        wait_for(lambda: r.get(keys.processed_total("default")) == b"5", timeout=30, what="5 processed")
        s = wait_for(lambda: (x := scrape(base + "/metrics")) and sum(counts_by_outcome(x).values()) == 5 and x)
        assert value(s, "asynqpy_task_limit_waits_total", queue="default", limit="ok") == 3
        assert series(s, "asynqpy_task_limit_waits_total") == {(("limit", "ok"), ("queue", "default")): 3}
        assert value(s, "asynqpy_task_limit_wait_seconds_count", queue="default", limit="ok") == 3
        assert value(s, "asynqpy_task_limit_wait_seconds_sum", queue="default", limit="ok") >= 0.3  # type: ignore[operator]
    finally:
        _stop(p)
    assert p.returncode == 0, p.stderr.read().decode() if p.stderr else ""


def test_limit_labels_stay_bounded() -> None:
    from asynqpy.metrics.worker import MAX_LIMITS
    from asynqpy.outcome import TaskOutcome
    reg = CollectorRegistry()
    m = WorkerMetrics(reg)
    for i in range(MAX_LIMITS + 50):
        m.observe(TaskOutcome("q", "t", "id", "success", 0.0, 0.01, 1.0, "", f"limit:{i}"))
    m.observe(TaskOutcome("q", "t", "id", "success", 0.0, 0.01, 1.0))  # waited on no limit
    waits = series(samples(reg), "asynqpy_task_limit_waits_total")
    assert len(waits) == MAX_LIMITS + 1 and waits[(("limit", "other"), ("queue", "q"))] == 50
    assert sum(waits.values()) == MAX_LIMITS + 50
