"""Test fixtures: one private Redis-protocol server per session (embedded Valkey, or REDIS_URL), a clean db per test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from asynqpy.embedded import EmbeddedServer


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
def redis_url(redis_server_url: str) -> Iterator[str]:
    """The server's URL with an empty database; the database is flushed before and after the test.

    With REDIS_URL the tests use db 15 of that server, and flush only that one.
    """
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
    conn = redis.Redis.from_url(redis_url)
    yield conn
    conn.close()
