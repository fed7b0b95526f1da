"""How the dashboard is served: settings from defaults, a config file, ASYNQPY_* variables and test overrides;
a sub-path behind a reverse proxy; forwarded headers only from trusted proxies; the `asynqpy dev` add-on."""

from __future__ import annotations

import argparse
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from werkzeug.test import Client as WsgiClient

from asynqpy.errors import InvalidArgumentError, UsageError
from asynqpy.plugins import DevContext, dev_addons
from tests.helpers import wait_for
from tests.webui.authkit import PASSWORD, PASSWORDS, make_app
from webui import settings
from webui.dev import ensure_admin
from webui.proxy import wrap
from webui.users import MIN_PASSWORD, UsersFile, check_password


def test_settings_layers(tmp_path: Path) -> None:
    cfg = tmp_path / "web.toml"
    cfg.write_text('page_size = 50\npoll_seconds = 9\ntrusted_proxies = ["10.0.0.0/8"]\n')
    env = {"ASYNQPY_WEB_CONFIG": str(cfg), "ASYNQPY_POLL_SECONDS": "3", "ASYNQPY_READ_ONLY": "yes"}
    s = settings({"ASYNQPY_MAX_PAGE_SIZE": 77}, environ=env)
    assert s["ASYNQPY_PAGE_SIZE"] == 50  # the file
    assert s["ASYNQPY_POLL_SECONDS"] == 3  # the environment beats the file
    assert s["ASYNQPY_READ_ONLY"] is True and s["ASYNQPY_TRUSTED_PROXIES"] == ("10.0.0.0/8",)
    assert s["ASYNQPY_MAX_PAGE_SIZE"] == 77  # the caller beats everything
    assert settings({}, environ={})["ASYNQPY_PAGE_SIZE"] == 30
    with pytest.raises(InvalidArgumentError, match="ASYNQPY_PAGE_SIZE"):
        settings({}, environ={"ASYNQPY_PAGE_SIZE": "many"})


def _login(c: WsgiClient, prefix: str, name: str, origin: str = "http://localhost", **environ: str) -> tuple[int, str]:
    page = c.get(f"{prefix}/login", environ_base=environ).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token, page[:400]
    resp = c.post(f"{prefix}/login", data={"username": name, "password": PASSWORDS[name], "csrf_token": token[1]},
                  environ_base=environ, headers={"Origin": origin})
    return resp.status_code, resp.headers.get("Set-Cookie", "")


def test_served_under_a_sub_path(redis_url: str, users_path: Path) -> None:
    app = make_app(redis_url, users_path)
    c = WsgiClient(wrap(app, prefix="/asynq"))
    html = c.get("/asynq/login").get_data(as_text=True)
    assert 'href="/asynq/static/app.css"' in html and 'action="/asynq/login"' in html
    status, _ = _login(c, "/asynq", "vera")
    assert status == 303
    resp = c.get("/asynq/")
    assert resp.status_code == 200 and 'href="/asynq/errors"' in resp.get_data(as_text=True)
    app.extensions["asynqpy.inspector"].close()


def test_forwarded_proto_only_from_trusted_proxies(redis_url: str, users_path: Path) -> None:
    app = make_app(redis_url, users_path)
    trusted = WsgiClient(wrap(app, trusted=["10.1.2.3"]))
    _, cookie = _login(trusted, "", "vera", "https://localhost", REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_PROTO="https")
    assert "Secure" in cookie
    untrusted = WsgiClient(wrap(app, trusted=["10.1.2.3"]))
    _, cookie = _login(untrusted, "", "vera", REMOTE_ADDR="192.0.2.9", HTTP_X_FORWARDED_PROTO="https")
    assert cookie and "Secure" not in cookie
    with pytest.raises(ValueError, match="not an IP"):
        wrap(app, trusted=["proxy.example"])
    app.extensions["asynqpy.inspector"].close()


def _failed_login(url: str) -> None:
    jar = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    page = jar.open(url + "login", timeout=5).read().decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token, page[:400]
    data = urllib.parse.urlencode({"username": "admin", "password": "wrong", "csrf_token": token[1]}).encode()
    req = urllib.request.Request(url + "login", data=data, headers={"Origin": url.rstrip("/")})
    try:
        jar.open(req, timeout=5).read()
    except urllib.error.HTTPError:
        pass  # the login page again, with its status


