"""Who is signed in and what they may do: the login/logout blueprint, the user loader, and require_role.

For the app factory: ``auth.init_app(app, get_inspector)``, before the other blueprints, sets up login, CSRF,
sessions, security headers and the /audit page (settings: see webui.security). Then:

- ``g.user``: a ``webui.users.User`` (``.name``, ``.role``, ``.can(role)``, ``.sso``) or None. Anonymous
  requests are sent to /login?next=... except /login, /healthz, /metrics and /static/ (``PUBLIC_PATHS``,
  or decorate a view with ``public``); htmx requests get 401 with an HX-Redirect header instead.
- ``@require_role("operator")`` on a view: 403 unless the user's role includes it, and 403 for any change
  (non-GET) above viewer in read-only mode (``ASYNQPY_READ_ONLY``), whatever the role. Roles: viewer < operator < admin.
  ``can(role)`` (alias ``user_can``) answers the same question inside a view or a template.
- templates: ``can("operator")`` (False in read-only mode), ``current_user`` (g.user), ``read_only``,
  ``csrf_token()``; the logout form posts to ``url_for("auth.logout")`` with the csrf_token field.
- ``webui.audit.record(...)`` writes an audit record for a change; ``record_refused(...)`` counts a failed login
  or a refused request apart from them (see that module).

Logins are throttled by inspector.throttle (each attempt counted before its password is checked) with
webui.devices' cookie exempting browsers that logged in before; requests marked with POLL_HEADER (the pages' own
live refresh) do not count as activity for the idle timeout.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.exceptions import HTTPException

from webui import access, audit, csrf, devices, security
from webui.users import ROLES, User

log = logging.getLogger("asynqpy.web")
bp = Blueprint("auth", __name__)
F = TypeVar("F", bound=Callable[..., Any])
PUBLIC_ENDPOINTS = {"auth.login", "static", "healthz", "metrics.metrics"}
PUBLIC_PATHS = ("/login", "/healthz", "/metrics")
LOGIN_FAILED = "Invalid username or password."
POLL_HEADER = "X-Asynqpy-Poll"


def public(view: F) -> F:
    """Mark a view as open without login (e.g. /healthz)."""
    view._asynqpy_public = True  # type: ignore[attr-defined]
    return view


def _is_public() -> bool:
    if request.endpoint in PUBLIC_ENDPOINTS:
        return True
    view = current_app.view_functions.get(request.endpoint or "")
    if view is not None and getattr(view, "_asynqpy_public", False):
        return True
    return request.path in PUBLIC_PATHS or request.path.startswith("/static/")


def safe_next(target: str | None) -> str:
    """target when it is a path on this site, else the dashboard's root (never an off-site redirect)."""
    root = request.script_root + "/"
    if not target or not isinstance(target, str) or len(target) > 2000:
        return root
    if any(c in target for c in "\\\r\n\t") or not target.startswith("/") or target.startswith("//"):
        return root
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return root
    return target


def _sso_user() -> User | None:
    header = current_app.config.get("ASYNQPY_AUTH_HEADER")
    if not header:
        return None
    name = request.headers.get(header, "").strip()
    if not name:
        return None
    if not security.from_trusted_proxy():
        log.warning("ignored %s from %s: not a trusted proxy", header, security.peer_address())
        return None
    st = security.state()
    groups = {grp.strip() for grp in request.headers.get(current_app.config["ASYNQPY_AUTH_GROUPS_HEADER"], "")
              .split(",") if grp.strip()}
    roles = [role for grp, role in st.group_roles.items() if grp in groups]
    if current_app.config["ASYNQPY_AUTH_DEFAULT_ROLE"]:
        roles.append(current_app.config["ASYNQPY_AUTH_DEFAULT_ROLE"])
    if not roles:
        abort(403, description=f"{name[:100]} signed in through the proxy but none of their groups has a role here")
    return User(name[:200], max(roles, key=ROLES.index), sso=True)


def is_background() -> bool:
    """Whether the page's own refresh sent this request (static/app.js marks polling with POLL_HEADER): it does
    not count as activity, so an open tab does not keep an idle session alive."""
    return request.headers.get(POLL_HEADER) == "1"


def load_user() -> Response | None:
    """Before every request: put the signed-in user (or None) in g.user; send anonymous users to the login."""
    g.user = None
    if _is_public() and request.endpoint != "auth.login":
        return None  # /healthz, /metrics, /static/: no Redis round trip for a session nobody needs
    g.user = _sso_user()
    sid = session.get("sid")
    if g.user is None and isinstance(sid, str):
        st = security.state()
        live = st.sessions.get(sid, touch=not is_background())
        if live is not None and live.via == "oidc":  # signed in at the identity provider: no users-file entry
            g.user = User(live.user, live.role, sso=True) if live.role in ROLES else None
            return None if g.user is not None else _to_login()
        stored = st.users.get(live.user) if live else None
        if live is not None and (stored is None or live.stamp != st.users.stamp(live.user)):
            st.sessions.end(sid)  # removed, or password changed since: this session is over
            stored = None
        if stored is None:
            session.pop("sid", None)
        g.user = stored
    if g.user is not None or request.endpoint == "auth.login":
        return None
    return _to_login()


