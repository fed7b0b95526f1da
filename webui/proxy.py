"""WSGI wrapping for running behind a reverse proxy: a sub-path (SCRIPT_NAME) and X-Forwarded-Proto/-Host/-Prefix
honoured only from trusted proxy addresses (the client address itself is left to webui.security, which reads
X-Forwarded-For from the same trusted addresses)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from werkzeug.middleware.proxy_fix import ProxyFix

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _networks(addrs: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Raises ValueError naming a bad address."""
    out = []
    for a in addrs:
        try:
            out.append(ipaddress.ip_network(a.strip(), strict=False))
        except ValueError:
            raise ValueError(f"--trusted-proxy {a!r} is not an IP address or network") from None
    return out


def wrap(app: WSGIApp, *, prefix: str = "", trusted: Sequence[str] = ()) -> WSGIApp:
    """app served under prefix (e.g. /asynq), trusting forwarded headers only from the trusted addresses."""
    nets = _networks(trusted)
    fixed = ProxyFix(app, x_for=0, x_proto=1, x_host=1, x_port=1, x_prefix=1)

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if prefix:
            path = environ.get("PATH_INFO", "")
            if path == prefix or path.startswith(prefix + "/"):
                environ["PATH_INFO"] = path[len(prefix):] or "/"
            environ["SCRIPT_NAME"] = prefix
        try:
            peer = ipaddress.ip_address(environ.get("REMOTE_ADDR", ""))
        except ValueError:
            peer = None
        if peer is not None and any(peer in n for n in nets):
            return fixed(environ, start_response)  # type: ignore[no-any-return]
        return app(environ, start_response)

    return serve
