"""Where an idle asynqpy worker's pickup time goes: the producer's share, Redis + the wake-up, the worker's share.

    python bench/pickup_probe.py [--samples 200] [--rounds 1] [--redis-url URL]

Runs the bench's pickup measurement (one task at a time, 25-75 ms apart, `t = time.time()` before the enqueue
call) against one worker process with timestamps at each hop, and the same shape over two floors of this machine
and Redis right now (two processes, one blocked client woken): a bare redis-py LPUSH + asyncio BLPOP pair, and
the same without any client library ("raw": the LPUSH written on a plain socket, the BLPOP's reply read by an
asyncio protocol with hiredis as the hand-off lane reads it; no AUTH or TLS, so not with such a --redis-url):

  producer   t -> the enqueue command leaves the client (Python work: options, message, packing)
  round trip t -> Client.enqueue returned (producer + script + reply)
  wire       the command leaves the client -> the worker's BLPOP returned (Redis, the script, the wake-up)
  worker     the BLPOP returned -> the handler's first line (decode, bookkeeping, scheduling the handler)
  total      t -> the handler's first line (the pickup sample)

Each column is printed as p50 / p99 in ms. The worker's timestamps come from a wrapper around its BLPOP call
(bench.pickup_probe worker), the producer's from a wrapper around the client's send.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

import redis  # noqa: E402

from bench.adapters.base import pickup_schedule  # noqa: E402
from bench.common import bench_redis  # noqa: E402

KEY_OUT = "probe:out"
KEY_READY = "probe:ready"
KEY_BARE = "probe:bare"
KEY_PASSES = "probe:passes"
KEY_GC = "probe:gc"
WORST: dict[str, list[str]] = {}  # the slowest samples of the last probe of each kind, with their split


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))] if s else float("nan")


# ------------------------------------------------------------------ worker side (python -m bench.pickup_probe ...)


def asynqpy_worker(url: str) -> None:
    from asynqpy import ReceivedTask, ServeMux, Server
    from asynqpy.rdb import handoff_io

    r = redis.Redis.from_url(url)
    popped: dict[str, float] = {}
    pop_class = getattr(handoff_io, "HandedPop", None)
    if pop_class is not None:
        real = pop_class.pop

        async def timed(self: Any, boxes: list[str], timeout: float, take: Any = None) -> Any:
            def timed_take(box: bytes, value: bytes) -> bool:  # the reply as it is read, when the pop has a take
                popped["at"] = time.time()
                return bool(take(box, value))
            item = await real(self, boxes, timeout, *(() if take is None else (timed_take,)))
            if item is not None and item is not getattr(handoff_io, "TAKEN", None):
                popped["at"] = time.time()
            return item
        pop_class.pop = timed
    else:  # before HandedPop (to compare with an older checkout)
        real_fn = handoff_io.pop_handed  # type: ignore[attr-defined]

        async def timed_fn(conn: Any, boxes: list[str], timeout: float) -> tuple[bytes, bytes] | None:
            item = await real_fn(conn, boxes, timeout)
            if item is not None:
                popped["at"] = time.time()
            return item
        handoff_io.pop_handed = timed_fn  # type: ignore[attr-defined]
    from asynqpy import forwarder

    real_once = forwarder.Forwarder.run_once

    passes: list[str] = []  # written by the handler, after its sample: no Redis call in the forwarder's pass
    collections: list[str] = []  # the worker's garbage collections (generation, start, end), written likewise
    gc_began = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_began[0] = time.time()
        else:
            collections.append(json.dumps([info["generation"], gc_began[0], time.time()]))
    gc.callbacks.append(on_gc)

    async def timed_once(self: Any) -> float | None:
        began = time.time()
        wait = await real_once(self)
        passes.append(json.dumps({"began": began, "ended": time.time(), "wait": wait}))
        return wait
    forwarder.Forwarder.run_once = timed_once  # type: ignore[method-assign]
    mux = ServeMux()

    @mux.handler("probe")
    async def handler(task: ReceivedTask) -> None:
        start = time.time()
        p = json.loads(task.payload)
        if p.get("w"):
            r.rpush(KEY_READY, "1")
            return
        r.rpush(KEY_OUT, json.dumps({"t": p["t"], "pop": popped.get("at", 0.0), "start": start,
                                     "due": p.get("due", 0.0)}))
        if passes:
            r.rpush(KEY_PASSES, *passes)
            passes.clear()
        if collections:
            r.rpush(KEY_GC, *collections)
            collections.clear()

    import asynqpy

    print("asynqpy from", asynqpy.__file__, flush=True)
    Server(url, concurrency=10, queues={"default": 1}).run(mux)


def bare_worker(url: str) -> None:
    import redis.asyncio as aredis

    async def go() -> None:
        a = aredis.Redis.from_url(url)
        r = redis.Redis.from_url(url)
        r.rpush(KEY_READY, "1")
        while True:
            item = await a.blpop([KEY_BARE], timeout=1)
            if item is None:
                continue
            start = time.time()
            r.rpush(KEY_OUT, json.dumps({"t": float(item[1]), "pop": start, "start": start}))
    asyncio.run(go())


def _plain_address(url: str) -> tuple[str, int, bytes]:
    """Host, port and the SELECT of the database of a redis:// URL (the raw floor speaks no AUTH or TLS)."""
    from urllib.parse import urlparse

    u = urlparse(url)
    db = ((u.path or "/0").lstrip("/") or "0").encode()
    return u.hostname or "127.0.0.1", u.port or 6379, b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n" % (len(db), db)


