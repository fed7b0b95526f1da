"""Fetch and acknowledgement across queues: on one node a fetch is at most two script calls and an ack batch one,
however many queues a worker has; strict and weighted order kept."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

import pytest
import redis

from asynqpy import Client, Limit, ReceivedTask, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.connection import aconnect
from asynqpy.fetch import Dequeued, _order, dequeue_for, forget_dry
from asynqpy.rdb import broker, keys
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.failures import TroubleLog
from asynqpy.rdb.flow import set_limit
from asynqpy.rdb.scripts import script
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.wire.codec import decode_task_message
from tests.helpers import running, wait_for


def _script_calls(r: redis.Redis) -> int:
    """EVALSHA and EVAL calls the server has answered so far (INFO commandstats: read, never reset)."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def _fetch(url: str, cfg: ServerConfig, free: int) -> list[Dequeued]:
    async def go() -> list[Dequeued]:
        client = aconnect(url)
        try:
            return await dequeue_for(AsyncRunner(client), cfg, free, lease_expiry=time.time() + 30,
                                     trouble=TroubleLog("test"))
        finally:
            await client.aclose()
    return asyncio.run(go())


def _fill(url: str, counts: dict[str, int]) -> None:
    c = Client(url)
    for q, n in counts.items():
        c.enqueue_many([Task("t", q.encode()) for _ in range(n)], queue=q)
    c.close()


def test_a_fetch_across_100_queues_is_at_most_two_script_calls(redis_url: str, r: redis.Redis) -> None:
    # One of 100 queues holds tasks: the fetch finds them in two calls at most (the first free queues of the order,
    # then all the others); it was one call per queue tried, up to 91.
    queues = {f"q{i:03d}": 1 for i in range(100)}
    _fill(redis_url, {"q099": 2})
    _fetch(redis_url, ServerConfig(queues={"warm": 1, "up": 1}), 1)  # the script is loaded; later calls EVALSHA
    before = _script_calls(r)
    got = _fetch(redis_url, ServerConfig(queues=queues), 10)
    assert _script_calls(r) - before <= 2
    assert [q for q, *_ in got] == ["q099", "q099"]
    for q, tid, data, since, _ in got:
        assert r.hget(keys.task(q, tid), "state") == b"active"
        assert r.zscore(keys.lease(q), tid) is not None
        assert since is not None and data
    assert r.llen(keys.pending("q099")) == 0


def test_strict_priority_takes_the_higher_queues_first(redis_url: str, r: redis.Redis) -> None:
    queues = {f"p{i}": 10 - i for i in range(10)}  # p0 highest
    _fill(redis_url, {"p3": 2, "p7": 5, "p9": 5})
    _fetch(redis_url, ServerConfig(queues={"warm": 1, "up": 1}), 1)
    before = _script_calls(r)
    got = _fetch(redis_url, ServerConfig(queues=queues, strict_priority=True), 8)
    assert _script_calls(r) - before == 1  # the first 8 queues hold enough
    assert [q for q, *_ in got] == ["p3", "p3", "p7", "p7", "p7", "p7", "p7"]
    got = _fetch(redis_url, ServerConfig(queues=queues, strict_priority=True), 2)
    assert _script_calls(r) - before == 3  # p0 and p1 are empty: then all the others
    assert [q for q, *_ in got] == ["p9", "p9"]
    assert r.llen(keys.pending("p9")) == 3


def test_weighted_fetch_gives_each_queue_its_share_first(redis_url: str, r: redis.Redis) -> None:
    _fill(redis_url, {"a": 10, "b": 10, "c": 10})
    got = _fetch(redis_url, ServerConfig(queues={"a": 1, "b": 1, "c": 1}), 3)
    assert sorted(q for q, *_ in got) == ["a", "b", "c"]
    got = _fetch(redis_url, ServerConfig(queues={"a": 1, "b": 1, "c": 1, "empty": 1}), 20)
    assert len(got) == 20 and Counter(q for q, *_ in got)["empty"] == 0  # the rest filled from the others


def test_a_paused_queue_gives_nothing_to_a_fetch_across_queues(redis_url: str, r: redis.Redis) -> None:
    _fill(redis_url, {"a": 3, "b": 3})
    r.set(keys.paused("a"), "1")
    got = _fetch(redis_url, ServerConfig(queues={"a": 5, "b": 1}), 10)
    assert [q for q, *_ in got] == ["b"] * 3
    assert r.llen(keys.pending("a")) == 3


