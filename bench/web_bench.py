"""The dashboard's benchmark (not a test): server time of the overview with 100 queues, of a queue page at the far
end of 1,000,000 tasks, and Redis commands per second while 20 clients poll the overview under gunicorn.

    python bench/web_bench.py [--tasks 1000000] [--clients 20] [--seconds 20]
    python bench/web_bench.py --observers [--seconds 30]   # issue 20 section 4: what observers cost Redis
    python bench/web_bench.py --snapshots [--queues 10,100,1000]   # only --observers' in-process part

--observers: Redis commands/s (INFO commandstats deltas) for 1, 20 and 100 logged-in browsers polling the overview
and a queue page every 5 s (gunicorn, 2 workers, 10 queues) and 1 and 5 scrapers of /metrics every 5 s; then the
overview's server time and a fresh snapshot's time at 10, 100 and 1,000 queues (--snapshots: only those).

Runs on a private embedded Valkey; data is written in asynq's layout by bench/inspector_data.py's loader.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asynqpy.embedded import EmbeddedServer, free_port
from bench.inspector_data import PER_QUEUE, Loader
from webui import create_app
from webui.users import create_user

PASSWORD = "bench-password-1"


def timed(fn: Callable[[], Any], reps: int) -> list[float]:
    fn()  # warm up (scripts loaded, templates compiled)
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def commands(r: redis.Redis) -> int:
    return int(r.info("stats")["total_commands_processed"])


def login_opener(base: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login", timeout=10).read().decode()
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    if not token:
        raise RuntimeError("no CSRF token on the login page")
    data = urllib.parse.urlencode({"username": "admin", "password": PASSWORD, "csrf_token": token[1]}).encode()
    opener.open(base + "/login", data=data, timeout=10).read()
    return opener


def poll(base: str, clients: int, seconds: float, interval: float, r: redis.Redis) -> tuple[float, float, int]:
    """clients browsers polling the overview's htmx partial every interval seconds. Returns (Redis commands/s,
    median response ms, requests)."""
    openers = [login_opener(base) for _ in range(clients)]
    stop = time.monotonic() + seconds
    lat: list[float] = []
    lock = threading.Lock()

    def client(op: urllib.request.OpenerDirector, offset: float) -> None:
        time.sleep(offset)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            req = urllib.request.Request(base + "/", headers={"HX-Request": "true"})
            op.open(req, timeout=30).read()
            with lock:
                lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(max(0.0, interval - (time.perf_counter() - t0)))

    before, t0 = commands(r), time.monotonic()
    threads = [threading.Thread(target=client, args=(op, i * interval / clients)) for i, op in enumerate(openers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    return (commands(r) - before) / elapsed, statistics.median(lat), len(lat)


POLL_HEADERS = {"HX-Request": "true", "X-Asynqpy-Poll": "1"}  # a live refresh, as static/app.js sends it


def by_command(r: redis.Redis) -> dict[str, int]:
    """Calls per command name (INFO commandstats, those scripts run included), INFO excluded."""
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in r.info("commandstats").items()
            if not k.startswith("cmdstat_info")}


def top_commands(before: dict[str, int], after: dict[str, int], seconds: float, n: int = 4) -> str:
    """The n commands run most often between two by_command() readings, per second: "hmget 12.4, zcard 8.0"."""
    rates = sorted(((after[k] - before.get(k, 0)) / seconds, k) for k in after)
    return ", ".join(f"{k} {rate:.1f}" for rate, k in reversed(rates[-n:]) if rate > 0)


def observers(base: str, browsers: int, scrapers: int, seconds: float, interval: float,
              r: redis.Redis) -> tuple[float, float, int, str]:
    """browsers logged-in clients polling the overview and a queue page, scrapers scraping /metrics, each every
    interval seconds (spread over it), for seconds (bounded). Returns (Redis commands/s, the same without MEMORY
    USAGE, requests, the commands run most often with their rates). Memory is sampled once a minute per queue
    whoever observes: a window holds that burst or not, which moves a row by more than its observers do."""
    openers = [login_opener(base) for _ in range(browsers)]
    n = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds + 1.0

    def client(op: urllib.request.OpenerDirector | None, offset: float) -> None:
        time.sleep(offset)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            paths = ["/", "/queues/q001"] if op is not None else ["/metrics"]
            for path in paths:
                req = urllib.request.Request(base + path, headers=POLL_HEADERS if op is not None else {})
                (op.open if op is not None else urllib.request.urlopen)(req, timeout=30).read()
                with lock:
                    n[0] += 1
            time.sleep(max(0.0, interval - (time.perf_counter() - t0)))

    clients = [*openers, *([None] * scrapers)]
    threads = [threading.Thread(target=client, args=(op, i * interval / len(clients)), daemon=True)
               for i, op in enumerate(clients)]
    for t in threads:
        t.start()
    time.sleep(interval)  # every client has started: measure whole intervals
    before, t0 = by_command(r), time.monotonic()
    time.sleep(seconds - interval)
    after, elapsed = by_command(r), time.monotonic() - t0
    for t in threads:
        t.join(timeout=60)
    total = (sum(after.values()) - sum(before.values())) / elapsed
    memory = (after.get("memory|usage", 0) - before.get("memory|usage", 0)) / elapsed
    return total, total - memory, n[0], top_commands(before, after, elapsed)


def observer_rows(args: argparse.Namespace, users: Path) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    with EmbeddedServer() as server:
        r = redis.Redis.from_url(server.url)
        load = Loader(r, time.time())
        for i in range(10):
            for state, count in PER_QUEUE.items():
                load.add(f"q{i:03d}", i, state, count)
        port = free_port()
        env = {**os.environ, "ASYNQPY_WEB_SECRET": "w" * 40}
        proc = subprocess.Popen([sys.executable, "-m", "asynqpy.cli", "web", "--bind", f"127.0.0.1:{port}",
                                 "--workers", "2", "--threads", "8", "--users", str(users), "--redis-url",
                                 server.url], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(200):
                try:
                    urllib.request.urlopen(base + "/healthz", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.1)
            for b, m in ((1, 0), (20, 0), (100, 0), (0, 1), (0, 5)):
                cps, polls, n, top = observers(base, b, m, args.seconds, 5.0, r)
                who = f"{b} browser(s)" if b else f"{m} scraper(s)"
                rows.append((f"{who} polling every 5 s, 10 queues (gunicorn, 2 workers)",
                             f"{cps:,.0f} Redis commands/s, {polls:,.0f} without MEMORY USAGE ({n} requests; "
                             f"most: {top})"))
        finally:
            proc.terminate()
            proc.wait(20)
        r.close()
    for queues in (10, 100, 1000):
        rows += overview_rows(queues, users)
    return rows


def overview_rows(queues: int, users: Path) -> list[tuple[str, str]]:
    """A fresh snapshot's time and the overview refresh's server time (new and shared snapshot) at queues."""
    with EmbeddedServer() as server:
        r = redis.Redis.from_url(server.url)
        load = Loader(r, time.time())
        for i in range(queues):
            for state, count in PER_QUEUE.items():
                load.add(f"q{i:04d}", i % 1000, state, count)
        app = create_app({"ASYNQPY_REDIS_URL": server.url, "ASYNQPY_USERS": str(users), "SECRET_KEY": "b" * 40,
                          "ASYNQPY_SAMPLE_SECONDS": 0})
        c = app.test_client()
        page = c.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token
        c.post("/login", data={"username": "admin", "password": PASSWORD, "csrf_token": token[1]})
        insp = app.extensions["asynqpy.inspector"]
        reps = 10 if queues < 1000 else 5
        fresh = timed(lambda: insp.queue_snapshot(0), reps)
        shared = timed(lambda: c.get("/", headers={"HX-Request": "true"}), reps)

        def fresh_page() -> None:
            r.delete("asynqpy:{snapshot}:queues")
            c.get("/", headers={"HX-Request": "true"})

        new = timed(fresh_page, reps)
        insp.close()
        r.close()
    return [(f"{queues} queues: a fresh snapshot (memory sampled when due)", f"{statistics.median(fresh):.1f} ms"),
            (f"{queues} queues: overview refresh, new snapshot / shared snapshot",
             f"{statistics.median(new):.1f} ms / {statistics.median(shared):.1f} ms")]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1_000_000, help="tasks in the big queue (default 1,000,000)")
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--observers", action="store_true", help="what observers cost Redis (issue 20 section 4)")
    ap.add_argument("--snapshots", metavar="COUNTS", nargs="?", const="10,100,1000",
                    help="only --observers' in-process part: a fresh snapshot and the overview refresh at these "
                         "queue counts (default 10,100,1000)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="asynqpy-webbench-"))
    users = tmp / "users.toml"
    create_user(users, "admin", "admin", PASSWORD)
    rows: list[tuple[str, str]] = []
    if args.snapshots:
        return _print([row for n in args.snapshots.split(",") for row in overview_rows(int(n), users)])
    if args.observers:
        return _print(observer_rows(args, users))
    with EmbeddedServer() as server:
        r = redis.Redis.from_url(server.url)
        load = Loader(r, time.time())
        for i in range(args.queues):
            for state, n in PER_QUEUE.items():
                load.add(f"q{i:03d}", i, state, n)
        app = create_app({"ASYNQPY_REDIS_URL": server.url, "ASYNQPY_USERS": str(users), "SECRET_KEY": "b" * 40,
                          "ASYNQPY_SAMPLE_SECONDS": 0})
        c = app.test_client()
        page = c.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token
        c.post("/login", data={"username": "admin", "password": PASSWORD, "csrf_token": token[1]})
        assert c.get("/").status_code == 200
        full = timed(lambda: c.get("/"), args.reps)
        part = timed(lambda: c.get("/", headers={"HX-Request": "true"}), args.reps)
        before = commands(r)
        c.get("/", headers={"HX-Request": "true"})
        per_view = commands(r) - before - 1  # INFO itself counts once
        rows.append((f"overview, {args.queues} queues (full page)", f"{statistics.median(full):.1f} ms"))
        rows.append((f"overview, {args.queues} queues (htmx refresh)", f"{statistics.median(part):.1f} ms, "
                                                                       f"{per_view} Redis commands"))

        t0 = time.perf_counter()
        load.add("big", 999, "archived", args.tasks)
        print(f"loaded {args.tasks:,} archived tasks in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        last = -(-args.tasks // 30)
        first_page = timed(lambda: c.get("/queues/big/archived?page=1&size=30"), args.reps)
        far = timed(lambda: c.get(f"/queues/big/archived?page={last}&size=30"), args.reps)
        assert f"page {last} of {last}" in c.get(f"/queues/big/archived?page={last}&size=30").get_data(as_text=True)
        rows.append((f"queue page 1 of {args.tasks:,} archived tasks", f"{statistics.median(first_page):.1f} ms"))
        rows.append((f"queue page {last:,} (the far end)", f"{statistics.median(far):.1f} ms"))
        app.extensions["asynqpy.inspector"].close()

        port = free_port()
        env = {**os.environ, "ASYNQPY_WEB_SECRET": "w" * 40, "ASYNQPY_SAMPLE_SECONDS": "10"}
        proc = subprocess.Popen([str(Path(sys.executable).with_name("asynqpy")), "web", "--bind", f"127.0.0.1:{port}",
                                 "--workers", "2", "--users", str(users), "--redis-url", server.url], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(200):
                try:
                    urllib.request.urlopen(base + "/healthz", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.1)
            for interval in (5.0, 1.0):
                cps, ms, n = poll(base, args.clients, args.seconds, interval, r)
                rows.append((f"{args.clients} clients polling the overview every {interval:g}s (gunicorn, 2 workers)",
                             f"{cps:,.0f} Redis commands/s, {n / args.seconds:.1f} req/s, median {ms:.1f} ms"))
            idle0 = commands(r)
            time.sleep(30)  # no viewer: only the queue-size sampler (one sample per 10 s across both workers)
            rows.append(("no viewer (the size sampler only)", f"{(commands(r) - idle0) / 30:,.1f} Redis commands/s"))
        finally:
            proc.terminate()
            proc.wait(20)
        r.close()
    return _print(rows)


def _print(rows: list[tuple[str, str]]) -> int:
    width = max(len(a) for a, _ in rows)
    print(f"{'measurement':<{width}}  result")
    for a, b in rows:
        print(f"{a:<{width}}  {b}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
