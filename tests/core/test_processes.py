"""Worker processes for real: exactly-once under competition, recovery after SIGKILL mid-task, and the supervisor's
signals (a kill, the terminal closing, Ctrl-C, Ctrl-Z)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.rdb import keys
from asynqpy.wire import TaskMessage
from tests.core.apps import MARKER, SEEN, STARTS
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def start_worker(url: str, mux: str, env: dict[str, str] | None = None, **settings) -> subprocess.Popen:  # type: ignore[no-untyped-def,type-arg]
    return subprocess.Popen([sys.executable, "-m", "tests.core.apps", url, mux, json.dumps(settings)],
                            cwd=ROOT, env={**os.environ, **(env or {})})


def stop(p: subprocess.Popen) -> None:  # type: ignore[type-arg]
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        p.wait(30)


def test_four_processes_process_ten_thousand_tasks_exactly_once(redis_url: str, r: redis.Redis) -> None:
    out = Client(redis_url).enqueue_many([Task("count", str(i).encode()) for i in range(10_000)])
    ids = {o.id for o in out}  # type: ignore[union-attr]
    procs = [start_worker(redis_url, "counting", concurrency=8, heartbeat_interval=1) for _ in range(4)]
    try:
        wait_for(lambda: r.hlen(SEEN) >= 10_000 and r.llen(keys.active("default")) == 0,
                 timeout=120, interval=0.2, what="10,000 tasks handled")
    finally:
        for p in procs:
            stop(p)
    seen = {k.decode(): int(v) for k, v in r.hgetall(SEEN).items()}
    assert set(seen) == ids
    assert set(seen.values()) == {1}  # each exactly once
    assert r.get(keys.processed_total("default")) == b"10000"
    assert r.llen(keys.pending("default")) == 0 and r.zcard(keys.lease("default")) == 0
    assert not r.keys("asynq:{default}:t:*")  # done tasks are deleted


def test_task_runs_again_after_worker_is_killed_mid_task(redis_url: str, r: redis.Redis) -> None:
    fast = {"lease_duration": 2, "lease_grace": 0.5, "heartbeat_interval": 0.5, "recover_interval": 0.3}
    tid = Client(redis_url).enqueue(Task("slow", b""), max_retry=3).id
    victim = start_worker(redis_url, "slow", {"HANG": "1"}, **fast)
    try:
        wait_for(lambda: r.llen(STARTS) == 1, timeout=30, what="the task to start")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        assert r.hget(keys.task("default", tid), "state") == b"active"  # orphaned: still leased to the dead one
        rescuer = start_worker(redis_url, "slow", **fast)
        try:
            wait_for(lambda: r.hget(keys.task("default", tid), "state") == b"retry", timeout=30,
                     what="the recoverer to move the orphan to retry")
            m = TaskMessage.FromString(r.hget(keys.task("default", tid), "msg"))
            assert m.error_msg == "asynq: task lease expired" and m.retried == 1
            r.zadd(keys.retry("default"), {tid: 0}, xx=True)  # due now, instead of asynq's 15 s back-off
            wait_for(lambda: r.llen(STARTS) == 2, timeout=30, what="the task to run again")
        finally:
            stop(rescuer)
    finally:
        if victim.poll() is None:
            victim.kill()
    first, second = (s.decode().split(":") for s in r.lrange(STARTS, 0, -1))
    assert first[1] == second[1] == tid and first[0] != second[0]
    assert second[2] == "1"  # the handler sees the attempt count
    assert not r.exists(keys.task("default", tid))  # then it succeeded and was deleted


def test_shutdown_requeues_a_running_sync_handler_and_exits_without_finishing_it(redis_url: str,
                                                                                  r: redis.Redis) -> None:
    tid = Client(redis_url).enqueue(Task("linger", b""), max_retry=3).id
    p = start_worker(redis_url, "lingering", {"LINGER": "3"}, shutdown_timeout=0.5, heartbeat_interval=0.5)
    try:
        wait_for(lambda: r.llen(STARTS) == 1, timeout=30, what="the handler to start")
        started = time.monotonic()
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert r.lrange(keys.pending("default"), 0, -1) == [tid.encode()]  # requeued, once
    assert r.hget(keys.task("default", tid), "state") == b"pending"
    assert r.llen(keys.active("default")) == 0 and r.zcard(keys.lease("default")) == 0
    time.sleep(max(0.0, started + 4 - time.monotonic()))  # past the moment the handler would have finished
    assert not r.hexists(MARKER, tid)  # the stopping process never finished the requeued task
    assert TaskMessage.FromString(r.hget(keys.task("default", tid), "msg")).retried == 0


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


def start_supervisor(url: str, stderr: Any = subprocess.DEVNULL) -> subprocess.Popen:  # type: ignore[type-arg]
    """`asynqpy worker --processes 2` (the counting app, 2 slots each) in a session of its own, as from a terminal."""
    return subprocess.Popen([sys.executable, "-m", "asynqpy.cli", "worker", "tests.core.apps:counting", "--redis-url",
                             url, "--processes", "2", "--concurrency", "2"], cwd=ROOT,
                            env={**os.environ, "TEST_REDIS_URL": url}, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=stderr)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sessions and autogroups are Linux's")
def test_supervised_workers_lead_their_own_sessions_and_stop_when_the_supervisor_is_killed(
        redis_url: str, r: redis.Redis) -> None:
    p = start_supervisor(redis_url)
    try:
        wait_for(lambda: r.zcard(keys.SERVERS) == 2, timeout=30, what="two servers registered")
        workers = [c for c in _children(p.pid) if os.getsid(c) == c]
        assert len(workers) == 2  # each its own session (and so its own scheduler autogroup)
        assert all(os.getpgid(c) == c for c in workers)
        p.send_signal(signal.SIGKILL)  # no relay: the kernel's death signal stops them, gracefully
        p.wait(10)
        wait_for(lambda: not any(_running(c) for c in workers), timeout=30, what="the orphaned workers to exit")
        wait_for(lambda: r.zcard(keys.SERVERS) == 0, timeout=5, what="servers to clear their state")
    finally:
        if p.poll() is None:
            p.kill()


def _running(pid: int) -> bool:
    """pid is a live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return b"Z" not in stat.rsplit(b")", 1)[1][:3]


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGINT], ids=["SIGHUP", "SIGINT"])
def test_the_supervisor_stops_its_workers_gracefully_when_the_terminal_closes_or_on_ctrl_c(
        redis_url: str, r: redis.Redis, sig: signal.Signals) -> None:
    """SIGHUP (the terminal closed) and SIGINT reach only the supervisor (its workers lead their own sessions): it
    relays SIGTERM, each worker shuts down and clears its server state, and the supervisor exits 0."""
    p = start_supervisor(redis_url, subprocess.PIPE)
    try:
        wait_for(lambda: r.zcard(keys.SERVERS) == 2, timeout=30, what="two servers registered")
        workers = [c for c in _children(p.pid) if os.getsid(c) == c]
        assert len(workers) == 2
        p.send_signal(sig)
        assert p.wait(30) == 0
        assert not any(_running(c) for c in workers)
        assert r.zcard(keys.SERVERS) == 0  # each cleared its own state on the way out, before the supervisor exited
        err = p.stderr.read().decode() if p.stderr else ""
        assert err.count("SIGTERM received") == 2 and "starting another" not in err, err
    finally:
        if p.poll() is None:
            p.kill()
        if p.stderr:
            p.stderr.close()


