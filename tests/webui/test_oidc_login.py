"""OpenID Connect login against a real provider (node's oidc-provider, tests/webui/oidc/), over real HTTP.

The provider runs from tests/webui/oidc (npm packages installed once into ~/.cache/asynqpy-node, keyed by the
package.json and provider.mjs hash); the dashboard is served by werkzeug on loopback and a requests.Session is
the browser: it follows the redirects and fills the provider's own login and consent forms. Without node or npm
the module skips saying why; ASYNQPY_REQUIRE_OIDC=1 (CI) makes that a failure.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from asynqpy.embedded import free_port
from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.webui.authkit import make_app

requests = pytest.importorskip("requests")

HERE = Path(__file__).parent / "oidc"
SECRET = "test-oidc-client-secret"
GROUP_ROLES = "asynq-admins=admin,asynq-operators=operator,asynq-viewers=viewer"


def _unavailable(why: str) -> None:
    if os.environ.get("ASYNQPY_REQUIRE_OIDC"):
        pytest.fail(f"ASYNQPY_REQUIRE_OIDC is set but {why}")
    pytest.skip(why)


def _provider_dir() -> Path:
    """A copy of tests/webui/oidc with its node_modules installed (cached by the sources' hash)."""
    if not shutil.which("node") or not shutil.which("npm"):
        _unavailable("node and npm are needed to run the OpenID provider (apt-get install nodejs npm)")
    sources = [HERE / "package.json", HERE / "provider.mjs"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    where = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "asynqpy-node" / f"oidc-{digest}"
    if not (where / "node_modules" / "oidc-provider").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        for p in sources:
            shutil.copy(p, where / p.name)
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            _unavailable(f"npm install of oidc-provider failed: {done.stderr.strip()[-500:]}")
    return where


PROVIDER_LOG: list[str] = []


def _drain(stream: Any) -> None:
    """Keep the provider's output (shown when a test fails) and its pipe from filling."""
    for line in stream:
        PROVIDER_LOG.append(line)


class Site:
    """The dashboard on loopback, with the provider it trusts."""

    def __init__(self, base: str, issuer: str, app: Any) -> None:
        self.base = base
        self.issuer = issuer
        self.app = app


@pytest.fixture(scope="module")
def provider_and_port() -> Iterator[tuple[str, int]]:
    where = _provider_dir()
    port, app_port = free_port(), free_port()
    proc = subprocess.Popen(["node", "provider.mjs", str(port), f"http://127.0.0.1:{app_port}/login/oidc/callback",
                             SECRET], cwd=where, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("ready "):
                break
        else:
            pytest.fail("the OpenID provider exited before it listened")
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        yield f"http://127.0.0.1:{port}", app_port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def site(provider_and_port: tuple[str, int], redis_url: str, users_path: Path) -> Iterator[Site]:
    issuer, app_port = provider_and_port
    app = make_app(redis_url, users_path, ASYNQPY_OIDC_ISSUER=issuer, ASYNQPY_OIDC_CLIENT_ID="asynqpy-dashboard",
                   ASYNQPY_OIDC_CLIENT_SECRET=SECRET, ASYNQPY_OIDC_GROUP_ROLES=GROUP_ROLES)
    server = make_server("127.0.0.1", app_port, app, threaded=True)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield Site(f"http://127.0.0.1:{app_port}", issuer, app)
    finally:
        server.shutdown()
        app.extensions["asynqpy.inspector"].close()


def _form(page: str) -> tuple[str, dict[str, str]]:
    """The first form of an HTML page: its action and its named inputs' values."""
    m = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', page, re.S)
    assert m, f"no form in the provider's page: {page[:500]}; provider said: {''.join(PROVIDER_LOG[-20:])}"
    fields = {}
    for tag in re.findall(r"<input[^>]*>", m.group(2)):
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', tag))
        if "name" in attrs:
            fields[html.unescape(attrs["name"])] = html.unescape(attrs.get("value", ""))
    return html.unescape(m.group(1)), fields


def _to_callback(browser: Any, site: Site, account: str) -> str:
    """Start the sign-in at the dashboard, log in and consent at the provider; returns the callback URL the
    provider sends the browser to (not followed yet)."""
    resp = browser.get(f"{site.base}/login/oidc", allow_redirects=True)
    for _ in range(4):  # the provider's login form, then its consent form
        if resp.url.startswith(site.base):
            break
        action, fields = _form(resp.text)
        if "login" in fields:
            fields.update(login=account, password="any")
        resp = browser.post(requests.compat.urljoin(resp.url, action), data=fields, allow_redirects=False)
        while resp.is_redirect and not resp.headers["Location"].startswith(site.base):
            resp = browser.get(requests.compat.urljoin(resp.url, resp.headers["Location"]), allow_redirects=False)
        if resp.is_redirect:
            return str(resp.headers["Location"])
    pytest.fail(f"the provider never sent the browser back: {resp.url}")


def test_the_login_page_offers_sso_and_a_mapped_group_signs_in(site: Site) -> None:
    browser = requests.Session()
    login = browser.get(f"{site.base}/login")
    assert 'id="oidc-login"' in login.text and "Sign in with SSO" in login.text
    back = _to_callback(browser, site, "olivia")
    assert "code=" in back and "state=" in back
    done = browser.get(back)
    assert done.status_code == 200 and done.url.rstrip("/") == site.base, done.url
    assert "oidc:olivia@example.com" in done.text and "operator" in done.text  # no preferred_username: email
    with site.app.app_context():
        page = site.app.extensions["asynqpy.auth"].audit.list(user="oidc:olivia@example.com")
    assert any(r.action == "login" and r.outcome == "ok" and r.user == "oidc:olivia@example.com"
               and r.role == "operator" for r in page.records), page.records


def test_an_oidc_logout_ends_the_session_and_is_audited(site: Site) -> None:
    browser = requests.Session()
    home = browser.get(_to_callback(browser, site, "olivia"))
    assert home.status_code == 200
    tok = re.search(r'"X-CSRF-Token": "([^"]+)"', home.text).group(1)  # type: ignore[union-attr]
    out = browser.post(f"{site.base}/logout", headers={"X-CSRF-Token": tok}, allow_redirects=False)
    assert out.status_code == 303
    assert browser.get(f"{site.base}/", allow_redirects=False).status_code in (302, 303)  # the session is over
    with site.app.app_context():
        page = site.app.extensions["asynqpy.auth"].audit.list(user="oidc:olivia@example.com")
    assert [r.action for r in page.records][:2] == ["logout", "login"], page.records


def test_admin_group_gets_admin_and_the_audit_page(site: Site) -> None:
    browser = requests.Session()
    browser.get(_to_callback(browser, site, "alice"))
    assert browser.get(f"{site.base}/audit").status_code == 200


def test_an_unmapped_group_is_refused_with_a_reason(site: Site) -> None:
    browser = requests.Session()
    resp = browser.get(_to_callback(browser, site, "mallory"))
    assert resp.status_code == 403 and "none of their groups has a role here" in resp.text
    assert browser.get(f"{site.base}/", allow_redirects=False).status_code in (302, 303)  # no session


def test_a_wrong_state_is_refused(site: Site, r: Any) -> None:
    browser = requests.Session()
    back = _to_callback(browser, site, "olivia")
    forged = re.sub(r"state=[^&]+", "state=forged-state", back)
    resp = browser.get(forged)
    assert resp.status_code == 400 and "state" in resp.text
    assert browser.get(f"{site.base}/", allow_redirects=False).status_code in (302, 303)
    # anyone can call the callback: a refusal is counted apart, never appended to the chain of actions
    assert not [x for x in AuditLog(r).list().records if x.action == "login.failed"]
    assert any(c.action == "login.failed" and "(state)" in c.detail for c in RefusedLog(r).list())


def test_a_replayed_code_is_refused(site: Site) -> None:
    first = requests.Session()
    back = _to_callback(first, site, "olivia")
    assert first.get(back).status_code == 200
    # An attacker who saw the callback URL replays it in a browser that started its own sign-in (same state
    # cookie trick is not possible: give it the state of a sign-in it started, with the stolen code).
    thief = requests.Session()
    own = _to_callback(thief, site, "mallory")
    stolen_code = re.search(r"code=([^&]+)", back).group(1)  # type: ignore[union-attr]
    replay = re.sub(r"code=[^&]+", f"code={stolen_code}", own)
    resp = thief.get(replay)
    assert resp.status_code == 400 and "did not accept" in resp.text
    assert thief.get(f"{site.base}/", allow_redirects=False).status_code in (302, 303)


def test_a_sign_in_without_an_id_token_is_refused(provider_and_port: tuple[str, int], redis_url: str,
                                                   users_path: Path, r: Any) -> None:
    """Without the openid scope the provider sends no ID token, so nothing checked says who signed in: refused,
    even with a default role (it was a session as "oidc:unknown", the same name for everyone)."""
    issuer, app_port = provider_and_port
    app = make_app(redis_url, users_path, ASYNQPY_OIDC_ISSUER=issuer, ASYNQPY_OIDC_CLIENT_ID="asynqpy-dashboard",
                   ASYNQPY_OIDC_CLIENT_SECRET=SECRET, ASYNQPY_OIDC_GROUP_ROLES=GROUP_ROLES,
                   ASYNQPY_OIDC_DEFAULT_ROLE="viewer")
    app.extensions["asynqpy.oidc"].oidc.client_kwargs["scope"] = "profile email"  # a provider asked without openid
    server = make_server("127.0.0.1", app_port, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        site = Site(f"http://127.0.0.1:{app_port}", issuer, app)
        browser = requests.Session()
        resp = browser.get(_to_callback(browser, site, "olivia"))
        assert resp.status_code == 400 and "no ID token" in resp.text and "oidc:unknown" not in resp.text
        assert browser.get(f"{site.base}/", allow_redirects=False).status_code in (302, 303)  # no session
        assert not [x for x in AuditLog(r).list().records if x.action == "login"]
        assert any(c.action == "login.failed" and "no ID token" in c.detail for c in RefusedLog(r).list())
    finally:
        server.shutdown()
        app.extensions["asynqpy.inspector"].close()


def test_bad_settings_are_clear_errors(redis_url: str, users_path: Path) -> None:
    with pytest.raises(ValueError, match="ASYNQPY_OIDC_CLIENT_ID"):
        make_app(redis_url, users_path, ASYNQPY_OIDC_ISSUER="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="ASYNQPY_OIDC_SCOPES must include openid"):
        make_app(redis_url, users_path, ASYNQPY_OIDC_ISSUER="http://127.0.0.1:1", ASYNQPY_OIDC_CLIENT_ID="x",
                 ASYNQPY_OIDC_SCOPES="profile email")
    with pytest.raises(ValueError, match="unknown role"):
        make_app(redis_url, users_path, ASYNQPY_OIDC_ISSUER="http://127.0.0.1:1", ASYNQPY_OIDC_CLIENT_ID="x",
                 ASYNQPY_OIDC_GROUP_ROLES="staff=superuser")
