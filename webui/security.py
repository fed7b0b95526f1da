"""The dashboard's security settings and plumbing: config defaults, the signing key, the session cookie,
response headers, client addresses behind trusted proxies, request ids, and the stores kept in Redis.

``init_app(app, get_inspector=None)`` (get_inspector defaults to ``webui.inspector``). Config keys
(``DEFAULTS``; create_app sets them from a file, ASYNQPY_<KEY> environment variables or tests):
  ASYNQPY_USERS           users file (None: ASYNQPY_WEB_USERS, else ./asynqpy-users.toml)
  SECRET_KEY              session signing key (None: ASYNQPY_WEB_SECRET, else the key file below)
  ASYNQPY_SECRET_FILE     generated key file, mode 0600, shared by every gunicorn worker
                          (None: .asynqpy-web.key beside the users file)
  ASYNQPY_READ_ONLY       refuse every change, whatever the role
  ASYNQPY_TRUSTED_PROXIES addresses or networks (list or "a,b") whose X-Forwarded-For and auth header count
  ASYNQPY_AUTH_HEADER     e.g. "X-Forwarded-User": single sign-on through a trusted proxy ("" = off)
  ASYNQPY_AUTH_GROUPS_HEADER  "X-Forwarded-Groups" (comma separated groups)
  ASYNQPY_AUTH_GROUP_ROLES    {group: role} or "group=role,group=role"; the strongest matching role wins
  ASYNQPY_AUTH_DEFAULT_ROLE   role of a proxy user in no mapped group ("" = refused with 403)
  ASYNQPY_SESSION_IDLE, ASYNQPY_SESSION_MAX_AGE   seconds: 3600 and 43200
  ASYNQPY_SESSION_RECHECK     1.0 s: each worker keeps the sessions it checked in memory and reads the sessions
                              epoch this often, so a logout ends a session on every worker within it
  ASYNQPY_LOGIN_MAX_PER_USER  5 failed logins of one account from one address (or one trusted browser) per window
  ASYNQPY_LOGIN_MAX_PER_ADDR  20 failed logins from one address, all accounts together, per window
  ASYNQPY_LOGIN_WINDOW        900 s, from the first failure
  ASYNQPY_LOGIN_SLOW_AFTER    5 failures of an account from all untrusted browsers, then each attempt waits 1 s,
  ASYNQPY_LOGIN_MAX_WAIT      doubling up to 60 s (a slow-down, never a lock: see inspector.throttle, webui.devices)
  ASYNQPY_AUDIT_CAP       records kept in asynqpy:{audit} before the oldest are spilled and trimmed (100000)
  ASYNQPY_AUDIT_DIR       audit key, anchor and spill file (None: beside the users file; webui.audit)
  ASYNQPY_AUDIT_REFUSED_WINDOW  seconds per aggregate of refused requests (300)
  ASYNQPY_SECURE_COOKIES  None: Secure when the request came over TLS; True/False to force it
  ASYNQPY_CLOCK           Unix-seconds clock (tests)

``state()`` gives the per-app AuthState (users file, sessions, throttle, audit log); ``client_address()``
the browser's address; ``request_id()`` this request's id (also sent back as X-Request-Id).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask, Response, current_app, g, request
from flask.sessions import SecureCookieSessionInterface

from inspector.audit import AuditLog
from inspector.auditkey import create_key_file
from inspector.throttle import LoginThrottle
from inspector.webstate import SessionStore
from webui.users import ENV_USERS, ROLES, UsersFile, default_users_path

ENV_SECRET = "ASYNQPY_WEB_SECRET"
EXT = "asynqpy.auth"
DEFAULTS: dict[str, Any] = {
    "ASYNQPY_USERS": None,
    "ASYNQPY_SECRET_FILE": None,
    "ASYNQPY_READ_ONLY": False,
    "ASYNQPY_TRUSTED_PROXIES": (),
    "ASYNQPY_AUTH_HEADER": "",
    "ASYNQPY_AUTH_GROUPS_HEADER": "X-Forwarded-Groups",
    "ASYNQPY_AUTH_GROUP_ROLES": {},
    "ASYNQPY_AUTH_DEFAULT_ROLE": "",
    "ASYNQPY_SESSION_IDLE": 3600,
    "ASYNQPY_SESSION_MAX_AGE": 12 * 3600,
    "ASYNQPY_SESSION_RECHECK": 1.0,
    "ASYNQPY_LOGIN_MAX_PER_USER": 5,
    "ASYNQPY_LOGIN_MAX_PER_ADDR": 20,
    "ASYNQPY_LOGIN_WINDOW": 900,
    "ASYNQPY_LOGIN_SLOW_AFTER": 5,
    "ASYNQPY_LOGIN_MAX_WAIT": 60,
    "ASYNQPY_AUDIT_CAP": 100_000,
    "ASYNQPY_AUDIT_DIR": None,
    "ASYNQPY_AUDIT_REFUSED_WINDOW": 300,
    "ASYNQPY_SECURE_COOKIES": None,
    "ASYNQPY_CLOCK": time.time,
}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass
class AuthState:
    """What the auth views share in one app: the users file, the Redis-backed stores, the settings."""

    users: UsersFile
    get_inspector: Callable[[], Any]
    clock: Callable[[], float]
    trusted: tuple[Network, ...]
    group_roles: dict[str, str]
    _stores: dict[str, Any] = field(default_factory=dict)

    def _redis(self) -> Any:
        return self.get_inspector().redis

    @property
    def sessions(self) -> SessionStore:
        cfg = current_app.config
        if "sessions" not in self._stores:
            self._stores["sessions"] = SessionStore(self._redis(), idle=cfg["ASYNQPY_SESSION_IDLE"],
                                                    absolute=cfg["ASYNQPY_SESSION_MAX_AGE"], clock=self.clock,
                                                    recheck=cfg["ASYNQPY_SESSION_RECHECK"])
        return self._stores["sessions"]

    @property
    def throttle(self) -> LoginThrottle:
        cfg = current_app.config
        if "throttle" not in self._stores:
            self._stores["throttle"] = LoginThrottle(
                self._redis(), per_pair=cfg["ASYNQPY_LOGIN_MAX_PER_USER"], per_addr=cfg["ASYNQPY_LOGIN_MAX_PER_ADDR"],
                window=cfg["ASYNQPY_LOGIN_WINDOW"], slow_after=cfg["ASYNQPY_LOGIN_SLOW_AFTER"],
                max_wait=cfg["ASYNQPY_LOGIN_MAX_WAIT"], clock=self.clock)
        return self._stores["throttle"]

    @property
    def audit(self) -> AuditLog:
        from webui import audit  # it reads this module's state(); the log, its key and anchor are made there

        return audit.audit_log()


def state() -> AuthState:
    """The current app's AuthState (init_app must have run)."""
    st: AuthState = current_app.extensions[EXT]
    return st


