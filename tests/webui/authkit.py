"""Helpers for the dashboard's auth tests: an app on the test database, users made once per session, and a
login through the real form. Import the fixtures you need into a test module."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from webui import create_app
from webui.users import UsersFile, create_user

# The one test password, past webui.users.MIN_PASSWORD; a test that needs several derives them from it.
PASSWORD = "test-password-long-enough"
PASSWORDS = {"vera": f"vera-{PASSWORD}", "otto": f"otto-{PASSWORD}", "ada": f"ada-{PASSWORD}"}
ROLES = {"vera": "viewer", "otto": "operator", "ada": "admin"}
SECRET = "test-secret-" + "x" * 40


@pytest.fixture(scope="session")
def users_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A users file with vera (viewer), otto (operator) and ada (admin), hashed once for the session."""
    path = tmp_path_factory.mktemp("users") / "users.toml"
    for name, role in ROLES.items():
        create_user(path, name, role, PASSWORDS[name])
    return path


def queue_roles_file(path: Path, users: Mapping[str, tuple[str, Mapping[str, str]]], password: str) -> Path:
    """A users file at path for per-queue role tests: {name: (role, {queue pattern: role})}, one password for all."""
    f = UsersFile(path)
    for name, (role, queues) in users.items():
        f.add(name, role, password, queue_roles=queues)
    return path


def make_app(redis_url: str, users_path: Path, **config: Any) -> Flask:
    """An app on the test database; each app has an audit directory of its own (key, anchor, spill file), as
    each test has a database of its own."""
    base = {"ASYNQPY_REDIS_URL": redis_url, "ASYNQPY_USERS": str(users_path), "SECRET_KEY": SECRET,
            "TESTING": True, "ASYNQPY_SAMPLE_SECONDS": 0,
            "ASYNQPY_AUDIT_DIR": tempfile.mkdtemp(prefix="audit-", dir=users_path.parent)}
    return create_app({**base, **config})


@contextmanager
def app_on(redis_url: str, users_path: Path, **config: Any) -> Iterator[Flask]:
    """make_app(...) until the block ends, then its inspector closed."""
    a = make_app(redis_url, users_path, **config)
    try:
        yield a
    finally:
        a.extensions["asynqpy.inspector"].close()
        a.extensions["asynqpy.health"].close()


@pytest.fixture
def app(redis_url: str, users_path: Path) -> Iterator[Flask]:
    with app_on(redis_url, users_path) as a:
        yield a


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def form_token(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, "no csrf_token field in the page"
    return m.group(1)


def login(client: FlaskClient, name: str, password: str | None = None, *, next: str | None = None,
          **environ: Any) -> Any:
    """Log in through the form (GET /login for the token, then POST); returns the POST's response."""
    page = client.get("/login" + (f"?next={next}" if next else ""), environ_base=environ)
    data = {"username": name, "password": PASSWORDS.get(name, "") if password is None else password,
            "csrf_token": form_token(page.get_data(as_text=True))}
    if next is not None:
        data["next"] = next
    return client.post("/login", data=data, environ_base=environ)


def token(client: FlaskClient) -> str:
    """The CSRF token of the client's session, as the pages carry it (hx-headers on <body>)."""
    html = client.get("/").get_data(as_text=True)
    m = re.search(r'"X-CSRF-Token": "([^"]+)"', html)
    assert m, "no X-CSRF-Token in hx-headers"
    return m.group(1)


def audit_verdict(app: Flask) -> Any:
    """inspector.auditverify.verify() of the app's audit log, with the app's key and anchor."""
    from inspector.audit import AuditLog
    from inspector.auditverify import verify

    insp = app.extensions["asynqpy.inspector"]
    return verify(AuditLog.open(insp.redis, Path(app.config["ASYNQPY_AUDIT_DIR"]), writer=False))
