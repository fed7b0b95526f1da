"""Hand-off: an idle worker of ours gets a new task leased to it by the enqueue script itself, in one hop."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from redis.cluster import RedisCluster

from asynqpy import Client, ServeMux, Task
from asynqpy.connection import connect
from asynqpy.options import build_options
from asynqpy.rdb import broker, keys
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire import TaskMessage
from tests.helpers import running, wait_for
from tests.redisfaults import blpop_denied

pytestmark = pytest.mark.cluster_too


def test_idle_worker_registers_and_receives_task(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    got = threading.Event()
    mux.handle("t", lambda t: got.set())
    with running(redis_url, mux) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="waiter registration")
        assert r.zscore(keys.waiters("default"), sid) > time.time()  # a short-lived registration
        Client(redis_url).enqueue(Task("t", b""))
        wait_for(got.is_set)
    assert r.zcard(keys.waiters("default")) == 0  # withdrawn at shutdown
    assert not r.keys("asynqpy:{default}:handoff:*")
    assert r.get(keys.processed_total("default")) == b"1"


def test_enqueue_hands_the_oldest_task_to_a_live_waiter(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    older = c.enqueue(Task("t", b"old")).id
    r.zadd(keys.waiters("default"), {"w1": time.time() + 5, "expired": time.time() - 1})
    newer = c.enqueue(Task("t", b"new")).id
    box = keys.handoff("default", "w1")
    [item] = r.lrange(box, 0, -1)
    tid, data = broker.parse_handoff(item)
    assert tid == older and TaskMessage.FromString(data).payload == b"old"  # FIFO, as a dequeue would
    h = r.hgetall(keys.task("default", older))
    assert h[b"state"] == b"active" and b"pending_since" not in h
    assert r.zscore(keys.lease("default"), older) > time.time() + 25
    assert r.lrange(keys.active("default"), 0, -1) == [older.encode()]
    assert r.lrange(keys.pending("default"), 0, -1) == [newer.encode()]
    assert r.zrange(keys.waiters("default"), 0, -1) == [b"expired"]  # the live registration was consumed
    assert 0 < r.ttl(box) <= 60
    c.enqueue(Task("t", b"third"))  # no live waiter: stays pending
    assert r.llen(keys.pending("default")) == 2


@pytest.mark.parametrize("unique", [None, 60], ids=["plain", "unique"])
def test_a_task_enqueued_to_an_idle_worker_is_stored_active_and_handed_over(redis_url: str, r: redis.Redis,
                                                                          unique: int | None) -> None:
    # the idle case (nothing pending before it): no pending round, the same end state as one
    r.zadd(keys.waiters("default"), {"w1": time.time() + 5})
    tid = Client(redis_url).enqueue(Task("t", b"p"), unique=unique).id
    h = r.hgetall(keys.task("default", tid))
    assert h[b"state"] == b"active" and b"pending_since" not in h
    assert TaskMessage.FromString(h[b"msg"]).payload == b"p"
    assert (b"unique_key" in h) == bool(unique)
    assert not r.exists(keys.pending("default"))
    assert r.lrange(keys.active("default"), 0, -1) == [tid.encode()]
    assert r.zscore(keys.lease("default"), tid) > time.time() + 25
    assert r.zcard(keys.waiters("default")) == 0
    [item] = r.lrange(keys.handoff("default", "w1"), 0, -1)
    assert broker.parse_handoff(item) == (tid, h[b"msg"])
    assert 0 < r.ttl(keys.handoff("default", "w1")) <= 60


def test_no_handoff_on_a_paused_queue(redis_url: str, r: redis.Redis) -> None:
    r.set(keys.paused("default"), 1)
    r.zadd(keys.waiters("default"), {"w1": time.time() + 5})
    Client(redis_url).enqueue(Task("t", b""), unique=60)
    assert r.llen(keys.pending("default")) == 1 and not r.exists(keys.handoff("default", "w1"))


def test_task_handed_to_a_dead_worker_is_recovered(redis_url: str, r: redis.Redis) -> None:
    r.zadd(keys.waiters("default"), {"dead-worker": time.time() + 1})
    tid = Client(redis_url).enqueue(Task("t", b""), max_retry=3).id
    assert r.hget(keys.task("default", tid), "state") == b"active"
    r.zadd(keys.lease("default"), {tid: time.time() - 60}, xx=True)  # as if 30 s + 30 s had passed
    mux = ServeMux()
    ran = threading.Event()
    mux.handle("t", lambda t: ran.set())
    with running(redis_url, mux, retry_delay=lambda n, e, t: 0):
        wait_for(ran.is_set, timeout=15, what="the recovered task to run")
    assert not r.exists(keys.task("default", tid))


def test_go_style_dequeue_and_handoff_never_hand_out_a_task_twice(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    run = SyncRunner(r)
    seen: list[str] = []
    for i in range(200):
        if i % 3 == 0:
            r.zadd(keys.waiters("default"), {f"w{i}": time.time() + 5})
        c.enqueue(Task("t", str(i).encode()))
        seen += [tid for tid, _ in run.run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1))]
    for box in r.keys("asynqpy:{default}:handoff:*"):
        seen += [broker.parse_handoff(v)[0] for v in r.lrange(box, 0, -1)]
    seen += [v.decode() for v in r.lrange(keys.pending("default"), 0, -1)]
    assert len(seen) == len(set(seen)) == 200


def test_task_left_in_the_hand_off_list_at_shutdown_is_requeued(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()
    busy, release = threading.Event(), threading.Event()

    @mux.handler("hold")
    def hold(t):  # type: ignore[no-untyped-def]
        busy.set()
        release.wait(10)

    c = Client(redis_url)
    with running(redis_url, mux, concurrency=1, shutdown_timeout=5) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        c.enqueue(Task("hold", b""))
        wait_for(busy.is_set)
        wait_for(lambda: r.zscore(keys.waiters("default"), sid) is None, what="full worker withdrawn")
        # a task handed over in the instant before the withdrawal: leased to us, waiting in our list
        late = c.enqueue(Task("other", b"")).id
        # (A registration still travelling when the worker filled up may stand a moment after the check above and
        # take this task; the full worker then gives it back to the queue, where this dequeue finds it.)
        [(tid, data)] = wait_for(
            lambda: SyncRunner(r).run(broker.dequeue("default", lease_expiry=time.time() + 30, count=1)),
            what="the task pending")
        assert tid == late
        r.lpush(keys.handoff("default", sid), f"{len(tid)}:{tid}".encode() + data)
        srv.stop()  # stopping: the listener hands the task back while the first one still runs
        wait_for(lambda: r.lrange(keys.pending("default"), 0, -1) == [late.encode()], what="requeue")
        release.set()
    assert r.lrange(keys.pending("default"), 0, -1) == [late.encode()]
    assert r.hget(keys.task("default", late), "state") == b"pending"
    assert not r.exists(keys.handoff("default", sid)) and r.zcard(keys.lease("default")) == 0


def test_forward_hands_due_tasks_to_waiters_and_wakes_for_the_rest(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    # Due more than a second apart: asynq's scores are whole seconds, and within one second the order is the ids'.
    a = c.enqueue(Task("t", b"a"), process_in=10).id
    b = c.enqueue(Task("t", b"b"), process_in=11.5).id
    r.zadd(keys.waiters("default"), {"w1": time.time() + 60})
    ps = r.pubsub(ignore_subscribe_messages=True)
    ps.subscribe(keys.WAKE_CHANNEL)
    moved, nxt, _ = SyncRunner(r).run(broker.forward("default", now=time.time() + 13))
    assert moved == 2 and nxt is None
    [item] = r.lrange(keys.handoff("default", "w1"), 0, -1)
    assert broker.parse_handoff(item)[0] == a  # the first due went to the waiter, leased
    assert r.hget(keys.task("default", a), "state") == b"active"
    assert r.lrange(keys.pending("default"), 0, -1) == [b.encode()]
    msg = wait_for(lambda: ps.get_message(timeout=0.1), timeout=2, what="a wake-up for the task left pending")
    assert msg["data"] == b"default"
    ps.close()


def test_a_task_handed_over_after_a_failed_withdraw_comes_back_to_its_queue(redis_url: str,
                                                                             r: redis.Redis) -> None:
    if isinstance(r, RedisCluster):
        pytest.skip("one ACL user on one server is enough")
    # A real fault: the worker's user loses the right to ZREM, so withdrawing its registration fails (NOPERM) and
    # the registration lives on until it lapses, while producers hand it tasks it has no slot for.
    def acl(zrem: str) -> None:
        r.acl_setuser("worker", enabled=True, passwords=["+pw"], keys=["~*"], channels=["*"],
                      commands=["+@all", f"{zrem}zrem"])

    acl("+")
    u = urlsplit(redis_url)
    url = urlunsplit(u._replace(netloc=f"worker:pw@{u.hostname}:{u.port}"))
    mux = ServeMux()
    busy, release, ran = threading.Event(), threading.Event(), threading.Event()

    @mux.handler("hold")
    def hold(t):  # type: ignore[no-untyped-def]
        busy.set()
        release.wait(20)

    mux.handle("other", lambda t: ran.set())
    c = Client(redis_url)
    try:
        with running(url, mux, concurrency=1, shutdown_timeout=1, idle_poll_interval=0.1) as srv:
            sid = srv.runtime.server_id  # type: ignore[union-attr]
            wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="the registration")
            acl("-")
            # Enqueued as Go does (no hand-off): the poll takes it and fills the only slot, then the withdraw fails.
            msg = broker.build_message("hold", b"", {}, build_options())
            r.sadd(keys.QUEUES, "default")
            r.hset(keys.task("default", msg.id), mapping={"msg": msg.SerializeToString(), "state": "pending"})
            r.lpush(keys.pending("default"), msg.id)
            wait_for(busy.is_set)
            assert r.zscore(keys.waiters("default"), sid)  # full, but the withdraw failed
            late = c.enqueue(Task("other", b"")).id
            assert r.hget(keys.task("default", late), "state") == b"active"  # handed to the full worker
            time.sleep(0.5)
            acl("+")  # (the requeue script needs ZREM too)
            wait_for(lambda: r.lrange(keys.pending("default"), 0, -1) == [late.encode()], timeout=6,
                     what="the task handed over to the full worker to come back to its queue")
            assert r.hget(keys.task("default", late), "state") == b"pending" and not ran.is_set()
            assert not r.exists(keys.handoff("default", sid))
            release.set()
            wait_for(ran.is_set, what="the returned task to run once a slot is free")
    finally:
        release.set()
        r.acl_deluser("worker")


def test_the_lane_blocks_again_after_its_connection_is_killed(redis_url: str, r: redis.Redis) -> None:
    """The lane BLPOPs on a connection of its own: killed under it (a real fault), the lane reconnects, and a task
    handed over meanwhile (the registration outlives the connection) still runs."""
    if isinstance(r, RedisCluster):
        pytest.skip("the cluster's lanes block through the cluster client; one server is enough here")
    mux = ServeMux()
    got: list[bytes] = []
    ran = threading.Event()

    @mux.handler("t")
    def handle(t):  # type: ignore[no-untyped-def]
        got.append(t.payload)
        ran.set()

    def blocked() -> bool:
        return any(c.get("cmd") == "blpop" for c in r.client_list())

    with running(redis_url, mux) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid) and blocked(), what="the lane blocking")
        r.client_kill_filter(_type="normal", skipme=True)
        tid = Client(redis_url).enqueue(Task("t", b"after")).id
        assert r.hget(keys.task("default", tid), "state") == b"active"  # handed over, to the box only the lane reads
        wait_for(ran.is_set, timeout=10, what="the handed task to run once the lane reconnected")
        wait_for(blocked, what="the lane blocking again")
    assert got == [b"after"]


@pytest.mark.parametrize("own_reader", [True, False], ids=["our protocol", "through redis-py"])
def test_the_lanes_pop_reads_replies_errors_and_hand_offs_it_takes(redis_url: str, r: redis.Redis,
                                                                   own_reader: bool) -> None:
    """HandedPop on one server: with this redis-py its replies are read by our protocol (a redis-py that lays its
    connection out otherwise falls back to reading through it, own_reader=False): no task within the block is
    None, a handed element is returned, or started by the take (TAKEN), an error reply is raised and the
    connection kept, and a killed connection is raised once and made again at the next pop."""
    if isinstance(r, RedisCluster):
        pytest.skip("on a Cluster the pop is the cluster client's blpop")
    from redis.exceptions import ConnectionError, ResponseError

    from asynqpy.connection import aconnect
    from asynqpy.rdb import handoff_io

    box = keys.handoff("default", "w1")
    taken: list[tuple[bytes, bytes]] = []

    async def go() -> None:
        client = aconnect(redis_url)
        popper = handoff_io.HandedPop(client, direct=True)
        try:
            if not own_reader:
                popper._connect = _plain_connect(popper)  # type: ignore[method-assign]
            assert await popper.pop([box], 0.05) is None
            assert popper.reads_itself is own_reader
            r.lpush(box, b"one")
            assert await popper.pop([box], 1) == (box.encode(), b"one")
            r.lpush(box, b"two")
            item = await popper.pop([box], 1, lambda k, v: bool(taken.append((k, v))) or True)
            if own_reader:
                assert item is handoff_io.TAKEN
            else:
                assert item == (box.encode(), b"two")
            assert taken == ([(box.encode(), b"two")] if own_reader else [])
            r.set("not-a-list", 1)
            with pytest.raises(ResponseError, match="WRONGTYPE"):
                await popper.pop(["not-a-list"], 1)
            r.lpush(box, b"three")
            assert await popper.pop([box], 1) == (box.encode(), b"three")
            killer = asyncio.get_running_loop().call_later(
                0.2, lambda: r.client_kill_filter(_type="normal", skipme=True))
            with pytest.raises(ConnectionError):
                await popper.pop([box], 2)
            killer.cancel()
            r.lpush(box, b"four")
            assert await popper.pop([box], 1) == (box.encode(), b"four")
        finally:
            await popper.aclose()
            await client.aclose()

    asyncio.run(go())


def test_a_hand_off_read_while_a_dequeue_is_in_flight_waits_for_it_then_starts(redis_url: str,
                                                                                r: redis.Redis) -> None:
    """The lane's take starts a handed task in the reply's callback only when a slot is sure without a wait: with a
    dequeue in flight (its slots reserved) it leaves the task to the lane's pass, which starts it once that dequeue
    has started what it got (here: nothing)."""
    if isinstance(r, RedisCluster):
        pytest.skip("on a Cluster the pop is the cluster client's blpop: the lane's pass always starts the task")
    mux = ServeMux()
    ran = threading.Event()
    mux.handle("t", lambda t: ran.set())
    with running(redis_url, mux, concurrency=2) as srv:
        proc, loop = srv._processor, srv._loop  # type: ignore[union-attr]
        assert proc is not None and loop is not None
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: r.zscore(keys.waiters("default"), sid)
                 and any(c.get("cmd") == "blpop" for c in r.client_list()), what="the lane blocking")

        def dequeue_in_flight(begins: bool) -> None:  # as _fetch_loop marks one (its slot reserved), then ends it
            proc._reserved += 1 if begins else -1
            (proc._fetched.clear if begins else proc._fetched.set)()

        loop.call_soon_threadsafe(dequeue_in_flight, True)
        tid = Client(redis_url).enqueue(Task("t", b"")).id
        assert r.hget(keys.task("default", tid), "state") == b"active"  # handed over at enqueue
        assert not ran.wait(0.5)  # read, but held for the dequeue in flight
        loop.call_soon_threadsafe(dequeue_in_flight, False)
        wait_for(ran.is_set, what="the handed task to start once the dequeue ended")
    assert r.get(keys.processed_total("default")) == b"1"


def _plain_connect(popper: Any) -> Any:
    """popper's _connect, with the take-over refused (as on a redis-py whose connection is laid out otherwise)."""
    from asynqpy.rdb import handoff_io

    real = popper._connect

    async def connect() -> None:
        take_over = handoff_io._Replies.take_over
        handoff_io._Replies.take_over = classmethod(lambda cls, conn: None)  # type: ignore[method-assign, assignment]
        try:
            await real()
        finally:
            handoff_io._Replies.take_over = take_over  # type: ignore[method-assign]
    return connect


