"""Real Redis faults for tests, as production Redis gives them (no mocks): BUSY, OOM, READONLY, a denied command,
a server that answers nothing (SIGSTOP).

Each is a context manager that puts the server at url into the fault for the length of the with-block and
restores its configuration after, whatever happens in the block. The fixtures fault_server, fault_url and
fault_redis give a test a private server of its module's own, so that no fault reaches the session's server
(import them into the test module).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from asynqpy.embedded import EmbeddedServer, free_port

# Spins inside Redis until killed (or ARGV[1] seconds pass, a safety net): past busy-reply-threshold, every
# other client is answered BUSY.
_SPIN = ("local t = redis.call('TIME') while true do local n = redis.call('TIME') "
         "if n[1] - t[1] > tonumber(ARGV[1]) then return 1 end end")


@contextlib.contextmanager
def busy(url: str, *, limit: float = 30.0) -> Iterator[None]:
    """Redis answers BUSY to everyone for the block: another client's script runs past busy-reply-threshold
    (lowered to 100 ms); the script is killed (SCRIPT KILL) when the block ends."""
    r = redis.Redis.from_url(url)
    old = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    r.config_set("busy-reply-threshold", "100")
    spinner = redis.Redis.from_url(url)

    def spin() -> None:
        with contextlib.suppress(redis.RedisError):
            spinner.eval(_SPIN, 0, int(limit))

    th = threading.Thread(target=spin, name="redis-busy", daemon=True)
    th.start()
    try:
        deadline = time.monotonic() + 5
        while True:  # until another client is answered BUSY
            try:
                r.get("asynqpy:tests:probe")
            except redis.ResponseError as exc:
                if str(exc).startswith("BUSY"):
                    break
                raise
            if time.monotonic() > deadline:
                raise AssertionError("Redis never answered BUSY")
            time.sleep(0.02)
        yield
    finally:
        while th.is_alive():
            with contextlib.suppress(redis.RedisError):
                r.script_kill()
            th.join(0.1)
        r.config_set("busy-reply-threshold", old)
        spinner.close()
        r.close()


@contextlib.contextmanager
def frozen(server: EmbeddedServer) -> Iterator[None]:
    """The server answers nothing for the block, as a hung host or a partition: SIGSTOP (its connections stay open,
    commands sent are never answered), then SIGCONT whatever happens in the block. Only on a server of the test's
    own (fault_server)."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@contextlib.contextmanager
def out_of_memory(url: str) -> Iterator[None]:
    """Redis refuses every write with OOM for the block (maxmemory 1 byte, noeviction)."""
    r = redis.Redis.from_url(url)
    cfg = r.config_get("maxmemory")
    cfg.update(r.config_get("maxmemory-policy"))
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        yield
    finally:
        r.config_set("maxmemory", cfg["maxmemory"])
        r.config_set("maxmemory-policy", cfg["maxmemory-policy"])
        r.close()


@contextlib.contextmanager
def read_only(url: str, primary_url: str) -> Iterator[None]:
    """The server at url is a replica of primary_url for the block (REPLICAOF), so it answers writes READONLY;
    then REPLICAOF NO ONE. Its data is replaced by the primary's: use it only on a server of the test's own."""
    r = redis.Redis.from_url(url)
    p = redis.Redis.from_url(primary_url).connection_pool.connection_kwargs
    r.replicaof(p.get("host", "127.0.0.1"), p.get("port", 6379))
    try:
        deadline = time.monotonic() + 5
        while True:
            try:
                r.set("asynqpy:tests:probe", "1")
            except redis.ReadOnlyError:
                break
            if time.monotonic() > deadline:
                raise AssertionError("the replica never answered READONLY")
            time.sleep(0.02)
        yield
    finally:
        r.replicaof("NO", "ONE")
        r.close()


@contextlib.contextmanager
def read_only_keeping_data(url: str) -> Iterator[None]:
    """The server at url is a replica of an address where nothing listens for the block: it keeps its data and
    answers reads, and answers READONLY to every write; then REPLICAOF NO ONE."""
    r = redis.Redis.from_url(url)
    r.replicaof("127.0.0.1", free_port())
    try:
        yield
    finally:
        r.replicaof("NO", "ONE")
        r.close()


def blpop_denied(r: redis.Redis, url: str) -> str:
    """The URL of a user "worker" on r's server who may run everything but BLPOP (an ACL refusal: a worker's
    hand-off lane registers, a script, but can never pop what producers hand it)."""
    r.acl_setuser("worker", enabled=True, passwords=["+pw"], keys=["~*"], channels=["*"],
                  commands=["+@all", "-blpop"])
    u = urlsplit(url)
    return urlunsplit(u._replace(netloc=f"worker:pw@{u.hostname}:{u.port}"))


class ReplyLost:
    """A clock for the Inspector (Inspector(clock=...)) that makes one script's reply get lost after it ran.

    The n-th time the function named `at` takes the time (the runner takes it just before it sends that script),
    the server is stopped (SIGSTOP): the script waits in the server's socket while the client's socket timeout
    passes, and the client drops the connection. `thaw_after` seconds later the server goes on (SIGCONT) and runs
    the script sent to a closed connection, whose reply nobody reads; `ran(admin connection)` must then hold
    (lost counts the replies so lost). Give the client a socket timeout well below thaw_after; use a private
    server."""

    def __init__(self, server: EmbeddedServer, at: str, n: int, ran: Callable[[redis.Redis], bool], *,
                 thaw_after: float = 1.0) -> None:
        self.server, self.at, self.left, self.ran, self.thaw_after = server, at, n, ran, thaw_after
        self.timer: threading.Timer | None = None
        self.lost = 0

    def __call__(self) -> float:
        if self.left > 0 and sys._getframe(2).f_code.co_name == self.at:  # 1: Ctx.now, 2: its caller
            self.left -= 1
            if self.left == 0:
                self._signal(signal.SIGSTOP)
                self.timer = threading.Timer(self.thaw_after, self._thaw)
                self.timer.start()
        return time.time()

    def settled(self) -> int:
        """lost, once the thaw has looked (the job may end before the thaw's own check of what ran does)."""
        if self.timer is not None:
            self.timer.join()
        return self.lost

    def __enter__(self) -> ReplyLost:
        return self

    def __exit__(self, *exc: object) -> None:  # never leave the server stopped (the fixtures' flush would hang)
        if self.timer is not None:
            self.timer.join()
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.server.proc is not None
        os.kill(self.server.proc.pid, sig)

    def _thaw(self) -> None:
        self._signal(signal.SIGCONT)
        admin = redis.Redis.from_url(self.server.url, socket_timeout=5)
        try:
            deadline = time.monotonic() + 5
            while not self.ran(admin):
                if time.monotonic() > deadline:
                    return  # lost stays 0: the test fails on it
                time.sleep(0.01)
            self.lost += 1
        finally:
            admin.close()


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
    """The private server's URL, flushed before and after the test."""
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
