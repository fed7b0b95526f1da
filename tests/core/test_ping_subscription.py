"""The worker's plain traffic in asynqpy/rdb: the start-up PING (rdb/ping.py) and the pub/sub subscription the
subscriber loop reads (rdb/subscription.py), on a real server."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from asynqpy.connection import aconnect
from asynqpy.embedded import free_port
from asynqpy.errors import RedisUnavailableError
from asynqpy.rdb import keys
from asynqpy.rdb.ping import ping
from asynqpy.rdb.subscription import Subscription


def test_ping_answers_with_the_round_trip(redis_url: str) -> None:
    async def go() -> float:
        client = aconnect(redis_url)
        try:
            return await ping(client, redis_url)
        finally:
            await client.aclose()

    assert 0 < asyncio.run(go()) < 5


def test_ping_of_a_server_that_cannot_be_reached_is_asynqpys_error() -> None:
    url = f"redis://:secret@127.0.0.1:{free_port()}/0"

    async def go() -> None:
        client = aconnect(url)
        try:
            await ping(client, url)
        finally:
            await client.aclose()

    with pytest.raises(RedisUnavailableError) as info:
        asyncio.run(go())
    assert info.value.kind == "connection" and not isinstance(info.value, redis.RedisError)
    assert "secret" not in str(info.value) and str(info.value).startswith("cannot reach Redis at redis://:***@")


def test_a_subscription_gives_each_message_of_its_channels_and_none_when_quiet(redis_url: str,
                                                                              r: redis.Redis) -> None:
    Message = tuple[bytes, object]

    async def go() -> tuple[list[Message | None], list[Message], Message | None]:
        client = aconnect(redis_url)
        try:
            async with Subscription(client) as sub:
                await sub.subscribe(keys.CANCEL_CHANNEL, keys.WAKE_CHANNEL)
                quiet = [await sub.next(timeout=0.1) for _ in range(3)]  # two confirmations (skipped), then nothing
                assert r.publish(keys.WAKE_CHANNEL, "default") == 1  # it is subscribed by now
                r.publish("not-ours", "x")
                r.publish(keys.CANCEL_CHANNEL, "task-1")
                got: list[Message] = []
                deadline = time.monotonic() + 5
                while len(got) < 2 and time.monotonic() < deadline:
                    m = await sub.next(timeout=0.5)
                    if m is not None:
                        got.append(m)
                return quiet, got, await sub.next(timeout=0.1)
        finally:
            await client.aclose()

    quiet, got, after = asyncio.run(go())
    assert quiet == [None, None, None]
    assert got == [(keys.WAKE_CHANNEL.encode(), b"default"), (keys.CANCEL_CHANNEL.encode(), b"task-1")]
    assert after is None  # the other channel's message never came