def raw_worker(url: str) -> None:
    """The floor without any client library: BLPOP written on a plain socket and its reply read by an asyncio
    protocol with hiredis, as the hand-off lane does; the time is taken in data_received."""
    import hiredis

    host, port, select = _plain_address(url)
    pop = b"*3\r\n$5\r\nBLPOP\r\n$%d\r\n%s\r\n$1\r\n1\r\n" % (len(KEY_BARE), KEY_BARE.encode())
    r = redis.Redis.from_url(url)

    class Pop(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.t = transport
            self.reader = hiredis.Reader()
            self.greeted = False
            transport.write(select)

        def data_received(self, data: bytes) -> None:
            now = time.time()
            self.reader.feed(data)
            while (reply := self.reader.gets()) is not False:
                if not self.greeted:
                    self.greeted = True
                    r.rpush(KEY_READY, "1")
                elif reply is not None:
                    r.rpush(KEY_OUT, json.dumps({"t": float(reply[1]), "pop": now, "start": now}))
                self.t.write(pop)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_connection(Pop, host, port)
        await asyncio.Event().wait()
    asyncio.run(go())


# ------------------------------------------------------------------ driver side


def _spawn(kind: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "bench.pickup_probe", "--worker", kind, "--redis-url", url],
                                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _gcs(r: redis.Redis) -> list[list[float]]:
    return [json.loads(v) for v in r.lrange(KEY_GC, 0, -1)]  # type: ignore[union-attr]


def _worst(rows: list[tuple[float, float, str]], gcs: list[list[float]], k: int = 3) -> list[str]:
    """The k slowest samples (begin, end, their split) with the worker's collections that overlapped them."""
    if not rows:
        return []
    first = min(e for _, e, _ in rows)
    during: dict[str, list[float]] = {}
    for g, gb, ge in gcs:
        if gb >= first:
            during.setdefault(f"{'driver ' if g >= 100 else 'worker '}gen{int(g) % 100}", []).append(ge - gb)
    out = ["collections while sampling: " + (", ".join(f"{k} x{len(v)} (longest {max(v) * 1e3:.2f} ms)"
                                                        for k, v in sorted(during.items())) or "none")]
    for b, e, split in sorted(rows, key=lambda x: x[0] - x[1], reverse=True)[:k]:
        hit = [f"{'driver ' if g >= 100 else ''}gen{int(g) % 100} {(ge - gb) * 1e3:.2f} ms"
               for g, gb, ge in gcs if gb < e and ge > b]
        out.append(f"{(b - e) * 1e3:6.2f} ms: {split}; gc: {', '.join(hit) or 'none'}")
    return out


class _DriverGC:
    """This process's garbage collections while a probe runs, as [generation + 100, start, end]."""

    def __init__(self) -> None:
        self.seen: list[list[float]] = []
        self._began = 0.0

    def __enter__(self) -> _DriverGC:
        gc.callbacks.append(self._cb)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._cb)

    def _cb(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.time()
        else:
            self.seen.append([100 + info["generation"], self._began, time.time()])


def _collect(r: redis.Redis, n: int, deadline: float) -> list[dict[str, float]]:
    while int(r.llen(KEY_OUT)) < n and time.time() < deadline:  # type: ignore[arg-type]
        time.sleep(0.02)
    return [json.loads(v) for v in r.lrange(KEY_OUT, 0, -1)]  # type: ignore[union-attr]


def probe_asynqpy(url: str, samples: int, log: Path) -> dict[str, list[float]]:
    from asynqpy import Client, Task
    from asynqpy.rdb import sync_runner

    r = redis.Redis.from_url(url)
    r.flushdb()
    proc = _spawn("asynqpy", url, log)
    client = Client(url)
    sent: list[float] = []
    real_send = sync_runner.SyncRunner.send

    def timed_send(self: sync_runner.SyncRunner, packed: Any) -> list[Any]:
        sent.append(time.time())
        return real_send(self, packed)

    sync_runner.SyncRunner.send = timed_send  # type: ignore[method-assign]
    driver_gc = _DriverGC().__enter__()
    try:
        client.enqueue(Task("probe", json.dumps({"w": 1}).encode()))
        if r.blpop([KEY_READY], timeout=60) is None:
            raise RuntimeError(f"the probe worker did not start: {log.read_text()[-500:]}")
        time.sleep(1.0)
        rows: list[tuple[float, float, float]] = []  # t, sent, returned
        for _ in pickup_schedule(samples):
            t = time.time()
            client.enqueue(Task("probe", json.dumps({"t": t}).encode()))
            rows.append((t, sent[-1], time.time()))
        got = {d["t"]: d for d in _collect(r, samples, time.time() + 10)}
        gcs = _gcs(r) + driver_gc.seen
    finally:
        driver_gc.__exit__()
        sync_runner.SyncRunner.send = real_send  # type: ignore[method-assign]
        client.close()
        _stop(proc)
        r.flushdb()
    out: dict[str, list[float]] = {k: [] for k in ("producer", "round trip", "wire", "worker", "total")}
    slow = []
    for t, s, ret in rows:
        d = got.get(t)
        if d is None:
            continue
        slow.append((d["start"], t, f"producer {(s - t) * 1e3:.2f} wire {(d['pop'] - s) * 1e3:.2f} "
                                    f"worker {(d['start'] - d['pop']) * 1e3:.2f}"))
        out["producer"].append(s - t)
        out["round trip"].append(ret - t)
        out["wire"].append(d["pop"] - s)
        out["worker"].append(d["start"] - d["pop"])
        out["total"].append(d["start"] - t)
    WORST["pickup"] = _worst(slow, gcs)
    return out


def probe_delayed(url: str, samples: int, log: Path, delay: float = 0.5, spread: float = 2.0) -> dict[str, list[float]]:
    """The bench's delayed step (due times staggered over spread s, process_at=) with the forwarder's passes."""
    import random
    from datetime import UTC, datetime

    from asynqpy import Client, Task

    r = redis.Redis.from_url(url)
    r.flushdb()
    proc = _spawn("asynqpy", url, log)
    client = Client(url)
    try:
        client.enqueue(Task("probe", json.dumps({"w": 1}).encode()))
        if r.blpop([KEY_READY], timeout=60) is None:
            raise RuntimeError(f"the probe worker did not start: {log.read_text()[-500:]}")
        time.sleep(1.0)
        r.delete(KEY_PASSES)
        rng = random.Random(2)
        t0 = time.time() + delay
        step = spread / samples
        dues = [t0 + i * step + rng.uniform(0, step) for i in range(samples)]
        for due in dues:
            client.enqueue(Task("probe", json.dumps({"t": due, "due": due}).encode()),
                           process_at=datetime.fromtimestamp(due, tz=UTC))
        rows = _collect(r, samples, max(dues) + 10)
        passes = [json.loads(v) for v in r.lrange(KEY_PASSES, 0, -1)]  # type: ignore[union-attr]
        gcs = _gcs(r)
    finally:
        client.close()
        _stop(proc)
        r.flushdb()
    out: dict[str, list[float]] = {k: [] for k in ("pass began", "pass", "pop", "worker", "late", "passes")}
    slow = []
    for d in rows:
        due = d["due"]
        # the pass that moved it: the last one that began before its BLPOP returned
        mine = [x for x in passes if x["began"] <= d["pop"]]
        via = "lane" if d["pop"] >= due else "fetch"  # a stale pop time: it came by a fetch, not the lane
        if mine:
            x = mine[-1]
            out["pass began"].append(x["began"] - due)
            out["pass"].append(x["ended"] - x["began"])
            slow.append((d["start"], due, f"pass began {(x['began'] - due) * 1e3:.2f} pass "
                                          f"{(x['ended'] - x['began']) * 1e3:.2f} pop {(d['pop'] - due) * 1e3:.2f} "
                                          f"via {via}"))
        out["pop"].append(d["pop"] - due)
        out["worker"].append(d["start"] - d["pop"])
        out["late"].append(d["start"] - due)
    out["passes"] = [float(len(passes))]
    WORST["delayed"] = _worst(slow, gcs)
    if os.environ.get("PROBE_DUMP"):
        events = [(d["due"], "due") for d in rows] + [(d["pop"], "pop") for d in rows]
        events += [(x["began"], f"pass began (wait {x['wait']})") for x in passes]
        events += [(x["ended"], "pass ended") for x in passes]
        base = min(e[0] for e in events)
        for t, what in sorted(events)[:60]:
            print(f"    {(t - base) * 1e3:10.2f} ms  {what}")
    # how late each sleep of the forwarder ended: next pass began - (previous ended + the wait it asked for)
    out["sleep overshoot"] = [b["began"] - (a["ended"] + a["wait"]) for a, b in itertools.pairwise(passes)
                              if a["wait"] is not None and a["wait"] < 1]
    return out


def _probe_floor(url: str, kind: str, samples: int, log: Path, push: Callable[[], None]) -> dict[str, list[float]]:
    """One floor: the `kind` worker started, then push() (an LPUSH of time.time() to KEY_BARE) at each arrival."""
    r = redis.Redis.from_url(url)
    r.flushdb()
    proc = _spawn(kind, url, log)
    try:
        if r.blpop([KEY_READY], timeout=60) is None:
            raise RuntimeError(f"the {kind} worker did not start: {log.read_text()[-500:]}")
        time.sleep(1.0)
        for _ in pickup_schedule(samples):
            push()
        rows = _collect(r, samples, time.time() + 10)
    finally:
        _stop(proc)
        r.flushdb()
    return {"total": [d["start"] - d["t"] for d in rows]}


def probe_bare(url: str, samples: int, log: Path) -> dict[str, list[float]]:
    """redis-py's LPUSH to the bare worker's asyncio BLPOP."""
    r = redis.Redis.from_url(url)
    return _probe_floor(url, "bare", samples, log, lambda: r.lpush(KEY_BARE, repr(time.time())))


def probe_raw(url: str, samples: int, log: Path) -> dict[str, list[float]]:
    """LPUSH written on a plain socket (its reply read before the next) to the raw worker's BLPOP."""
    import socket

    host, port, select = _plain_address(url)
    key = KEY_BARE.encode()

    def push() -> None:
        v = repr(time.time()).encode()
        sock.sendall(b"*3\r\n$5\r\nLPUSH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(v), v))
        sock.recv(64)

    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(select)
        sock.recv(64)
        return _probe_floor(url, "raw", samples, log, push)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/pickup_probe.py", description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1, help="alternate raw, bare and asynqpy this many times")
    ap.add_argument("--delayed", type=int, default=0, help="also this many delayed tasks (the bench's step)")
    ap.add_argument("--redis-url")
    ap.add_argument("--worker", choices=("asynqpy", "bare", "raw"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        {"asynqpy": asynqpy_worker, "bare": bare_worker, "raw": raw_worker}[args.worker](args.redis_url)
        return 0
    logs = ROOT / "bench" / "results" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with bench_redis(args.redis_url) as url:
        for i in range(args.rounds):
            print(f"round {i + 1}, load average {os.getloadavg()[0]:.2f} (ms, p50 / p99)")
            if args.samples:
                raw = probe_raw(url, args.samples, logs / "probe-raw.log")
                bare = probe_bare(url, args.samples, logs / "probe-bare.log")
                mine = probe_asynqpy(url, args.samples, logs / "probe-asynqpy.log")
                print(f"  raw socket LPUSH -> BLPOP       total {pct(raw['total'], 50) * 1e3:5.2f} / "
                      f"{pct(raw['total'], 99) * 1e3:5.2f}")
                print(f"  bare LPUSH -> asyncio BLPOP     total {pct(bare['total'], 50) * 1e3:5.2f} / "
                      f"{pct(bare['total'], 99) * 1e3:5.2f}")
                print("  asynqpy   " + "  ".join(f"{k} {pct(v, 50) * 1e3:.2f} / {pct(v, 99) * 1e3:.2f}"
                                             for k, v in mine.items()))
                for line in WORST.get("pickup", []):
                    print("    slowest pickup " + line)
            if args.delayed:
                late = probe_delayed(url, args.delayed, logs / "probe-delayed.log")
                n = late.pop("passes")[0]
                print(f"  delayed (ms after due; {n:.0f} forwarder passes) "
                      + "  ".join(f"{k} {pct(v, 50) * 1e3:.2f} / {pct(v, 99) * 1e3:.2f}" for k, v in late.items()))
                for line in WORST.get("delayed", []):
                    print("    slowest delayed " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
