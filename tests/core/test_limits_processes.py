"""Flow control with 3 worker processes on a real server: limits hold across the fleet."""

from __future__ import annotations

import json
import math
import signal
import time

import redis

from asynqpy import Client, Limit, Task
from asynqpy.rdb import keys
from asynqpy.rdb.flow import set_limit
from tests.core.apps import BEGUN, PEAKS, RUNNING
from tests.core.test_processes import start_worker, stop
from tests.helpers import wait_for

FAST = {"concurrency": 4, "heartbeat_interval": 0.5, "forward_max_wait": 0.5, "idle_poll_interval": 0.5}


def peaks(r: redis.Redis) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in r.lrange(PEAKS, 0, -1):
        part, n = item.decode().rsplit(":", 1)
        out[part] = max(out.get(part, 0), int(n))
    return out


def begun(r: redis.Redis) -> list[tuple[str, float]]:
    rows = [b.decode().rsplit(":", 1) for b in r.lrange(BEGUN, 0, -1)]
    return [(t, float(s)) for t, s in rows]


def test_concurrency_limit_of_two_holds_across_three_workers_and_others_run_freely(
        redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=2), queues=["default"])
    c = Client(redis_url)
    c.enqueue_many([Task("email:send", b"", headers={"tenant": "mail", "sleep": "0.3"}) for _ in range(12)])
    c.enqueue_many([Task("free:x", b"", headers={"tenant": "free", "sleep": "0.3"}) for _ in range(12)])
    procs = [start_worker(redis_url, "limited", **FAST) for _ in range(3)]
    sampled = 0
    try:
        t0 = time.time()
        while r.llen(BEGUN) < 24 and time.time() - t0 < 60:
            sampled = max(sampled, int(r.get(RUNNING + "mail") or 0))  # sampled from outside too
            time.sleep(0.02)
        wait_for(lambda: r.llen(BEGUN) >= 24 and r.zcard(keys.lease("default")) == 0, timeout=60,
                 what="all 24 tasks handled")
    finally:
        for p in procs:
            stop(p)
    top = peaks(r)
    assert top["mail"] == 2 and sampled <= 2  # the limit was reached and never exceeded
    assert top["free"] > 2  # the unlimited type ran beside it, more than 2 at once
    starts = begun(r)
    free_done = max(t for ty, t in starts if ty == "free:x")
    mail_done = max(t for ty, t in starts if ty == "email:send")
    assert free_done < mail_done  # the limited type did not hold the unlimited one back (no head-of-line block)


def test_rate_limit_admits_at_most_rate_times_time_plus_burst(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("sync:*", rate=20, burst=5), queues=["default"])
    Client(redis_url).enqueue_many([Task("sync:crm", b"", headers={"sleep": "0"}) for _ in range(200)])
    procs = [start_worker(redis_url, "limited", **FAST) for _ in range(3)]
    try:
        wait_for(lambda: r.llen(BEGUN) >= 60, timeout=60, what="60 starts")
    finally:
        for p in procs:
            stop(p)
    times = sorted(t for _, t in begun(r))
    first = times[0]
    # Any window of w seconds holds at most 20 w + 5 starts; the handlers stamp their start a little after
    # the script admitted them, so a window is widened by 0.1 s of that jitter.
    for i, t0 in enumerate(times):
        for window in (0.5, 1.0, 2.0, 3.0):
            n = sum(1 for t in times[i:] if t - t0 <= window)
            assert n <= 20 * (window + 0.1) + 5, (window, n)
    span = times[59] - first
    assert span >= (60 - 5) / 20 * 0.9  # and it is a rate, not a stall: about 2.75 s for 60 starts


def test_partitioned_limit_holds_per_key_while_other_keys_run(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1, key="header.tenant"), queues=["default"])
    tasks = [Task("email:send", b"", headers={"tenant": t, "sleep": "0.3"}) for t in "abc" * 4]
    Client(redis_url).enqueue_many(tasks)
    procs = [start_worker(redis_url, "limited", **FAST) for _ in range(3)]
    try:
        wait_for(lambda: r.llen(BEGUN) >= 12, timeout=60, what="12 starts")
        wait_for(lambda: r.zcard(keys.lease("default")) == 0, timeout=30, what="all finished")
    finally:
        for p in procs:
            stop(p)
    assert peaks(r) == {"a": 1, "b": 1, "c": 1}
    starts = sorted(t for _, t in begun(r))
    assert starts[2] - starts[0] < 0.3  # three keys started together: one key does not hold the others


def test_killed_workers_slots_come_back_after_its_lease(redis_url: str, r: redis.Redis) -> None:
    set_limit(r, Limit("email:*", concurrency=1, key="payload.account"), queues=["default"])
    c = Client(redis_url)
    fast = {**FAST, "lease_duration": 2, "lease_grace": 30, "recover_interval": 60}
    c.enqueue(Task("email:send", json.dumps({"account": "acme"}).encode()))
    victim = start_worker(redis_url, "limited", {"HANG": "1"}, **fast)
    try:
        wait_for(lambda: r.llen(BEGUN) == 1, timeout=30, what="the first task to start")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed_at = time.time()
        c.enqueue(Task("email:send", json.dumps({"account": "acme"}).encode(), headers={"sleep": "0"}))
        worker = start_worker(redis_url, "limited", **fast)
        try:
            wait_for(lambda: r.llen(BEGUN) == 2, timeout=30, what="the second task to start once the lease ran out")
        finally:
            stop(worker)
    finally:
        stop(victim)
    second = begun(r)[1][1]
    assert second >= killed_at + 0.5  # it waited for the dead worker's lease (recovery would take 30 s more)
    assert second <= math.ceil(killed_at) + 2 + 3
