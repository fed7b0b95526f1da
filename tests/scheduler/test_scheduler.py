"""The Scheduler against the real test server: what it writes where asynq's tools read it, register errors,
changes while running, clean shutdown, and the `asynqpy scheduler` command stopped with SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Task
from asynqpy.embedded import EmbeddedServer, free_port
from asynqpy.errors import InvalidArgumentError
from asynqpy.scheduler import PeriodicTaskManager, Scheduler, YamlFileProvider
from asynqpy.wire import SchedulerEntry
from inspector import Inspector

from .clocks import SharedClock, shared_time, wait_for

ROOT = Path(__file__).resolve().parents[2]



class Running:
    """A Scheduler on a shared fake clock, run in a thread."""

    def __init__(self, redis_url: str, **kw: Any) -> None:
        self.base = shared_time()
        self.s = Scheduler(redis_url, clock=SharedClock(self.base), heartbeat_interval=3600, **kw)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.s.arun()))

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.s.stop()
        self.thread.join(10)


@pytest.fixture
def running(redis_url: str) -> Iterator[Running]:
    run = Running(redis_url)
    try:
        yield run
    finally:
        run.stop()


def test_register_errors_name_the_problem(redis_url: str) -> None:
    s = Scheduler(redis_url)
    task = Task("t", b"")
    cases: list[tuple[Callable[[], Any], str, str]] = [
        (lambda: s.register("0 25 * * *", task), "spec", "'0 25 * * *'"),
        (lambda: s.register("CRON_TZ=Nowhere/Land @daily", task), "spec", "Nowhere/Land"),
        (lambda: s.register("@daily", task, queue=""), "queue", "blank"),
        (lambda: s.register("@daily", task, max_retry="3"), "max_retry", "int"),
        (lambda: s.register("@daily", task, priority=1), "priority", "unknown enqueue option"),
        (lambda: s.register("@daily", task, durable=True), "durable", "not a scheduler option"),
        (lambda: s.register("@daily", "t"), "task", "asynqpy.Task"),  # type: ignore[arg-type]
        (lambda: s.unregister("nope"), "entry_id", "nope"),
        (lambda: Scheduler(redis_url, location="Mars/Base"), "location", "Mars/Base"),
        # a nan late_grace made every claim fail (int(nan)); a nan heartbeat_interval every heartbeat
        (lambda: Scheduler(redis_url, late_grace=float("nan")), "late_grace", "finite"),
        (lambda: Scheduler(redis_url, late_grace=float("inf")), "late_grace", "finite"),
        (lambda: Scheduler(redis_url, late_grace=-5), "late_grace", "0 or more"),
        (lambda: Scheduler(redis_url, late_grace="60"), "late_grace", "finite"),  # type: ignore[arg-type]
        (lambda: Scheduler(redis_url, heartbeat_interval=float("nan")), "heartbeat_interval", "finite"),
        (lambda: Scheduler(redis_url, heartbeat_interval="10"), "heartbeat_interval", "finite"),  # type: ignore[arg-type]
        (lambda: PeriodicTaskManager(YamlFileProvider("x.yaml"), float("inf")), "sync_interval", "finite"),
        (lambda: PeriodicTaskManager(YamlFileProvider("x.yaml"), float("nan")), "sync_interval", "finite"),
    ]
    for call, arg, words in cases:
        with pytest.raises(InvalidArgumentError) as err:
            call()
        assert err.value.argument == arg and words in str(err.value)
    eid = s.register("@daily", task, queue="cron")
    with pytest.raises(InvalidArgumentError, match="already registered"):
        s.register("@daily", task, {"queue": "cron"})
    s.unregister(eid)
    assert s.entries() == []


def test_entries_history_and_tasks_as_asynq_tools_read_them(running: Running, redis_url: str,
                                                            r: redis.Redis) -> None:
    s = running.s
    eid = s.register("@every 2s", Task("sync:orders", b'{"full":false}', {"source": "cron"}),
                     queue="cron", max_retry=3, timeout=90, retention=3600)
    daily = s.register("CRON_TZ=Europe/Berlin 0 3 * * *", Task("report:daily", b"acme"))
    running.start()
    wait_for(lambda: r.zcard("asynq:schedulers") == 1, "the scheduler entry list")
    key = f"asynq:schedulers:{{{s.id}}}"
    assert r.zrange("asynq:schedulers", 0, -1) == [key.encode()] and 0 < r.ttl(key) <= 7200
    ids = set()
    for data in r.lrange(key, 0, -1):
        e = SchedulerEntry()
        e.ParseFromString(data)
        ids.add(e.id)
    assert ids == {eid, daily}

    start = int(running.base.value)
    for n in (1, 2):  # two ticks of @every 2s
        running.base.value += 2.0
        wait_for(lambda n=n: r.llen("asynq:{cron}:pending") == n, f"{n} tasks")  # type: ignore[misc]
    with Inspector(redis_url) as insp:
        entries = {e.id: e for e in wait_for(
            lambda: [e for e in insp.scheduler_entries() if e.prev_enqueue_at], "prev to be published")}
        e = entries[eid]
        assert (e.spec, e.task_type, e.task_payload) == ("@every 2s", "sync:orders", b'{"full":false}')
        assert e.opts == ('Queue("cron")', "MaxRetry(3)", "Timeout(1m30s)", "Retention(1h0m0s)")
        nxt = (start // 2 + 3) * 2  # ticks are multiples of 2 s since the epoch
        assert e.next_enqueue_at == datetime.fromtimestamp(nxt, UTC)
        assert e.prev_enqueue_at == datetime.fromtimestamp(nxt - 2, UTC)
        events = insp.scheduler_history(eid)
        assert len(events) == 2 and events[0].enqueued_at > events[1].enqueued_at  # type: ignore[operator]
        task = insp.get_task("cron", events[0].task_id).info
        assert (task.type, task.max_retry, task.timeout, task.retention) == ("sync:orders", 3, 90, 3600)
        assert dict(task.headers) == {"source": "cron"}
        berlin = insp.scheduler_entries()
        (d,) = [x for x in berlin if x.id == daily]
        assert d.next_enqueue_at is not None and d.next_enqueue_at.astimezone(UTC).hour in (1, 2)

    s.unregister(daily)  # while running: the published list follows
    wait_for(lambda: len(r.lrange(key, 0, -1)) == 1, "the entry to go")
    running.stop()
    assert r.zcard("asynq:schedulers") == 0 and not r.exists(key)
    assert not r.exists(f"asynq:scheduler_history:{eid}")  # no live scheduler lists it any more


def test_a_unique_entry_whose_task_is_still_there_skips_the_tick(running: Running, r: redis.Redis) -> None:
    s = running.s
    s.register("@every 1s", Task("slow", b""), queue="cron", unique=3600)
    running.start()
    wait_for(lambda: r.zcard("asynq:schedulers"), "start")
    for _ in range(3):
        running.base.value += 1
        time.sleep(0.05)
    wait_for(lambda: s.failures == 2, "two refused ticks")
    assert r.llen("asynq:{cron}:pending") == 1
    assert s.entries()[0].enqueued == 1


def test_stopping_keeps_history_another_replica_still_lists(redis_url: str, r: redis.Redis) -> None:
    a, b = Running(redis_url), Running(redis_url)
    b.base = a.base
    b.s.clock = SharedClock(a.base)
    eid = a.s.register("@every 1s", Task("t", b""))
    assert b.s.register("@every 1s", Task("t", b"")) == eid  # replicas derive the same id
    a.start()
    b.start()
    wait_for(lambda: r.zcard("asynq:schedulers") == 2, "both")
    a.base.value += 2
    wait_for(lambda: r.zcard(f"asynq:scheduler_history:{eid}") == 2, "history")
    a.stop()
    assert r.zcard("asynq:schedulers") == 1 and r.zcard(f"asynq:scheduler_history:{eid}") == 2
    b.stop()
    assert r.zcard("asynq:schedulers") == 0 and not r.exists(f"asynq:scheduler_history:{eid}")


def _cli(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    # The app's directory, then this checkout (not whichever one the venv installed), as tests/core/procs.py does.
    paths = (str(cwd), str(ROOT), os.environ.get("PYTHONPATH", ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.Popen([sys.executable, "-m", "asynqpy.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("how", ["app", "config"])
def test_cli_runs_until_sigterm_and_removes_its_entries(how: str, tmp_path: Path, redis_url: str,
                                                        r: redis.Redis) -> None:
    (tmp_path / "cronapp.py").write_text(textwrap.dedent("""
        from asynqpy import Task
        from asynqpy.scheduler import Scheduler

        scheduler = Scheduler()
        scheduler.register("@every 1s", Task("heartbeat", b"{}"), queue="cron")
    """))
    (tmp_path / "cron.yaml").write_text('configs:\n  - {cronspec: "@every 1s", task_type: heartbeat, '
                                        'options: {queue: cron}}\n')
    args = ["cronapp:scheduler"] if how == "app" else ["--config", "cron.yaml"]
    proc = _cli(["scheduler", *args, "--redis-url", redis_url], tmp_path)
    try:
        wait_for(lambda: r.zcard("asynq:schedulers") == 1, "the scheduler to start")
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= 1, "a tick", timeout=5)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert r.zcard("asynq:schedulers") == 0 and not r.keys("asynq:schedulers:*")
    assert b"enqueued heartbeat" in err


@pytest.mark.parametrize(("args", "words"), [
    (["nomodule:scheduler"], "cannot load"),
    (["asynqpy.scheduler:Scheduler"], "is a class"),  # not called: it would run with no entries
    (["asynqpy:Task"], "is a class"),  # not called: a TypeError traceback
    (["os:remove"], "needs arguments"),
    ([], "either APP"),
    (["--config", "missing.yaml"], "missing.yaml: cannot read"),
    (["--config", "cron.yaml", "--redis-url", "redis://:secret@127.0.0.1:1/0"],
     "cannot reach Redis at redis://:***@127.0.0.1:1/0"),
])
def test_cli_errors_are_one_line(args: list[str], words: str, tmp_path: Path, redis_url: str) -> None:
    (tmp_path / "cron.yaml").write_text('configs:\n  - {cronspec: "@daily", task_type: t}\n')
    if "--redis-url" not in args:
        args = [*args, "--redis-url", redis_url]
    proc = _cli(["scheduler", *args], tmp_path)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode in (1, 2) and words in err.decode() and "Traceback" not in err.decode()
    assert "secret" not in err.decode()


def test_a_replica_far_behind_skips_ticks_older_than_late_grace(redis_url: str, r: redis.Redis,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    run = Running(redis_url, late_grace=5)
    run.s.register("@every 1s", Task("t", b""), queue="cron")
    run.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers"), "start")
        run.base.value += 100  # as if the process had been frozen for 100 s
        wait_for(lambda: r.llen("asynq:{cron}:pending") >= 5, "the recent ticks")
        time.sleep(0.2)
        assert r.llen("asynq:{cron}:pending") == 5  # ticks at most 5 s late; the 95 older ones skipped
        assert "skipped its tick" in caplog.text
    finally:
        run.stop()


def test_ticks_due_while_redis_was_away_are_enqueued_when_it_is_back(tmp_path: Path) -> None:
    """A Redis of the test's own, stopped and started again on the same port."""
    port = free_port()
    server = EmbeddedServer(port=port, data_dir=tmp_path).start()
    run = Running(server.url)
    run.s.register("@every 1s", Task("t", b""), queue="cron")
    try:
        run.start()
        r = redis.Redis.from_url(server.url)
        wait_for(lambda: r.zcard("asynq:schedulers"), "start")
        server.stop()
        run.base.value += 3  # three ticks come due with Redis away
        wait_for(lambda: run.s.failures >= 2, "failed attempts")
        server = EmbeddedServer(port=port, data_dir=tmp_path).start()
        wait_for(lambda: r.llen("asynq:{cron}:pending") == 3, "the three ticks")
        r.close()
    finally:
        run.stop()
        server.stop()


