"""MetricsHTTPServer: /metrics (optionally behind a bearer token) and health probes, on a port of its own."""

from __future__ import annotations

import hmac
import logging
import re
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from asynqpy.errors import AsynqError, UsageError

log = logging.getLogger("asynqpy")

Render = Callable[[], tuple[bytes, str]]  # body, content type
Probe = Callable[[], tuple[bool, str]]  # ok, why
Health = Callable[[], tuple[bool, bool, str]]  # live, ready, why: Server.health


def health_probes(health: Health) -> dict[str, Probe]:
    """/livez and /readyz from a Server's health(): each answers 200 or 503 with the reason as its body, e.g.
    "degraded: Redis answers BUSY since 12 s" while the worker meets transient Redis trouble (still ready until
    its heartbeat has missed Redis for three intervals; then 503 with the same reason), "ok" once it passed."""
    def live() -> tuple[bool, str]:
        h = health()
        return h[0], h[2]

    def ready() -> tuple[bool, str]:
        h = health()
        return h[1], h[2]

    return {"/livez": live, "/readyz": ready}


# An optional host (a name, an IPv4 address, an IPv6 one bare or in brackets), then a port of ASCII digits.
_BIND = re.compile(r"(?:(?P<host>\[[^\[\]\s]*\]|[^\[\]\s]*):)?(?P<port>[0-9]{1,6})")


def parse_bind(text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """"0.0.0.0:9876", ":9876", "9876" or "[::1]:9876" -> (host, port). Raises UsageError."""
    m = _BIND.fullmatch(text)
    if m is None:
        raise UsageError(f"expected host:port (e.g. 0.0.0.0:9876, :9876 or [::1]:9876), got {text!r}")
    host = (m["host"] or "").removeprefix("[").removesuffix("]") or default_host
    n = int(m["port"])
    if not 0 <= n <= 65535:
        raise UsageError(f"port must be between 0 and 65535, got {n}")
    return host, n


class MetricsHTTPServer:
    """Serves render() at /metrics and each probe at its path (200 when ok, else 503), in a daemon thread.

    token: when set, /metrics answers 401 unless the request carries `Authorization: Bearer <token>`
    (probes stay open: kubelets do not send tokens). Raises AsynqError (one line: a runtime failure in the CLI)
    when it cannot listen on host:port, e.g. the port is in use.
    """

    def __init__(self, host: str, port: int, render: Render, probes: Mapping[str, Probe] | None = None, *,
                 token: str | None = None) -> None:
        self.render = render
        self.probes = dict(probes or {})
        self.token = token or None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer._handle(self)

            def log_message(self, fmt: str, *args: object) -> None:
                log.debug("metrics http: " + fmt, *args)

        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer  # an IPv6 address, e.g. "::1" or "::"
        try:
            self.httpd = server_class((host, port), Handler)
        except OSError as exc:  # a port in use, an address not ours, a host name that does not resolve
            raise AsynqError(f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}") from exc
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> MetricsHTTPServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="asynqpy-metrics-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                if not self.authorized(req.headers.get("Authorization")):
                    self._send(req, 401, b"a bearer token is required\n", "text/plain; charset=utf-8",
                               {"WWW-Authenticate": "Bearer"})
                    return
                body, ctype = self.render()
                self._send(req, 200, body, ctype)
            elif path in self.probes:
                ok, why = self.probes[path]()
                self._send(req, 200 if ok else 503, (why + "\n").encode(), "text/plain; charset=utf-8")
            else:
                self._send(req, 404, b"not found: try /metrics\n", "text/plain; charset=utf-8")
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (Prometheus's scrape_timeout)
            log.debug("metrics http: %s: the client left before the answer", path)
            req.close_connection = True
        except Exception:  # a broken collector answers 500 and is logged; the server carries on
            log.exception("metrics http: %s failed", path)
            try:
                self._send(req, 500, b"internal error\n", "text/plain; charset=utf-8")
            except OSError:
                req.close_connection = True

    def authorized(self, header: str | None) -> bool:
        return authorized(self.token, header)

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str,
              headers: Mapping[str, str] | None = None) -> None:
        req.send_response(code)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            req.send_header(k, v)
        req.end_headers()
        req.wfile.write(body)


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def authorized(token: str | None, header: str | None) -> bool:
    """True when no token is required, or header is `Bearer <token>` (compared in constant time).

    Blanks around the token are no part of it (a token read from a file keeps its newline; Prometheus trims its
    credentials_file); a token of blanks only lets no one in. The header's text is compared as the bytes sent
    (HTTP servers and WSGI hand header values over decoded as Latin-1), so a non-ASCII token works in UTF-8."""
    if not token:
        return True
    want = token.strip().encode()
    scheme, _, given = (header or "").strip().partition(" ")
    try:
        got = given.strip().encode("latin-1")
    except UnicodeEncodeError:  # not a header value as received from a client
        got = given.strip().encode()
    return bool(want) and scheme.lower() == "bearer" and hmac.compare_digest(got, want)
