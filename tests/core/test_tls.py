"""A worker over TLS (rediss://): its hand-off lane takes over the TLS transport that redis-py made, and a task
handed over at enqueue runs. Needs a server built with TLS (Debian's redis-server is, the embedded Valkey is not):
the second CI pass names one, ASYNQPY_TEST_SERVER_BINARY; elsewhere redis-server on PATH, else the test skips."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.embedded import EmbeddedServer, EmbeddedServerError, free_port
from asynqpy.rdb import keys
from tests.helpers import running, wait_for


def _binaries() -> list[str]:
    found = [os.environ.get("ASYNQPY_TEST_SERVER_BINARY", ""), shutil.which("redis-server") or ""]
    return [b for b in dict.fromkeys(found) if b]


@pytest.fixture(scope="module")
def tls_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private server with a TLS port (self-signed certificate, clients not asked for theirs): its rediss:// URL."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed: no certificate for the TLS server")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    for binary in _binaries():
        port = free_port()
        server = EmbeddedServer(binary=binary, extra_args=[
            "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no"])
        try:
            server.start()
        except EmbeddedServerError:
            continue  # built without TLS
        try:
            yield f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none"
        finally:
            server.stop()
        return
    pytest.skip(f"no server built with TLS here (tried {_binaries() or 'none'})")


def test_a_worker_over_tls_gets_a_task_handed_over_through_its_own_reader(tls_url: str) -> None:
    r = redis.Redis.from_url(tls_url)
    assert r.ping()
    mux = ServeMux()
    ran, checked = threading.Event(), threading.Event()
    mux.handle("t", lambda t: (ran.set(), checked.wait(10)))  # (active until the test looked: a quick task's
    # acknowledgement could delete it before the test reads its state, on a loaded machine)
    with running(tls_url, mux) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid)
                 and any(c.get("cmd") == "blpop" for c in r.client_list()), what="the lane blocking")
        lanes = srv._processor.handoff.lanes  # type: ignore[union-attr]
        assert [lane.popper.reads_itself for lane in lanes] == [True]  # the TLS transport taken over
        tid = Client(tls_url).enqueue(Task("t", b"")).id
        assert r.hget(keys.task("default", tid), "state") == b"active"  # handed over at enqueue
        checked.set()
        wait_for(ran.is_set, what="the handed task to run")
    assert r.get(keys.processed_total("default")) == b"1"
