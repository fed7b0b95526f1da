"""What this machine allows for an idle pickup: one element from one process to another blocked one, without any
task queue and without redis-py, at the bench's arrivals (25-75 ms apart), as p50 / p99 in ms.

    python bench/wake_floor.py [--samples 200] [--rounds 1] [--redis-url URL]

  direct        producer -> worker over one loopback TCP socket, no Redis: the two-process wake-up alone
  raw BLPOP     producer LPUSH on a raw socket -> Redis -> worker's BLPOP on a raw blocking socket
  raw asyncio   the same LPUSH -> a BLPOP read by an asyncio Protocol with a hiredis Reader, on uvloop (the shape
                of a worker's hand-off lane at its leanest)
  raw EVALSHA   an EVALSHA of a script that only LPUSHes -> the raw blocking BLPOP (what a script call adds)
  redis-py      the raw LPUSH -> redis-py's asyncio client's blpop() on uvloop (what redis-py's reading adds)
  redis-py both redis-py's sync lpush() -> that blpop() (what redis-py adds on both sides)

Every socket has TCP_NODELAY. Sample = the worker's time.time() when its read returned - the producer's
time.time() just before its send (both processes on this machine's clock).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    sys.path[0] = str(ROOT)

from bench.adapters.base import pickup_schedule  # noqa: E402

KEY = "floor:box"
PUSH_SCRIPT = "return redis.call('LPUSH', KEYS[1], ARGV[1])"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(p / 100 * len(s) + 0.5) - 1))] if s else float("nan")


def resp(*args: str | bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def connect(url: str) -> socket.socket:
    u = urlparse(url)
    s = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_reply(s: socket.socket, reader: object) -> object:
    """One reply off a blocking socket through a hiredis Reader."""
    while True:
        got = reader.gets()  # type: ignore[attr-defined]
        if got is not False:
            return got
        reader.feed(s.recv(65536))  # type: ignore[attr-defined]


# ------------------------------------------------------------------ worker side (one process each)


def worker_direct(port: int, out: Path) -> None:
    srv = socket.create_server(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rows = []
    buf = b""
    while True:
        data = conn.recv(65536)
        at = time.time()
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            rows.append({"t": float(line), "at": at})
    out.write_text(json.dumps(rows))


def worker_blpop(url: str, out: Path) -> None:
    import hiredis

    s = connect(url)
    reader = hiredis.Reader()
    rows = []
    while True:
        s.sendall(resp("BLPOP", KEY, "1"))
        if not _arrived(read_reply(s, reader), time.time(), rows):
            break
    out.write_text(json.dumps(rows))


def _arrived(item: object, at: float, rows: list[dict[str, float]]) -> bool:
    """Note one BLPOP reply (None: the block timed out) in rows; False when it is the stop marker."""
    if item is None:
        return True
    v = item[1]  # type: ignore[index]
    if v == b"stop":
        return False
    rows.append({"t": float(v), "at": at})
    return True


class _Lane(asyncio.Protocol):
    def __init__(self) -> None:
        import hiredis

        self.reader = hiredis.Reader()
        self.waiter: asyncio.Future[object] | None = None

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        got = self.reader.gets()
        if got is not False and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(got)


def worker_asyncio(url: str, out: Path) -> None:
    async def go() -> None:
        loop = asyncio.get_running_loop()
        s = connect(url)
        s.setblocking(False)
        transport, lane = await loop.create_connection(_Lane, sock=s)
        rows = []
        while True:
            lane.waiter = loop.create_future()
            transport.write(resp("BLPOP", KEY, "1"))
            if not _arrived(await lane.waiter, time.time(), rows):
                break
        out.write_text(json.dumps(rows))
        transport.close()
    try:
        import uvloop
        uvloop.run(go())
    except ImportError:
        asyncio.run(go())


def worker_redispy(url: str, out: Path) -> None:
    import redis.asyncio as aredis

    async def go() -> None:
        a = aredis.Redis.from_url(url)
        rows = []
        while True:
            item = await a.blpop([KEY], timeout=1)
            at = time.time()
            if item is None:
                continue
            if item[1] == b"stop":
                break
            rows.append({"t": float(item[1]), "at": at})
        out.write_text(json.dumps(rows))
        await a.aclose()
    try:
        import uvloop
        uvloop.run(go())
    except ImportError:
        asyncio.run(go())


# ------------------------------------------------------------------ driver side


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "bench.wake_floor", "--worker", *args], env=env, cwd=ROOT,
                            start_new_session=True)


def _samples(out: Path, proc: subprocess.Popen[bytes]) -> list[float]:
    proc.wait(30)
    return [d["at"] - d["t"] for d in json.loads(out.read_text())]


def probe_direct(samples: int, tmp: Path) -> list[float]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp / "direct.json"
    proc = _spawn(["direct", str(port), str(out)])
    deadline = time.time() + 30
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    time.sleep(1.0)
    for _ in pickup_schedule(samples):
        s.sendall(repr(time.time()).encode() + b"\n")
    s.close()
    return _samples(out, proc)


def probe_redis(url: str, samples: int, tmp: Path, kind: str, script: bool = False,
                redispy: bool = False) -> list[float]:
    import hiredis
    import redis

    out = tmp / f"{kind}.json"
    s = connect(url)
    reader = hiredis.Reader()
    s.sendall(resp("DEL", KEY))
    read_reply(s, reader)
    sha = b""
    if script:
        s.sendall(resp("SCRIPT", "LOAD", PUSH_SCRIPT))
        sha = read_reply(s, reader)  # type: ignore[assignment]
    proc = _spawn([kind, url, str(out)])
    while True:  # the worker is blocked once Redis counts a blocked client
        s.sendall(resp("INFO", "clients"))
        info = read_reply(s, reader)
        if b"blocked_clients:1" in info:  # type: ignore[operator]
            break
        time.sleep(0.05)
    time.sleep(1.0)
    r = redis.Redis.from_url(url)
    r.ping()
    for _ in pickup_schedule(samples):
        t = time.time()
        if redispy:
            r.lpush(KEY, repr(t))
            continue
        if script:
            s.sendall(resp("EVALSHA", sha, "1", KEY, repr(t)))
        else:
            s.sendall(resp("LPUSH", KEY, repr(t)))
        read_reply(s, reader)
    s.sendall(resp("LPUSH", KEY, "stop"))
    read_reply(s, reader)
    s.close()
    return _samples(out, proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/wake_floor.py", description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--redis-url")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        kind, *rest = args.worker
        if kind == "direct":
            worker_direct(int(rest[0]), Path(rest[1]))
        else:
            {"blpop": worker_blpop, "eval": worker_blpop, "asyncio": worker_asyncio,
             "redispy": worker_redispy, "redispy2": worker_redispy}[kind](rest[0], Path(rest[1]))
        return 0
    import tempfile

    server = None
    url = args.redis_url
    if url is None:
        from asynqpy.embedded import EmbeddedServer

        server = EmbeddedServer().start()
        url = server.url
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            for i in range(args.rounds):
                print(f"round {i + 1}, load average {os.getloadavg()[0]:.2f} (ms, p50 / p99)")
                for name, run in (("direct", lambda: probe_direct(args.samples, tmp)),
                                  ("raw BLPOP", lambda: probe_redis(url, args.samples, tmp, "blpop")),
                                  ("raw asyncio", lambda: probe_redis(url, args.samples, tmp, "asyncio")),
                                  ("raw EVALSHA", lambda: probe_redis(url, args.samples, tmp, "eval", True)),
                                  ("redis-py", lambda: probe_redis(url, args.samples, tmp, "redispy")),
                                  ("redis-py both", lambda: probe_redis(url, args.samples, tmp, "redispy2",
                                                                        redispy=True))):
                    v = run()
                    print(f"  {name:12} {pct(v, 50) * 1e3:5.2f} / {pct(v, 99) * 1e3:5.2f}  ({len(v)} samples)",
                          flush=True)
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
