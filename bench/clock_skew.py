"""How late (or early) delayed tasks start when a worker's or a producer's clock is off (libfaketime).

    .venv/bin/python -m bench.clock_skew [--tasks 20] [--delay 3] [--skews=-5,0,5] [--redis-url URL]

For each skew, a worker process runs under `faketime -f <skew>s` (and then a producer does, the worker on
the true clock); the producer enqueues --tasks tasks with process_in=--delay. Each start is compared with
its due time, both read from Redis's clock (TIME), so the faked clocks do not enter the figures: negative
lateness means the task started early. Prints min, median and max lateness per case. Needs Debian's faketime.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import redis

from bench.common import bench_redis
from tests.core.skewapp import enqueued_key, started_key

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def _cmd(role: str, *args: str) -> list[str]:
    return [sys.executable, "-u", "-m", "tests.core.skewapp", role, *args]


def _env(skew: float) -> dict[str, str]:
    """The environment of a process whose clock is off by skew seconds (libfaketime preloaded: the faketime
    wrapper would stand between us and the process, and not pass on our signals)."""
    env = dict(os.environ)
    if skew:
        env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME=f"{skew:+g}s")
    return env


def _due(e: dict[str, float]) -> float:
    """When the task was meant to start: DELAY after the enqueue by Redis's clock, which lies between Redis's times
    before and after the enqueue call; the exact due time the script wrote, kept within those bounds (a release
    that computed it by a skewed producer's clock wrote it outside them)."""
    lo, hi = e["before"] + e["delay"], e["after"] + e["delay"]
    return hi if e.get("due") is None else min(max(e["due"], lo), hi)


def lateness(url: str, q: str, worker_skew: float, producer_skew: float, n: int, delay: float) -> list[float]:
    r = redis.Redis.from_url(url)
    r.delete(started_key(q), enqueued_key(q))
    w = subprocess.Popen(_cmd("worker", url, q), stdout=subprocess.PIPE, text=True, env=_env(worker_skew))
    try:
        assert w.stdout is not None
        w.stdout.readline()  # "worker ready"
        subprocess.run(_cmd("produce", url, q, str(n), str(delay)), check=True, stdout=subprocess.DEVNULL,
                       env=_env(producer_skew))
        deadline = time.monotonic() + delay + 20
        while r.llen(started_key(q)) < n and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        w.terminate()
        w.wait(10)
    due = {e["payload"]: _due(e) for e in map(json.loads, r.lrange(enqueued_key(q), 0, -1))}
    starts = {e["payload"]: e["at"] for e in map(json.loads, r.lrange(started_key(q), 0, -1))}
    return [starts[p] - due[p] for p in due if p in starts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--skews", default="-5,0,5")
    ap.add_argument("--redis-url")
    a = ap.parse_args()
    if not os.path.exists(LIBFAKETIME):
        raise SystemExit("faketime is missing: apt-get install -y faketime")
    with bench_redis(a.redis_url) as url:
        print(f"{'case':<22} {'started':>7} {'min s':>8} {'median s':>9} {'max s':>8}")
        for skew in (float(s) for s in a.skews.split(",")):
            for who, ws, ps in (("worker", skew, 0.0), ("producer", 0.0, skew)):
                if skew == 0 and who == "producer":
                    continue
                late = lateness(url, f"skew{who}", ws, ps, a.tasks, a.delay)
                name = f"{who} {skew:+g} s" if skew else "no skew"
                if late:
                    print(f"{name:<22} {len(late):>4}/{a.tasks:<2} {min(late):>8.3f} {statistics.median(late):>9.3f} "
                          f"{max(late):>8.3f}")
                else:
                    print(f"{name:<22} {0:>4}/{a.tasks:<2}  none started")


if __name__ == "__main__":
    main()