@pytest.mark.parametrize(("start", "expected"), [
    ("2026-03-28T22:00:00+00:00", "2026-03-29T01:00:00+00:00"),  # 02:30 does not exist: at 03:00 CEST
    ("2026-10-24T22:00:00+00:00", "2026-10-25T00:30:00+00:00"),  # 02:30 happens twice: the first one (CEST)
])
def test_a_berlin_night_with_a_clock_change_enqueues_once(start: str, expected: str, redis_url: str,
                                                          r: redis.Redis) -> None:
    run = Running(redis_url)
    run.base.value = datetime.fromisoformat(start).timestamp()
    eid = run.s.register("CRON_TZ=Europe/Berlin 30 2 * * *", Task("nightly", b""), queue="cron")
    run.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers"), "start")
        for _ in range(6 * 6):  # six hours in ten-minute steps
            run.base.value += 600
            time.sleep(0.01)
        wait_for(lambda: r.llen("asynq:{cron}:pending") == 1, "the nightly task")
        time.sleep(0.1)
        assert r.llen("asynq:{cron}:pending") == 1
        (entry,) = run.s.entries()
        assert entry.id == eid and entry.prev_tick == datetime.fromisoformat(expected).timestamp()
    finally:
        run.stop()


def test_dev_addon_runs_demo_entries(redis_url: str, tmp_path: Path) -> None:
    from asynqpy.plugins import DevContext, dev_addons

    (addon,) = [a for a in dev_addons() if a.name == "scheduler"]
    running = addon.start(DevContext(redis_url, tmp_path, argparse.Namespace()))
    try:
        with Inspector(redis_url) as insp:
            entries = wait_for(lambda: insp.scheduler_entries(), "the demo entries")
        assert {e.task_type for e in entries} == {"sync:crm", "report:usage", "cleanup:tmp"}
        assert any("demo cron entries" in line for line in running.banner)
    finally:
        running.stop()
    with Inspector(redis_url) as insp:
        assert insp.scheduler_entries() == []
