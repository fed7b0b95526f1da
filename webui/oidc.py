"""OpenID Connect login: the authorization code flow with PKCE against any OpenID provider, through Authlib.

Off unless ASYNQPY_OIDC_ISSUER is set. Settings (the dashboard config file, ASYNQPY_* variables or create_app):
  ASYNQPY_OIDC_ISSUER         the provider's issuer URL; its /.well-known/openid-configuration is read
  ASYNQPY_OIDC_CLIENT_ID      this dashboard's client id at the provider
  ASYNQPY_OIDC_CLIENT_SECRET  its secret (or ASYNQPY_OIDC_CLIENT_SECRET_FILE, a file holding it)
  ASYNQPY_OIDC_SCOPES         "openid profile email" (add the scope that carries the groups claim, if any)
  ASYNQPY_OIDC_GROUPS_CLAIM   "groups": the ID-token (or userinfo) claim listing the user's groups
  ASYNQPY_OIDC_GROUP_ROLES    {group: role} or "group=role,group=role"; the strongest matching role wins
  ASYNQPY_OIDC_DEFAULT_ROLE   role of a user in no mapped group ("" = refused with 403, the default)
  ASYNQPY_OIDC_NAME_CLAIM     "preferred_username": the claim shown as the user's name (then email, then sub)
  ASYNQPY_OIDC_LABEL          "Sign in with SSO": the login page's button

The login page gets a button to /login/oidc, which sends the browser to the provider with a fresh state, nonce
and PKCE (S256) challenge kept in the signed session cookie; /login/oidc/callback checks the state, trades the
code (once: a replayed code is refused by the provider), checks the ID token's signature, issuer, audience,
expiry and nonce (Authlib), maps the groups to a role and starts a dashboard session as any login does. Every
outcome is audited. The user's name is prefixed "oidc:" so it never collides with a users-file account.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, current_app, g, redirect, render_template, request, session, url_for

from webui import audit, csrf, security
from webui.auth import PUBLIC_ENDPOINTS, safe_next
from webui.users import ROLES, User

log = logging.getLogger("asynqpy.web")
bp = Blueprint("oidc", __name__)
EXT = "asynqpy.oidc"
NAME_PREFIX = "oidc:"
DEFAULTS: dict[str, Any] = {
    "ASYNQPY_OIDC_ISSUER": "",
    "ASYNQPY_OIDC_CLIENT_ID": "",
    "ASYNQPY_OIDC_CLIENT_SECRET": "",
    "ASYNQPY_OIDC_CLIENT_SECRET_FILE": "",
    "ASYNQPY_OIDC_SCOPES": "openid profile email",
    "ASYNQPY_OIDC_GROUPS_CLAIM": "groups",
    "ASYNQPY_OIDC_GROUP_ROLES": {},
    "ASYNQPY_OIDC_DEFAULT_ROLE": "",
    "ASYNQPY_OIDC_NAME_CLAIM": "preferred_username",
    "ASYNQPY_OIDC_LABEL": "Sign in with SSO",
}


def enabled() -> bool:
    """Whether this app offers OpenID Connect login (for the login template)."""
    return EXT in current_app.extensions


def role_for(groups: list[str], group_roles: dict[str, str], default: str) -> str | None:
    """The strongest role any of groups maps to, else default (None when that is "" : the user is refused)."""
    roles = [group_roles[grp] for grp in groups if grp in group_roles]
    if default:
        roles.append(default)
    return max(roles, key=ROLES.index) if roles else None


def _claim_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if isinstance(v, (str, int))]
    return []


def _display_name(claims: dict[str, Any]) -> str:
    for key in (current_app.config["ASYNQPY_OIDC_NAME_CLAIM"], "preferred_username", "email", "sub"):
        value = claims.get(key)
        if isinstance(value, str) and value.strip():
            return NAME_PREFIX + value.strip()[:150]
    return NAME_PREFIX + "unknown"


def _client() -> Any:
    return current_app.extensions[EXT].oidc


@bp.route("/login/oidc")
def start() -> Any:
    """Send the browser to the provider (a new state, nonce and PKCE verifier in the session)."""
    if g.get("user") is not None:
        return redirect(url_for("pages.overview"))
    session["oidc_next"] = safe_next(request.args.get("next"))
    return _client().authorize_redirect(url_for("oidc.callback", _external=True))


@bp.route("/login/oidc/callback")
def callback() -> Any:
    """The provider's answer: check it all, then start a session (or refuse, saying why)."""
    from authlib.integrations.base_client.errors import MismatchingStateError, OAuthError

    if request.args.get("error"):
        reason = f"the identity provider refused the login: {request.args.get('error', '')[:100]}"
        return _refuse(reason, 403, user="")
    try:
        token = _client().authorize_access_token()
    except MismatchingStateError:
        return _refuse("the sign-in answer does not match a sign-in this browser started (state); start again",
                       400, user="")
    except OAuthError as exc:  # e.g. invalid_grant for a code used twice or expired
        return _refuse(f"the identity provider did not accept the sign-in: {exc.error}", 400, user="")
    except Exception as exc:  # a bad ID token (signature, issuer, audience, nonce), or the provider unreachable
        log.warning("OIDC sign-in failed: %s: %s", type(exc).__name__, exc)
        return _refuse(f"the sign-in could not be checked: {type(exc).__name__}", 400, user="")
    claims = dict(token.get("userinfo") or {})
    if not token.get("id_token") or not isinstance(claims.get("sub"), str) or not claims["sub"]:
        # Authlib checks the ID token's signature, issuer, audience, expiry and nonce only when there is one:
        # without it nothing says who signed in (every such user was "oidc:unknown" with the default role)
        return _refuse("the identity provider sent no ID token (is openid in ASYNQPY_OIDC_SCOPES?)", 400, user="")
    groups_claim = current_app.config["ASYNQPY_OIDC_GROUPS_CLAIM"]
    groups = _claim_list(claims.get(groups_claim))
    name = _display_name(claims)
    st = current_app.extensions[EXT]
    role = role_for(groups, st.group_roles, current_app.config["ASYNQPY_OIDC_DEFAULT_ROLE"])
    if role is None:
        return _refuse(f"{name} signed in, but none of their groups has a role here", 403, user=name)
    nxt = session.pop("oidc_next", None) or url_for("pages.overview")
    old = session.get("sid")
    auth = security.state()
    if isinstance(old, str):
        auth.sessions.end(old)
    session.clear()
    session["sid"] = auth.sessions.create(name, "", role=role, via="oidc").id
    csrf.rotate()
    g.user = User(name, role, sso=True)
    audit.record("login", outcome="ok", detail=f"OpenID Connect; groups: {', '.join(groups)[:200] or '-'}")
    return redirect(nxt, 303)


