"""Observers cost Redis nothing extra (issue 20, section 4), through real HTTP under gunicorn: however many
logged-in browsers poll, Redis computes one queue snapshot per live-refresh interval, and MEMORY USAGE runs once a
minute per queue at most, across app instances."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys
from inspector import Inspector
from tests.webui.authkit import PASSWORDS
from tests.webui.livekit import Browser, gunicorn_web
from webui.users import create_user

pytestmark = pytest.mark.slow

QUEUES = ("billing", "mail", "reports")
POLL = {"X-Asynqpy-Poll": "1", "HX-Request": "true"}  # what static/app.js sends for a live refresh


def _web(redis_url: str, folder: Path, env: Mapping[str, str], workers: int = 2) -> AbstractContextManager[str]:
    """`asynqpy web` under gunicorn on a free port; its base URL."""
    return gunicorn_web(redis_url, folder / "asynqpy-users.toml", "--threads", "4", workers=workers, **env)


@pytest.fixture
def folder(redis_url: str, tmp_path: Path) -> Path:
    create_user(tmp_path / "asynqpy-users.toml", "otto", "operator", PASSWORDS["otto"])
    with Client(redis_url) as c:
        for q in QUEUES:
            for i in range(3):
                c.enqueue(Task("email", f'{{"n": {i}}}'.encode()), queue=q)
    return tmp_path


def _calls(r: redis.Redis, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def _browsers(bases: list[str], n: int) -> list[Browser]:
    out = [Browser(bases[i % len(bases)]) for i in range(n)]
    for b in out:
        assert b.login("otto", PASSWORDS["otto"]).status == 303
    return out


def test_ten_polling_browsers_cost_one_snapshot_per_interval(folder: Path, redis_url: str, r: redis.Redis) -> None:
    # The default live refresh (5 s); the chart sampler off, so that only pages ask for snapshots.
    r.config_resetstat()
    with Inspector(redis_url) as insp:
        insp.queue_snapshot(0)
    per_snapshot = _calls(r, "zcard")  # the queues' set sizes: what one snapshot's queue reads run
    assert per_snapshot >= len(QUEUES)
    with _web(redis_url, folder, {"ASYNQPY_SAMPLE_SECONDS": "0"}) as base:
        browsers = _browsers([base], 10)
        r.delete(keys.SNAPSHOT)
        r.config_resetstat()
        t0 = time.monotonic()
        for _ in range(4):  # four polls of the overview and of a queue page by each browser within ~3.5 s
            for b in browsers:
                assert b.open("/", **POLL).status == 200
                page = b.open("/queues/mail", **POLL)
                assert page.status == 200 and "mail" in page.text
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0) % 1.0))
        assert time.monotonic() - t0 < 5.0, "the polls took longer than one interval: the count below means less"
        # One snapshot for 80 requests over both workers: not one per request, per worker or per two seconds.
        assert _calls(r, "zcard") == per_snapshot, r.info("commandstats")
        # What a poll costs besides: the session read, and (the queue page) its rows, read once per worker and
        # interval: the 80 requests cost about what a few do.
        stats = r.info("commandstats")
        assert _calls(r, "hmget") <= 80 + 2 * 10, stats  # a session read per request, the 3 rows twice at most


def test_memory_is_sampled_once_a_minute_per_queue_across_two_instances(folder: Path, redis_url: str,
                                                                          r: redis.Redis) -> None:
    r.config_resetstat()
    with Inspector(redis_url) as insp:
        insp.queue_infos(memory=True)
    one_sample = _calls(r, "memory|usage")  # one memory sample of every queue
    per_snapshot = _calls(r, "zcard")
    assert one_sample >= len(QUEUES)
    env = {"ASYNQPY_SAMPLE_SECONDS": "0", "ASYNQPY_POLL_SECONDS": "1"}  # a new snapshot every second
    with _web(redis_url, folder, env, workers=1) as one, _web(redis_url, folder, env, workers=1) as two:
        browsers = _browsers([one, two], 4)
        r.config_resetstat()
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:
            for b in browsers:
                assert b.open("/", **POLL).status == 200
            time.sleep(0.3)
        assert _calls(r, "zcard") >= 3 * per_snapshot  # several snapshots were taken...
        assert _calls(r, "memory|usage") <= one_sample  # ...but each queue's memory was sampled once
        with Inspector(redis_url) as insp:
            sampled = insp.queue_snapshot(60).queue("mail")
        assert sampled is not None and sampled.memory_usage  # the stored sample is shown, not "unknown"
