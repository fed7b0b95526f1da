"""asynqmon v0.7.2 (the real one, built on asynq v0.24.1) shows and acts on a queue that asynqpy wrote.

Its JSON API, the one its web UI calls, answers 200 with our tasks for every state, one task's detail, our
server, the scheduler entries and the queue stats; its run, archive and delete actions work on our tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from asynqpy.embedded import free_port
from asynqpy.rdb import keys

from .every_state import every_state
from .goasynq import ASYNQMON_VERSION, build_asynqmon, built_or_skip

TASK_STATES = ("pending", "active", "scheduled", "retry", "archived", "completed")


@pytest.fixture(scope="session")
def asynqmon_binary() -> Path:
    return built_or_skip(build_asynqmon, f"asynqmon {ASYNQMON_VERSION}")


class Monitor:
    """HTTP calls to a running asynqmon; every answer's status and JSON body."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api"

    def call(self, method: str, path: str) -> tuple[int, Any]:
        req = urllib.request.Request(self.base + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                body = resp.read()
                return resp.status, (json.loads(body) if body.strip() else None)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def get(self, path: str) -> Any:
        status, body = self.call("GET", path)
        assert status == 200, f"GET {path}: {status} {body}"
        return body


@pytest.fixture
def asynqmon(asynqmon_binary: Path, redis_url: str, tmp_path: Path) -> Iterator[Monitor]:
    u = urlsplit(redis_url)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIS_")}  # its flags fall back on REDIS_*
    argv = [str(asynqmon_binary), "--port", str(port), "--redis-addr", f"{u.hostname}:{u.port}",
            "--redis-db", u.path.strip("/") or "0"]
    if u.password:
        argv += ["--redis-password", u.password]
    log = (tmp_path / "asynqmon.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    mon = Monitor(port)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if mon.call("GET", "/queues")[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"asynqmon did not start: {(tmp_path / 'asynqmon.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield mon
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_asynqmon_lists_and_shows_every_state_we_write(asynqmon: Monitor, redis_url: str) -> None:
    with every_state(redis_url) as world:
        q = world.queue
        queues = asynqmon.get("/queues")["queues"]
        (mine,) = [x for x in queues if x["queue"] == q]
        assert (mine["pending"], mine["active"], mine["scheduled"], mine["retry"], mine["archived"],
                mine["completed"], mine["aggregating"]) == (2, 1, 1, 1, 1, 1, 1)
        for state in TASK_STATES:
            got = asynqmon.get(f"/queues/{q}/{state}_tasks")
            assert [t["id"] for t in got["tasks"]] == world.ids[state], state
        (group,) = asynqmon.get(f"/queues/{q}/groups")["groups"]
        assert group["group"] == world.group and group["size"] == 1
        agg = asynqmon.get(f"/queues/{q}/groups/{world.group}/aggregating_tasks")
        assert [t["id"] for t in agg["tasks"]] == world.ids["aggregating"]
        for state, tid in world.all_ids():
            detail = asynqmon.get(f"/queues/{q}/tasks/{tid}")
            assert (detail["id"], detail["queue"], detail["state"]) == (tid, q, state)
        assert asynqmon.get(f"/queues/{q}/tasks/retry-1")["error_message"] == "RuntimeError: boom retry-1"
        assert asynqmon.get(f"/queues/{q}/tasks/done-1")["result"] == "done:done-1"
        servers = asynqmon.get("/servers")["servers"]
        (srv,) = [s for s in servers if s["pid"] == world.server_pid]
        assert [w["task_id"] for w in srv["active_workers"]] == world.ids["active"]
        entries = asynqmon.get("/scheduler_entries")["entries"]
        assert [e["id"] for e in entries] == [world.scheduler_entry]
        stats = asynqmon.get("/queue_stats")["stats"]
        assert q in stats and stats[q][0]["processed"] == 3 and stats[q][0]["failed"] == 2


def test_asynqmon_runs_archives_and_deletes_our_tasks(asynqmon: Monitor, redis_url: str, r: redis.Redis) -> None:
    with every_state(redis_url) as world:
        q = world.queue

        def ok(method: str, path: str) -> None:
            status, body = asynqmon.call(method, path)
            assert status in (200, 204), f"{method} {path}: {status} {body}"

        ok("POST", f"/queues/{q}/scheduled_tasks/sched-1:archive")
        assert r.hget(keys.task(q, "sched-1"), "state") == b"archived"
        assert r.zscore(keys.scheduled(q), "sched-1") is None
        ok("POST", f"/queues/{q}/archived_tasks/dead-1:run")
        assert r.hget(keys.task(q, "dead-1"), "state") == b"pending"  # the only worker slot is busy
        ok("DELETE", f"/queues/{q}/retry_tasks/retry-1")
        assert not r.exists(keys.task(q, "retry-1"))
        ok("POST", f"/queues/{q}/groups/{world.group}/aggregating_tasks/agg-1:run")
        assert r.hget(keys.task(q, "agg-1"), "state") == b"pending"
        ok("DELETE", f"/queues/{q}/completed_tasks/done-1")
        assert not r.exists(keys.task(q, "done-1"))
        ok("POST", f"/queues/{q}/pending_tasks/wait-1:archive")
        assert r.hget(keys.task(q, "wait-1"), "state") == b"archived"
        archived = [t["id"] for t in asynqmon.get(f"/queues/{q}/archived_tasks")["tasks"]]
        assert set(archived) == {"sched-1", "wait-1"}
