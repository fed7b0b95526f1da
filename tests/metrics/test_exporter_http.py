"""`asynqpy exporter` as a user runs it, and the /metrics blueprint mounted on a bare Flask app, over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from flask import Flask
from werkzeug.serving import make_server

from asynqpy import Client, Task
from asynqpy.embedded import free_port
from asynqpy.errors import UsageError
from asynqpy.metrics.http import parse_bind
from tests.helpers import wait_for
from tests.metrics.scrape import get, scrape, value

ASYNQPY = os.path.join(os.path.dirname(sys.executable), "asynqpy")


@pytest.fixture
def exporter(redis_url: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ASYNQPY_METRICS_TOKEN": "s3cret"}
    proc = subprocess.Popen([ASYNQPY, "exporter", "--bind", f"127.0.0.1:{port}", "--redis-url", redis_url,
                             "--max-age", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), what="the exporter to listen")
        yield base
    finally:
        _end(proc)
        assert proc.returncode == 0, proc.stdout.read() if proc.stdout else ""


def _end(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _answers(base: str) -> bool:
    try:
        return get(base + "/livez", timeout=1)[0] == 200
    except OSError:
        return False


def test_exporter_serves_metrics_behind_token_and_probes(exporter: str, redis_url: str) -> None:
    Client(redis_url).enqueue(Task("t"), queue="emails")
    status, _, _ = get(exporter + "/metrics")
    assert status == 401
    assert get(exporter + "/metrics", token="wrong")[0] == 401
    s = scrape(exporter + "/metrics", token="s3cret")
    assert value(s, "asynq_queue_size", queue="emails") == 1
    assert value(s, "asynq_tasks_enqueued_total", queue="emails", state="pending") == 1
    assert value(s, "process_resident_memory_bytes") is not None  # as asynq's exporter registers the process's
    assert get(exporter + "/readyz")[0] == 200 and get(exporter + "/livez")[0] == 200
    assert get(exporter + "/nope")[0] == 404


def test_exporter_with_redis_down_answers_and_is_not_ready() -> None:
    port = free_port()
    proc = subprocess.Popen([ASYNQPY, "exporter", "--bind", f"127.0.0.1:{port}", "--redis-url",
                             "redis://127.0.0.1:1/0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), what="the exporter to listen")
        s = scrape(base + "/metrics")
        assert value(s, "asynqpy_redis_up") == 0 and value(s, "asynqpy_exporter_scrape_errors_total") == 1
        status, _, body = get(base + "/readyz")
        assert status == 503 and "cannot reach Redis" in body
        assert get(base + "/livez")[0] == 200
    finally:
        _end(proc)


def test_bad_bind_is_a_usage_error() -> None:
    out = subprocess.run([ASYNQPY, "exporter", "--bind", "localhost:http"], capture_output=True, text=True)
    assert out.returncode == 2 and "host:port" in out.stderr and "Traceback" not in out.stderr
    assert parse_bind(":9876") == ("0.0.0.0", 9876) and parse_bind("[::1]:80") == ("::1", 80)
    with pytest.raises(UsageError):
        parse_bind("1.2.3.4:70000")


@pytest.mark.parametrize("bind", ["127.0.0.1:\u0661\u0662\u0663\u0664", "127.0.0.1:+9876", "127.0.0.1:9_876",
                                  "127.0.0.1: 9876", " 9876", "[::1", "::1]:80", "[::1]x:80", "a b:80"])
def test_a_bind_that_is_not_host_port_is_refused(bind: str) -> None:
    """Only ASCII digits make a port and only a whole [IPv6] a bracketed host: int() read Arabic-Indic digits
    as 1234, and took "+9876", "9_876" and blanks, so a typo listened on a port nobody asked for."""
    with pytest.raises(UsageError, match="host:port"):
        parse_bind(bind)


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_blank_token_is_a_usage_error(how: str) -> None:
    """A token of blanks (an empty Secret file's newline) let no scrape in, with nothing said at start."""
    env = {**os.environ, "ASYNQPY_METRICS_TOKEN": " \n"} if how == "environment" else None
    args = ["--metrics-token", "  "] if how == "option" else []
    out = subprocess.run([ASYNQPY, "exporter", "--bind", "127.0.0.1:0", "--redis-url", "redis://127.0.0.1:1/0",
                          *args], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "metrics token" in out.stderr and "blank" in out.stderr


def test_blueprint_on_a_bare_flask_app(redis_url: str) -> None:
    from webui.metrics import bp

    app = Flask("bare")
    app.config.update(ASYNQPY_REDIS_URL=redis_url, METRICS_TOKEN="tok", METRICS_MAX_AGE=0)
    app.register_blueprint(bp)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{srv.server_port}"
    try:
        Client(redis_url).enqueue(Task("t"), queue="web")
        assert get(base + "/metrics")[0] == 401
        status, ctype, _ = get(base + "/metrics", token="tok")
        assert status == 200 and ctype.startswith("text/plain; version=")
        s = scrape(base + "/metrics", token="tok")
        assert value(s, "asynq_queue_size", queue="web") == 1 and value(s, "asynqpy_redis_up") == 1
    finally:
        srv.shutdown()
        t.join(5)
