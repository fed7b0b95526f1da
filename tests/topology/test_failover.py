"""A Sentinel failover (SENTINEL FAILOVER), and a primary crash that loses writes, in the middle of a steady load,
with and without durability.

Producers keep enqueueing, a worker keeps working, an Inspector keeps reading; the primary changes. Every
client reconnects by itself, no call hangs, and with durable=True (and durable_acks) nothing that was
acknowledged is lost. The counts of lost and twice-run tasks are printed for both modes (pytest -s).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.errors import AsynqError
from asynqpy.rdb import keys
from asynqpy.topology import LocalSentinel
from inspector import Inspector
from tests.helpers import running, wait_for

DELAY = 1.0
MAX_CALL = 12.0  # no client call may take longer (socket timeouts are 10 s; a hang would be far longer)


@dataclass
class Load:
    acknowledged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # the client said so: error or NotDurableError
    slowest: float = 0.0
    inspector_errors: int = 0
    inspector_reads: int = 0


def produce(url: str, mode: str, durable: bool, stop: threading.Event, load: Load) -> None:
    c = Client(url)
    i = 0
    while not stop.is_set():
        tid = f"{mode}-{i}"
        i += 1
        t0 = time.monotonic()
        try:
            # Due a second later: at the moment of the event the last second's tasks are still only stored, so
            # a write the new primary never got shows as a lost task instead of one that already ran.
            c.enqueue(Task("work", tid.encode()), task_id=tid, durable=durable, process_in=DELAY)
            load.acknowledged.append(tid)
        except (AsynqError, redis.RedisError):
            load.refused.append(tid)
        load.slowest = max(load.slowest, time.monotonic() - t0)
        time.sleep(0.002)
    c.close()


def inspect(url: str, stop: threading.Event, load: Load) -> None:
    with Inspector(url) as insp:
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                insp.queue_infos()
                load.inspector_reads += 1
            except (AsynqError, redis.RedisError):
                load.inspector_errors += 1
            load.slowest = max(load.slowest, time.monotonic() - t0)
            time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
@pytest.mark.parametrize("event", ["failover", "crash"])
def test_failover_under_load(redis_sentinel: LocalSentinel, event: str, durable: bool,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """event: "failover" is SENTINEL FAILOVER (Sentinel hands over); "crash" kills the primary while its replica
    lags behind (frozen for half a second), the case where asynchronous replication loses writes."""
    redis_sentinel.wait_replicas_synced()
    redis_sentinel.flushall()
    url = redis_sentinel.url
    mode = f"{event}-{'durable' if durable else 'plain'}"
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    mux = ServeMux()

    @mux.handler("work")
    async def work(t: object) -> None:
        with lock:
            runs[t.payload.decode()] += 1  # type: ignore[attr-defined]

    load = Load()
    stop = threading.Event()
    # Short leases and a quick recoverer, so that a task whose acknowledgement vanished runs again (and is
    # counted twice) within the test instead of a minute later.
    with running(url, mux, concurrency=20, durable_acks=durable, heartbeat_interval=0.5, lease_duration=4,
                 lease_grace=1, recover_interval=1, retry_delay=lambda n, exc, task: 0.5):
        threads = [threading.Thread(target=produce, args=(url, mode, durable, stop, load)),
                   threading.Thread(target=inspect, args=(url, stop, load))]
        for t in threads:
            t.start()
        wait_for(lambda: len(runs) > 100, what="steady load")
        old = redis_sentinel.primary_addr()
        t_fail = time.monotonic()
        new = redis_sentinel.failover() if event == "failover" else redis_sentinel.crash_primary(lag=0.5)
        t_fail = time.monotonic() - t_fail
        before = len(load.acknowledged)
        wait_for(lambda: len(load.acknowledged) > before + 200, timeout=30, what="enqueues after the failover")
        reads = load.inspector_reads
        wait_for(lambda: load.inspector_reads > reads + 3, timeout=30, what="Inspector reads after the failover")
        stop.set()
        for t in threads:
            t.join(30)
        acked = set(load.acknowledged)
        with redis.Redis(*new) as primary:  # what is stored runs: the queue drains
            try:
                wait_for(lambda: primary.llen(keys.pending("default")) == 0
                         and primary.llen(keys.active("default")) == 0
                         and primary.zcard(keys.scheduled("default")) == 0
                         and primary.zcard(keys.retry("default")) == 0,
                         timeout=40, interval=0.1, what="the queue to drain")
            except AssertionError:
                print("left: pending", primary.llen(keys.pending("default")), "active",
                      primary.lrange(keys.active("default"), 0, 3), "scheduled",
                      primary.zrange(keys.scheduled("default"), 0, 3, withscores=True), "retry",
                      primary.zrange(keys.retry("default"), 0, 3, withscores=True), time.time())
                raise
        time.sleep(0.5)  # the last handlers finish
    lost = sorted(acked - set(runs))
    twice = sorted(tid for tid, n in runs.items() if n > 1)
    with capsys.disabled():
        print(f"\n[{mode}] primary {old[1]} -> {new[1]}: {len(acked)} acknowledged, "
              f"{len(load.refused)} refused with an error, lost {len(lost)}, run twice {len(twice)}, "
              f"slowest client call {load.slowest:.2f}s, inspector errors {load.inspector_errors}, "
              f"{event} took {t_fail:.1f}s")
    assert new != old
    assert load.slowest < MAX_CALL, "a client call hung"
    assert len(acked) > 300
    if durable:
        assert lost == [], f"acknowledged durable tasks lost at failover: {lost[:10]}"