def test_ctrl_z_to_the_supervisor_stops_its_workers_fetching_and_sigterm_still_stops_them(
        redis_url: str, r: redis.Redis, tmp_path: Path) -> None:
    """SIGTSTP reaches only the supervisor: it relays it, each worker stops fetching (tasks enqueued after it stay
    pending) but keeps running, and a SIGTERM after it still stops everything with exit 0."""
    log = tmp_path / "stderr.log"
    with log.open("wb") as err:
        p = start_supervisor(redis_url, err)
    try:
        wait_for(lambda: r.zcard(keys.SERVERS) == 2, timeout=30, what="two servers registered")
        p.send_signal(signal.SIGTSTP)
        wait_for(lambda: log.read_text().count("SIGTSTP received") == 2, timeout=10, what="both workers paused")
        Client(redis_url).enqueue_many([Task("count", str(i).encode()) for i in range(20)])
        time.sleep(2)  # two idle polls and more: a worker still fetching would have taken them
        assert r.hlen(SEEN) == 0 and r.llen(keys.pending("default")) == 20
        assert p.poll() is None and r.zcard(keys.SERVERS) == 2  # paused, not stopped
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
        assert r.zcard(keys.SERVERS) == 0 and r.llen(keys.pending("default")) == 20
    finally:
        if p.poll() is None:
            p.kill()
