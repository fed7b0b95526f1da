"""Test fixtures: one Redis-protocol server per session (a private embedded Valkey, or the server named by the
test-only ASYNQPY_TEST_REDIS_URL), a clean database per test.

REDIS_URL is the application's default connection and is never read here: a developer with it set must not lose
data to the tests. With ASYNQPY_TEST_REDIS_URL the tests use db 15 of that server and refuse to run when db 15
holds keys they did not write (they leave a marker key in it after each test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
import redis

from asynqpy.embedded import EmbeddedServer

TEST_URL_ENV = "ASYNQPY_TEST_REDIS_URL"
TEST_DB = 15
MARKER = "asynqpy:tests:owned"  # left in db 15 after each test: what is there was written by the tests


def db15_url(url: str) -> str:
    """url with its database replaced by TEST_DB (the path of redis://, the db= query of unix://)."""
    u = urlsplit(url)
    if u.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(u.query) if k != "db"] + [("db", str(TEST_DB))]
        return f"unix://{u.path}?{urlencode(query)}"
    return urlunsplit(u._replace(path=f"/{TEST_DB}"))


def check_owned(url: str) -> None:
    """pytest.exit with a clear message unless the database at url is empty or holds the tests' marker."""
    r = redis.Redis.from_url(url)
    try:
        n = r.dbsize()
        if n and not r.exists(MARKER):
            pytest.exit(f"{TEST_URL_ENV} names a server whose db {TEST_DB} holds {n} keys the tests did not write "
                        f"({url}). The tests flush db {TEST_DB}, so they refuse to run: empty it yourself if its "
                        f"data is disposable (e.g. left by a killed test run: redis-cli -n {TEST_DB} FLUSHDB), or "
                        f"point {TEST_URL_ENV} at another server.", returncode=2)
    except redis.ConnectionError as exc:
        pytest.exit(f"{TEST_URL_ENV}={url}: cannot reach that server: {exc}", returncode=2)
    finally:
        r.close()


@pytest.fixture(scope="session")
def redis_server_url() -> Iterator[str]:
    """db 15 of the server in ASYNQPY_TEST_REDIS_URL (CI runs the suite once more against Debian's redis-server),
    checked to hold nothing but the tests' own keys; else a private Valkey for the session."""
    url = os.environ.get(TEST_URL_ENV)
    if url:
        url = db15_url(url)
        check_owned(url)
        yield url
        return
    server = EmbeddedServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server_url: str) -> Iterator[str]:
    """The session server's test database, empty; flushed before and after the test (only this database)."""
    url = redis_server_url
    r = redis.Redis.from_url(url)
    r.flushdb()
    try:
        yield url
    finally:
        r.flushdb()
        r.set(MARKER, "the asynqpy tests flush this database")
        r.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A raw (binary) connection to the clean test database."""
    conn = redis.Redis.from_url(redis_url)
    yield conn
    conn.close()
