"""The one classification of Redis trouble, against a real server's error replies."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.exceptions import ResponseError

from asynqpy.errors import RedisBusyError, RedisCommandError, RedisOutOfMemoryError, RedisUnavailableError
from asynqpy.rdb.failures import TroubleLog, backoff_delay, kind_of, translate

URL = "redis://:secret@127.0.0.1:1/0"


def test_reply_codes_are_transient_and_a_script_error_is_a_bug() -> None:
    for code in ("BUSY", "LOADING", "OOM", "READONLY", "MASTERDOWN", "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN",
                 "MISCONF"):
        assert kind_of(ResponseError(f"{code} something went wrong")) == code
    assert kind_of(ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")) is None
    assert kind_of(ResponseError("ERR user_script:1: Script attempted to access nonexistent global")) is None
    assert kind_of(redis.ConnectionError("Error 111 connecting")) == "connection"
    assert kind_of(redis.TimeoutError("Timeout reading")) == "timeout"
    assert kind_of(ValueError("not from Redis")) is None


def test_translate_masks_the_password_and_types_the_kind() -> None:
    busy = translate(ResponseError("BUSY Redis is busy running a script"), URL)
    assert isinstance(busy, RedisBusyError) and isinstance(busy, RedisUnavailableError)
    assert busy.kind == "BUSY" and "secret" not in str(busy) and "answers BUSY" in str(busy)
    bug = translate(ResponseError("WRONGTYPE Operation against a key"), URL)
    assert isinstance(bug, RedisCommandError) and "secret" not in str(bug)
    down = translate(redis.ConnectionError("refused"), URL)
    assert type(down) is RedisUnavailableError and str(down).startswith("cannot reach Redis at redis://:***@")


def test_real_oom_and_busy_replies(r: redis.Redis, redis_url: str) -> None:
    old = r.config_get("maxmemory")["maxmemory"]
    r.config_set("maxmemory", "1")
    try:
        with pytest.raises(redis.RedisError) as info:
            r.eval("return redis.call('set', KEYS[1], 'x')", 1, "k")
        assert kind_of(info.value) == "OOM"
        assert isinstance(translate(info.value, redis_url), RedisOutOfMemoryError)
    finally:
        r.config_set("maxmemory", old)
    old_threshold = r.config_get("busy-reply-threshold")["busy-reply-threshold"]
    r.config_set("busy-reply-threshold", "100")
    spin = ("local t = redis.call('TIME') while true do local n = redis.call('TIME') "
            "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1500000 then return 1 end end")
    other = redis.Redis.from_url(redis_url)
    busy = threading.Thread(target=other.eval, args=(spin, 0))
    busy.start()
    try:
        time.sleep(0.4)
        with pytest.raises(redis.RedisError) as info:
            r.set("k", "v")
        assert kind_of(info.value) == "BUSY"
    finally:
        busy.join()
        other.close()
        r.config_set("busy-reply-threshold", old_threshold)


def test_trouble_log_logs_once_per_kind_and_clears(caplog: pytest.LogCaptureFixture) -> None:
    t = TroubleLog("fetch", every=60)
    with caplog.at_level("INFO", logger="asynqpy"):
        for _ in range(5):
            t.note(ResponseError("BUSY running a script"))
        t.note(redis.ConnectionError("refused"))
        assert t.degraded is not None and t.degraded.kind == "connection"
        assert t.degraded.describe().startswith("degraded: Redis cannot be reached since ")
        t.ok()
    lines = [rec.getMessage() for rec in caplog.records]
    assert sum("answers BUSY" in m for m in lines) == 1
    assert sum("cannot be reached (" in m for m in lines) == 1
    assert t.degraded is None and t.attempts == 0 and any("answers again" in m for m in lines)


def test_backoff_grows_with_jitter_up_to_the_cap() -> None:
    firsts = {round(backoff_delay(1), 4) for _ in range(50)}
    assert all(0.05 <= d <= 0.1 for d in firsts) and len(firsts) > 1
    assert all(2.5 <= backoff_delay(30) <= 5.0 for _ in range(50))
