"""Auth through real HTTP against `asynqpy web` under gunicorn with two workers: the generated key file is shared,
so a login made in one worker holds in the other; logout ends the session in both (within the second each worker
takes to notice: inspector.webstate); throttling is shared."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

from webui.users import create_user

pytestmark = pytest.mark.slow


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Browser:
    """Just enough of a browser: a cookie jar, no redirects followed, and the page's CSRF token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect())

    def open(self, path: str, data: dict[str, str] | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        try:
            with self.opener.open(req, timeout=10) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def login(self, name: str, password: str) -> int:
        _, _, html = self.open("/login")
        tok = re.search(r'name="csrf_token" value="([^"]+)"', html)
        assert tok
        return self.open("/login", {"username": name, "password": password, "csrf_token": tok.group(1)})[0]

    def token(self) -> str:
        m = re.search(r'"X-CSRF-Token": "([^"]+)"', self.open("/")[2])
        assert m
        return m.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def web(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    users = tmp_path / "asynqpy-users.toml"
    create_user(users, "otto", "operator", "operator-pass-1")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("ASYNQPY_WEB_SECRET", "ASYNQPY_WEB_USERS")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "asynqpy.cli", "web", "--bind", f"127.0.0.1:{port}", "--workers", "2",
         "--threads", "2", "--redis-url", redis_url, "--users", str(users)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"asynqpy web did not start: {proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.2)
        yield base, tmp_path
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def test_sessions_hold_across_workers_and_end_at_logout(web: tuple[str, Path]) -> None:
    base, folder = web
    key = folder / ".asynqpy-web.key"
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600
    b = Browser(base)
    assert b.login("otto", "operator-pass-1") == 303
    statuses = {b.open("/")[0] for _ in range(12)}  # gunicorn spreads these over both workers
    assert statuses == {200}
    thief = Browser(base)
    for cookie in b.jar:
        thief.jar.set_cookie(cookie)
    assert thief.open("/")[0] == 200
    assert b.open("/logout", {"csrf_token": b.token()})[0] == 303
    deadline = time.monotonic() + 1.0 + 2.0  # each worker rereads the sessions epoch every second
    while thief.open("/")[0] != 303:
        assert time.monotonic() < deadline, "the session outlived the recheck window"
        time.sleep(0.05)
    assert {thief.open("/")[0] for _ in range(6)} == {303}


def test_throttling_is_shared_by_the_workers(web: tuple[str, Path]) -> None:
    base, _ = web
    for _ in range(5):
        assert Browser(base).login("otto", "wrong") == 401
    assert {Browser(base).login("otto", "operator-pass-1") for _ in range(4)} == {429}
