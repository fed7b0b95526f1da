"""Fixtures of the fault suite: real faults on private servers (never the session server: the faults change a
server's config, restart it or cut it off), one Toxiproxy per session, the components under test started once
per module, and a ledger server no fault touches where the handlers record every run.

Each test module parametrizes a module-scoped `outcome` fixture over its faults (tests/faults/faults.py): the
rig goes through each fault once, and the component tests (tests/faults/checks.py) assert on what happened.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from asynqpy.embedded import EmbeddedServer
from tests.faults.faults import Target
from tests.faults.rig import Rig
from tests.faults.toxiproxy import Toxiproxy, build
from tests.interop.goasynq import built_or_skip


@pytest.fixture(scope="session")
def ledger() -> Iterator[redis.Redis]:
    """A private server the handlers write every run to; no fault ever reaches it."""
    with EmbeddedServer() as server:
        conn = redis.Redis.from_url(server.url)
        yield conn
        conn.close()


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    """One Toxiproxy server for the session (built once into ~/.cache/asynqpy-go; skips, saying why, where Go or
    the build is missing, fails then under ASYNQPY_REQUIRE_GO=1)."""
    binary = built_or_skip(build, "toxiproxy")
    proxy = Toxiproxy(binary, tmp_path_factory.mktemp("toxiproxy"))
    yield proxy
    proxy.stop()


def _admin(server: EmbeddedServer) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, socket_timeout=30)


@pytest.fixture(scope="module")
def reply_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A private server with a kept data directory (so LOADING can restart it on its data), and a second private
    server, asking a password the first does not know, for READONLY to be a replica of."""
    server = EmbeddedServer(data_dir=tmp_path_factory.mktemp("faulted")).start()
    other = EmbeddedServer().start()
    _admin(other).config_set("requirepass", "not-known-to-the-replica")
    admin = _admin(server)
    try:
        yield Target(server=server, admin=admin, other=other)
    finally:
        admin.close()
        other.stop()
        server.stop()


@pytest.fixture(scope="module")
def reply_rig(reply_target: Target, ledger: redis.Redis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """The components on the faulted server itself."""
    url = reply_target.server.url
    rig = Rig(url, url, _ledger_url(ledger), tmp_path_factory.mktemp("reply-rig"))
    try:
        yield rig.start()
    finally:
        rig.stop()


@pytest.fixture(scope="module")
def network_target(toxiproxy: Toxiproxy) -> Iterator[Target]:
    """A private server behind a Toxiproxy proxy."""
    server = EmbeddedServer().start()
    admin = _admin(server)
    try:
        yield Target(server=server, admin=admin, proxy=toxiproxy.proxy("faults", server.port))
    finally:
        admin.close()
        server.stop()


@pytest.fixture(scope="module")
def network_rig(network_target: Target, ledger: redis.Redis,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    """The components behind the proxy; setting up and checking go to the server directly."""
    assert network_target.proxy is not None
    rig = Rig(network_target.proxy.url(), network_target.server.url, _ledger_url(ledger),
              tmp_path_factory.mktemp("network-rig"))
    try:
        yield rig.start()
    finally:
        rig.stop()


def _ledger_url(conn: redis.Redis) -> str:
    kw = conn.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}/0"
