"""The components under fault, all pointed at one Redis URL: a real `asynqpy worker` process, the dashboard under
gunicorn (`asynqpy web`), the exporter (`asynqpy exporter`) and the scheduler (`asynqpy scheduler`), plus a
logged-in HTTP session for the dashboard. Started once per rig and shared by every fault of a module."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

from asynqpy.embedded import free_port
from inspector import Inspector
from tests.core.procs import ROOT, Proc
from tests.faults.app import CRON
from tests.webui.authkit import PASSWORDS
from webui.users import create_user

QUEUE = "faults"   # the worker's queue; the scheduler's entry enqueues here too
SPARE = "spare"    # a queue no worker takes, paused and resumed by the dashboard action
HTTP_TIMEOUT = 30  # far above any bound the tests assert: a hung request shows as a slow one, not an error
CRON_YAML = f"""
configs:
  - cronspec: "@every 1s"
    task_type: {CRON}
    options: {{queue: {QUEUE}}}
"""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Browser:
    """A cookie jar, no redirects followed, the CSRF token the pages carry: enough for pages and actions."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect())
        self.csrf = ""

    def open(self, path: str, data: dict[str, str] | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, str]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {})
        try:
            with self.opener.open(req, timeout=HTTP_TIMEOUT) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def login(self, name: str, password: str) -> None:
        status, html = self.open("/login")
        tok = re.search(r'name="csrf_token" value="([^"]+)"', html)
        assert tok, f"no login form ({status}): {html[:300]}"
        status, html = self.open("/login", {"username": name, "password": password, "csrf_token": tok.group(1)},
                                 {"Origin": self.base})
        assert status == 303, f"login failed ({status}): {html[:300]}"
        m = re.search(r'"X-CSRF-Token": "([^"]+)"', self.open("/")[1])
        assert m, "no X-CSRF-Token on the overview page"
        self.csrf = m.group(1)

    def post(self, path: str, data: dict[str, str] | None = None) -> tuple[int, str]:
        return self.open(path, data or {}, {"X-CSRF-Token": self.csrf, "Origin": self.base, "HX-Request": "true"})


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait(probe: object, what: str, procs: list[Proc], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe():  # type: ignore[operator]
                return
        except OSError:
            pass
        for p in procs:
            if p.p.poll() is not None:
                raise AssertionError(f"{p.p.args!r} exited with {p.p.returncode} while waiting for {what}:\n"
                                     f"{p.output[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Rig:
    """The processes under test on `url` (the components' view of Redis); `direct_url` is the same server without
    the proxy, for setting up and checking (the faults never reach the ledger at `ledger_url`)."""

    def __init__(self, url: str, direct_url: str, ledger_url: str, workdir: Path) -> None:
        self.url, self.direct_url, self.ledger_url, self.workdir = url, direct_url, ledger_url, workdir
        self.procs: dict[str, Proc] = {}
        self.worker_metrics = free_port()
        self.web_base = f"http://127.0.0.1:{free_port()}"
        self.exporter_base = f"http://127.0.0.1:{free_port()}"
        self.browser = Browser(self.web_base)

    def _env(self) -> dict[str, str]:
        return {"LEDGER_URL": self.ledger_url, "ASYNQPY_WEB_SECRET": "faults-secret-" + "x" * 40}

    def _launch(self, name: str) -> None:
        env, url = self._env(), ["--redis-url", self.url]
        if name == "worker":
            self.procs[name] = Proc.asynqpy(
                "worker", "tests.faults.app:mux", *url, "--queues", f"{QUEUE}=1", "--concurrency", "4",
                "--shutdown-timeout", "2", "--metrics-port", str(self.worker_metrics), "--metrics-host",
                "127.0.0.1", cwd=ROOT, **env)
        elif name == "web":
            self.procs[name] = Proc.asynqpy(
                "web", "--bind", self.web_base.removeprefix("http://"), "--workers", "1", "--threads", "4", *url,
                "--users", str(self.workdir / "users.toml"), cwd=self.workdir, **env)
        elif name == "exporter":
            self.procs[name] = Proc.asynqpy(
                "exporter", "--bind", self.exporter_base.removeprefix("http://"), *url, cwd=self.workdir, **env)
        else:
            self.procs[name] = Proc.asynqpy("scheduler", "--config", str(self.workdir / "cron.yaml"), *url,
                                            cwd=self.workdir, **env)

    def start(self) -> Rig:
        create_user(self.workdir / "users.toml", "otto", "operator", PASSWORDS["otto"])
        (self.workdir / "cron.yaml").write_text(CRON_YAML)
        for name in ("worker", "web", "exporter", "scheduler"):
            self._launch(name)
        self._ready()
        self.browser.login("otto", PASSWORDS["otto"])
        return self

    def restart(self, name: str) -> None:
        """Stop one process (gracefully if it still runs) and start it again."""
        _stop(self.procs[name])
        self._launch(name)
        self._ready()
        if name == "web":
            self.browser.login("otto", PASSWORDS["otto"])

    def _ready(self) -> None:
        procs = list(self.procs.values())
        insp = Inspector(self.direct_url)
        try:
            pid = self.procs["worker"].p.pid  # not a server an earlier worker left in the list
            _wait(lambda: pid in {s.pid for s in insp.servers()}, "the worker's heartbeat", procs)
            _wait(lambda: insp.scheduler_entries(), "the scheduler's entry", procs)
        finally:
            insp.close()
        _wait(lambda: http_get(self.web_base + "/login")[0] == 200, "the dashboard", procs)
        _wait(lambda: http_get(self.exporter_base + "/metrics")[0] == 200, "the exporter", procs)

    def dead(self) -> dict[str, str]:
        """The processes that exited, with the tail of their output."""
        return {name: f"exit {p.p.returncode}:\n{p.output[-3000:]}" for name, p in self.procs.items()
                if p.p.poll() is not None}

    def stop(self) -> None:
        for p in self.procs.values():
            if p.p.poll() is None:
                p.p.terminate()
        for p in self.procs.values():
            _stop(p)


def _stop(p: Proc) -> None:
    """SIGTERM, 10 s to finish, then SIGKILL."""
    if p.p.poll() is None:
        p.p.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        p.p.wait(10)
    p.__exit__()