def _refuse(reason: str, status: int, *, user: str) -> Any:
    session.pop("oidc_next", None)
    # counted apart from the chain, as every failed login: anyone can call the callback with a bad state
    audit.record_refused("login.failed", outcome="denied", user=user, detail=f"OpenID Connect: {reason}")
    return render_template("login.html", next=url_for("pages.overview"), error=reason, username=""), status


class OidcState:
    """The registered Authlib client and the group-to-role map of one app."""

    def __init__(self, oidc: Any, group_roles: dict[str, str]) -> None:
        self.oidc = oidc
        self.group_roles = group_roles


def _secret(cfg: Any) -> str:
    if cfg["ASYNQPY_OIDC_CLIENT_SECRET"]:
        return str(cfg["ASYNQPY_OIDC_CLIENT_SECRET"])
    path = cfg["ASYNQPY_OIDC_CLIENT_SECRET_FILE"]
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read ASYNQPY_OIDC_CLIENT_SECRET_FILE {path}: {exc.strerror}") from None
    return ""


def init_app(app: Flask) -> None:
    """Register /login/oidc and its callback when ASYNQPY_OIDC_ISSUER is set. Raises ValueError for bad
    settings (a missing client id, an unknown role) and names the setting."""
    for k, v in DEFAULTS.items():
        if app.config.get(k) is None:
            app.config[k] = v
    cfg = app.config
    issuer = str(cfg["ASYNQPY_OIDC_ISSUER"] or "").rstrip("/")
    if not issuer:
        return
    if not cfg["ASYNQPY_OIDC_CLIENT_ID"]:
        raise ValueError("ASYNQPY_OIDC_ISSUER is set but ASYNQPY_OIDC_CLIENT_ID is not")
    if "openid" not in str(cfg["ASYNQPY_OIDC_SCOPES"]).split():
        raise ValueError(f"ASYNQPY_OIDC_SCOPES must include openid (the ID token says who signed in), got "
                         f"{cfg['ASYNQPY_OIDC_SCOPES']!r}")
    default = cfg["ASYNQPY_OIDC_DEFAULT_ROLE"]
    if default and default not in ROLES:
        raise ValueError(f"ASYNQPY_OIDC_DEFAULT_ROLE {default!r} is not one of {', '.join(ROLES)}")
    try:
        from authlib.integrations.flask_client import OAuth
    except ImportError:
        raise ValueError("OpenID Connect login needs Authlib: pip install 'asynqpy[oidc]'") from None
    oauth = OAuth(app)
    client = oauth.register(
        "oidc", client_id=cfg["ASYNQPY_OIDC_CLIENT_ID"], client_secret=_secret(cfg),
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_kwargs={"scope": cfg["ASYNQPY_OIDC_SCOPES"], "code_challenge_method": "S256", "timeout": 10})
    app.extensions[EXT] = OidcState(client, security.parse_group_roles(cfg["ASYNQPY_OIDC_GROUP_ROLES"]))
    PUBLIC_ENDPOINTS.update({"oidc.start", "oidc.callback"})  # anonymous by nature: they sign the user in
    label = str(cfg["ASYNQPY_OIDC_LABEL"])
    app.context_processor(lambda: {"oidc_label": label})
    app.register_blueprint(bp)

