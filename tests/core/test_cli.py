"""The `asynqpy` command: worker (one and several processes), dev, and one-line errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys
from tests.core.apps import SEEN
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
ASYNQPY = [sys.executable, "-m", "asynqpy.cli"]


def run(*args: str, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def,type-arg]
    return subprocess.run([*ASYNQPY, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def test_worker_with_processes_serves_and_stops_on_sigterm(redis_url: str, r: redis.Redis) -> None:
    Client(redis_url).enqueue_many([Task("count", b"")] * 200, queue="cli")
    env = {**os.environ, "TEST_REDIS_URL": redis_url}
    p = subprocess.Popen([*ASYNQPY, "worker", "tests.core.apps:counting", "--redis-url", redis_url,
                          "--queues", "cli=1", "--processes", "2", "--concurrency", "4"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: r.hlen(SEEN) == 200, timeout=60, what="200 tasks")
        wait_for(lambda: r.zcard(keys.SERVERS) == 2, timeout=20, what="two servers registered")
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    assert "supervising 2 worker processes" in out
    assert set(r.hvals(SEEN)) == {b"1"}
    wait_for(lambda: r.zcard(keys.SERVERS) == 0, timeout=5, what="servers to clear their state")


def test_bad_mux_and_queues_are_one_line_errors() -> None:
    res = run("worker", "no_such_module:mux")
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "cannot import 'no_such_module'" in res.stderr
    res = run("worker", "tests.core.apps:counting", "--queues", "a=x")
    assert res.returncode == 2 and "priority of queue 'a'" in res.stderr
    res = run("worker", "tests.core.apps", "--queues", "a=1")
    assert res.returncode == 2 and "module:attribute" in res.stderr
    # The settings are checked by ServerConfig, once, before any process starts.
    res = run("worker", "tests.core.apps:counting", "--concurrency", "0", "--processes", "2")
    assert res.returncode == 1 and res.stderr.strip().count("\n") == 0 and "concurrency must be >= 1" in res.stderr


def test_worker_on_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    res = run("worker", "tests.core.apps:counting", "--redis-url", "redis://127.0.0.1:1/0")
    assert res.returncode == 1 and "cannot reach Redis" in res.stderr and "Traceback" not in res.stderr


def test_dev_runs_embedded_server_worker_and_demo_then_stops_everything(tmp_path: Path) -> None:
    p = subprocess.Popen([*ASYNQPY, "dev", "--rate", "40"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url_file = tmp_path / ".asynqpy" / "redis.url"
        url = wait_for(lambda: url_file.exists() and url_file.read_text().strip(), timeout=20, what="dev server")
        conn = redis.Redis.from_url(url)
        wait_for(lambda: int(conn.get(keys.processed_total("critical")) or 0) > 3, timeout=30,
                 what="demo tasks processed")
        assert conn.smembers(keys.QUEUES) >= {b"critical"}
    finally:
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    assert "asynqpy dev is running" in out and "stopped" in out
    assert not url_file.exists()
    try:
        conn.ping()
        alive = True
    except redis.ConnectionError:
        alive = False
    assert not alive  # the embedded Valkey was stopped too


def test_worker_exits_after_shutdown_timeout_despite_a_stuck_plain_handler(redis_url: str, r: redis.Redis) -> None:
    from tests.core.apps import STARTS

    tid = Client(redis_url).enqueue(Task("stuck", b"")).id
    env = {**os.environ, "TEST_REDIS_URL": redis_url}
    p = subprocess.Popen([*ASYNQPY, "worker", "tests.core.apps:stuck", "--redis-url", redis_url,
                          "--shutdown-timeout", "0.5"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: r.llen(STARTS) == 1, timeout=20, what="the handler to start")
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)  # not the handler's 120 s
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, out
    assert "still running after shutdown" in out
    assert r.lrange(keys.pending("default"), 0, -1) == [tid.encode()]  # requeued for another worker
