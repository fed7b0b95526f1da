"""The Server with real handlers: outcomes, retries, timeouts, cancel, shutdown, heartbeat, outages."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from datetime import timedelta

import pytest
import redis

from asynqpy import Client, RevokeTask, ServeMux, Server, SkipRetry, Task
from asynqpy.config import ServerConfig, default_retry_delay
from asynqpy.embedded import EmbeddedServer
from asynqpy.errors import InvalidArgumentError, LeaseExpiredError, RedisUnavailableError
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire import ServerInfo, TaskMessage, WorkerInfo
from tests.helpers import running, wait_for

pytestmark = pytest.mark.cluster_too


def stored(r: redis.Redis, tid: str, q: str = "default") -> TaskMessage:
    return TaskMessage.FromString(r.hget(keys.task(q, tid), "msg"))


def test_async_and_plain_handlers_with_longest_prefix_routing(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    got: list[tuple[str, str, str, int]] = []

    @mux.handler("email:")
    async def email(t):  # type: ignore[no-untyped-def]
        got.append(("email:", t.type, t.queue, t.retry_count))

    @mux.handler("email:welcome")
    def welcome(t):  # type: ignore[no-untyped-def]
        assert threading.current_thread() is not threading.main_thread()
        got.append(("email:welcome", t.type, t.queue, t.retry_count))

    c = Client(redis_url)
    c.enqueue(Task("email:welcome", b""), queue="mail")
    c.enqueue(Task("email:digest", b""), queue="mail")
    with running(redis_url, mux, queues={"mail": 1}):
        wait_for(lambda: len(got) == 2 and r.get(keys.processed_total("mail")) == b"2")
    assert sorted(got) == [("email:", "email:digest", "mail", 0), ("email:welcome", "email:welcome", "mail", 0)]
    assert not r.keys("asynq:{mail}:t:*")


def test_no_matching_handler_is_asynq_error_text(redis_url: str, r: redis.Redis) -> None:
    tid = Client(redis_url).enqueue(Task("nobody:home", b""), max_retry=0).id
    with running(redis_url, ServeMux()):
        wait_for(lambda: r.zscore(keys.archived("default"), tid))
    assert stored(r, tid).error_msg == 'handler not found for task "nobody:home"'


def test_failures_retry_with_delay_then_archive_with_error(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    attempts: list[int] = []
    delays: list[tuple[int, str]] = []

    @mux.handler("flaky")
    async def flaky(t):  # type: ignore[no-untyped-def]
        attempts.append(t.retry_count)
        raise ValueError(f"attempt {t.retry_count} failed")

    def delay(n: int, exc: BaseException, task) -> float:  # type: ignore[no-untyped-def]
        delays.append((n, str(exc)))
        return 0.05

    tid = Client(redis_url).enqueue(Task("flaky", b"{}"), max_retry=2).id
    with running(redis_url, mux, retry_delay=delay):
        wait_for(lambda: r.zscore(keys.archived("default"), tid), what="archive after retries")
    assert attempts == [0, 1, 2]
    assert delays == [(0, "attempt 0 failed"), (1, "attempt 1 failed")]
    m = stored(r, tid)
    assert m.retried == 2 and m.error_msg == "ValueError: attempt 2 failed" and m.last_failed_at > 0
    assert r.get(keys.failed_total("default")) == b"3" and r.get(keys.processed_total("default")) == b"3"


def test_retry_score_follows_the_delay_function(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    mux.handle("f", lambda t: 1 / 0)
    tid = Client(redis_url).enqueue(Task("f", b"")).id
    before = time.time()
    with running(redis_url, mux, retry_delay=lambda n, e, t: 3600.0):
        wait_for(lambda: r.zscore(keys.retry("default"), tid))
    score = r.zscore(keys.retry("default"), tid)
    assert before + 3600 <= score <= math.ceil(time.time() + 3600) and score == int(score)  # rounded up
    assert before + 3600 <= r.zscore(keys.exact_due("default"), tid) <= time.time() + 3600
    assert stored(r, tid).error_msg == "ZeroDivisionError: division by zero"


def test_default_retry_delay_is_asynqs_formula() -> None:
    for n in (0, 1, 3, 10):
        values = {default_retry_delay(n, ValueError(), None) for _ in range(300)}
        assert min(values) >= n**4 + 15 and max(values) <= n**4 + 15 + 29 * (n + 1)
        assert len(values) > 5  # randomised


def test_skip_retry_archives_and_revoke_deletes(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()

    @mux.handler("skip")
    async def skip(t):  # type: ignore[no-untyped-def]
        raise SkipRetry("bad input")

    @mux.handler("revoke")
    async def revoke(t):  # type: ignore[no-untyped-def]
        raise RevokeTask()

    c = Client(redis_url)
    s = c.enqueue(Task("skip", b""), max_retry=10).id
    v = c.enqueue(Task("revoke", b""), max_retry=10).id
    with running(redis_url, mux):
        wait_for(lambda: r.zscore(keys.archived("default"), s) and not r.exists(keys.task("default", v)))
    assert stored(r, s).error_msg == "SkipRetry: bad input" and stored(r, s).retried == 0
    assert r.zcard(keys.retry("default")) == 0


def test_an_error_text_that_is_not_utf8_or_whose_str_raises_is_still_recorded(redis_url: str,
                                                                              r: redis.Redis) -> None:
    # error_msg is a protobuf string: a lone surrogate (a JSON string cut inside an emoji, a surrogateescape'd
    # file name) failed its encoding, so the retry was never written and the task sat active until the
    # recoverer retried it a minute or two later as "task lease expired", the real error lost.
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    mux = ServeMux()

    @mux.handler("surrogate")
    async def surrogate(t):  # type: ignore[no-untyped-def]
        raise ValueError("name " + json.loads('"caf\\u00e9 \\ud83d"'))

    @mux.handler("unprintable")
    def unprintable(t):  # type: ignore[no-untyped-def]
        raise Unprintable()

    c = Client(redis_url)
    a = c.enqueue(Task("surrogate"), max_retry=0).id
    b = c.enqueue(Task("unprintable"), max_retry=3).id
    with running(redis_url, mux, retry_delay=lambda n, e, t: 3600):
        wait_for(lambda: r.zscore(keys.archived("default"), a) and r.zscore(keys.retry("default"), b),
                 what="both failures recorded")
    assert stored(r, a).error_msg == "ValueError: name café \\ud83d"
    assert stored(r, b).error_msg == "Unprintable: <str() of the exception raised RuntimeError>"
    assert stored(r, b).retried == 1


def test_timeout_cancels_handler_with_asynq_text(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    cancelled = threading.Event()

    @mux.handler("slow")
    async def slow(t):  # type: ignore[no-untyped-def]
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    tid = Client(redis_url).enqueue(Task("slow", b""), timeout=1, max_retry=0).id
    with running(redis_url, mux):
        wait_for(lambda: r.zscore(keys.archived("default"), tid))
    assert cancelled.is_set() and stored(r, tid).error_msg == "context deadline exceeded"


def test_plain_handler_sees_cancel_event_on_timeout(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    saw = threading.Event()

    @mux.handler("slow")
    def slow(t):  # type: ignore[no-untyped-def]
        if t.cancelled.wait(10):
            saw.set()

    tid = Client(redis_url).enqueue(Task("slow", b""), timeout=1, max_retry=0).id
    with running(redis_url, mux):
        wait_for(lambda: saw.is_set() and r.zscore(keys.archived("default"), tid))
    assert stored(r, tid).error_msg == "context deadline exceeded"


def _long_running() -> tuple[ServeMux, threading.Event]:
    """A mux whose "long" handler sets the event once it has started, then sleeps a minute (until cancelled)."""
    mux = ServeMux()
    started = threading.Event()

    @mux.handler("long")
    async def long(t):  # type: ignore[no-untyped-def]
        started.set()
        await asyncio.sleep(60)

    return mux, started


def test_cancel_message_cancels_running_task(redis_url: str, r: redis.Redis) -> None:
    mux, started = _long_running()

    tid = Client(redis_url).enqueue(Task("long", b""), max_retry=0).id
    with running(redis_url, mux):
        wait_for(started.is_set)
        r.publish(keys.CANCEL_CHANNEL, tid)
        wait_for(lambda: r.zscore(keys.archived("default"), tid))
    assert stored(r, tid).error_msg == "context canceled"


def test_retention_keeps_completed_task_with_result(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()

    @mux.handler("calc")
    async def calc(t):  # type: ignore[no-untyped-def]
        t.write_result(b"42")

    c = Client(redis_url)
    tid = c.enqueue(Task("calc", b""), retention=timedelta(hours=1), unique=600).id
    with running(redis_url, mux):
        wait_for(lambda: r.zscore(keys.completed("default"), tid))
    h = r.hgetall(keys.task("default", tid))
    assert h[b"state"] == b"completed" and h[b"result"] == b"42"
    m = stored(r, tid)
    assert m.completed_at > 0 and r.zscore(keys.completed("default"), tid) == pytest.approx(
        m.completed_at + 3600, abs=1.5)
    assert not r.exists(m.unique_key)  # success releases the uniqueness lock
    c.enqueue(Task("calc", b""), unique=600)


def test_shutdown_requeues_unfinished_tasks(redis_url: str, r: redis.Redis) -> None:
    mux, started = _long_running()

    c = Client(redis_url)
    first = c.enqueue(Task("long", b"")).id
    second = c.enqueue(Task("other", b"")).id  # no handler needed: it stays pending behind
    srv = Server(redis_url, concurrency=1, shutdown_timeout=0.2)
    srv.start(mux)
    wait_for(started.is_set)
    srv.shutdown()
    assert r.lrange(keys.pending("default"), 0, -1) == [second.encode(), first.encode()]  # back at the front
    assert r.hget(keys.task("default", first), "state") == b"pending"
    assert r.llen(keys.active("default")) == 0 and r.zcard(keys.lease("default")) == 0
    assert r.zcard(keys.SERVERS) == 0 and not r.keys("asynq:servers:*")


def test_a_graceful_stop_with_redis_healthy_takes_shutdown_timeout_not_more(redis_url: str) -> None:
    # The handlers' grace counts from the stop (not from when the hand-off lane's BLPOP returned, up to a second
    # later), and the loops stop at once after the requeue (the subscriber waited out its 0.5 s poll).
    mux, started = _long_running()

    Client(redis_url).enqueue(Task("long", b""))
    srv = Server(redis_url, shutdown_timeout=1)
    srv.start(mux)
    wait_for(started.is_set)
    time.sleep(0.3)  # the hand-off lane blocks in its BLPOP again
    began = time.monotonic()
    srv.shutdown()
    assert time.monotonic() - began < 1.5


def test_malformed_message_is_archived_with_readable_error(redis_url: str, r: redis.Redis) -> None:
    r.sadd(keys.QUEUES, "default")
    r.hset(keys.task("default", "junk"), mapping={"msg": b"\xff\xfe not protobuf", "state": "pending"})
    r.lpush(keys.pending("default"), "junk")
    mux = ServeMux()
    payloads: list[bytes] = []

    @mux.handler("json")
    async def parse(t):  # type: ignore[no-untyped-def]
        payloads.append(t.payload)
        json.loads(t.payload)

    bad = Client(redis_url).enqueue(Task("json", b"{not json"), max_retry=0).id
    with running(redis_url, mux):
        wait_for(lambda: r.zcard(keys.archived("default")) == 2)
    h = r.hgetall(keys.task("default", "junk"))
    assert h[b"state"] == b"archived" and h[b"msg"] == b"\xff\xfe not protobuf"  # kept as it was
    assert b"not valid protobuf" in h[b"asynqpy_error"]
    assert stored(r, bad).error_msg.startswith("JSONDecodeError: ")
    assert payloads == [b"{not json"]


def test_delayed_tasks_never_start_early(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    starts: dict[str, float] = {}

    @mux.handler("later")
    async def later(t):  # type: ignore[no-untyped-def]
        starts[t.id] = time.time()

    c = Client(redis_url)
    with running(redis_url, mux):
        due = {}
        for i in range(20):
            info = c.enqueue(Task("later", b""), process_in=0.1 + i * 0.037)
            due[info.id] = info.next_process_at.timestamp()  # type: ignore[union-attr]
        wait_for(lambda: len(starts) == 20)
    assert all(starts[i] >= due[i] for i in due), {i: starts[i] - due[i] for i in due}


# What Go asynq's enqueue does: the task hash and the pending list, no hand-off to a waiter, no wake-up signal.
GO_ENQUEUE = """if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending", "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
return 1"""


def test_go_style_enqueue_without_hand_off_or_wake_signal_is_picked_up_by_polling(redis_url: str,
                                                                                   r: redis.Redis) -> None:
    mux = ServeMux()
    done = threading.Event()
    mux.handle("go", lambda t: done.set())
    waits: list[float | None] = []
    with running(redis_url, mux, outcome_hooks=(lambda o: waits.append(o.wait),)) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="the idle worker waiting for a hand-off")
        opts = __import__("asynqpy.options", fromlist=["build_options"]).build_options()
        msg = broker.build_message("go", b"", {}, opts)
        r.sadd(keys.QUEUES, "default")
        assert r.eval(GO_ENQUEUE, 2, keys.task("default", msg.id), keys.pending("default"), msg.SerializeToString(),
                      msg.id, time.time_ns()) == 1
        wait_for(done.is_set, timeout=5, what="the idle poll to pick the task up")
    # Dequeued from pending by the poll: it waited there (a hand-off would say 0.0, never sitting in pending).
    assert len(waits) == 1 and waits[0] is not None and waits[0] > 0


def test_strict_priority_drains_higher_queue_first(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    order: list[str] = []
    mux.handle("t", lambda t: order.append(t.queue))
    c = Client(redis_url)
    c.enqueue_many([Task("t", b"")] * 5, queue="low")
    c.enqueue_many([Task("t", b"")] * 5, queue="high")
    with running(redis_url, mux, concurrency=1, queues={"high": 2, "low": 1}, strict_priority=True):
        wait_for(lambda: len(order) == 10)
    assert order == ["high"] * 5 + ["low"] * 5


def test_weighted_queues_all_get_served(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    order: list[str] = []
    mux.handle("t", lambda t: order.append(t.queue))
    c = Client(redis_url)
    for q in ("a", "b", "c"):
        c.enqueue_many([Task("t", b"")] * 30, queue=q)
    with running(redis_url, mux, concurrency=1, queues={"a": 6, "b": 3, "c": 1}):
        wait_for(lambda: len(order) == 90)
    first_half = order[:45]
    assert first_half.count("a") > first_half.count("c")  # weights matter
    assert first_half.count("c") < 30  # weighted, not strict


def test_middleware_wraps_handlers_in_order(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    trail: list[str] = []

    async def outer(t, nxt):  # type: ignore[no-untyped-def]
        trail.append("outer>")
        await nxt(t)
        trail.append("<outer")

    async def inner(t, nxt):  # type: ignore[no-untyped-def]
        trail.append("inner>")
        await nxt(t)
        trail.append("<inner")

    mux.use(outer, inner)
    mux.handle("t", lambda t: trail.append("handler"))
    Client(redis_url).enqueue(Task("t", b""))
    with running(redis_url, mux):
        wait_for(lambda: len(trail) == 5)
    assert trail == ["outer>", "inner>", "handler", "<inner", "<outer"]


def test_heartbeat_publishes_server_and_active_workers(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    release = threading.Event()
    mux.handle("hold", lambda t: release.wait(10))
    tid = Client(redis_url).enqueue(Task("hold", b"pay")).id
    with running(redis_url, mux, queues={"default": 2}, concurrency=3) as srv:
        rt = srv.runtime
        assert rt is not None
        wait_for(lambda: r.hlen(rt.workers_key) == 1, what="worker info")
        info = ServerInfo.FromString(r.get(rt.server_key))
        assert (info.host, info.pid, info.server_id) == (rt.host, rt.pid, rt.server_id)
        assert info.concurrency == 3 and dict(info.queues) == {"default": 2} and info.status == "active"
        assert r.zscore(keys.SERVERS, rt.server_key) > time.time()
        w = WorkerInfo.FromString(r.hget(rt.workers_key, tid))
        assert (w.task_id, w.task_type, w.task_payload, w.queue) == (tid, "hold", b"pay", "default")
        assert w.deadline.seconds - w.start_time.seconds == pytest.approx(1800, abs=1)
        release.set()
    assert not r.exists(rt.server_key, rt.workers_key)


def test_group_aggregation(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    batches: list[bytes] = []
    mux.handle("batch", lambda t: batches.append(t.payload))

    def aggregate(group: str, tasks: list[Task]) -> Task:
        return Task("batch", f"{group}:".encode() + b",".join(t.payload for t in tasks))

    c = Client(redis_url)
    for i in range(3):
        c.enqueue(Task("item", str(i).encode()), group="g1")
    with running(redis_url, mux, group_aggregator=aggregate, group_grace_period=1, group_max_size=10):
        wait_for(lambda: batches, timeout=15)
    group, items = batches[0].split(b":")
    assert len(batches) == 1 and group == b"g1" and sorted(items.split(b",")) == [b"0", b"1", b"2"]
    assert not r.keys("asynq:{default}:g:*") and not r.keys("asynq:{default}:t:*")


def test_worker_survives_a_redis_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    srv_redis = EmbeddedServer(data_dir=tmp_path / "valkey").start()
    port, url = srv_redis.port, srv_redis.url
    mux = ServeMux()
    seen: list[bytes] = []
    mux.handle("t", lambda t: seen.append(t.payload))
    c = Client(url)
    try:
        with running(url, mux):
            c.enqueue(Task("t", b"before"))
            wait_for(lambda: seen == [b"before"])
            srv_redis.stop()
            time.sleep(1.0)  # the worker's loops now fail and back off
            srv_redis = EmbeddedServer(port=port, data_dir=tmp_path / "valkey").start()
            c = Client(url)
            c.enqueue(Task("t", b"after"))
            wait_for(lambda: seen == [b"before", b"after"], timeout=20, what="processing after the restart")
    finally:
        srv_redis.stop()


def test_unreachable_redis_is_one_clear_error() -> None:
    with pytest.raises(RedisUnavailableError, match="cannot reach Redis"):
        Server("redis://127.0.0.1:1/0").start(ServeMux())


@pytest.mark.parametrize(("settings", "word"), [
    ({"concurrency": 0}, "concurrency"),
    ({"queues": {}}, "queues"),
    ({"queues": {"a}": 1}}, "queue"),
    ({"queues": {"a": 0}}, "priority"),
    ({"shutdown_timeout": -1}, "shutdown_timeout"),
    ({"heartbeat_interval": 40}, "heartbeat_interval"),
    ({"retry_delay": 5}, "retry_delay"),
    ({"concurrence": 5}, "concurrence"),  # a misspelt setting is named, not ignored
    # a loop with no period floods Redis (tens of thousands of commands a second)
    ({"heartbeat_interval": 0}, "heartbeat_interval"),
    ({"idle_poll_interval": 0}, "idle_poll_interval"),
    ({"forward_max_wait": 0.001}, "forward_max_wait"),
    ({"lease_duration": 0}, "lease_duration"),  # named itself, not heartbeat_interval
])
def test_bad_server_settings(settings, word) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match=word) as err:
        Server("redis://127.0.0.1:1/0", **settings)
    assert err.value.argument in (word, "queues")


def test_server_durations_take_a_timedelta() -> None:
    cfg = ServerConfig(shutdown_timeout=timedelta(seconds=3), idle_poll_interval=timedelta(milliseconds=50))
    assert (cfg.shutdown_timeout, cfg.idle_poll_interval) == (3.0, 0.05)


def test_server_takes_a_config_and_keywords_win() -> None:
    cfg = ServerConfig(concurrency=3, queues={"a": 2, "b": 1}, shutdown_timeout=2)
    srv = Server("redis://127.0.0.1:1/0", cfg, concurrency=7)
    assert (srv.config.concurrency, dict(srv.config.queues), srv.config.shutdown_timeout) == (7, {"a": 2, "b": 1}, 2)
    assert Server("redis://127.0.0.1:1/0", cfg).config is cfg
    with pytest.raises(InvalidArgumentError) as err:
        Server("redis://127.0.0.1:1/0", {"concurrency": 3})  # type: ignore[arg-type]
    assert err.value.argument == "config"


def test_result_of_a_task_finished_while_redis_was_away_is_written_later(tmp_path) -> None:  # type: ignore[no-untyped-def]
    srv_redis = EmbeddedServer(data_dir=tmp_path / "valkey").start()
    port, url = srv_redis.port, srv_redis.url
    mux = ServeMux()
    started, release = threading.Event(), threading.Event()

    @mux.handler("t")
    def work(t):  # type: ignore[no-untyped-def]
        started.set()
        release.wait(10)

    tid = Client(url).enqueue(Task("t", b"")).id
    try:
        with running(url, mux, syncer_interval=0.2):
            wait_for(started.is_set)
            srv_redis.stop()  # the acknowledgement will fail and be held by the syncer
            release.set()
            time.sleep(0.5)
            srv_redis = EmbeddedServer(port=port, data_dir=tmp_path / "valkey").start()
            r = redis.Redis.from_url(url)
            wait_for(lambda: not r.exists(keys.task("default", tid)), timeout=15, what="the held ack to be replayed")
            assert r.get(keys.processed_total("default")) == b"1" and r.llen(keys.active("default")) == 0
    finally:
        srv_redis.stop()


def test_handler_calling_sys_exit_is_a_failure_not_a_dead_worker(redis_url: str, r: redis.Redis) -> None:
    import sys

    mux = ServeMux()
    mux.handle("quit", lambda t: sys.exit(3))
    ok = threading.Event()
    mux.handle("ok", lambda t: ok.set())
    c = Client(redis_url)
    tid = c.enqueue(Task("quit", b""), max_retry=0).id
    with running(redis_url, mux):
        wait_for(lambda: r.zscore(keys.archived("default"), tid))
        c.enqueue(Task("ok", b""))
        wait_for(ok.is_set)
    assert stored(r, tid).error_msg == "SystemExit: 3"


def _orphan(r: redis.Redis, q: str, task: Task, **opts: object) -> str:
    """A task of q left active by a worker that died a minute ago (its lease long expired)."""
    tid = Client(connection=r).enqueue(task, queue=q, **opts).id
    [(got, _)] = SyncRunner(r).run(broker.dequeue(q, lease_expiry=time.time() - 60, count=1))
    assert got == tid
    return tid


def test_recoverer_makes_the_processors_retry_decision_for_every_queue(redis_url: str, r: redis.Redis) -> None:
    # The first queue fails to recover (its lease key is not a sorted set); the others must still be recovered.
    r.sadd(keys.QUEUES, "broken")
    r.set(keys.lease("broken"), "not a sorted set")
    typed = _orphan(r, "q1", Task("report:daily", b"1"), max_retry=3)
    uncounted = _orphan(r, "q2", Task("ping", b"2"), max_retry=3)
    last = _orphan(r, "q2", Task("report:daily", b"3"), max_retry=0)
    seen: list[tuple[int, str, str]] = []

    def delay(n: int, exc: BaseException, task) -> float:  # type: ignore[no-untyped-def]
        seen.append((n, type(exc).__name__, task.type))  # a retry_delay that reads the task, as handlers do
        return 1000.0 if task.type == "report:daily" else 2000.0

    def is_failure(exc: BaseException) -> bool:
        return not isinstance(exc, LeaseExpiredError) or seen[-1][2] == "report:daily"

    before = time.time()
    with running(redis_url, ServeMux(), queues={"broken": 3, "q1": 2, "q2": 1}, strict_priority=True,
                 retry_delay=delay, is_failure=is_failure, lease_grace=0, recover_interval=0.2):
        wait_for(lambda: r.zcard(keys.retry("q1")) and r.zcard(keys.retry("q2")) and r.zcard(keys.archived("q2")),
                 what="the orphans of q1 and q2 to be recovered")
    assert sorted(seen) == [(0, "LeaseExpiredError", "ping"), (0, "LeaseExpiredError", "report:daily")]
    m = TaskMessage.FromString(r.hget(keys.task("q1", typed), "msg"))
    assert (m.retried, m.error_msg) == (1, "asynq: task lease expired")
    assert before + 1000 - 1 <= r.zscore(keys.retry("q1"), typed) <= time.time() + 1000 + 1
    m = TaskMessage.FromString(r.hget(keys.task("q2", uncounted), "msg"))
    assert m.retried == 0  # is_failure said no: retried without counting an attempt, as the processor does
    assert r.zscore(keys.retry("q2"), uncounted) >= before + 2000 - 1
    assert r.zscore(keys.archived("q2"), last) is not None  # out of retries: archived, retry_delay not asked


def test_recoverer_survives_a_retry_delay_that_raises(redis_url: str, r: redis.Redis) -> None:
    tid = _orphan(r, "default", Task("t", b""), max_retry=3)

    def broken(n: int, exc: BaseException, task: object) -> float:
        raise RuntimeError("bug in user code")

    before = time.time()
    with running(redis_url, ServeMux(), retry_delay=broken, lease_grace=0, recover_interval=0.2):
        wait_for(lambda: r.zscore(keys.retry("default"), tid), what="the orphan to go to retry anyway")
    assert r.zscore(keys.retry("default"), tid) >= before + 15 - 1  # asynq's delay for a first retry
