"""servers() against a real asynqpy Server, scheduler entries and history as a scheduler writes them,
redis_info, and explain/queue_warnings."""

from __future__ import annotations

import threading

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from asynqpy.wire import SchedulerEnqueueEvent, SchedulerEntry, ServerInfo, timestamp
from inspector import Inspector
from tests.helpers import running, wait_for
from tests.inspector.worker import Clock, Worker

pytestmark = pytest.mark.cluster_too


def test_servers_show_running_tasks(redis_url: str, client: Client) -> None:
    release = threading.Event()
    mux = ServeMux()

    @mux.handler("slow")
    def slow(task: object) -> None:
        release.wait(10)

    client.enqueue(Task("slow", b"zzz"), queue="work", task_id="s1")
    with Inspector(redis_url) as insp:
        with running(redis_url, mux, queues={"work": 3, "other": 1}, concurrency=2):
            srv = wait_for(lambda: [s for s in insp.servers() if s.active_workers], what="an active worker")[0]
            assert dict(srv.queues) == {"work": 3, "other": 1} and srv.concurrency == 2 and srv.status == "active"
            (w,) = srv.active_workers
            assert (w.task_id, w.task_type, w.task_payload, w.queue) == ("s1", "slow", b"zzz", "work")
            assert w.started is not None and w.deadline is not None and w.deadline > w.started
            why = insp.explain("work", "s1")
            assert why.state is not None and why.state.value == "active"
            codes = [f.code for f in why.findings]
            assert "leased" in codes and "running" in codes and "consumer" in codes
            assert insp.queue_warnings("work") == []
            release.set()
        assert insp.servers() == [] or all(not s.active_workers for s in insp.servers())


def test_servers_show_handler_threads_stuck_past_their_tasks(redis_url: str, client: Client) -> None:
    release = threading.Event()
    mux = ServeMux()

    @mux.handler("stuck")
    def stuck(task: object) -> None:
        release.wait(20)  # ignores task.cancelled

    client.enqueue(Task("stuck", b""), timeout=1, max_retry=0)
    try:
        with Inspector(redis_url) as insp, running(redis_url, mux, concurrency=1):
            wait_for(lambda: [s for s in insp.servers() if s.stuck_threads == 1], timeout=10,
                     what="the stuck thread in the server's info")
            release.set()
            wait_for(lambda: [s for s in insp.servers() if s.stuck_threads == 0], timeout=10, what="it cleared")
    finally:
        release.set()


def test_expired_servers_are_not_listed(insp: Inspector, r: redis.Redis, clock: Clock) -> None:
    info = ServerInfo(host="h", pid=1, server_id="sid", concurrency=1, status="active")
    key = keys.server_info("h", 1, "sid")
    r.set(key, info.SerializeToString())
    r.zadd(keys.SERVERS, {key: clock.t + 5})
    assert [s.id for s in insp.servers()] == ["sid"]
    clock.advance(6)
    assert insp.servers() == []


def test_undecodable_server_info_is_skipped(insp: Inspector, r: redis.Redis, clock: Clock) -> None:
    r.set("asynq:servers:{h:1:x}", b"\xff\xff\xff")
    r.zadd(keys.SERVERS, {"asynq:servers:{h:1:x}": clock.t + 10})
    assert insp.servers() == []


def test_scheduler_entries_and_history(insp: Inspector, r: redis.Redis, clock: Clock) -> None:
    e = SchedulerEntry(id="e1", spec="@every 30s", task_type="cron:tick", task_payload=b"{}",
                       enqueue_options=['Queue("critical")', "MaxRetry(3)"])
    e.next_enqueue_time.CopyFrom(timestamp(clock.t + 30))
    e.prev_enqueue_time.CopyFrom(timestamp(None))
    skey = keys.scheduler_entries("host:9:abc")
    r.lpush(skey, e.SerializeToString())
    r.zadd(keys.SCHEDULERS, {skey: clock.t + 20})
    for i in range(3):
        ev = SchedulerEnqueueEvent(task_id=f"t{i}")
        ev.enqueue_time.CopyFrom(timestamp(clock.t - 100 + i))
        r.zadd(keys.scheduler_history("e1"), {ev.SerializeToString(): clock.t - 100 + i})
    (entry,) = insp.scheduler_entries()
    assert (entry.id, entry.spec, entry.task_type, entry.opts) == ("e1", "@every 30s", "cron:tick",
                                                                  ('Queue("critical")', "MaxRetry(3)"))
    assert entry.prev_enqueue_at is None and entry.next_enqueue_at is not None
    assert entry.scheduler_id == "host:9:abc"
    assert [h.task_id for h in insp.scheduler_history("e1")] == ["t2", "t1", "t0"]
    assert [h.task_id for h in insp.scheduler_history("e1", page=2, size=2)] == ["t0"]
    clock.advance(21)
    assert insp.scheduler_entries() == []