@pytest.mark.cluster_too
def test_fetch_across_queues_works_on_every_backend(redis_url: str) -> None:
    # On a cluster each queue is its own call (their keys live in different slots); the result is the same.
    _fill(redis_url, {"x": 2, "y": 2, "z": 2})
    got = _fetch(redis_url, ServerConfig(queues={"x": 3, "y": 2, "z": 1}), 10)
    assert Counter(q for q, *_ in got) == {"x": 2, "y": 2, "z": 2}


def test_the_first_places_of_a_weighted_order_follow_the_weights() -> None:
    # The fetch draws only the places it needs (k of n queues); they must be distributed as queue_order()'s.
    random.seed(11)
    cfg = ServerConfig(queues={"a": 6, "b": 3, **{f"z{i}": 1 for i in range(10)}})  # total weight 19
    heads = [_order(cfg).first(2) for _ in range(20_000)]
    assert all(len(set(h)) == 2 for h in heads)
    firsts = Counter(h[0] for h in heads)
    assert abs(firsts["a"] / 20_000 - 6 / 19) < 0.02
    assert abs(firsts["z3"] / 20_000 - 1 / 19) < 0.01
    after_a = Counter(h[1] for h in heads if h[0] == "a")
    assert abs(after_a["b"] / sum(after_a.values()) - 3 / 13) < 0.03
    rest = _order(cfg).rest(["a", "z0"])
    assert sorted(rest) == sorted(set(cfg.queues) - {"a", "z0"})


def test_weighted_order_follows_the_weights() -> None:
    random.seed(7)
    cfg = ServerConfig(queues={"a": 6, "b": 3, "c": 1})
    firsts = Counter(cfg.queue_order()[0] for _ in range(20_000))
    assert abs(firsts["a"] / 20_000 - 0.6) < 0.02
    assert abs(firsts["b"] / 20_000 - 0.3) < 0.02
    assert abs(firsts["c"] / 20_000 - 0.1) < 0.02
    seconds = Counter(o[1] for o in (cfg.queue_order() for _ in range(20_000)) if o[0] == "a")
    assert abs(seconds["b"] / sum(seconds.values()) - 0.75) < 0.03  # without replacement: b 3/(3+1) after a


def test_done_queues_finishes_the_tasks_of_several_queues_in_one_call(redis_url: str, r: redis.Redis) -> None:
    # The acker's call for a batch spanning queues (it was one done call per queue in the batch). It names each
    # queue by its key prefix alone: the keys it builds must be rdb/keys.py's (asynq's, read by Go's Inspector).
    _fill(redis_url, {"a": 2, "b": 1, "c": 3})
    got = _fetch(redis_url, ServerConfig(queues={"a": 1, "b": 1, "c": 1}), 10)
    by_queue: dict[str, list[tuple[str, str]]] = {}
    for q, tid, *_ in got:
        by_queue.setdefault(q, []).append((tid, ""))
    by_queue["b"].append(("not-held", ""))
    r.script_load(script("done_queues").text)  # so that the call below is one EVALSHA, not EVALSHA then EVAL
    before = _script_calls(r)
    now = time.time()
    lost = SyncRunner(r).run(broker.done_queues(sorted(by_queue.items()), now=now))
    assert _script_calls(r) - before == 1
    assert lost == ["not-held"]
    for q, n in (("a", 2), ("b", 1), ("c", 3)):
        assert r.get(keys.processed_total(q)) == str(n).encode()
        assert r.get(keys.processed_daily(q, now)) == str(n).encode()
        assert 89 * 86400 < r.ttl(keys.processed_daily(q, now)) <= 90 * 86400
        assert r.ttl(keys.processed_total(q)) == -1
        assert r.zcard(keys.lease(q)) == 0 and r.llen(keys.active(q)) == 0
    assert not r.keys("asynq:{*}:t:*")
    assert not r.keys("asynq:{*}:processed:*[^0-9-]*")  # no other key of ours under the day's name


