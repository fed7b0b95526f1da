"""Client and AsyncClient against real error replies: every redis-py error leaves as ours (defect 8), and the
client works again once the fault is over."""

from __future__ import annotations

import asyncio

import pytest
import redis

from asynqpy import AsyncClient, Client, Task
from asynqpy.errors import RedisBusyError, RedisOutOfMemoryError, RedisUnavailableError
from tests.redisfaults import busy, out_of_memory


def _not_redis_pys(exc: BaseException) -> None:
    assert isinstance(exc, RedisUnavailableError) and not isinstance(exc, redis.RedisError)


def test_client_out_of_memory_raises_our_error(redis_url: str, r: redis.Redis) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("t", b"0"))  # the queue registered, the scripts loaded
        with out_of_memory(redis_url):
            for fields in ({}, {"unique": 60}, {"process_in": 30}, {"group": "g"}):
                with pytest.raises(RedisOutOfMemoryError) as info:
                    c.enqueue(Task("t", b"1"), **fields)
                _not_redis_pys(info.value)
                assert info.value.kind == "OOM"
            with pytest.raises(RedisOutOfMemoryError) as info:
                c.enqueue_many([Task("t", b"2"), Task("t", b"3")])
            _not_redis_pys(info.value)
        c.enqueue(Task("t", b"4"))
        assert len(c.enqueue_many([Task("t", b"5")])) == 1
    assert r.llen("asynq:{default}:pending") == 3


def test_async_client_out_of_memory_raises_our_error(redis_url: str, r: redis.Redis) -> None:
    async def go() -> None:
        async with AsyncClient(redis_url) as c:
            await c.enqueue(Task("t", b"0"))
            with out_of_memory(redis_url):
                # concurrent callers share round trips: each gets our error
                outs = await asyncio.gather(*(c.enqueue(Task("t", b"1")) for _ in range(5)), return_exceptions=True)
                assert all(isinstance(o, RedisOutOfMemoryError) for o in outs), outs
                for fields in ({"unique": 60}, {"process_in": 30}):
                    with pytest.raises(RedisOutOfMemoryError) as info:
                        await c.enqueue(Task("t", b"2"), **fields)
                    _not_redis_pys(info.value)
                with pytest.raises(RedisOutOfMemoryError) as info:
                    await c.enqueue_many([Task("t", b"3"), Task("t", b"4")])
                _not_redis_pys(info.value)
            await c.enqueue(Task("t", b"5"))
            await c.enqueue_many([Task("t", b"6")])
    asyncio.run(go())
    assert r.llen("asynq:{default}:pending") == 3


def test_clients_under_busy_raise_our_error(redis_url: str) -> None:
    c = Client(redis_url)
    ac = AsyncClient(redis_url)
    try:
        with busy(redis_url):
            with pytest.raises(RedisBusyError) as info:
                c.enqueue(Task("t", b"1"))
            _not_redis_pys(info.value)
            with pytest.raises(RedisBusyError):
                c.enqueue_many([Task("t", b"2")])
            with pytest.raises(RedisBusyError):
                asyncio.run(ac.enqueue(Task("t", b"3")))
        c.enqueue(Task("t", b"4"))
    finally:
        c.close()