def test_redis_info_warns_about_missing_persistence(insp: Inspector, r: redis.Redis) -> None:
    info = insp.redis_info()
    assert info.version and info.uptime_seconds >= 0 and info.connected_clients >= 1 and info.used_memory > 0
    codes = {w.code for w in info.warnings}
    if r.config_get("save").get("save") == "" and not r.info("persistence")["aof_enabled"]:
        assert info.persistence == "none" and "no_persistence" in codes


def test_redis_warnings_rules() -> None:
    from inspector.cluster import redis_warnings

    codes = {w.code for w in redis_warnings("allkeys-lru", "none", 95, 100)}
    assert codes == {"eviction_policy", "no_persistence", "memory_near_limit"}
    assert redis_warnings("noeviction", "rdb", 10, 0) == []


def test_explain_paths(insp: Inspector, one_of_each: dict[str, str], clock: Clock, r: redis.Redis) -> None:
    missing = insp.explain("q", "nope")
    assert missing.state is None and missing.findings[-1].code == "task_missing"
    assert insp.explain("nowhere", "x").findings[0].code == "queue_not_registered"
    insp.pause("q")
    pending = insp.explain("q", "pending2")
    codes = [f.code for f in pending.findings]
    assert codes[:4] == ["state", "paused", "no_consumer", "position"]
    assert "1 pending task(s) are ahead" in pending.findings[3].message
    assert "paused" in pending.summary
    retry = insp.explain("q", "retry")
    assert "boom: try again" in " ".join(f.message for f in retry.findings)
    assert any(f.code == "due" for f in retry.findings)
    clock.advance(7200)
    assert any(f.code == "overdue" for f in insp.explain("q", "retry").findings)
    assert any(f.code == "orphaned" for f in insp.explain("q", "active").findings)
    assert any(f.code == "archived" for f in insp.explain("q", "archived").findings)
    assert any(f.code == "aggregating" for f in insp.explain("q", "aggregating").findings)
    assert any(f.code == "completed" for f in insp.explain("q", "completed").findings)


def test_strict_priority_starvation(insp: Inspector, client: Client, r: redis.Redis, clock: Clock) -> None:
    client.enqueue(Task("t"), queue="critical")
    client.enqueue(Task("t"), queue="low", task_id="l1")
    info = ServerInfo(host="h", pid=2, server_id="s", concurrency=4, strict_priority=True, status="active")
    info.queues.update({"critical": 6, "low": 1})
    key = keys.server_info("h", 2, "s")
    r.set(key, info.SerializeToString())
    r.zadd(keys.SERVERS, {key: clock.t + 10})
    assert any(f.code == "starved" for f in insp.explain("low", "l1").findings)
    assert [f.code for f in insp.queue_warnings("low")] == ["starved"]


def test_queue_warnings(insp: Inspector, client: Client, worker: Worker, clock: Clock, r: redis.Redis) -> None:
    client.enqueue(Task("t"), queue="q")
    client.enqueue(Task("t"), queue="q")
    worker.take("q")
    clock.advance(400)
    codes = [f.code for f in insp.queue_warnings("q", latency_threshold=300)]
    assert codes == ["no_consumer", "latency", "orphaned"]
    r.zadd(keys.archived("q"), {f"a{i}": clock.t for i in range(9500)})
    assert "archive_near_cap" in [f.code for f in insp.queue_warnings("q")]


def test_clock_offsets_of_servers(insp: Inspector, client: Client, r: redis.Redis, clock: Clock) -> None:
    """An asynqpy server's offset to Redis's clock (in our health note beside its ServerInfo) shows on it, and
    explain names a server more than a second off; a Go server, which reports none, has None."""
    client.enqueue(Task("t"), queue="q", task_id="t1")
    for pid, offset in ((1, "5.250000"), (2, "0.003000"), (3, None)):
        info = ServerInfo(host="h", pid=pid, server_id=f"s{pid}", concurrency=1, status="active")
        info.queues.update({"q": 1})
        key = keys.server_info("h", pid, f"s{pid}")
        r.set(key, info.SerializeToString())
        r.zadd(keys.SERVERS, {key: clock.t + 10})
        if offset is not None:
            r.hset(keys.server_health("h", pid, f"s{pid}"), "clock_offset", offset)
    assert [(s.pid, s.clock_offset) for s in insp.servers()] == [(1, 5.25), (2, 0.003), (3, None)]
    [off] = [f for f in insp.explain("q", "t1").findings if f.code == "clock_off"]
    assert off.level == "warn" and "h:1" in off.message and "5.2 s behind Redis" in off.message