def read_only() -> bool:
    return bool(current_app.config.get("ASYNQPY_READ_ONLY"))


def parse_networks(value: Any) -> tuple[Network, ...]:
    """Addresses or networks from a list or a comma-separated string. Raises ValueError naming a bad one."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    out = []
    for item in (str(i).strip() for i in items):
        if item:
            try:
                out.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"trusted proxy {item!r} is not an IP address or network") from None
    return tuple(out)


def parse_group_roles(value: Any) -> dict[str, str]:
    """{group: role} from a mapping or "group=role,group=role". Raises ValueError for an unknown role."""
    pairs = value.items() if isinstance(value, dict) else (
        p.split("=", 1) for p in str(value or "").split(",") if p.strip())
    out = {}
    for group, role in pairs:
        if role.strip() not in ROLES:
            raise ValueError(f"group {group!r} maps to unknown role {role!r}; expected one of {', '.join(ROLES)}")
        out[group.strip()] = role.strip()
    return out


def _is_trusted(addr: str, trusted: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def peer_address() -> str:
    """The address of whoever opened the connection (before any proxy header is believed)."""
    orig = request.environ.get("werkzeug.proxy_fix.orig") or {}
    return str(orig.get("REMOTE_ADDR") or request.environ.get("REMOTE_ADDR") or "")


def from_trusted_proxy() -> bool:
    return _is_trusted(peer_address(), state().trusted)


def client_address() -> str:
    """The browser's address: the peer, or, when the peer is a trusted proxy, the nearest untrusted address
    in X-Forwarded-For (a forged entry further left is ignored)."""
    peer = peer_address()
    trusted = state().trusted
    if not _is_trusted(peer, trusted):
        return peer
    hops = [h.strip() for h in request.headers.get("X-Forwarded-For", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop[:64]
    return hops[0][:64] if hops else peer


def request_id() -> str:
    """This request's id: the trusted proxy's X-Request-Id, else a new one."""
    rid = getattr(g, "request_id", None)
    if rid is None:
        sent = request.headers.get("X-Request-Id", "")
        ok = sent and len(sent) <= 64 and sent.isascii() and sent.replace("-", "").isalnum()
        rid = sent if ok and from_trusted_proxy() else uuid.uuid4().hex[:16]
        g.request_id = rid
    return str(rid)


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed cookie session, Secure when the request came over TLS (or as configured), and scoped to
    the dashboard's path (under --url-prefix /asynq, Path=/asynq: other apps on the host never see it)."""

    def get_cookie_path(self, app: Flask) -> str:
        return (request.script_root if request else "") or "/"

    def get_cookie_secure(self, app: Flask) -> bool:
        forced = app.config.get("ASYNQPY_SECURE_COOKIES")
        if forced is not None:
            return bool(forced)
        return bool(request) and request.is_secure