def _to_login() -> Response:
    """Anonymous: to the login page, back here afterwards (htmx: an HX-Redirect to the page it polls from)."""
    target = request.script_root + request.full_path.rstrip("?")
    if request.headers.get("HX-Request"):
        # back to the page the browser shows after login, not to the partial it was polling
        page = urlsplit(request.headers.get("HX-Current-URL", ""))
        back = page.path + (f"?{page.query}" if page.query else "") if page.netloc == request.host else None
        return Response("login required", 401, {"HX-Redirect": url_for("auth.login", next=back)})
    login = url_for("auth.login", next=target if request.method == "GET" else None)
    return cast(Response, redirect(login, 303))


def refuse_in_read_only() -> None:
    """Before every request: in read-only mode no state-changing request gets to a view (login aside)."""
    if (security.read_only() and request.method not in csrf.SAFE_METHODS
            and request.endpoint not in ("auth.login", "auth.logout")):
        audit.refused_request("the dashboard is read-only: no changes can be made")
        abort(403, description="the dashboard is read-only: no changes can be made")


def require_role(role: str, *, stronger: Callable[[dict[str, Any]], bool] | None = None) -> Callable[[F], F]:
    """Decorate a view: 403 unless g.user's role includes role (and, for a change, not in read-only mode).

    stronger(view_args): whether this call needs the admin role instead (deleting a queue, acting on every task
    of a state), so that a refusal names the role the action really needs. On a view with a <queue> the user's
    role on that queue counts (webui.access.require: a hidden queue is a 404). A refused change (non-GET) is
    counted in the audit log's refused requests. Raises ValueError at decoration time for an unknown role.
    """
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")

    def wrap(view: F) -> F:
        @functools.wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            need = "admin" if stronger is not None and stronger(kwargs) else role
            access.require(kwargs.get("queue"), need)  # per-queue roles: a hidden queue is a 404
            return view(*args, **kwargs)

        return cast(F, guarded)

    return wrap


def can(role: str, queue: str | None = None) -> bool:
    """For templates: whether the signed-in user may do what role allows on queue (default: the queue of the
    page, by their per-queue role; False in read-only mode above viewer)."""
    return access.can(role, queue)


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    nxt = safe_next(request.values.get("next"))
    if request.method == "GET":
        if g.user is not None:
            return redirect(nxt)
        return render_template("login.html", next=nxt, error=None, username="")
    st = security.state()
    name = request.form.get("username", "")[:200]
    password = request.form.get("password", "")
    device = devices.device_for(name)
    attempt = st.throttle.attempt(name, security.client_address(), device)  # counted before the password check
    if not attempt.allowed:
        audit.record_refused("login.failed", outcome="throttled", user=name,
                             detail=f"throttled ({attempt.scope}): too many failed logins")
        resp = render_template("login.html", next=nxt, error=attempt.message(), username=name)
        return resp, 429, {"Retry-After": str(attempt.retry_after)}
    user = st.users.authenticate(name, password)
    if user is None:
        audit.record_refused("login.failed", outcome="failed", user=name, detail="wrong username or password")
        return render_template("login.html", next=nxt, error=LOGIN_FAILED, username=name), 401
    st.throttle.refund(attempt)
    old = session.get("sid")
    if isinstance(old, str):
        st.sessions.end(old)
    session.clear()  # a new session id and a new CSRF token: nothing planted before login survives it
    session["sid"] = st.sessions.create(user.name, st.users.stamp(user.name)).id
    csrf.rotate()
    g.user = user
    audit.record("login", outcome="ok")
    resp = cast(Response, redirect(nxt, 303))
    devices.remember(resp, name, device)
    return resp


@bp.route("/logout", methods=["POST"])
def logout() -> Any:
    sid = session.get("sid")
    if isinstance(sid, str):
        security.state().sessions.end(sid)
    # a proxy (header) user has no session to end; an OpenID Connect user's session is ended like any other and
    # its logout recorded like any other (it was not: g.user.sso is true for both kinds)
    if g.user is not None and (not g.user.sso or isinstance(sid, str)):
        audit.record("logout", outcome="ok")
    session.clear()
    csrf.rotate()
    return redirect(url_for("auth.login"), 303)


user_can = can


def _refused(exc: HTTPException) -> Any:
    """400/401/403 as the dashboard's error page (an htmx request gets the message in place)."""
    from webui import render  # the app's pages; imported late because it imports from this module's package

    return render.error_page(exc, exc.code or 403)


def _template_globals() -> dict[str, Any]:
    return {"can": can, "current_user": g.get("user"), "read_only": security.read_only()}


def init_app(app: Flask, get_inspector: Callable[[], Any] | None = None) -> None:
    """Set up everything of auth on app: security headers, the session cookie and signing key, CSRF, the user
    loader, read-only refusal, can()/current_user in templates, /login, POST /logout and the /audit page.

    get_inspector: returns the app's Inspector, whose connection holds sessions, throttle counters and the
    audit log (default webui.inspector). Call it before registering the other blueprints.
    Raises ValueError for bad settings, OSError when the key file cannot be made.
    """
    security.init_app(app, get_inspector)
    app.before_request(load_user)
    app.before_request(refuse_in_read_only)
    csrf.init_app(app)
    app.context_processor(_template_globals)
    for code in (400, 401, 403):
        app.register_error_handler(code, _refused)
    app.register_blueprint(bp)
    from webui import auditviews  # it imports require_role from here

    app.register_blueprint(auditviews.bp)
