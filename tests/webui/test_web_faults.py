"""The dashboard under real Redis faults, through real HTTP: never a 500. Trouble that passes (BUSY; OOM and
READONLY for writes) is the Redis-down banner (503; for htmx a message in #messages); a command Redis refuses for
good (WRONGTYPE) is "Redis refused a command" (502) with Redis's message; no traceback ever. The servers page shows
what a server's heartbeat says of its Redis trouble."""

from __future__ import annotations

import http.cookiejar
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from werkzeug.serving import make_server

from asynqpy import Client, Task
from asynqpy.rdb import keys
from asynqpy.wire import ServerInfo
from tests.redisfaults import busy, fault_redis, fault_server, fault_url, out_of_memory, read_only_keeping_data
from tests.webui.authkit import PASSWORDS, make_app, users_path

__all__ = ["fault_redis", "fault_server", "fault_url", "users_path"]  # fixtures

PAGES = ("/", "/queues/mail", "/queues/mail/pending", "/errors", "/servers", "/scheduler", "/redis",
         "/charts/daily", "/charts/sizes")


@dataclass
class Answer:
    status: int
    body: str
    headers: dict[str, str]


class Browser:
    """A cookie-keeping HTTP client logged in through the real login form."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = ""

    def get(self, path: str, *, htmx: bool = False) -> Answer:
        return self._send(urllib.request.Request(self.base + path, headers={"HX-Request": "true"} if htmx else {}))

    def post(self, path: str, data: dict[str, str], *, htmx: bool = False) -> Answer:
        headers = {"X-CSRF-Token": self.csrf, **({"HX-Request": "true"} if htmx else {})}
        return self._send(urllib.request.Request(self.base + path, data=urllib.parse.urlencode(data).encode(),
                                                 headers=headers))

    def login(self, name: str) -> None:
        form = self.get("/login").body
        token = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert token
        page = self.post("/login", {"username": name, "password": PASSWORDS[name], "csrf_token": token.group(1)})
        assert page.status == 200, page.body[:300]
        m = re.search(r'"X-CSRF-Token": "([^"]+)"', page.body)
        assert m, "not logged in"
        self.csrf = m.group(1)

    def _send(self, req: urllib.request.Request) -> Answer:
        try:
            with self.opener.open(req, timeout=15) as resp:
                return Answer(resp.status, resp.read().decode(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, exc.read().decode(), dict(exc.headers))


@pytest.fixture
def web(fault_url: str, users_path: Path) -> Iterator[Browser]:
    """The dashboard on the fault server over real HTTP, with queue "mail" holding a task; logged in as otto."""
    with Client(fault_url) as c:
        c.enqueue(Task("email", b"{}"), queue="mail")
    app = make_app(fault_url, users_path)
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    b = Browser(f"http://127.0.0.1:{srv.server_port}")
    b.login("otto")
    try:
        yield b
    finally:
        srv.shutdown()
        t.join(5)
        app.extensions["asynqpy.inspector"].close()


def _no_traceback(a: Answer) -> None:
    assert "Traceback" not in a.body and "redis.exceptions" not in a.body


def test_busy_is_the_banner_on_every_page_and_a_message_for_htmx(web: Browser, fault_url: str) -> None:
    with busy(fault_url):
        for path in PAGES:
            a = web.get(path)
            assert a.status == 503, (path, a.status)
            assert 'id="redis-banner">' in a.body and "answers BUSY" in a.body, path  # shown, not hidden
            _no_traceback(a)
        a = web.get("/servers", htmx=True)
        assert a.status == 503 and a.headers["HX-Retarget"] == "#messages"
        assert 'class="message error redis-down"' in a.body and "Redis is unavailable" in a.body
        assert 'id="redis-banner" hx-swap-oob="true">' in a.body  # the banner too, out of band
        a = web.post("/queues/mail/pause", {}, htmx=True)
        assert a.status == 503 and "answers BUSY" in a.body
        _no_traceback(a)
    assert web.get("/").status == 200  # by itself, once the script ends


@pytest.mark.parametrize("fault", ["OOM", "READONLY"])
def test_writes_refused_pages_still_show_and_actions_say_why(web: Browser, fault_url: str,
                                                             fault: str) -> None:
    with (out_of_memory if fault == "OOM" else read_only_keeping_data)(fault_url):
        for path in PAGES:
            a = web.get(path)
            assert a.status == 200, (path, a.status, a.body[:300])
        assert "mail" in web.get("/").body
        a = web.post("/queues/mail/pause", {}, htmx=True)
        assert a.status == 503 and f"answers {fault}" in a.body, a.body[:500]
        _no_traceback(a)
        a = web.post("/queues/mail/pause", {})
        assert a.status == 503 and 'id="redis-banner">' in a.body
    a = web.post("/queues/mail/pause", {}, htmx=True)
    assert a.status == 200 and "paused" in a.body


def test_a_command_redis_refuses_is_a_502_with_its_message(web: Browser, fault_redis: redis.Redis) -> None:
    fault_redis.delete(keys.QUEUES, keys.SNAPSHOT)
    fault_redis.set(keys.QUEUES, "not a set")  # every read of the registered queues now answers WRONGTYPE
    for path in ("/", "/errors"):
        a = web.get(path)
        assert a.status == 502, (path, a.status)
        assert "Redis refused a command" in a.body and "WRONGTYPE" in a.body
        assert 'id="redis-banner" hidden' in a.body  # not the Redis-down banner: Redis answers
        _no_traceback(a)
    a = web.get("/", htmx=True)
    assert a.status == 502 and "Redis refused a command" in a.body and a.headers["HX-Retarget"] == "#messages"


def test_servers_page_shows_a_servers_degraded_state(web: Browser, fault_redis: redis.Redis) -> None:
    def beat(server_id: str, health: str | None) -> None:
        info = ServerInfo(host="h", pid=1, server_id=server_id, concurrency=2, queues={"mail": 1}, status="active")
        fault_redis.zadd(keys.SERVERS, {keys.server_info("h", 1, server_id): time.time() + 30})
        fault_redis.set(keys.server_info("h", 1, server_id), info.SerializeToString())
        if health is not None:  # the note an asynqpy server writes with its heartbeat (Go's write none)
            fault_redis.hset(keys.server_health("h", 1, server_id), mapping={"status": health, "kind": "BUSY"})

    beat("ok-one", "ok")
    beat("go-one", None)
    beat("sick-one", "degraded: Redis answers BUSY since 12 s")
    rows = web.get("/servers").body.split("<tr")
    sick = next(r for r in rows if "sick-one" in r)
    assert '<span class="badge warn">degraded: Redis answers BUSY since 12 s</span>' in sick
    assert not any(("ok-one" in r or "go-one" in r) and "badge warn" in r for r in rows)
    assert all(any(name in r for r in rows) for name in ("ok-one", "go-one"))