def test_done_and_done_queues_write_the_same(redis_url: str, r: redis.Redis) -> None:
    # done.lua (one queue: a cluster, or a batch of one queue) and done_queues.lua share done_tasks(); the same
    # batch through each leaves the same keys: counters with the same values and expiry, locks released.
    c = Client(redis_url)
    for q in ("one", "many"):
        for i in range(3):
            c.enqueue(Task("t", f"{q}{i}".encode()), queue=q, unique=3600)
    c.close()
    now = time.time()
    got = _fetch(redis_url, ServerConfig(queues={"one": 1, "many": 1}), 10)
    items: dict[str, list[tuple[str, str]]] = {"one": [], "many": []}
    for q, tid, data, *_ in got:
        items[q].append((tid, decode_task_message(data, queue=q, task_id=tid).unique_key))
    assert all(len(v) == 3 and all(r.get(u) == tid.encode() for tid, u in v) for v in items.values())
    run = SyncRunner(r)
    assert run.run(broker.done("one", [*items["one"], ("gone", "")], now=now)) == ["gone"]
    assert run.run(broker.done_queues([("many", [*items["many"], ("gone", "")]), ("x", [("gone2", "")])],
                                      now=now)) == ["gone", "gone2"]
    for q in ("one", "many"):
        assert r.get(keys.processed_daily(q, now)) == b"3" and r.get(keys.processed_total(q)) == b"3"
        assert 89 * 86400 < r.ttl(keys.processed_daily(q, now)) <= 90 * 86400
        assert not any(r.exists(u) for _, u in items[q])
        assert r.zcard(keys.lease(q)) == 0 and r.llen(keys.active(q)) == 0
    assert not r.exists(keys.processed_total("x"), keys.processed_daily("x", now))  # nothing done: nothing counted
    assert not r.keys("asynq:{*}:t:*")


def test_a_worker_of_ten_queues_acknowledges_every_task(redis_url: str, r: redis.Redis) -> None:
    queues = {f"w{i}": 1 for i in range(10)}
    _fill(redis_url, {q: 20 for q in queues})
    mux = ServeMux()

    async def noop(task: ReceivedTask) -> None:
        return None
    mux.handle("t", noop)
    with running(redis_url, mux, queues=queues):
        wait_for(lambda: all(r.get(keys.processed_total(q)) == b"20" for q in queues), what="200 acknowledged")
    assert not r.keys("asynq:{*}:t:*")
    assert all(r.zcard(keys.lease(q)) == 0 and r.llen(keys.active(q)) == 0 for q in queues)


def _commands(r: redis.Redis) -> Counter[str]:
    """Calls per command the server has answered so far, scripts' own commands included (INFO commandstats)."""
    return Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()})


def test_an_empty_fetch_asks_all_its_queues_one_exists(redis_url: str, r: redis.Redis) -> None:
    # An idle worker polls its queues every idle_poll_interval: neither paused nor limited is one EXISTS for all
    # the queues of the call (paused, limits and limit waits of each at once); it was one per queue (two before).
    queues = {"idle-a": 1, "idle-b": 1, "idle-c": 1}
    _fetch(redis_url, ServerConfig(queues=queues), 10)  # the script is loaded
    before = _commands(r)
    assert _fetch(redis_url, ServerConfig(queues=queues), 10) == []
    spent = _commands(r) - before
    assert spent["exists"] == 1 and spent["rpoplpush"] == 3


def test_a_paused_or_limited_queue_among_others_is_asked_on_its_own(redis_url: str, r: redis.Redis) -> None:
    # When the one EXISTS finds a queue paused or limited, each queue is asked its own: the paused one gives
    # nothing, the limited one holds its limit, the others give all.
    _fill(redis_url, {"open": 3, "held": 3})
    c = Client(redis_url)
    c.enqueue_many([Task("mail:x", b"") for _ in range(3)], queue="limited")
    c.close()
    set_limit(r, Limit("mail:*", concurrency=1), queues=["limited"])
    r.set(keys.paused("held"), "1")
    got = _fetch(redis_url, ServerConfig(queues={"open": 1, "held": 1, "limited": 1}), 10)
    assert Counter(q for q, *_ in got) == {"open": 3, "limited": 1}
    assert r.llen(keys.pending("held")) == 3


