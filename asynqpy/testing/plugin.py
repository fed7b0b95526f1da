"""The asynqpy pytest plugin (entry point pytest11, installed with the `testing` extra). Its fixtures start
nothing until a test asks for one, and all are named asynqpy_*, so they sit beside a project's own.

- asynqpy_server_url (session): the embedded Valkey (or ASYNQPY_TEST_SERVER_BINARY), started on first use, one per
  pytest-xdist worker; or db 15 of the server in ASYNQPY_TEST_REDIS_URL, refused when that db holds keys the
  tests did not write (and under pytest-xdist, where the workers would share it).
- asynqpy_redis: that server's test database, emptied before and after the test; its URL.
- asynqpy_client: a Client on it. asynqpy_inspector: an Inspector on it.
- asynqpy_worker: a factory, asynqpy_worker(mux, **settings) -> TestWorker, a real Server stopped after the test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asynqpy.client import Client
from asynqpy.mux import ServeMux
from asynqpy.testing.server import TEST_URL_ENV, ForeignDataError, clean_db, session_server
from asynqpy.testing.worker import TestWorker


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker process starts its own server; a named one (one database) is refused."""
    workers = getattr(config.option, "numprocesses", None)
    if os.environ.get(TEST_URL_ENV) and workers not in (None, 0, "0"):
        raise pytest.UsageError(
            f"{TEST_URL_ENV} names one database, which parallel test processes would flush under each other: run "
            f"without -n (or with -n 0), or unset it so that each process starts its own server")


@pytest.fixture(scope="session")
def asynqpy_server_url() -> Iterator[str]:
    """The session's Redis-protocol server (see the module docstring); its test database's URL."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(session_server())
        except ForeignDataError as exc:
            pytest.exit(str(exc), returncode=2)
        yield url


@pytest.fixture
def asynqpy_redis(asynqpy_server_url: str) -> Iterator[str]:
    """The URL of an empty test database (flushed before and after the test)."""
    with clean_db(asynqpy_server_url) as url:
        yield url


@pytest.fixture
def asynqpy_client(asynqpy_redis: str) -> Iterator[Client]:
    """A Client on the test database."""
    with Client(asynqpy_redis) as client:
        yield client


@pytest.fixture
def asynqpy_inspector(asynqpy_redis: str) -> Iterator[Any]:
    """An inspector.Inspector on the test database."""
    from inspector import Inspector  # the same distribution; imported here, as asynqpy itself never does

    ins = Inspector(asynqpy_redis)
    try:
        yield ins
    finally:
        ins.close()


@pytest.fixture
def asynqpy_worker(asynqpy_redis: str) -> Iterator[Callable[..., TestWorker]]:
    """asynqpy_worker(mux, **settings): a TestWorker (a running Server) on the test database; every one
    started is stopped after the test."""
    started: list[TestWorker] = []

    def start(mux: ServeMux, **settings: Any) -> TestWorker:
        w = TestWorker(asynqpy_redis, mux, **settings)
        started.append(w)
        return w
    yield start
    for w in reversed(started):
        w.stop()
