"""A Redis that answers nothing (SIGSTOPped: its connections stay open, no reply ever comes) is met within the
socket timeout: an async call raises our error then."""

from __future__ import annotations

import asyncio
import time

import pytest

from asynqpy import AsyncClient, Task
from asynqpy.embedded import EmbeddedServer
from asynqpy.errors import RedisUnavailableError
from tests.redisfaults import fault_server, fault_url, frozen

__all__ = ["fault_server", "fault_url"]  # the fixtures, imported for this module


def test_an_async_call_to_a_redis_that_answers_nothing_raises_within_the_socket_timeout(
        fault_server: EmbeddedServer, fault_url: str) -> None:
    async def enqueue() -> float:
        client = AsyncClient(fault_url + "?socket_timeout=1")
        await client.enqueue(Task("before", b""))  # connected, and the connection kept for the next call
        with frozen(fault_server):
            began = time.monotonic()
            with pytest.raises(RedisUnavailableError) as info:
                await asyncio.wait_for(client.enqueue(Task("during", b"")), 5)  # (a hang fails, not blocks)
            took = time.monotonic() - began
        assert info.value.kind == "timeout", info.value
        await client.close()
        return took

    assert asyncio.run(enqueue()) < 2.5