def test_a_paused_queue_among_idle_ones_is_still_skipped(redis_url: str, r: redis.Redis) -> None:
    _fill(redis_url, {"pz-a": 2, "pz-b": 2})
    r.set(keys.paused("pz-a"), "1")
    got = _fetch(redis_url, ServerConfig(queues={"pz-a": 1, "pz-b": 1, "pz-c": 1}), 10)
    assert [q for q, *_ in got] == ["pz-b", "pz-b"]
    r.delete(keys.paused("pz-a"))
    got = _fetch(redis_url, ServerConfig(queues={"pz-a": 1, "pz-b": 1, "pz-c": 1}), 10)
    assert [q for q, *_ in got] == ["pz-a", "pz-a"]


def _fetch_many(url: str, cfg: ServerConfig, free: int, rounds: int) -> list[list[Dequeued]]:
    """rounds fetches of one server (one config), on one connection."""
    async def go() -> list[list[Dequeued]]:
        client = aconnect(url)
        try:
            return [await dequeue_for(AsyncRunner(client), cfg, free, lease_expiry=time.time() + 30,
                                      trouble=TroubleLog("test")) for _ in range(rounds)]
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_queues_found_dry_are_left_out_until_the_idle_poll(redis_url: str, r: redis.Redis) -> None:
    # 100 queues, the tasks in one: once the others were found empty a fetch is one call naming that queue only
    # (one EXISTS), taking all it can from it; it was every fetch naming 10 queues first, then the other 90.
    queues = {f"dry{i:02d}": 100 - i for i in range(100)}  # strict: dry00 highest
    _fill(redis_url, {"dry50": 40})
    cfg = ServerConfig(queues=queues, strict_priority=True, idle_poll_interval=0.5)
    _fetch(redis_url, ServerConfig(queues={"warm": 1, "up": 1}), 1)
    [first] = _fetch_many(redis_url, cfg, 10, 1)
    assert [q for q, *_ in first] == ["dry50"] * 10
    before, calls = _commands(r), _script_calls(r)
    [second] = _fetch_many(redis_url, cfg, 10, 1)
    spent = _commands(r) - before
    assert [q for q, *_ in second] == ["dry50"] * 10
    assert _script_calls(r) - calls == 1 and spent["exists"] == 1
    # a task added to a higher queue found dry waits at most idle_poll_interval (Go producers send no wake-up)
    _fill(redis_url, {"dry05": 1})
    [third] = _fetch_many(redis_url, cfg, 10, 1)
    assert [q for q, *_ in third] == ["dry50"] * 10
    time.sleep(0.6)
    [fourth] = _fetch_many(redis_url, cfg, 10, 1)
    assert [q for q, *_ in fourth] == ["dry05"]  # (the first ten queues had something: the fetch ends there)


def test_a_wake_up_asks_the_dry_queues_again(redis_url: str, r: redis.Redis) -> None:
    queues = {f"wk{i:02d}": 100 - i for i in range(20)}
    _fill(redis_url, {"wk10": 30})
    cfg = ServerConfig(queues=queues, strict_priority=True, idle_poll_interval=60.0)
    got = _fetch_many(redis_url, cfg, 5, 2)
    assert [q for batch in got for q, *_ in batch] == ["wk10"] * 10
    _fill(redis_url, {"wk02": 1})
    [batch] = _fetch_many(redis_url, cfg, 5, 1)
    assert [q for q, *_ in batch] == ["wk10"] * 5  # wk02 is left out: found dry a moment ago
    forget_dry(cfg)  # what Processor.wake() does (our producers' enqueue, the forwarder)
    [batch] = _fetch_many(redis_url, cfg, 5, 1)
    assert [q for q, *_ in batch] == ["wk02"]


def test_weighted_fetches_leave_out_dry_queues_and_keep_the_weights(redis_url: str, r: redis.Redis) -> None:
    queues = {"wa": 3, "wb": 1, **{f"we{i:02d}": 1 for i in range(30)}}
    _fill(redis_url, {"wa": 400, "wb": 400})
    cfg = ServerConfig(queues=queues, idle_poll_interval=60.0)
    got = _fetch_many(redis_url, cfg, 1, 200)
    counts = Counter(q for batch in got for q, *_ in batch)
    assert sum(counts.values()) == 200 and set(counts) == {"wa", "wb"}
    assert 0.62 < counts["wa"] / 200 < 0.88  # 3:1
    assert _order(cfg).live(time.monotonic()) == ["wa", "wb"]
