"""MetricsHTTPServer (the worker's and the exporter's /metrics, /livez, /readyz) over real sockets."""

from __future__ import annotations

import http.client
import logging
import socket
import struct
import threading

import pytest

from asynqpy.metrics.http import MetricsHTTPServer, parse_bind
from tests.helpers import wait_for
from tests.metrics.scrape import get


def test_a_client_gone_before_the_answer_is_no_error(caplog: pytest.LogCaptureFixture,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """Prometheus gives up on a slow scrape (its scrape_timeout) and closes the connection: the answer's write
    fails, which is no error of ours. It logged "metrics http: /metrics failed" with a traceback, tried to answer
    500 on the closed connection and socketserver printed a second traceback."""
    entered, release = threading.Event(), threading.Event()

    def slow() -> tuple[bytes, str]:
        entered.set()
        release.wait(30)
        return b"x" * 1_000_000, "text/plain"

    srv = MetricsHTTPServer("127.0.0.1", 0, slow).start()
    try:
        with caplog.at_level(logging.DEBUG, logger="asynqpy"):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert entered.wait(10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # gone: a reset
            s.close()
            done = threading.Event()
            orig = srv.httpd.shutdown_request

            def noted(request: object) -> None:
                orig(request)  # type: ignore[arg-type]
                done.set()

            srv.httpd.shutdown_request = noted  # type: ignore[method-assign]
            release.set()
            wait_for(done.is_set, what="the server to finish the request")
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "Traceback" not in capfd.readouterr().err
        srv.render = lambda: (b"ok\n", "text/plain")
        assert get(f"http://127.0.0.1:{srv.port}/metrics")[0] == 200  # and it carries on
    finally:
        release.set()
        srv.stop()


@pytest.mark.parametrize("bind", ["[::1]:0", "::1:0"])
def test_an_ipv6_address_listens(bind: str) -> None:
    """`--bind [::1]:9876` (the form parse_bind documents) and `--metrics-host ::1` listen on IPv6; they failed
    with "address family for hostname not supported" (the server was IPv4 only)."""
    host, port = parse_bind(bind)
    srv = MetricsHTTPServer(host, port, lambda: (b"ok\n", "text/plain"), {"/livez": lambda: (True, "ok")}).start()
    try:
        assert get(f"http://[::1]:{srv.port}/livez") == (200, "text/plain; charset=utf-8", "ok\n")
    finally:
        srv.stop()


def _status(port: int, authorization: bytes | None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", "/metrics")
        if authorization is not None:
            conn.putheader("Authorization", authorization)  # bytes as given: UTF-8, as Prometheus sends them
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize(("token", "ok", "refused"), [
    # a token read from a file or a Kubernetes Secret with its newline; Prometheus trims its credentials_file
    ("s3cret\n", [b"Bearer s3cret"], [b"Bearer s3cre", b"Bearer s3cret\\n", b"", b"Basic s3cret"]),
    # a token with non-ASCII characters, sent as UTF-8
    ("s\u00e9cr\u00eat-\u00f8", ["Bearer s\u00e9cr\u00eat-\u00f8".encode()], [b"Bearer s", "Bearer s\u00e9".encode()]),
    # blanks only: refuses everyone rather than letting "Bearer " in
    ("  ", [], [b"Bearer ", b"Bearer", b""]),
])
def test_bearer_token_as_operators_give_it(token: str, ok: list[bytes], refused: list[bytes]) -> None:
    """The token compares with what a client sends: a token with a trailing newline (a Secret file) refused its
    own value, forever 401; a non-ASCII one refused the right token (the header's UTF-8 was compared as
    Latin-1 text re-encoded)."""
    srv = MetricsHTTPServer("127.0.0.1", 0, lambda: (b"ok\n", "text/plain"), token=token).start()
    try:
        assert [_status(srv.port, h) for h in ok] == [200] * len(ok)
        assert [_status(srv.port, h or None) for h in refused] == [401] * len(refused)
    finally:
        srv.stop()
