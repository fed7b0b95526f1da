"""Only Redis's clock matters: a worker, a producer or a scheduler whose clock is 5 s off (libfaketime) starts
no task early and none late, and ticks once.

The processes of tests/core/skewapp.py run with libfaketime preloaded (FAKETIME="+5s" or "-5s"); every time the
tests compare is read from Redis (TIME, the due times the scripts wrote), never from a faked clock. Lateness is
bounded generously (LATE): a forwarder wakes at the due time, and a busy test machine adds its own delays.
Debian's `faketime` package provides the library; without it these tests skip, unless ASYNQPY_REQUIRE_FAKETIME
is set (CI), which makes that a failure.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from inspector import Inspector
from tests.core.skewapp import RETRY_DELAY, enqueued_key, started_key
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
LATE = 1.5  # seconds: the bound on how late a task may start (the usual is milliseconds)
SKEWS = (5, -5)
LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), None)


@pytest.fixture(scope="module", autouse=True)
def _need_faketime() -> None:
    if LIBFAKETIME is not None:
        return
    why = "libfaketime is missing (Debian: apt-get install faketime): the clock-skew tests need it"
    if os.environ.get("ASYNQPY_REQUIRE_FAKETIME"):
        pytest.fail(why + " and ASYNQPY_REQUIRE_FAKETIME is set")
    pytest.skip(why)


def _env(skew: float) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if skew:
        assert LIBFAKETIME is not None
        env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME=f"{skew:+d}s")
    return env


def _app(role: str, *args: str, skew: int = 0, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-u", "-m", "tests.core.skewapp", role, *args], env=_env(skew),
                            cwd=ROOT, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def test_faketime_moves_this_python(r: redis.Redis) -> None:
    """The premise: libfaketime moves time.time() of the interpreter the tests run (else they prove nothing)."""
    out = subprocess.run([sys.executable, "-c", "import time; print(time.time())"], env=_env(5),
                         capture_output=True, text=True, check=True).stdout
    sec, usec = r.time()
    assert float(out) - (sec + usec / 1e6) == pytest.approx(5, abs=0.5)


@pytest.fixture
def worker(request: pytest.FixtureRequest, redis_url: str) -> Iterator[tuple[subprocess.Popen[str], str, int]]:
    """A worker process on queue "skew" with the skew given by the test's parameter (0 when none)."""
    skew = getattr(request, "param", 0)
    p = _app("worker", redis_url, "skew", skew=skew, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "worker ready"
        yield p, redis_url, skew
    finally:
        p.terminate()
        p.wait(15)


def _lateness(r: redis.Redis, n: int) -> list[float]:
    wait_for(lambda: r.llen(started_key("skew")) >= n, timeout=20, what=f"{n} delayed tasks to start")
    due = {}
    for e in map(json.loads, r.lrange(enqueued_key("skew"), 0, -1)):
        # The exact due time lies between Redis's times before and after the enqueue, plus the delay.
        assert e["before"] + e["delay"] - 0.001 <= e["due"] <= e["after"] + e["delay"] + 0.001
        due[e["payload"]] = e["due"]
    starts = {e["payload"]: e["at"] for e in map(json.loads, r.lrange(started_key("skew"), 0, -1))}
    assert sorted(starts) == sorted(due)  # each ran once
    return [starts[p] - due[p] for p in due]


def _produce(redis_url: str, n: int, delay: float, skew: int = 0) -> None:
    p = _app("produce", redis_url, "skew", str(n), str(delay), skew=skew, stdout=subprocess.DEVNULL)
    assert p.wait(30) == 0


@pytest.mark.parametrize("worker", SKEWS, indirect=True, ids=lambda s: f"worker{s:+d}s")
def test_a_worker_whose_clock_is_off_starts_delayed_tasks_on_time(
        worker: tuple[subprocess.Popen[str], str, int], r: redis.Redis) -> None:
    proc, url, skew = worker
    _produce(url, 5, 2.0)
    late = _lateness(r, 5)
    assert min(late) >= 0, f"started early: {late}"
    assert max(late) < LATE, f"started late: {late}"
    # A retry is due by Redis's clock too: RETRY_DELAY after the failure, by the worker's estimate of Redis's
    # time (its clock plus the offset its heartbeat measured: off by at most half that round trip, a few ms).
    from asynqpy import Client, Task
    with Client(url) as c:
        c.enqueue(Task("skewretry"), queue="skew")
    wait_for(lambda: r.llen(f"{started_key('skew')}:retry") == 2, timeout=20, what="the retry")
    first, second = map(json.loads, r.lrange(f"{started_key('skew')}:retry", 0, -1))
    assert (first["attempt"], second["attempt"]) == (0, 1)
    assert RETRY_DELAY - 0.05 <= second["at"] - first["at"] < RETRY_DELAY + LATE
    # The worker measured its offset and reports it: on the servers page (Inspector) and in its log.
    with Inspector(url) as insp:
        [srv] = insp.servers()
        assert srv.clock_offset == pytest.approx(-skew, abs=0.5)  # Redis's clock minus the worker's
    proc.terminate()
    _, err = proc.communicate(timeout=15)
    way = "ahead of" if skew > 0 else "behind"
    assert re.search(rf"this machine's clock is 5\.\d s {way} Redis", err), err[-2000:]
    assert err.count("this machine's clock is") == 1  # warned once, not at every heartbeat


@pytest.mark.parametrize("skew", SKEWS, ids=lambda s: f"producer{s:+d}s")
def test_a_producer_whose_clock_is_off_gets_its_delays_by_redis_clock(
        worker: tuple[subprocess.Popen[str], str, int], r: redis.Redis, skew: int) -> None:
    _, url, _ = worker
    _produce(url, 5, 2.0, skew=skew)
    late = _lateness(r, 5)
    assert min(late) >= 0, f"started early: {late}"
    assert max(late) < LATE, f"started late: {late}"


TICK = re.compile(r"enqueued tick \(@every 1s\) for (\S+): task (\S+)")


def test_schedulers_whose_clocks_are_off_enqueue_each_tick_once_and_on_time(redis_url: str,
                                                                          r: redis.Redis) -> None:
    """Two replicas, one 5 s fast and one 5 s slow: each tick is enqueued once, never before Redis's clock
    reaches it, and shortly after."""
    from datetime import datetime

    procs = [_app("schedule", redis_url, "cron", "5", skew=s, stderr=subprocess.PIPE) for s in SKEWS]
    logs = [p.communicate(timeout=60)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs
    for skew, log in zip(SKEWS, logs, strict=True):  # each warned once about its clock, the right way round
        way = "ahead of" if skew > 0 else "behind"
        assert len(re.findall(rf"this machine's clock is 5\.\d s {way} Redis", log)) == 1, log[-2000:]
    ticks: dict[str, float] = {}
    for log in logs:
        for when, tid in TICK.findall(log):
            assert tid not in ticks
            ticks[tid] = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    at = sorted(ticks.values())
    assert len(at) >= 3 and len(set(at)) == len(at), logs  # every tick once, by one replica or the other
    assert at == [at[0] + i for i in range(len(at))]  # and none skipped between the first and the last
    pending = [b.decode() for b in r.lrange("asynq:{cron}:pending", 0, -1)]
    assert sorted(pending) == sorted(ticks)  # each logged enqueue is one task, and there are no others
    for tid, tick in ticks.items():
        since = int(r.hget(f"asynq:{{cron}}:t:{tid}", "pending_since") or 0) / 1e9  # by Redis's clock
        assert tick <= since < tick + LATE, (tid, tick, since)
