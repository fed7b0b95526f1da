"""CSRF protection: a random token per browser session, required on every POST (and PUT, PATCH, DELETE).

Templates: ``{{ csrf_token() }}``. Forms send it in the field ``csrf_token``; htmx sends it in the header
``X-CSRF-Token``, set once on <body>: ``hx-headers='{"X-CSRF-Token": "{{ csrf_token() }}"}'``. A missing or
wrong token, or a cross-site request (Sec-Fetch-Site, else Origin: scheme and host), answers 400 before the view runs:
nothing changes. Tokens are compared with hmac.compare_digest; a new token is issued at login (``rotate()``).
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from flask import Flask, abort, request, session

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
            abort(400, description="cross-site request refused")
    else:
        origin = request.headers.get("Origin")
        if origin and origin != "null" and not _same_origin(origin):
            abort(400, description="cross-origin request refused (a proxy in front must pass the Host header, and "
                                   "a TLS proxy must be a --trusted-proxy so that X-Forwarded-Proto counts)")
    sent = request.headers.get(HEADER) or request.form.get(FIELD) or ""
    want = session.get(_KEY)
    if not isinstance(want, str) or not want or not hmac.compare_digest(sent.encode(), want.encode()):
        abort(400, description="missing or wrong CSRF token: reload the page and try again")


def init_app(app: Flask) -> None:
    """Check every state-changing request and offer csrf_token() to templates."""
    app.before_request(check)
    app.add_template_global(csrf_token, "csrf_token")