def test_dev_addon_starts_the_dashboard_with_an_admin(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("ASYNQPY_WEB_USERS", raising=False)
    monkeypatch.delenv("ASYNQPY_ADMIN_PASSWORD", raising=False)
    addon = next(a for a in dev_addons() if a.name == "dashboard")
    parser = argparse.ArgumentParser()
    addon.add_arguments(parser)
    args = parser.parse_args(["--web-port", "0"])
    assert args.web_port == 0
    args.web_port = _free()
    running = addon.start(DevContext(redis_url, tmp_path, args))
    try:
        url = running.banner[0].split("Dashboard: ")[1].split()[0]
        assert url == f"http://127.0.0.1:{args.web_port}/"
        password = re.search(r"log in as admin / (\S+)", running.banner[1])
        assert password, running.banner
        assert UsersFile(tmp_path / "users.toml").authenticate("admin", password[1]) is not None
        with urllib.request.urlopen(url + "healthz", timeout=5) as resp:
            assert resp.status == 200
            assert resp.headers["Server"] == "gunicorn"  # as `asynqpy web` serves it, not Werkzeug's dev server
        assert f"Metrics:   {url}metrics" in running.banner[2]
        with caplog.at_level(logging.INFO, logger="asynqpy.dev.dashboard"):
            _failed_login(url)  # writes an audit record
            wait_for(lambda: any(r.getMessage().startswith("audit: ") for r in caplog.records), what="audit line")
    finally:
        running.stop()
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("audit: ")]
    assert line.startswith("audit: admin ") and "login" in line and len(line) < 120, line  # short, not the JSON
    assert "asynqpy.audit: {" in (tmp_path / "dashboard.log").read_text()  # the JSON record: in the log file
    assert '"GET /healthz HTTP/1.1" 200' in (tmp_path / "dashboard.log").read_text()  # access lines: the log only
    assert not (tmp_path / "dashboard.pid").exists()
    # a second start keeps the account and does not print a password again
    assert ensure_admin(str(tmp_path / "users.toml"), None) is None
    assert ensure_admin(str(tmp_path / "users.toml"), f"env-{PASSWORD}") is None
    assert UsersFile(tmp_path / "users.toml").authenticate("admin", f"env-{PASSWORD}") is not None


def test_dev_admin_password_meets_the_minimum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated admin password passes the users file's own check; a short ASYNQPY_ADMIN_PASSWORD stops
    `asynqpy dev` with one line naming the variable, before any dashboard starts or any password changes."""
    users = tmp_path / "users.toml"
    printed = ensure_admin(str(users), None)
    assert printed is not None and len(printed) >= MIN_PASSWORD and check_password(printed) == printed
    with pytest.raises(UsageError, match=f"ASYNQPY_ADMIN_PASSWORD: .*at least {MIN_PASSWORD}"):
        ensure_admin(str(users), "short")  # the account exists: not reset to a short one
    assert UsersFile(users).authenticate("admin", printed) is not None
    with pytest.raises(UsageError, match="ASYNQPY_ADMIN_PASSWORD"):
        ensure_admin(str(tmp_path / "fresh.toml"), "short")  # nor made with one
    assert not (tmp_path / "fresh.toml").exists()
    monkeypatch.setenv("ASYNQPY_WEB_USERS", str(tmp_path / "other.toml"))
    monkeypatch.setenv("ASYNQPY_ADMIN_PASSWORD", "x")
    addon = next(a for a in dev_addons() if a.name == "dashboard")
    parser = argparse.ArgumentParser()
    addon.add_arguments(parser)
    with pytest.raises(UsageError, match="ASYNQPY_ADMIN_PASSWORD"):
        addon.start(DevContext("redis://127.0.0.1:1/0", tmp_path, parser.parse_args(["--web-port", str(_free())])))
    assert not (tmp_path / "dashboard.pid").exists()


def _free() -> int:
    from asynqpy.embedded import free_port

    return free_port()


def test_web_command_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    from asynqpy.cli import main

    with pytest.raises(SystemExit) as exit:  # argparse's check (asynqpy.cliargs): the usage and one line
        main(["web", "--workers", "0"])
    assert exit.value.code == 2 and "argument --workers: must be at least 1" in capsys.readouterr().err
    assert main(["web", "--url-prefix", "asynq"]) == 2
    assert "must start with '/'" in capsys.readouterr().err


def test_dev_dashboard_shows_an_audit_record_as_one_short_line() -> None:
    from webui.dev import audit_line

    record = {"action": "task.delete", "outcome": "ok", "user": "alice", "role": "operator", "queue": "critical",
              "task_ids": ["a", "b", "c"], "addr": "127.0.0.1", "request_id": "r" * 32, "hash": "h" * 64,
              "prev": "p" * 64, "seq": 7, "time": 1.0}
    assert audit_line(record) == "audit: alice (operator) task.delete critical, 3 tasks: ok"
    assert audit_line({"action": "login", "outcome": "denied", "detail": "x" * 100}) == \
        f"audit: - login: denied ({'x' * 80}...)"
    assert audit_line({"refused": "login", "outcome": "failure", "user": "admin", "counted": 1}) == \
        "audit: admin refused login: failure"


def test_web_prints_one_scheme_and_warns_when_nobody_can_log_in(redis_url: str, tmp_path: Path) -> None:
    from tests.core.procs import Proc

    port = _free()
    with Proc.asynqpy("web", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--redis-url", redis_url,
                      cwd=tmp_path) as web:
        out = web.wait_for("serving the dashboard")
        assert web.stop()[0] == 0
    assert f"serving the dashboard on http://127.0.0.1:{port}/\n" in out, out
    users = tmp_path / "asynqpy-users.toml"
    assert f"there is no users file at {users}, so nobody can log in; add a user with: asynqpy user add NAME " \
           f"--role admin --users {users}" in out
