"""CSRF protection: a random token per browser session, required on every POST (and PUT, PATCH, DELETE).

Templates: ``{{ csrf_token() }}``. Forms send it in the field ``csrf_token``; htmx sends it in the header
``X-CSRF-Token``, set once on <body>: ``hx-headers='{"X-CSRF-Token": "{{ csrf_token() }}"}'``. A missing or
wrong token, or a cross-site request (Sec-Fetch-Site, else Origin: scheme and host), answers 400 before the view runs:
nothing changes; the refusal is counted with the other refused requests (webui.audit.refused_request, outcome
"csrf": bounded per window, never in the chain). Tokens are compared with hmac.compare_digest; a new token is
issued at login (``rotate()``).
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from flask import Flask, abort, request, session

from webui import audit

FIELD = "csrf_token"
HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_KEY = "csrf"


def csrf_token() -> str:
    """This browser session's token (made on first use)."""
    tok = session.get(_KEY)
    if not isinstance(tok, str) or len(tok) < 32:
        tok = secrets.token_urlsafe(32)
        session[_KEY] = tok
    return tok


def rotate() -> str:
    """A fresh token (at login and logout)."""
    session.pop(_KEY, None)
    return csrf_token()


def _same_origin(value: str) -> bool:
    """Scheme and host both: an http:// page must not post to the https:// dashboard (nor the other way)."""
    parts = urlsplit(value)
    return parts.scheme == request.scheme and parts.netloc.lower() == request.host.lower()


def check() -> None:
    """Abort with 400 unless a state-changing request carries this session's token from the same origin."""
    if request.method in SAFE_METHODS:
        return
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:  # the browser's own verdict, which no proxy's Host rewriting can confuse
        if fetch_site not in ("same-origin", "none"):
            _refuse("cross-site request refused", f"cross-site request (Sec-Fetch-Site: {fetch_site[:20]})")
    else:
        origin = request.headers.get("Origin")
        if origin and origin != "null" and not _same_origin(origin):
            _refuse("cross-origin request refused (a proxy in front must pass the Host header, and a TLS proxy "
                    "must be a --trusted-proxy so that X-Forwarded-Proto counts)", "foreign Origin")
    sent = request.headers.get(HEADER) or request.form.get(FIELD) or ""
    want = session.get(_KEY)
    if not isinstance(want, str) or not want or not hmac.compare_digest(sent.encode(), want.encode()):
        _refuse("missing or wrong CSRF token: reload the page and try again",
                "missing CSRF token" if not sent else "wrong CSRF token")


def _refuse(message: str, reason: str) -> None:
    """Count the refusal (webui.audit: user if signed in, address, path's verb, reason), then 400 with message.
    reason is one of a few fixed phrases, so a flood of one kind stays one aggregate per window."""
    audit.refused_request(f"CSRF check: {reason} ({request.method} {request.path[:200]})", outcome="csrf")
    abort(400, description=message)


def init_app(app: Flask) -> None:
    """Check every state-changing request and offer csrf_token() to templates."""
    app.before_request(check)
    app.add_template_global(csrf_token, "csrf_token")
