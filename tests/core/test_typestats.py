"""Per-type aggregates: the Server's default hook counts outcomes and its flusher writes them in batches; the
Inspector reads counts, failure rates and percentiles back; deploy marks; and what a Redis outage leaves."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.errors import InvalidArgumentError
from asynqpy.marks import mark
from asynqpy.outcome import TaskOutcome
from asynqpy.rdb import keys
from asynqpy.rdb.state import record_type_stats
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.typestats import BUCKETS, OTHER, TypeStats, bucket
from inspector import Inspector
from inspector.typestats import percentile
from tests.helpers import running, wait_for


def _outcome(ttype: str, outcome: str, duration: float, wait: float | None, at: float) -> TaskOutcome:
    return TaskOutcome("default", ttype, "id", outcome, at, duration, wait)  # type: ignore[arg-type]


def test_buckets_and_percentiles() -> None:
    assert bucket(0.001) == 0 and bucket(0.005) == 0 and bucket(0.006) == 1 and bucket(7200) == len(BUCKETS)
    counts = [0] * (len(BUCKETS) + 1)
    counts[bucket(0.2)] = 100  # all in (0.1, 0.25]
    assert percentile(counts, 0.5) == pytest.approx(0.175)
    assert percentile([0] * len(counts), 0.5) is None
    counts[-1] = 1000
    assert percentile(counts, 0.99) == BUCKETS[-1]


def test_the_hook_bounds_types_and_a_flush_is_one_call_per_chunk(r: redis.Redis) -> None:
    stats = TypeStats(max_types=2)
    now = time.time()
    for t in ("a", "b", "c", "d"):
        stats.observe(_outcome(t, "success", 0.02, 0.5, now))
    stats.observe(_outcome("a", "retry", 0.02, None, now))
    groups = stats.take()
    minute = int(now // 60)
    assert set(groups) == {("default", "a", minute), ("default", "b", minute), ("default", OTHER, minute)}
    assert groups[("default", "a", minute)] == {"n": 2, "f": 1, "rt": 40, f"r{bucket(0.02)}": 2, "wn": 1,
                                                 "wt": 500, f"w{bucket(0.5)}": 1}
    SyncRunner(r).run(record_type_stats([(q, t, m, f) for (q, t, m), f in groups.items()]))
    assert r.hget(keys.type_queue_minute("default", "a", minute), "n") == b"2"
    assert r.hget(keys.type_queue_hour("default", "a", minute // 60), "f") == b"1"
    assert 72 * 3600 < r.ttl(keys.type_queue_minute("default", "a", minute)) <= 73 * 3600
    assert r.zscore(keys.TYPE_QUEUE_INDEX, '["default","a"]') == minute


def test_a_server_records_types_and_the_inspector_reads_them(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()

    @mux.handler("email:send")
    async def send(t):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.03)

    @mux.handler("image:resize")
    async def resize(t):  # type: ignore[no-untyped-def]
        raise ValueError("bad image")

    with Client(redis_url) as c:
        for _ in range(20):
            c.enqueue(Task("email:send", b""))
        for _ in range(5):
            c.enqueue(Task("image:resize", b""), max_retry=0)
        with running(redis_url, mux, concurrency=10):
            wait_for(lambda: r.get(keys.processed_total("default")) == b"25", what="all 25 processed")
        # shutdown flushed the last batch
    with Inspector(redis_url) as insp:
        rows = {s.task_type: s for s in insp.type_stats("1h")}
        email, image = rows["email:send"], rows["image:resize"]
        assert (email.processed, email.failed) == (20, 0) and (image.processed, image.failed) == (5, 5)
        assert image.failure_rate == 1.0
        # Each run is a sleep(0.03), which can measure a little under 30 ms: the loop schedules it from the time it
        # read at the start of its iteration, which a busy machine leaves behind the handler's own start.
        assert email.run_p50 is not None and 0.025 <= email.run_p50 <= 0.05 and email.run_total >= 20 * 0.025
        assert email.wait_known == 20 and email.wait_p99 is not None
        assert list(rows) == ["email:send", "image:resize"]  # the most total run time first
        assert sum(n for _, n, _ in email.points) == 20 and len(email.points) == 60 and email.step == 60
        day = insp.one_type_stats("email:send", "24h")
        assert day.processed == 20 and day.step == 3600 and len(day.points) == 24
        assert insp.one_type_stats("never:seen", "72h").processed == 0
        with pytest.raises(InvalidArgumentError, match="window"):
            insp.type_stats("5m")


def test_deploy_marks(redis_url: str) -> None:
    t = mark("v1.4.2", redis_url=redis_url)
    with Inspector(redis_url) as insp:
        m = insp.mark("v1.4.3", by="alice")
        got = insp.marks(t - 1)
        assert [(x.label, x.by) for x in got] == [("v1.4.2", ""), ("v1.4.3", "alice")] and got[1].at == m.at
        with pytest.raises(InvalidArgumentError, match="label"):
            insp.mark("  ")


def test_a_flush_redis_refuses_is_kept_and_written_later(redis_url: str, r: redis.Redis) -> None:
    from asynqpy.config import ServerConfig
    from asynqpy.runtime import Runtime
    from asynqpy.typestats import TypeStatsFlusher

    stats = TypeStats()
    now = time.time()
    stats.observe(_outcome("a", "success", 0.1, 0.0, now))

    async def go() -> None:
        rt = Runtime(ServerConfig(), redis_url)
        flusher = TypeStatsFlusher(rt, stats)
        r.config_set("maxmemory", "1")
        try:
            with pytest.raises(Exception, match="OOM"):
                await flusher.run_once()
        finally:
            r.config_set("maxmemory", "0")
        stats.observe(_outcome("a", "success", 0.1, 0.0, now))
        await flusher.run_once()
        await rt.close()
    asyncio.run(go())
    assert r.hget(keys.type_queue_minute("default", "a", int(now // 60)), "n") == b"2"


def test_the_cli_shows_types_and_records_marks(redis_url: str, r: redis.Redis,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from inspector.cli import main

    # Ten seconds into the minute before this one: a 2 s run observed now would end in the next minute, which
    # the 1 h window (up to the current minute) does not hold yet when the test runs in a minute's last 2 s.
    now = (time.time() // 60 - 1) * 60 + 10
    stats = TypeStats()
    for d in (0.01, 0.02, 2.0):
        stats.observe(_outcome("email:send", "success", d, 0.1, now))
    stats.observe(_outcome("email:send", "archived", 0.01, None, now))
    SyncRunner(r).run(record_type_stats([(q, t, m, f) for (q, t, m), f in stats.take().items()]))
    assert main(["mark", "v1.4.2", "--redis-url", redis_url]) == 0
    assert "marked 'v1.4.2'" in capsys.readouterr().out
    assert main(["stats", "--types", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("email:send"))
    assert row.split()[1:4] == ["4", "1", "25.0%"] and "marks: v1.4.2" in out and "Go asynq workers" in out
    assert main(["stats", "--types", "--window", "72h", "--json", "--redis-url", redis_url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["window"] == "72h" and data["types"][0]["processed"] == 4
    assert data["types"][0]["queues"] == ["default"] and data["types"][0]["unqueued"] is False
    assert main(["stats", "--types", "--queue", "billing:*", "--queue", "hr:*", "--redis-url", redis_url]) == 0
    assert "no task types recorded" in capsys.readouterr().out  # default's runs are not billing's or hr's
    assert main(["stats", "--types", "--queue", "def*", "--json", "--redis-url", redis_url]) == 0
    assert json.loads(capsys.readouterr().out)["types"][0]["processed"] == 4
    assert main(["mark", " ", "--redis-url", redis_url]) == 2  # a blank label is a wrong argument
    assert "label" in capsys.readouterr().err
