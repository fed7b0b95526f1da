"""MetricsHTTPServer (the worker's and the exporter's /metrics, /livez, /readyz) over real sockets."""

from __future__ import annotations

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
