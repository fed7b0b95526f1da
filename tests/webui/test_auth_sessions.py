"""Sessions, login throttling, redirects after login and the security headers of the dashboard."""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from pathlib import Path

import pytest
import redis
from flask.testing import FlaskClient

from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.webui.authkit import PASSWORD, form_token, login, make_app, token
from webui import users as users_mod
from webui.users import create_user


def _cookie(c: FlaskClient) -> str:
    ck = c.get_cookie("asynqpy_session")
    assert ck is not None
    return ck.value


def test_login_rotates_the_session_and_the_csrf_token(client: FlaskClient) -> None:
    before_token = form_token(client.get("/login").get_data(as_text=True))
    before = _cookie(client)
    assert login(client, "otto").status_code == 303
    assert _cookie(client) != before
    assert token(client) != before_token


def test_logout_ends_the_session_on_the_server(app, client: FlaskClient, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    login(client, "otto")
    stolen = _cookie(client)
    thief = app.test_client()
    thief.set_cookie("asynqpy_session", stolen)
    assert thief.get("/").status_code == 200  # a copied cookie works while the session lives ...
    assert client.post("/logout", headers={"X-CSRF-Token": token(client)}).status_code == 303
    resp = thief.get("/")  # ... and stops working once its owner logs out
    assert resp.status_code == 303 and resp.headers["Location"].startswith("/login")
    assert client.get("/").status_code == 303
    actions = [x.action for x in AuditLog(r).list().records]
    assert actions[:2] == ["logout", "login"]


def test_logout_needs_a_post_with_the_token(client: FlaskClient) -> None:
    login(client, "otto")
    assert client.get("/logout").status_code == 405
    assert client.post("/logout").status_code == 400
    assert client.get("/").status_code == 200


def test_idle_and_absolute_timeouts(redis_url: str, users_path: Path) -> None:
    now = [1_800_000_000.0]
    app = make_app(redis_url, users_path, ASYNQPY_CLOCK=lambda: now[0], ASYNQPY_SESSION_IDLE=600,
                   ASYNQPY_SESSION_MAX_AGE=1800)
    c = app.test_client()
    login(c, "vera")
    now[0] += 599
    assert c.get("/").status_code == 200
    now[0] += 601  # idle for longer than 600 s
    assert c.get("/").status_code == 303
    login(c, "vera")
    for _ in range(4):  # active every 500 s, but 1800 s after login the session ends anyway
        now[0] += 500
        assert c.get("/").status_code == (200 if _ < 3 else 303)


def test_removing_a_user_or_lowering_a_role_takes_effect_at_once(redis_url: str, tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    create_user(path, "ann", "admin", PASSWORD)
    app = make_app(redis_url, path)
    c = app.test_client()
    login(c, "ann", PASSWORD)
    assert c.get("/audit").status_code == 200
    users_mod.UsersFile(path).set_role("ann", "viewer")
    assert c.get("/audit").status_code == 403
    users_mod.UsersFile(path).remove("ann")
    assert c.get("/").status_code == 303


def test_unknown_user_and_wrong_password_look_the_same(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real = users_mod.verify_password
    def counting(stored: str, password: str) -> bool:
        checked.append(stored)
        return real(stored, password)

    monkeypatch.setattr(users_mod, "verify_password", counting)
    a = login(client, "otto", "wrong")
    b = login(client, "nobody-here", "wrong")
    assert a.status_code == b.status_code == 401
    norm = [re.sub(r'value="[^"]*"', 'value=""', x.get_data(as_text=True)) for x in (a, b)]
    assert norm[0] == norm[1]
    assert "Invalid username or password." in norm[0]
    assert len(checked) == 2 and all(h.startswith("scrypt$16384$") for h in checked)  # a hash is computed either way


def test_failed_logins_are_throttled_per_account(client: FlaskClient, app, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    for _ in range(5):
        assert login(client, "otto", "guess").status_code == 401
    resp = login(client, "otto")  # the right password, but too late
    assert resp.status_code == 429 and "Too many failed logins" in resp.get_data(as_text=True)
    assert 0 < int(resp.headers["Retry-After"]) <= 900
    other = app.test_client()
    assert login(other, "vera").status_code == 303  # other accounts from the same address are not locked
    counts: Counter[tuple[str, str, str]] = Counter()
    for x in RefusedLog(r).list():  # one row per 5-minute window: the logins may straddle two
        counts[(x.action, x.outcome, x.user)] += x.count
    assert counts == {("login.failed", "throttled", "otto"): 1, ("login.failed", "failed", "otto"): 5}
    assert "login.failed" not in [x.action for x in AuditLog(r).list().records]


def test_failed_logins_are_throttled_per_address(redis_url: str, users_path: Path) -> None:
    app = make_app(redis_url, users_path, ASYNQPY_LOGIN_MAX_PER_ADDR=3)
    bad, good = {"REMOTE_ADDR": "198.51.100.9"}, {"REMOTE_ADDR": "198.51.100.10"}
    c = app.test_client()
    for name in ("a1", "a2", "a3"):  # a different unknown account each time
        assert login(c, name, "x", **bad).status_code == 401
    assert login(c, "ada", **bad).status_code == 429
    assert login(app.test_client(), "ada", **good).status_code == 303


def test_throttle_state_is_shared_by_every_app_process(redis_url: str, users_path: Path) -> None:
    one, two = make_app(redis_url, users_path), make_app(redis_url, users_path)
    for i in range(5):
        login((one if i % 2 else two).test_client(), "vera", "nope")
    assert login(one.test_client(), "vera").status_code == 429
    assert login(two.test_client(), "vera").status_code == 429


@pytest.mark.parametrize("target", [
    "https://evil.example/", "//evil.example/x", "/\\evil.example", "\\\\evil.example", "javascript:alert(1)",
    "http:/evil.example", " //evil.example", "evil.example", "/\t/evil.example", "///evil.example"])
def test_next_never_leaves_the_site(client: FlaskClient, target: str) -> None:
    resp = login(client, "vera", next=target)
    assert resp.status_code == 303
    assert resp.headers["Location"] == "/"


def test_next_keeps_a_path_on_the_site(client: FlaskClient) -> None:
    resp = login(client, "vera", next="/queues/default/archived?page=3")
    assert resp.headers["Location"] == "/queues/default/archived?page=3"


def test_security_headers_and_cookie_flags(client: FlaskClient) -> None:
    resp = client.get("/login")
    csp = resp.headers["Content-Security-Policy"]
    script = next(p for p in csp.split(";") if p.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script
    assert "frame-ancestors 'none'" in csp
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Referrer-Policy"] == "same-origin"
    assert resp.headers["X-Request-Id"]
    cookie = resp.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    https = client.get("/login", base_url="https://dash.example")
    assert "Secure" in https.headers["Set-Cookie"] and "Strict-Transport-Security" in https.headers
    assert "no-store" not in resp.headers.get("Cache-Control", "")
    login(client, "vera")
    assert client.get("/").headers["Cache-Control"] == "no-store"


def test_the_generated_key_file_is_private_and_shared(redis_url: str, users_path: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNQPY_WEB_SECRET", raising=False)
    key = tmp_path / "web.key"
    one = make_app(redis_url, users_path, SECRET_KEY=None, ASYNQPY_SECRET_FILE=str(key))
    two = make_app(redis_url, users_path, SECRET_KEY=None, ASYNQPY_SECRET_FILE=str(key))
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert one.config["SECRET_KEY"] == two.config["SECRET_KEY"] == key.read_text().strip()
    assert len(one.config["SECRET_KEY"]) >= 40
    c1 = one.test_client()
    login(c1, "vera")
    c2 = two.test_client()  # another worker with the same key accepts the session
    c2.set_cookie("asynqpy_session", _cookie(c1))
    assert c2.get("/").status_code == 200
    monkeypatch.setenv("ASYNQPY_WEB_SECRET", "from-the-environment")
    three = make_app(redis_url, users_path, SECRET_KEY=None, ASYNQPY_SECRET_FILE=str(key))
    assert three.config["SECRET_KEY"] == "from-the-environment"


def test_a_password_change_ends_open_sessions(redis_url: str, tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    create_user(path, "ann", "operator", PASSWORD)
    app = make_app(redis_url, path)
    c = app.test_client()
    login(c, "ann", PASSWORD)
    assert c.get("/").status_code == 200
    users_mod.UsersFile(path).set_password("ann", f"new-{PASSWORD}")  # as `asynqpy user passwd` or a hand edit would
    assert c.get("/").status_code == 303
    assert login(c, "ann", f"new-{PASSWORD}").status_code == 303 and c.get("/").status_code == 200


def test_settings_from_the_environment(redis_url: str, users_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNQPY_AUTH_HEADER", "X-Remote-User")
    monkeypatch.setenv("ASYNQPY_TRUSTED_PROXIES", "10.1.0.0/16")
    monkeypatch.setenv("ASYNQPY_AUTH_GROUP_ROLES", "sre=admin")
    monkeypatch.setenv("ASYNQPY_SECURE_COOKIES", "false")
    monkeypatch.setenv("ASYNQPY_READ_ONLY", "yes")
    c = make_app(redis_url, users_path).test_client()
    hdrs = {"X-Remote-User": "kim", "X-Forwarded-Groups": "sre"}
    resp = c.get("/audit", headers=hdrs, environ_base={"REMOTE_ADDR": "10.1.2.3"}, base_url="https://dash.example")
    assert resp.status_code == 200
    assert "asynqpy_session=" in resp.headers["Set-Cookie"] and "Secure" not in resp.headers["Set-Cookie"]
    assert "read-only" in resp.get_data(as_text=True)
    monkeypatch.setenv("ASYNQPY_AUTH_GROUP_ROLES", "sre=root")
    with pytest.raises(ValueError, match="unknown role"):
        make_app(redis_url, users_path)
