"""The faults themselves, each a context manager that makes a real server misbehave for the with-block and puts
it back after: error replies made by the server (BUSY, OOM, READONLY, LOADING, NOSCRIPT, CLIENT KILL) and
network faults made by Toxiproxy (latency, blackhole, reset_peer, bandwidth)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from asynqpy.embedded import EmbeddedServer

if TYPE_CHECKING:
    from tests.faults.toxiproxy import Proxy

# A script that spins for ARGV[1] microseconds by the server's clock: the server answers BUSY to everyone else
# once it runs past busy-reply-threshold.
SPIN = """
local t0 = redis.call('TIME')
while true do
  local t = redis.call('TIME')
  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > tonumber(ARGV[1]) then return 1 end
end
"""
LOADING_KEYS = 20_000      # padding keys written before the LOADING restart (in db LOADING_DB)
LOADING_DB = 7
LOAD_DELAY_US = 100        # per key while loading: 20,000 keys -> about 2 s of LOADING replies


@dataclass
class Target:
    """What the faults act on: the server the components use (directly or behind the proxy), an admin connection
    to it that the faults use, a second private server (READONLY's "primary") and the proxy, if any."""

    server: EmbeddedServer
    admin: redis.Redis
    other: EmbeddedServer | None = None
    proxy: Proxy | None = None


@dataclass(frozen=True)
class Fault:
    """A named fault: inject(target) is a context manager lasting about `seconds`."""

    name: str
    seconds: float
    inject: Callable[[Target], contextlib.AbstractContextManager[None]]
    swallows: bool = False  # a request sent during it gets no reply: its sender waits out its socket timeout
    # Reads fail at once too (not only writes): the dashboard must show its banner. (Not the blackhole: a read
    # sent in it times out as it ends, and its retry on a new connection may well succeed.)
    refuses_reads: bool = False

    def __repr__(self) -> str:
        return self.name


@contextlib.contextmanager
def _restoring(admin: redis.Redis, *names: str) -> Iterator[None]:
    """Puts the named config settings back as they were, whatever happens in the block."""
    before = {n: str(admin.config_get(n)[n]) for n in names}
    try:
        yield
    finally:
        for name, value in before.items():
            admin.config_set(name, value)


@contextlib.contextmanager
def busy(target: Target, seconds: float = 2.5) -> Iterator[None]:
    """Another client's script runs for `seconds` with busy-reply-threshold at 100 ms."""
    with _restoring(target.admin, "busy-reply-threshold"):
        target.admin.config_set("busy-reply-threshold", 100)
        spinner = redis.Redis(host=target.server.host, port=target.server.port, socket_timeout=seconds + 30)
        runs = threading.Thread(target=spinner.eval, args=(SPIN, 0, int(seconds * 1e6)), daemon=True)
        runs.start()
        try:
            time.sleep(0.15)  # past the threshold: BUSY from here on
            yield
        finally:
            runs.join(seconds + 30)
            spinner.close()


@contextlib.contextmanager
def oom(target: Target, seconds: float = 2.5) -> Iterator[None]:
    """maxmemory 1 byte under noeviction: every write is refused with OOM."""
    with _restoring(target.admin, "maxmemory", "maxmemory-policy"):
        target.admin.config_set("maxmemory-policy", "noeviction")
        target.admin.config_set("maxmemory", 1)
        yield
        time.sleep(seconds)


@contextlib.contextmanager
def readonly(target: Target, seconds: float = 2.5) -> Iterator[None]:
    """The server becomes a replica of the other private server for `seconds`, then a primary again. The other
    server asks for a password the replica does not have, so no sync ever replaces the data: as a demoted
    primary that has not found its new primary yet, it keeps its data and answers every write READONLY."""
    assert target.other is not None
    with _restoring(target.admin, "replica-read-only"):
        target.admin.config_set("replica-read-only", "yes")
        target.admin.replicaof(target.other.host, target.other.port)
        try:
            yield
            time.sleep(seconds)
        finally:
            target.admin.replicaof("NO", "ONE")


@contextlib.contextmanager
def loading(target: Target, seconds: float = 2.0) -> Iterator[None]:
    """A restart of the (private) server that then loads its dataset for about `seconds`, answering LOADING
    meanwhile: LOADING_KEYS padding keys are written, rewritten into the append-only file's base, and each is
    loaded slowly (valkey's key-load-delay, with events served every KB so clients see LOADING, not silence)."""
    server, admin = target.server, target.admin
    pad = redis.Redis(host=server.host, port=server.port, db=LOADING_DB)
    pipe = pad.pipeline(transaction=False)
    for i in range(LOADING_KEYS):
        pipe.set(f"pad:{i}", b"x" * 32)
    pipe.execute()
    admin.bgrewriteaof()
    while admin.info("persistence")["aof_rewrite_in_progress"]:
        time.sleep(0.02)
    per_key = max(1, int(seconds * 1e6 / LOADING_KEYS))
    saved = server.extra_args
    server.extra_args = [*saved, "--key-load-delay", str(per_key), "--loading-process-events-interval-bytes", "1024"]
    server.stop()  # SIGTERM: the append-only file is flushed first
    started = threading.Thread(target=server.start, kwargs={"timeout": seconds + 30}, daemon=True)
    started.start()
    try:
        yield
        started.join(seconds + 30)
    finally:
        server.extra_args = saved
        with contextlib.suppress(redis.RedisError):
            pad.flushdb()
        pad.close()


@contextlib.contextmanager
def noscript(target: Target, seconds: float = 2.0) -> Iterator[None]:
    """SCRIPT FLUSH every 100 ms: every cached script is gone again and again while the components run."""
    yield
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        target.admin.script_flush()
        time.sleep(0.1)


@contextlib.contextmanager
def client_kill(target: Target, seconds: float = 2.0) -> Iterator[None]:
    """CLIENT KILL TYPE normal every 300 ms: every connection of every component is dropped, repeatedly."""
    yield
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        target.admin.client_kill_filter(_type="normal", skipme=True)
        time.sleep(0.3)


def _toxic(kind: str, seconds: float, stream: str = "downstream", **attributes: int
           ) -> Callable[[Target], contextlib.AbstractContextManager[None]]:
    @contextlib.contextmanager
    def inject(target: Target) -> Iterator[None]:
        assert target.proxy is not None
        with target.proxy.toxic(kind, stream, **attributes):
            yield
            time.sleep(seconds)
    return inject


REPLIES = (
    Fault("BUSY", 2.5, busy, refuses_reads=True),
    Fault("OOM", 2.5, oom),
    Fault("READONLY", 2.5, readonly),
    Fault("LOADING", 2.0, loading, refuses_reads=True),
    Fault("NOSCRIPT", 2.0, noscript),
    Fault("CLIENT_KILL", 2.0, client_kill),
)
NETWORK = (
    Fault("latency_200ms", 3.0, _toxic("latency", 3.0, latency=200)),
    Fault("blackhole_10s", 10.0, _toxic("timeout", 10.0, timeout=0), swallows=True),
    Fault("reset_peer", 2.0, _toxic("reset_peer", 2.0, timeout=0), refuses_reads=True),
    Fault("bandwidth_2KBps", 3.0, _toxic("bandwidth", 3.0, rate=2)),
)
