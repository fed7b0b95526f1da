"""The queue-size chart has its last hour on the first visit (issue 19, item 12): `asynqpy web` samples queue
sizes from the moment its gunicorn workers boot, not from the first page someone opens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from asynqpy import Client, Task
from asynqpy.embedded import free_port
from asynqpy.rdb.keys import SIZE_TOTALS as TOTALS_KEY

SAMPLING_DB = 13


def test_asynqpy_web_samples_before_anyone_opens_a_page(redis_server_url: str, users_path: Path,
                                                         tmp_path: Path) -> None:
    url = redis_server_url.rsplit("/", 1)[0] + f"/{SAMPLING_DB}"
    r = redis.Redis.from_url(url)
    r.flushdb()
    with Client(url) as c:
        c.enqueue(Task("t", b"{}"), queue="sampled")
    env = {**os.environ, "ASYNQPY_WEB_SECRET": "sampling-test-secret-" + "z" * 32, "ASYNQPY_SAMPLE_SECONDS": "1"}
    log = tmp_path / "gunicorn.log"
    exe = Path(sys.executable).with_name("asynqpy")
    proc = subprocess.Popen([str(exe), "web", "--bind", f"127.0.0.1:{free_port()}", "--workers", "1", "--users",
                             str(users_path), "--redis-url", url], env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20  # gunicorn boots in ~2 s; then one sample per second
        while r.llen(TOTALS_KEY) < 2:  # no HTTP request at all: nobody has opened the dashboard
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "no queue-size sample without a page view:\n" + log.read_text()[-2000:]
            time.sleep(0.2)
        assert b'"*":[1,0,0,0,0]' in r.lindex(TOTALS_KEY, 0)
    finally:
        proc.terminate()
        proc.wait(15)
        r.flushdb()
        r.close()
