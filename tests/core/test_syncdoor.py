"""The sync door to Redis (asynqpy.rdb.syncdoor): batches with NOSCRIPT reload, commands with redis-py's reply
forms, and every error reply or socket error coming out as asynqpy's, against real faults."""

from __future__ import annotations

import hashlib

import pytest
import redis

from asynqpy.connection import connect
from asynqpy.embedded import free_port
from asynqpy.errors import (
    RedisBusyError,
    RedisCommandError,
    RedisOutOfMemoryError,
    RedisReadOnlyError,
    RedisUnavailableError,
)
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, Script
from asynqpy.rdb.syncdoor import SyncDoor
from tests.redisfaults import busy, fault_redis, fault_server, fault_url, out_of_memory, read_only_keeping_data

__all__ = ["fault_redis", "fault_server", "fault_url"]  # fixtures

TEXT = "return tonumber(ARGV[1]) * 6"
FRESH = Script("brand_new", TEXT, hashlib.sha1(TEXT.encode()).hexdigest())


def test_a_new_script_needs_no_registration(r: redis.Redis) -> None:
    """A script no list names (as a new one would be) runs in a batch and alone on a flushed server."""
    door = SyncDoor(r)
    r.script_flush()
    assert door.read_script(Call(FRESH, [], [7], int)) == 42
    r.script_flush()
    known, raw = door.read(lambda b: (b.command("SISMEMBER", keys.QUEUES, "q"), b.script(Call(FRESH, [], [2], int))))
    assert (known, raw) == (0, 12)
    r.script_flush()
    assert door.run(Call(FRESH, [], [3], int)) == 18


def test_replies_are_redis_pys(r: redis.Redis) -> None:
    door = SyncDoor(r)
    r.hset("h", mapping={"a": "1"})
    r.sadd("s", "x")
    h, members, ok, again = door.read(lambda b: (b.command("HGETALL", "h"), b.command("SMEMBERS", "s"),
                                                 b.command("SET", "k", "v", "NX"), b.command("SET", "k", "v", "NX")))
    assert (h, members, ok, again) == ({b"a": b"1"}, {b"x"}, True, None)
    assert isinstance(door.command("INFO"), dict) and door.read(lambda b: None) == []


def test_a_bug_is_a_command_error_and_the_password_is_masked(r: redis.Redis, redis_url: str) -> None:
    door = SyncDoor(r, redis_url.replace("redis://", "redis://:secret@"))
    r.set("str", "v")
    with pytest.raises(RedisCommandError) as err:
        door.command("HGET", "str", "f")
    assert "WRONGTYPE" in str(err.value) and "secret" not in str(err.value)
    with pytest.raises(RedisCommandError):
        door.read(lambda b: (b.command("GET", "str"), b.command("LLEN", "str")))
    bad = Script("bad", "return redis.call('NOPE')", hashlib.sha1(b"return redis.call('NOPE')").hexdigest())
    with pytest.raises(RedisCommandError):
        door.run(Call(bad, [], [], int))


def test_unreachable_is_redis_unavailable() -> None:
    url = f"redis://:pw@127.0.0.1:{free_port()}/0"
    door = SyncDoor(connect(url), url)
    for call in (lambda: door.command("PING"), lambda: door.read(lambda b: b.command("GET", "k")),
                 lambda: door.run(Call(FRESH, [], [1], int))):
        with pytest.raises(RedisUnavailableError) as err:
            call()
        assert err.value.kind == "connection" and "pw" not in str(err.value)


def test_real_oom_busy_and_readonly_come_out_typed(fault_url: str) -> None:
    door = SyncDoor(redis.Redis.from_url(fault_url))
    text = "return redis.call('SET', KEYS[1], 'x')"
    write = Script("w", text, hashlib.sha1(text.encode()).hexdigest())
    with out_of_memory(fault_url):
        assert door.command("GET", "k") is None  # reads still work
        with pytest.raises(RedisOutOfMemoryError):
            door.command("SET", "k", "v")
        with pytest.raises(RedisOutOfMemoryError):
            door.run(Call(write, ["k"], [], int))
        with pytest.raises(RedisOutOfMemoryError):
            door.read(lambda b: (b.command("GET", "k"), b.command("SET", "k", "v")))
    with read_only_keeping_data(fault_url):
        assert door.read(lambda b: b.command("GET", "k")) == [None]
        with pytest.raises(RedisReadOnlyError) as ro:
            door.run(Call(write, ["k"], [], int))
        assert ro.value.kind == "READONLY"
    with busy(fault_url):
        with pytest.raises(RedisBusyError):
            door.command("GET", "k")
        with pytest.raises(RedisBusyError):
            door.read(lambda b: b.command("GET", "k"))
        with pytest.raises(RedisBusyError):
            door.run(Call(FRESH, [], [1], int))
    assert door.command("SET", "k", "v") is True  # all well again, through the same door
    door.close()


def test_run_many_gives_each_calls_outcome_translated(r: redis.Redis) -> None:
    door = SyncDoor(r)
    r.set("str", "v")
    text = "return redis.call('LLEN', KEYS[1])"
    llen = Script("llen", text, hashlib.sha1(text.encode()).hexdigest())
    r.script_flush()
    ok, bug = door.run_many([Call(FRESH, [], [1], int), Call(llen, ["str"], [], int)])
    assert ok == 6 and isinstance(bug, RedisCommandError) and "WRONGTYPE" in str(bug)
