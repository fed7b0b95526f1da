"""Device cookies (OWASP's answer to lockout abuse): a browser that has logged in as an account before carries a
signed note of it, and its login attempts for that account count against that note only, never against the
account's or the address's counters, so others' failed guesses neither lock nor slow it.

``device_for(account)``: the device id this request's cookie holds for account, or None (no cookie, a forged or
expired one, or one for other accounts). ``remember(resp, account, device)``: after a successful login, (re)issue
the cookie. It is HttpOnly, SameSite=Strict, scoped to the dashboard's path, signed with the session key, and
valid DEVICE_DAYS days from the last login; it holds at most MAX_ACCOUNTS accounts.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Response, current_app, request
from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE = "asynqpy_device"
DEVICE_DAYS = 90
MAX_ACCOUNTS = 5
_SALT = "asynqpy.device-cookie"


def _signer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=_SALT)


def _entries() -> dict[str, str]:
    raw = request.cookies.get(COOKIE)
    if not raw or len(raw) > 4096:
        return {}
    try:
        data: Any = _signer().loads(raw, max_age=DEVICE_DAYS * 86400)
    except BadSignature:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def device_for(account: str) -> str | None:
    """The device id this browser holds for account, when its cookie is genuine and recent enough."""
    return _entries().get(account.lower()[:200])


def remember(resp: Response, account: str, device: str | None) -> None:
    """Issue the cookie (keeping the device id this browser already had for account, if any)."""
    entries = _entries()
    name = account.lower()[:200]
    entries.pop(name, None)
    entries[name] = device or secrets.token_urlsafe(18)
    kept = dict(list(entries.items())[-MAX_ACCOUNTS:])
    secure = current_app.session_interface.get_cookie_secure(current_app)
    resp.set_cookie(COOKIE, _signer().dumps(kept), max_age=DEVICE_DAYS * 86400, httponly=True, samesite="Strict",
                    secure=secure, path=request.script_root or "/")