def test_a_worker_behind_sentinel_gets_handed_tasks(redis_sentinel, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    """The lane's own connection finds the primary through Sentinel (as the pool's connections do), not the default
    host: a task handed over at enqueue runs."""
    if isinstance(r, RedisCluster):
        pytest.skip("Sentinel has its own servers; once is enough")
    url = redis_sentinel.url
    primary = connect(url)
    mux = ServeMux()
    ran, release = threading.Event(), threading.Event()
    mux.handle("t", lambda t: (ran.set(), release.wait(10)))  # held: a finished task's hash is gone (retention 0)
    try:
        with running(url, mux) as srv:
            sid = srv.runtime.server_id  # type: ignore[union-attr]
            wait_for(lambda: primary.zscore(keys.waiters("default"), sid), what="the registration")
            wait_for(lambda: any(c.get("cmd") == "blpop" for c in primary.client_list()), what="the lane blocking")
            tid = Client(url).enqueue(Task("t", b"")).id
            assert primary.hget(keys.task("default", tid), "state") == b"active"  # handed over
            wait_for(ran.is_set, what="the handed task to run")
            release.set()
    finally:
        release.set()
        for k in primary.keys("asynq*"):
            primary.delete(k)
        primary.close()


def test_a_fetch_takes_what_was_handed_to_its_server_before_any_pending_task(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    r.zadd(keys.waiters("default"), {"w1": time.time() + 5})
    handed = c.enqueue(Task("t", b"handed")).id  # to w1's hand-off list (its lane has not popped it yet)
    later = c.enqueue(Task("t", b"later")).id  # no registration left: pending
    run = SyncRunner(r)
    expiry = time.time() + 120
    # another server's fetch takes the pending one, never w1's
    other = run.run(broker.dequeue_waited("default", lease_expiry=expiry, count=5, server_id="w2"))
    assert [t[0] for t in other] == [later]
    run.run(broker.requeue("default", later, now=time.time()))
    [(tid, data, since, limit)] = run.run(broker.dequeue_waited("default", lease_expiry=expiry, count=1,
                                                                server_id="w1"))
    assert tid == handed and TaskMessage.FromString(data).payload == b"handed" and limit is None
    assert since is not None and abs(since - time.time()) < 5  # it never waited in pending
    assert r.zscore(keys.lease("default"), handed) == math.ceil(expiry)  # the fetch's lease from now on
    assert not r.exists(keys.handoff("default", "w1"))
    assert r.lrange(keys.pending("default"), 0, -1) == [later.encode()]
    assert sorted(r.lrange(keys.active("default"), 0, -1)) == [handed.encode()]


def test_a_fetch_leaves_its_lane_the_slot_of_a_hand_off_the_lane_took(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    r.zadd(keys.waiters("default"), {"w1": time.time() + 5})
    handed = c.enqueue(Task("t", b"handed")).id
    later = c.enqueue(Task("t", b"later")).id
    # w1's lane popped the task (its registration is consumed), and w1 has not started it yet
    assert broker.parse_handoff(r.rpop(keys.handoff("default", "w1")))[0] == handed
    run = SyncRunner(r)
    expiry = time.time() + 60
    # w1 believes its registration stood: the slot is its lane's, the fetch takes one task fewer
    assert run.run(broker.dequeue_waited("default", lease_expiry=expiry, count=1, server_id="w1", offered=True)) == []
    assert r.lrange(keys.pending("default"), 0, -1) == [later.encode()]
    [(tid, *_)] = run.run(broker.dequeue_waited("default", lease_expiry=expiry, count=2, server_id="w1",
                                                offered=True))
    assert tid == later  # the other slot
    run.run(broker.requeue("default", later, now=time.time()))
    # not registered as far as w1 knows (withdrawn, or never): nothing is held for it
    [(tid, *_)] = run.run(broker.dequeue_waited("default", lease_expiry=expiry, count=1, server_id="w1"))
    assert tid == later
    if not isinstance(r, RedisCluster):
        run.run(broker.requeue("default", later, now=time.time()))
        assert run.run(broker.dequeue_queues([("default", 1)], lease_expiry=expiry, count=1, server_id="w1",
                                             offered=True)) == []
        r.zadd(keys.waiters("default"), {"w1": time.time() + 5})  # it stands: the fetch may fill the slot
        [(_, tid, *_)] = run.run(broker.dequeue_queues([("default", 1)], lease_expiry=expiry, count=1,
                                                       server_id="w1", offered=True))
        assert tid == later


def test_a_fetch_of_several_queues_takes_the_handed_tasks_first(redis_url: str, r: redis.Redis) -> None:
    if isinstance(r, RedisCluster):
        pytest.skip("dequeue_queues runs where every queue lives on one node")
    c = Client(redis_url)
    c.enqueue(Task("t", b"a-old"), queue="a")
    r.zadd(keys.waiters("b"), {"w1": time.time() + 5})
    handed = c.enqueue(Task("t", b"b-handed"), queue="b").id
    run = SyncRunner(r)
    got = run.run(broker.dequeue_queues([("a", 0), ("b", 0)], lease_expiry=time.time() + 60, count=1,
                                        server_id="w1"))
    assert [(q, tid) for q, tid, *_ in got] == [("b", handed)]  # a strict order would have given a's first
    assert r.llen(keys.pending("a")) == 1 and not r.exists(keys.handoff("b", "w1"))


def test_a_task_handed_over_keeps_its_place_when_the_lane_cannot_pop(redis_url: str, r: redis.Redis) -> None:
    if isinstance(r, RedisCluster):
        pytest.skip("one ACL user on one server is enough")
    # A real fault: the worker's user may not BLPOP, so its lane registers (a script) but never pops what
    # producers hand it. The fetch takes what was handed over before the task enqueued after it, rather than
    # running the later one first (and leaving the first in the hand-off list).
    url = blpop_denied(r, redis_url)
    mux = ServeMux()
    ran: list[str] = []
    mux.handle("t", lambda t: ran.append(t.payload.decode()))
    c = Client(redis_url)
    try:
        with running(url, mux, concurrency=1, idle_poll_interval=0.2) as srv:
            sid = srv.runtime.server_id  # type: ignore[union-attr]
            wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="the registration")
            first = c.enqueue(Task("t", b"first")).id
            assert r.hget(keys.task("default", first), "state") == b"active"  # handed to the worker
            c.enqueue(Task("t", b"second"))
            wait_for(lambda: len(ran) == 2, timeout=10, what="both tasks to run")
        assert ran == ["first", "second"]
    finally:
        r.acl_deluser("worker")
