"""Web hardening over real HTTP: nothing signed-in is cached, the CSP allows no inline style, the CSRF origin check
compares the scheme, background polling does not keep a session alive; and, under gunicorn with --url-prefix and
no --trusted-proxy, no forwarded header is believed (not even from 127.0.0.1), the cookie is scoped to the prefix
and every URL a page holds (links, forms, live refresh) carries the prefix."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from asynqpy.embedded import free_port
from tests.webui.authkit import make_app
from tests.webui.livekit import Browser, Clock, go_enqueue, gunicorn_web, live_app, serve, signed_in
from webui.proxy import wrap

URL_ATTRS = re.compile(r'\b(href|src|action|formaction|hx-get|hx-post)="([^"]*)"')


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def live(redis_url: str, users_path: Path, clock: Clock) -> Iterator[str]:
    with live_app(redis_url, users_path, ASYNQPY_CLOCK=clock, ASYNQPY_SESSION_IDLE=600) as base:
        yield base


def test_nothing_signed_in_is_cached_and_the_csp_allows_no_inline_style(live: str) -> None:
    b = signed_in(live, "ada")
    for path in ("/audit.jsonl", "/", "/audit", "/charts/daily"):
        resp = b.open(path)
        assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store", path
    csp = b.open("/").headers["Content-Security-Policy"]
    assert "unsafe-inline" not in csp and "style-src 'self'" in csp


def test_the_csrf_origin_check_compares_the_scheme(live: str) -> None:
    b = signed_in(live, "vera")
    host = live.removeprefix("http://")
    tok = b.token()
    refused = b.open("/logout", {"csrf_token": tok}, Origin=f"https://{host}")
    assert refused.status == 400 and "cross-origin" in refused.text
    assert b.open("/").status == 200  # still signed in: nothing happened
    assert b.open("/logout", {"csrf_token": tok}, Origin=f"http://{host}").status == 303


def test_background_polling_does_not_keep_a_session_alive(live: str, clock: Clock) -> None:
    b = signed_in(live, "vera")
    for _ in range(2):  # a tab left open polls every few seconds
        clock.t += 250
        assert b.open("/", **{"HX-Request": "true", "X-Asynqpy-Poll": "1"}).status == 200
    clock.t += 150  # 650 s after the last thing the user did, past the 600 s idle timeout
    assert b.open("/").status == 303
    user = signed_in(live, "vera")
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
def gunicorn(redis_url: str, users_path: Path) -> Iterator[str]:
    """`asynqpy web --url-prefix /asynq`, no --trusted-proxy: what a user starts behind a reverse proxy."""
    with gunicorn_web(redis_url, users_path, "--threads", "2", prefix="/asynq",
                      ASYNQPY_WEB_SECRET="hardening-test-secret-" + "z" * 30) as base:
        yield base


def _raw_get(base: str, target: str) -> tuple[str, dict[str, str], str]:
    """GET target over a plain socket (no client library between): the status line, headers and body."""
    u = urlsplit(base)
    with socket.create_connection((u.hostname, u.port), timeout=20) as s:
        try:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: {u.netloc}\r\n\r\n".encode())
        except OSError:  # the server may close once it has refused the line; its answer is still there to read
            pass
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.decode("utf-8", "replace").partition("\r\n\r\n")
    status, *lines = head.split("\r\n")
    return status, {k.lower(): v for k, _, v in (line.partition(": ") for line in lines)}, body


@pytest.mark.slow
def test_under_gunicorn_an_overlong_request_line_gets_the_dashboards_own_414_page(gunicorn: str) -> None:
    """gunicorn reads at most 8190 bytes of a request line (its maximum: still a bound, so no client can make it
    buffer more); past that the answer is the dashboard's own error page, under the prefix and with its headers,
    not gunicorn's unstyled one. A line within the bound reaches the app (the old 4094 bytes did not)."""
    b = Browser(gunicorn)
    assert b.open("/asynq/healthz?pad=" + "a" * 6000).status == 200
    for n in (8190, 50_000):
        status, headers, body = _raw_get(gunicorn, "/asynq/queues/" + "q" * n)
        assert status.startswith("HTTP/1.1 414 "), (status, body[:300])
        assert headers["content-type"].startswith("text/html") and int(headers["content-length"]) == len(body.encode())
        assert "frame-ancestors 'none'" in headers["content-security-policy"] and headers["connection"] == "close"
        assert "<title>Address too long · asynqpy</title>" in body and "<h1>Address too long</h1>" in body
        assert "longer than 8190 bytes" in body and 'href="/asynq/static/app.css"' in body
        assert '<a href="/asynq/">Back to the queues</a>' in body and "gunicorn" not in body.lower()
    assert b.open("/asynq/healthz").status == 200  # the worker goes on serving


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
