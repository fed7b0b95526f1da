"""A real Prometheus (Debian's package) scraping a real exporter, an exporter whose Redis is down, and a worker
with --processes 2, on loopback ports, with a 1 s scrape interval: started once per session, stopped at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from asynqpy import Client, QueueFullError, Task
from asynqpy.embedded import EmbeddedServer, free_port
from asynqpy.limits import Limit
from asynqpy.rdb import keys
from asynqpy.rdb.flow import set_limit, set_queue_limit

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ASYNQPY = os.path.join(os.path.dirname(sys.executable), "asynqpy")


def prometheus_binary() -> str | None:
    found = shutil.which("prometheus")
    if found is None and os.environ.get("ASYNQPY_REQUIRE_PROMETHEUS"):
        pytest.fail("prometheus is not installed (apt-get install --no-install-recommends prometheus)")
    return found


@dataclass
class Stack:
    prometheus: str  # base URL of Prometheus
    exporter: str  # base URL of the live exporter
    worker: str  # base URL of the worker's metrics port
    redis_url: str

    def query(self, expr: str) -> dict[str, Any]:
        """Prometheus's /api/v1/query answer (raises on an HTTP error: a bad expression is a 400)."""
        data = urllib.parse.urlencode({"query": expr}).encode()
        try:
            with urllib.request.urlopen(self.prometheus + "/api/v1/query", data, timeout=10) as resp:
                return dict(json.load(resp))
        except urllib.error.HTTPError as exc:
            return dict(json.load(exc))

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(self.prometheus + path, timeout=10) as resp:
            return json.load(resp)["data"]


def _wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _config(exporter: int, dead_exporter: int, worker: int) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml with our loopback targets and a 1 s scrape interval."""
    cfg = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    cfg["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    cfg["rule_files"] = [str(DEPLOY / "prometheus" / "alerts.yml")]
    # a third exporter target where nothing listens: Prometheus's up 0 (AsynqpyExporterDown)
    targets = {"asynqpy-exporter": [f"127.0.0.1:{exporter}", f"127.0.0.1:{dead_exporter}", f"127.0.0.1:{free_port()}"],
               "asynqpy-workers": [f"127.0.0.1:{worker}"]}
    cfg["scrape_configs"] = [j for j in cfg["scrape_configs"] if j["job_name"] in targets]
    for job in cfg["scrape_configs"]:
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    return cfg


@pytest.fixture(scope="module")
def prometheus_stack() -> Iterator[Stack]:
    """Prometheus scraping two exporters and a worker fed by a producer thread, for the module that asks (its
    only user): torn down after it, so the producer's enqueues never reach another module's tests (their
    OpenTelemetry spans, for one)."""
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("prometheus is not installed (apt-get install --no-install-recommends prometheus)")
    tmp = Path(tempfile.mkdtemp(prefix="asynqpy-prom-"))
    valkey = EmbeddedServer().start()
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()
    try:
        url = valkey.url
        c = Client(url)
        r = redis.Redis.from_url(url)
        # A task pending for an hour (as one left behind would be), in a queue nobody serves.
        tid = c.enqueue(Task("old"), queue="stale").id
        r.hset(keys.task("stale", tid), "pending_since", str(int((time.time() - 3600) * 1e9)))
        set_queue_limit(r, "stale", max_size=1)  # full: the producer's enqueues there are refused
        set_limit(r, Limit("ok:slow", concurrency=1), queues=["work"])  # pairs of slow tasks: one waits on it
        p_exp, p_dead, p_work, p_prom = (free_port() for _ in range(4))
        log = open(tmp / "children.log", "wb")  # noqa: SIM115 (closed with the stack)
        procs.append(subprocess.Popen([ASYNQPY, "exporter", "--bind", f"127.0.0.1:{p_exp}", "--redis-url", url],
                                      stdout=log, stderr=log))
        procs.append(subprocess.Popen([ASYNQPY, "exporter", "--bind", f"127.0.0.1:{p_dead}", "--redis-url",
                                       "redis://127.0.0.1:1/0"], stdout=log, stderr=log))
        procs.append(subprocess.Popen([ASYNQPY, "worker", "tests.metrics.apps:mux", "--redis-url", url,
                                       "--queues", "work=1", "--processes", "2", "--metrics-port", str(p_work),
                                       "--metrics-host", "127.0.0.1"], cwd=REPO, stdout=log, stderr=log))
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(_config(p_exp, p_dead, p_work)))
        procs.append(subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={tmp / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{p_prom}"], stdout=log, stderr=log))

        def produce() -> None:  # a steady stream: successes of ~20 ms and failures that archive
            n = 0
            while not stop.wait(0.05):
                n += 1
                try:
                    c.enqueue(Task("ok", b"0.02"), queue="work")
                    with contextlib.suppress(QueueFullError):
                        c.enqueue(Task("more"), queue="stale")
                    if n % 2 == 0:
                        c.enqueue(Task("fail", b""), queue="work", max_retry=0)
                    if n % 10 == 0:  # two at once, every 0.5 s: the second waits on the limit for ~0.2 s
                        for _ in range(2):
                            c.enqueue(Task("ok:slow", b"0.2"), queue="work")
                except Exception:
                    continue

        threading.Thread(target=produce, daemon=True, name="producer").start()
        base = f"http://127.0.0.1:{p_prom}"
        for u in (f"http://127.0.0.1:{p_exp}/livez", f"http://127.0.0.1:{p_dead}/livez", base + "/-/ready"):
            _wait_http(u, 20)
        yield Stack(base, f"http://127.0.0.1:{p_exp}", f"http://127.0.0.1:{p_work}", url)
    finally:
        stop.set()
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        valkey.stop()
        shutil.rmtree(tmp, ignore_errors=True)
