"""Real HTTP for the dashboard's tests: an app served by werkzeug's threaded server on a free loopback port (in
this process, so a test's fake clock reaches it), optionally behind webui.proxy.wrap; `asynqpy web` under
gunicorn as a user starts it; and a small cookie-keeping client that logs in through the form."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from werkzeug.serving import make_server

from asynqpy import Client, Task
from asynqpy.embedded import free_port
from tests.core.procs import ASYNQPY
from tests.core.procs import env as command_env
from tests.webui.authkit import PASSWORDS, app_on
from webui.users import create_user


@dataclass
class Reply:
    status: int
    headers: Any
    text: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Browser:
    """A cookie jar, no redirects followed; headers: sent with every request (e.g. X-Forwarded-For)."""

    def __init__(self, base: str, **headers: str) -> None:
        self.base = base
        self.headers = headers
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect())

    def open(self, path: str, data: dict[str, str] | None = None, **headers: str) -> Reply:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers={**self.headers, **headers})
        try:
            with self.opener.open(req, timeout=20) as resp:
                return Reply(resp.status, resp.headers, resp.read().decode())
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.headers, exc.read().decode())

    def login(self, name: str, password: str | None = None, path: str = "/login") -> Reply:
        page = self.open(path)
        tok = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert tok, page.text[:300]
        return self.open(path, {"username": name, "password": PASSWORDS.get(name, "") if password is None else password,
                                "csrf_token": tok.group(1)})

    def token(self, path: str = "/") -> str:
        m = re.search(r'"X-CSRF-Token": "([^"]+)"', self.open(path).text)
        assert m
        return m.group(1)

    def cookie(self, name: str) -> Any:
        return next((c for c in self.jar if c.name == name), None)


def signed_in(base: str, name: str, password: str | None = None) -> Browser:
    """A Browser logged in through the form as name (its PASSWORDS entry unless password is given)."""
    b = Browser(base)
    assert b.login(name, password).status == 303
    return b


@contextmanager
def serve(app: Flask | Any) -> Iterator[str]:
    """app (a Flask app or any WSGI callable) on http://127.0.0.1:<free port> until the block ends."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


@contextmanager
def live_app(redis_url: str, users_path: Path, **config: Any) -> Iterator[str]:
    """An app on the test database (authkit.make_app) served on loopback until the block ends; its base URL."""
    with app_on(redis_url, users_path, **config) as app, serve(app) as base:
        yield base


# Read by `asynqpy web` from its environment; a test that wants one passes it to gunicorn_web.
_NOT_INHERITED = ("ASYNQPY_WEB_SECRET", "ASYNQPY_WEB_USERS", "FORWARDED_ALLOW_IPS")


@contextmanager
def gunicorn_web(redis_url: str, users: Path, *args: str, workers: int = 1, prefix: str = "",
                 **env: str) -> Iterator[str]:
    """`asynqpy web` under gunicorn on a free loopback port (--workers, --url-prefix prefix when given, then args),
    run in the users file's folder, until the block ends; its base URL once {prefix}/healthz answers. Its
    environment is a command's under test (tests.core.procs.env: this checkout importable) with no web secret,
    users file or trusted proxies of its own, plus env."""
    port = free_port()
    full = {k: v for k, v in command_env().items() if k not in _NOT_INHERITED} | env
    argv = [*ASYNQPY, "web", "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--redis-url", redis_url,
            "--users", str(users), *(("--url-prefix", prefix) if prefix else ()), *args]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=users.parent, env=full, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(base + prefix + "/healthz", timeout=2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise AssertionError(f"asynqpy web did not start:\n{log.read().decode()[-3000:]}") from None
                    time.sleep(0.1)
            yield base
        finally:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """sig to gunicorn's master and its workers (its process group), if any is left."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


@pytest.fixture
def two_workers(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`asynqpy web` with two workers (2 threads each) in tmp_path, otto (operator) its one user and no secret
    given, so that the workers share the key files they generate there: (base URL, tmp_path)."""
    users = tmp_path / "asynqpy-users.toml"
    create_user(users, "otto", "operator", PASSWORDS["otto"])
    with gunicorn_web(redis_url, users, "--threads", "2", workers=2) as base:
        yield base, tmp_path


class Clock:
    """A fake Unix-seconds clock (ASYNQPY_CLOCK) a test moves on by hand."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def go_enqueue(redis_url: str, queue: str, type_: str, payload: bytes = b"{}",
               headers: dict[str, str] | None = None) -> str:
    """Write a pending task as Go asynq's enqueue does (its script's keys), for names our Client refuses
    (braces, absurdly long types). Returns the task id."""
    import time
    import uuid

    import redis

    from asynqpy.rdb import keys
    from asynqpy.wire.asynq_pb2 import TaskMessage

    tid = str(uuid.uuid4())
    msg = TaskMessage(type=type_, payload=payload, id=tid, queue=queue, retry=25, timeout=1800, headers=headers or {})
    r = redis.Redis.from_url(redis_url)
    try:
        r.hset(keys.task(queue, tid), mapping={"msg": msg.SerializeToString(), "state": "pending",
                                               "pending_since": str(time.time_ns())})
        r.lpush(keys.pending(queue), tid)
        r.sadd(keys.QUEUES, queue)
    finally:
        r.close()
    return tid


@pytest.fixture(name="base")
def mail_app_over_fault_server(fault_url: str, users_path: Path) -> Iterator[str]:
    """The dashboard served live over the module's fault server (tests.redisfaults), one task in queue mail,
    refreshing every second: the base URL. Import it with fault_url and users_path to use it as `base`."""
    with Client(fault_url) as c:
        c.enqueue(Task("email", b"{}"), queue="mail")
    with live_app(fault_url, users_path, ASYNQPY_POLL_SECONDS=1) as served:
        yield served
