"""Cron controls against the real test server: pause honoured by every replica through the claim script, resume,
enqueue now, Go schedulers' entries read-only, and each entry's status (plain words, next runs, last task)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from asynqpy import Task
from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import keys
from asynqpy.scheduler import Scheduler
from asynqpy.wire import SchedulerEntry
from inspector import Inspector

from .clocks import SharedClock, shared_time, wait_for


class Replicas:
    """Two Scheduler replicas with the same entry, on one shared fake clock, each in its own thread."""

    def __init__(self, redis_url: str) -> None:
        self.base = shared_time()
        self.schedulers = [Scheduler(redis_url, clock=SharedClock(self.base), heartbeat_interval=3600)
                           for _ in range(2)]
        self.threads = [threading.Thread(target=lambda s=s: asyncio.run(s.arun())) for s in self.schedulers]

    def register(self) -> str:
        ids = {s.register("@every 1s", Task("sync:orders", b"{}"), queue="cron", max_retry=2) for s in self.schedulers}
        (eid,) = ids
        return eid

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        for s in self.schedulers:
            s.stop()
        for t in self.threads:
            t.join(10)


@pytest.fixture
def replicas(redis_url: str) -> Iterator[Replicas]:
    run = Replicas(redis_url)
    try:
        yield run
    finally:
        run.stop()


def _tick(rep: Replicas, r: redis.Redis, want: int) -> None:
    rep.base.value += 1.0
    wait_for(lambda: r.llen("asynq:{cron}:pending") == want, f"{want} tasks")


def test_pause_holds_every_replica_and_resume_lets_ticks_through(replicas: Replicas, redis_url: str,
                                                                 r: redis.Redis) -> None:
    eid = replicas.register()
    replicas.start()
    wait_for(lambda: r.zcard("asynq:schedulers") == 2, "both replicas")
    _tick(replicas, r, 1)
    with Inspector(redis_url) as insp:
        st = insp.cron_status(eid)
        assert st.ours and not st.paused and st.queue == "cron" and st.when == "every 1 s"
        assert insp.cron_pause(eid, by="alice") is True
        assert insp.cron_pause(eid) is False  # paused already: says so
        assert r.exists(keys.cron_paused("cron", eid))
        for _ in range(3):  # three ticks pass: neither replica enqueues
            replicas.base.value += 1.0
            time.sleep(0.1)
        assert r.llen("asynq:{cron}:pending") == 1
        assert insp.cron_status(eid).paused
        assert insp.cron_resume(eid) is True and insp.cron_resume(eid) is False
        _tick(replicas, r, 2)
        st = wait_for(lambda: (s := insp.cron_status(eid)).last_task_id and s, "the last task")
        assert st.last_state == "pending" and len(st.firings) == 2 and len(st.next_runs) == 3
        tid = insp.cron_enqueue_now(eid)
        info = insp.get_task("cron", tid).info
        assert (info.type, info.payload, info.max_retry) == ("sync:orders", b"{}", 2)
        with pytest.raises(InvalidArgumentError, match="no live scheduler"):
            insp.cron_pause("nope")


def test_a_go_schedulers_entry_is_read_only(redis_url: str, r: redis.Redis) -> None:
    # what a Go scheduler writes: its entry list and index, and no asynqpy marker beside them
    sid = "gohost:42:0b7f"
    key = keys.scheduler_entries(sid)
    entry = SchedulerEntry(id="go-entry", spec="0 3 * * *", task_type="go:report", task_payload=b"x",
                           enqueue_options=['Queue("reports")'])
    r.lpush(key, entry.SerializeToString())
    r.zadd(keys.SCHEDULERS, {key: time.time() + 60})
    with Inspector(redis_url) as insp:
        (st,) = insp.cron_statuses()
        assert not st.ours and "Go" in st.read_only_reason and st.when == "every day at 03:00 UTC"
        with pytest.raises(InvalidArgumentError, match="Go asynq scheduler"):
            insp.cron_pause("go-entry")
        assert not r.exists(keys.cron_paused("reports", "go-entry"))
        tid = insp.cron_enqueue_now("go-entry")  # an ordinary enqueue: fine for Go's entries too
        assert insp.get_task("reports", tid).info.type == "go:report"


def test_the_cli_lists_pauses_resumes_and_runs(replicas: Replicas, redis_url: str, r: redis.Redis,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.cli import main

    def cli(*argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--redis-url", redis_url])
        out, err = capsys.readouterr()
        return code, out, err

    eid = replicas.register()
    replicas.start()
    wait_for(lambda: r.zcard("asynq:schedulers") == 2, "both replicas")
    code, out, _ = cli("cron", "ls")
    assert code == 0 and "every 1 s" in out and "running" in out
    assert cli("cron", "pause", eid)[:2] == (0, f"entry {eid} paused\n")
    assert cli("cron", "pause", eid)[:2] == (0, f"entry {eid} was already paused\n")
    assert "paused" in cli("cron", "ls")[1]
    assert cli("cron", "resume", eid)[:2] == (0, f"entry {eid} resumed\n")
    code, out, _ = cli("cron", "run", eid, "--json")
    assert code == 0 and r.hexists(keys.task("cron", json.loads(out)["task_id"]), "msg")
    code, _, err = cli("cron", "pause", "nope")
    assert code == 1 and err.startswith("asynqpy: no live scheduler has an entry 'nope'") and err.count("\n") == 1


def test_plain_words_use_our_schedulers_location(redis_url: str, r: redis.Redis) -> None:
    s = Scheduler(redis_url, location="Europe/Berlin", heartbeat_interval=3600)
    eid = s.register("0 3 * * *", Task("report:daily", b""))
    t = threading.Thread(target=lambda: asyncio.run(s.arun()))
    t.start()
    try:
        wait_for(lambda: r.zcard("asynq:schedulers") == 1, "the scheduler")
        with Inspector(redis_url) as insp:
            st = insp.cron_status(eid)
            assert st.ours and st.when == "every day at 03:00 Europe/Berlin"
            assert all(time.gmtime(n).tm_hour in (1, 2) for n in st.next_runs)  # 03:00 Berlin is 01:00/02:00 UTC
    finally:
        s.stop()
        t.join(10)
