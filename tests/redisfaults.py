"""Real Redis error replies for tests, on a private server of their own (so a fault never reaches the session's):
OOM (maxmemory 1 under noeviction), BUSY (a long script with busy-reply-threshold lowered, ended by SCRIPT KILL)
and READONLY (REPLICAOF an address where nothing listens: the server keeps its data, answers reads, refuses
writes). Each context manager restores the server's config when it ends.

    from tests.redisfaults import fault_url, fault_redis, oom, busy, readonly  # fixtures and faults
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from asynqpy.embedded import EmbeddedServer, free_port

# A read-only script that spins until killed (SCRIPT KILL ends it at once; it wrote nothing).
SPIN = ("local t = redis.call('TIME') while true do local n = redis.call('TIME') "
        "if (n[1] - t[1]) > tonumber(ARGV[1]) then return 1 end end")


@pytest.fixture(scope="module")
def fault_server() -> Iterator[EmbeddedServer]:
    """A private Valkey for the module's fault tests."""
    server = EmbeddedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fault_url(fault_server: EmbeddedServer) -> Iterator[str]:
    """The private server's URL, its database flushed before and after the test."""
    r = redis.Redis.from_url(fault_server.url)
    r.flushall()
    yield fault_server.url
    r.flushall()
    r.close()


@pytest.fixture
def fault_redis(fault_url: str) -> Iterator[redis.Redis]:
    """A raw (binary) connection to the private server."""
    r = redis.Redis.from_url(fault_url)
    yield r
    r.close()


@contextlib.contextmanager
def oom(r: redis.Redis) -> Iterator[None]:
    """Redis answers OOM to every write (maxmemory 1, noeviction) for the block; reads still work."""
    old = r.config_get("maxmemory")["maxmemory"]
    policy = r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        yield
    finally:
        r.config_set("maxmemory", old)
        r.config_set("maxmemory-policy", policy)


@contextlib.contextmanager
def busy(url: str, *, longest: float = 20.0) -> Iterator[None]:
    """Redis answers BUSY to every command but a few (another client's script runs past busy-reply-threshold)
    for the block, at most `longest` seconds; SCRIPT KILL ends it after the block."""
    admin = redis.Redis.from_url(url)
    old = admin.config_get("busy-reply-threshold")["busy-reply-threshold"]
    admin.config_set("busy-reply-threshold", "100")
    spinner = redis.Redis.from_url(url, socket_timeout=longest + 10)
    done = threading.Event()

    def spin() -> None:
        with contextlib.suppress(redis.RedisError):  # "Script killed by user": what ends it
            spinner.eval(SPIN, 0, int(longest))
        done.set()

    threading.Thread(target=spin, daemon=True).start()
    try:
        deadline = time.monotonic() + 5
        while True:  # BUSY once the script is past the threshold
            try:
                admin.ping()
            except redis.ResponseError as exc:
                if str(exc).startswith("BUSY"):
                    break
                raise
            if time.monotonic() > deadline:
                raise AssertionError("the server never answered BUSY")
            time.sleep(0.02)
        yield
    finally:
        while not done.is_set():
            with contextlib.suppress(redis.RedisError):
                admin.script_kill()
            done.wait(0.05)
        admin.config_set("busy-reply-threshold", old)
        admin.close()
        spinner.close()


@contextlib.contextmanager
def readonly(r: redis.Redis) -> Iterator[None]:
    """Redis is a replica (of an address where nothing listens) for the block: it keeps its data and answers
    reads, and answers READONLY to every write."""
    r.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
    try:
        yield
    finally:
        r.execute_command("REPLICAOF", "NO", "ONE")
