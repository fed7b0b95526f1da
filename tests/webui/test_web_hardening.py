"""Web hardening over real HTTP: nothing signed-in is cached, the CSP allows no inline style, the CSRF origin check
compares the scheme, background polling does not keep a session alive; and, under gunicorn with --url-prefix and
no --trusted-proxy, no forwarded header is believed (not even from 127.0.0.1), the cookie is scoped to the prefix
and every URL a page holds (links, forms, live refresh) carries the prefix."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from asynqpy.embedded import free_port
from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, Clock, go_enqueue, serve
from webui.proxy import wrap

URL_ATTRS = re.compile(r'\b(href|src|action|formaction|hx-get|hx-post)="([^"]*)"')


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def live(redis_url: str, users_path: Path, clock: Clock) -> Iterator[dict[str, Any]]:
    app = make_app(redis_url, users_path, ASYNQPY_CLOCK=clock, ASYNQPY_SESSION_IDLE=600)
    with serve(app) as base:
        yield {"base": base, "app": app, "redis_url": redis_url}
    app.extensions["asynqpy.inspector"].close()


def test_nothing_signed_in_is_cached_and_the_csp_allows_no_inline_style(live: dict[str, Any]) -> None:
    b = Browser(live["base"])
    assert b.login("ada").status == 303
    for path in ("/audit.jsonl", "/", "/audit", "/charts/daily"):
        resp = b.open(path)
        assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store", path
    csp = b.open("/").headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "style-src 'self'" in csp


def test_the_csrf_origin_check_compares_the_scheme(live: dict[str, Any]) -> None:
    b = Browser(live["base"])
    assert b.login("vera").status == 303
    host = live["base"].removeprefix("http://")
    tok = b.token()
    refused = b.open("/logout", {"csrf_token": tok}, Origin=f"https://{host}")
    assert refused.status == 400 and "cross-origin" in refused.text
    assert b.open("/").status == 200  # still signed in: nothing happened
    assert b.open("/logout", {"csrf_token": tok}, Origin=f"http://{host}").status == 303


def test_background_polling_does_not_keep_a_session_alive(live: dict[str, Any], clock: Clock) -> None:
    b = Browser(live["base"])
    assert b.login("vera").status == 303
    for _ in range(2):  # a tab left open polls every few seconds
        clock.t += 250
        assert b.open("/", **{"HX-Request": "true", "X-Asynqpy-Poll": "1"}).status == 200
    clock.t += 150  # 650 s after the last thing the user did, past the 600 s idle timeout
    assert b.open("/").status == 303
    user = Browser(live["base"])
    assert user.login("vera").status == 303
    for _ in range(4):  # the same requests made by the user do count
        clock.t += 250
        assert user.open("/", **{"HX-Request": "true"}).status == 200


def test_error_pages_poll_under_the_prefix(redis_url: str, users_path: Path) -> None:
    app = make_app(redis_url, users_path, ASYNQPY_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")  # nothing there
    cookie = app.session_interface.get_signing_serializer(app).dumps({"sid": "x" * 43})  # type: ignore[attr-defined]
    with serve(wrap(app, prefix="/asynq")) as base:
        resp = Browser(base).open("/asynq/queues/a%2Fb/pending?page=2", Cookie=f"asynqpy_session={cookie}")
    assert resp.status == 503 and "Redis is unavailable" in resp.text
    (poll,) = re.findall(r'hx-get="([^"]+)"', resp.text)
    assert unescape(poll) == "/asynq/queues/a/b/pending?page=2"
    app.extensions["asynqpy.inspector"].close()


@pytest.fixture
def gunicorn(redis_url: str, users_path: Path, tmp_path: Path) -> Iterator[str]:
    """`asynqpy web --url-prefix /asynq`, no --trusted-proxy: what a user starts behind a reverse proxy."""
    port = free_port()
    env = {**os.environ, "ASYNQPY_WEB_SECRET": "hardening-test-secret-" + "z" * 30}
    env.pop("FORWARDED_ALLOW_IPS", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this checkout's code, whatever is installed
    proc = subprocess.Popen([sys.executable, "-m", "asynqpy.cli", "web", "--bind", f"127.0.0.1:{port}", "--workers",
                             "1", "--threads", "2", "--url-prefix", "/asynq", "--users", str(users_path),
                             "--redis-url", redis_url], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/asynq/healthz", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"asynqpy web did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.mark.slow
def test_under_gunicorn_no_forwarded_header_counts_and_every_url_has_the_prefix(gunicorn: str, redis_url: str) -> None:
    tid = go_enqueue(redis_url, "mail", "email:send")
    spoofed = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}
    b = Browser(gunicorn, **spoofed)
    page = b.open("/asynq/login")
    assert "Strict-Transport-Security" not in page.headers  # the request is plain http, whatever it claims
    cookie = page.headers["Set-Cookie"]
    assert "Secure" not in cookie and "Path=/asynq" in cookie
    assert 'action="/asynq/login"' in page.text
    assert b.login("ada", path="/asynq/login").status == 303
    for path in ("/asynq/", "/asynq/queues/mail/pending", f"/asynq/queues/mail/tasks/{tid}", "/asynq/errors",
                 "/asynq/servers", "/asynq/audit"):
        resp = b.open(path)
        assert resp.status == 200, path
        urls = [unescape(u) for _, u in URL_ATTRS.findall(resp.text)]
        assert urls and all(u.startswith(("/asynq/", "?", "#")) for u in urls), (path, [
            u for u in urls if not u.startswith(("/asynq/", "?", "#"))])
    poll = re.search(r'id="queue-body" class="poll" hx-get="([^"]+)"', b.open("/asynq/queues/mail/pending?page=1").text)
    assert poll and unescape(poll.group(1)) == "/asynq/queues/mail/pending?page=1"
