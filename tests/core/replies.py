"""Real Redis error replies on demand, for fault tests: BUSY (a long script), OOM (maxmemory 1), restored after."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import redis

from asynqpy.rdb.failures import kind_of

# Spins inside the server for ARGV[1] microseconds: past busy-reply-threshold every other client gets BUSY.
SPIN = ("local t = redis.call('TIME') while true do local n = redis.call('TIME') "
        "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > tonumber(ARGV[1]) then return 1 end end")


@contextlib.contextmanager
def busy(r: redis.Redis, url: str, seconds: float) -> Iterator[None]:
    """Redis answers BUSY to everyone from entering the block until `seconds` after it began (the block may end
    earlier: leaving it waits for the script to end)."""
    old = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    r.config_set("busy-reply-threshold", "100")
    other = redis.Redis.from_url(url)
    spinner = threading.Thread(target=other.eval, args=(SPIN, 0, int(seconds * 1_000_000)), daemon=True)
    spinner.start()
    probe = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # until the server really answers BUSY
            try:
                probe.ping()
            except redis.RedisError as exc:
                if kind_of(exc) == "BUSY":
                    break
            time.sleep(0.01)
        else:
            raise AssertionError("the server never answered BUSY")
        yield
    finally:
        spinner.join(seconds + 10)
        probe.close()
        other.close()
        r.config_set("busy-reply-threshold", old)


@contextlib.contextmanager
def out_of_memory(r: redis.Redis) -> Iterator[None]:
    """Every write is refused with OOM inside the block (maxmemory 1, noeviction)."""
    cfg = r.config_get("maxmemory*")
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        yield
    finally:
        r.config_set("maxmemory", cfg["maxmemory"])
        r.config_set("maxmemory-policy", cfg["maxmemory-policy"])
