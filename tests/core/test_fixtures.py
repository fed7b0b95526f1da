"""The test fixtures never touch data they did not write: REDIS_URL is ignored, and ASYNQPY_TEST_REDIS_URL's
db 15 is refused when it holds keys the tests did not write."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from asynqpy.embedded import EmbeddedServer, server_binary

REPO = Path(__file__).resolve().parents[2]
ONE_TEST = "tests/core/test_client.py::test_task_id_conflict"  # a quick test that uses the redis_url fixture


@pytest.fixture(scope="module")
def other_server() -> Iterator[str]:
    """A server of its own, standing for a developer's Redis."""
    server = EmbeddedServer().start()
    try:
        yield server.url
    finally:
        server.stop()


def run_suite(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "ASYNQPY_TEST_REDIS_URL")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ONE_TEST],
                          cwd=REPO, env={**env, **env_extra}, capture_output=True, text=True, timeout=120)


def test_tests_refuse_a_database_holding_keys_they_did_not_write(other_server: str) -> None:
    db15 = redis.Redis.from_url(other_server.rsplit("/", 1)[0] + "/15")
    db15.flushall()  # our own server
    db15.set("precious", "a developer's data")
    out = run_suite({"ASYNQPY_TEST_REDIS_URL": other_server})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "holds 1 keys the tests did not write" in out.stdout + out.stderr
    assert db15.get("precious") == b"a developer's data"  # untouched
    db15.delete("precious")
    out = run_suite({"ASYNQPY_TEST_REDIS_URL": other_server})
    assert out.returncode == 0, out.stdout + out.stderr
    assert db15.keys("*") == [b"asynqpy:tests:owned"]  # what the tests leave: their marker, nothing else
    out = run_suite({"ASYNQPY_TEST_REDIS_URL": other_server})  # the marker says the leftovers are the tests' own
    assert out.returncode == 0, out.stdout + out.stderr
    db15.close()


def test_redis_url_is_the_apps_variable_and_never_the_tests(other_server: str) -> None:
    r = redis.Redis.from_url(other_server)
    r.flushall()  # our own server
    dbs = [redis.Redis.from_url(other_server.rsplit("/", 1)[0] + f"/{n}") for n in (0, 15)]
    for db in dbs:
        db.set("precious", "keep me")
    out = run_suite({"REDIS_URL": other_server})
    assert out.returncode == 0, out.stdout + out.stderr
    assert [db.get("precious") for db in dbs] == [b"keep me", b"keep me"]
    assert [db.dbsize() for db in dbs] == [1, 1]
    for db in dbs:
        db.close()
    r.close()


def test_the_session_server_runs_the_binary_it_was_given(r: redis.Redis) -> None:
    """CI's second pass names Debian's redis-server in ASYNQPY_TEST_SERVER_BINARY: the suite must really run on it."""
    if os.environ.get("ASYNQPY_TEST_REDIS_URL"):
        pytest.skip("the session server is the one ASYNQPY_TEST_REDIS_URL names")
    executable = Path(str(r.info("server")["executable"])).resolve()
    named = os.environ.get("ASYNQPY_TEST_SERVER_BINARY")
    assert executable == (Path(named).resolve() if named else Path(server_binary()).resolve())