def load_secret(path: Path) -> str:
    """The key in path, made (random, mode 0600) when missing. Concurrent workers agree: the first to link its
    file in place wins and the others read it. Raises OSError when the file cannot be read or made."""
    try:
        key = path.read_text().strip()
        if key:
            if path.stat().st_mode & 0o077:
                logging.getLogger("asynqpy.web").warning("the key file %s can be read by others: chmod 600 it", path)
            return key
    except FileNotFoundError:
        pass
    key = create_key_file(path)
    if not key:
        raise OSError(f"the key file {path} is empty: delete it (a new one is made) or set ASYNQPY_WEB_SECRET")
    return key


def _start_request() -> None:
    request_id()  # made now so every log line and audit record of the request carries the same id


def _headers(resp: Response) -> Response:
    h = resp.headers
    h.setdefault("Content-Security-Policy", CSP)
    h.setdefault("X-Content-Type-Options", "nosniff")
    h.setdefault("X-Frame-Options", "DENY")
    h.setdefault("Referrer-Policy", "same-origin")
    h.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    h["X-Request-Id"] = request_id()
    if request.is_secure:
        h.setdefault("Strict-Transport-Security", "max-age=31536000")
    if getattr(g, "user", None) is not None:  # pages, partials and exports (/audit.jsonl) alike
        h.setdefault("Cache-Control", "no-store")
    return resp


def _app_inspector() -> Any:
    from webui import inspector  # the app factory's accessor (webui/app.py imports this module)

    return inspector()


def init_app(app: Flask, get_inspector: Callable[[], Any] | None = None) -> None:
    """Fill config defaults, the signing key and the session cookie, add the response headers, and keep an
    AuthState in app.extensions. get_inspector: returns the app's Inspector (default webui.inspector).

    Raises ValueError for bad settings, OSError when the key file cannot be made.
    """
    for k, v in DEFAULTS.items():
        if app.config.get(k) is None:
            app.config[k] = v
    cfg = app.config
    if not cfg["ASYNQPY_USERS"]:
        cfg["ASYNQPY_USERS"] = os.environ.get(ENV_USERS) or str(default_users_path())
    users_path = Path(cfg["ASYNQPY_USERS"])
    if not cfg.get("SECRET_KEY"):
        env = os.environ.get(ENV_SECRET, "").strip()
        key_file = Path(cfg["ASYNQPY_SECRET_FILE"] or users_path.resolve().parent / ".asynqpy-web.key")
        cfg["SECRET_KEY"] = env or load_secret(key_file)
    cfg["SESSION_COOKIE_NAME"] = "asynqpy_session"
    cfg["SESSION_COOKIE_HTTPONLY"] = True
    cfg["SESSION_COOKIE_SAMESITE"] = "Lax"
    if isinstance(cfg["ASYNQPY_SECURE_COOKIES"], str):  # from the environment or a file
        cfg["ASYNQPY_SECURE_COOKIES"] = cfg["ASYNQPY_SECURE_COOKIES"].strip().lower() in ("1", "true", "yes", "on")
    try:
        cfg["ASYNQPY_SESSION_RECHECK"] = float(cfg["ASYNQPY_SESSION_RECHECK"])
        if not cfg["ASYNQPY_SESSION_RECHECK"] >= 0:
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"ASYNQPY_SESSION_RECHECK must be a number of seconds, got "
                         f"{cfg['ASYNQPY_SESSION_RECHECK']!r}") from None
    default = cfg["ASYNQPY_AUTH_DEFAULT_ROLE"]
    if default and default not in ROLES:
        raise ValueError(f"ASYNQPY_AUTH_DEFAULT_ROLE {default!r} is not one of {', '.join(ROLES)}")
    app.session_interface = SessionInterface()
    app.extensions[EXT] = AuthState(
        users=UsersFile(users_path), get_inspector=get_inspector or _app_inspector, clock=cfg["ASYNQPY_CLOCK"],
        trusted=parse_networks(cfg["ASYNQPY_TRUSTED_PROXIES"]),
        group_roles=parse_group_roles(cfg["ASYNQPY_AUTH_GROUP_ROLES"]))
    app.before_request(_start_request)
    app.after_request(_headers)
