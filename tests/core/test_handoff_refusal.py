"""Hand-off: a registration stands only while its server's hand-off list is empty (register_waiter.lua refuses
otherwise), so an idle fetch poll that finds it standing does not ask the list (_dequeue.lua take_handed)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis
from redis.cluster import RedisCluster

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import broker, handoff_io, keys
from asynqpy.rdb.sync_runner import SyncRunner
from tests.helpers import running, wait_for
from tests.redisfaults import blpop_denied

pytestmark = pytest.mark.cluster_too


def _commands(r: redis.Redis) -> Counter[str]:
    """Calls per command the server has answered so far, scripts' own commands included (INFO commandstats)."""
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()})


def test_a_registration_is_refused_while_its_hand_off_list_holds_a_task(redis_url: str, r: redis.Redis) -> None:
    # A registration stands only while its hand-off list is empty: a fetch that finds it standing does not ask the
    # list (see _dequeue.lua take_handed).
    run = SyncRunner(r)
    waiters, box = keys.waiters("default"), keys.handoff("default", "w1")
    r.zadd(waiters, {"w1": time.time() + 5})
    tid = Client(redis_url).enqueue(Task("t", b"handed")).id  # consumes the registration, fills the list
    assert r.llen(box) == 1 and r.zscore(waiters, "w1") is None
    assert run.run(handoff_io.register_waiter("default", "w1", until=time.time() + 4)) == 0
    assert r.zscore(waiters, "w1") is None and r.llen(box) == 1  # refused; the task waits for its server
    later = Client(redis_url).enqueue(Task("t", b"later")).id  # so no producer hands it a second task meanwhile
    assert r.lrange(keys.pending("default"), 0, -1) == [later.encode()]
    assert broker.parse_handoff(r.rpop(box))[0] == tid  # its lane pops it
    until = time.time() + 4
    assert run.run(handoff_io.register_waiter("default", "w1", until=until)) == 1
    assert r.zscore(waiters, "w1") == pytest.approx(until, abs=0.01)
    if not isinstance(r, RedisCluster):  # a renewal (it still stands) is one ZADD: the list is not asked
        before = _commands(r)
        assert run.run(handoff_io.register_waiter("default", "w1", until=until + 2)) == 1
        spent = _commands(r) - before
        assert spent["zadd"] == 1 and spent["exists"] == 0
        assert r.zscore(waiters, "w1") == pytest.approx(until + 2, abs=0.01)


def test_an_idle_poll_with_a_standing_registration_does_not_ask_the_hand_off_list(redis_url: str,
                                                                                   r: redis.Redis) -> None:
    if isinstance(r, RedisCluster):
        pytest.skip("commandstats of one server")
    queues = ["idle-a", "idle-b", "idle-c"]
    run = SyncRunner(r)
    for q in queues:
        run.run(handoff_io.register_waiter(q, "w1", until=time.time() + 5))

    def poll(offered: bool) -> Counter[str]:
        before = _commands(r)
        assert run.run(broker.dequeue_queues([(q, 1) for q in queues], lease_expiry=time.time() + 30, count=10,
                                             server_id="w1", offered=offered)) == []
        return _commands(r) - before

    poll(True)  # the script is loaded
    spent = poll(True)
    assert spent["zscore"] == 3 and spent["llen"] == 0  # one command per queue for the hand-off side
    spent = poll(False)  # as far as it knows not registered: it asks the lists
    assert spent["llen"] == 3 and spent["zscore"] == 0
    before = _commands(r)
    assert run.run(broker.dequeue_waited("idle-a", lease_expiry=time.time() + 30, count=10, server_id="w1",
                                         offered=True)) == []
    assert (_commands(r) - before)["llen"] == 0
    r.zrem(keys.waiters("idle-b"), "w1")  # consumed (its lane popped the task): the list is asked, a slot held
    spent = poll(True)
    assert spent["zscore"] == 3 and spent["llen"] == 1


def test_a_lane_refused_its_registration_does_not_offer_and_its_task_runs_first(redis_url: str,
                                                                                  r: redis.Redis) -> None:
    if isinstance(r, RedisCluster):
        pytest.skip("one ACL user on one server is enough")
    # The worker's user may not BLPOP: a task handed to it waits in its hand-off list. Its lane's next registration
    # is refused while the list holds it (no producer hands it more; it does not offer), and the fetch takes it
    # before the task enqueued after it.
    url = blpop_denied(r, redis_url)
    mux = ServeMux()
    ran: list[str] = []
    mux.handle("t", lambda t: ran.append(t.payload.decode()))
    c = Client(redis_url)
    try:
        with running(url, mux, concurrency=1, idle_poll_interval=30) as srv:
            sid = srv.runtime.server_id  # type: ignore[union-attr]
            [lane] = srv._processor.handoff.lanes  # type: ignore[attr-defined]
            wait_for(lambda: r.zscore(keys.waiters("default"), sid), what="the registration")
            first = c.enqueue(Task("t", b"first")).id
            assert r.hget(keys.task("default", first), "state") == b"active"  # handed over; no wake-up
            tried = lane.trouble.attempts
            wait_for(lambda: lane.trouble.attempts > tried + 1, timeout=15, what="the lane's next passes")
            # each pass registered (refused) before its BLPOP was refused
            assert r.zscore(keys.waiters("default"), sid) is None and not lane.offering
            assert r.llen(keys.handoff("default", sid)) == 1 and ran == []
            c.enqueue(Task("t", b"second"))  # pending: wakes the worker, whose fetch takes the handed task first
            wait_for(lambda: len(ran) == 2, timeout=10, what="both tasks to run")
            assert not r.exists(keys.handoff("default", sid))
        assert ran == ["first", "second"]
        assert r.get(keys.processed_total("default")) == b"2"
    finally:
        r.acl_deluser("worker")
