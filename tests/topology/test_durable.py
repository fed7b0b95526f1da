"""durable=True on enqueue and durable_acks in the server: WAIT for a replica, on one node, Sentinel and cluster."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from asynqpy import AsyncClient, Client, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.errors import InvalidArgumentError, NotDurableError
from asynqpy.options import TaskOptions
from asynqpy.rdb import keys
from asynqpy.rdb.durability import Durability
from asynqpy.topology import LocalSentinel
from tests.helpers import running, wait_for


def test_durable_enqueue_without_replicas_says_so(redis_url: str, r: redis.Redis) -> None:
    c = Client(redis_url)
    t0 = time.monotonic()
    with pytest.raises(NotDurableError, match="confirmed by 0 of 1 replica"):
        c.enqueue(Task("t", b"x"), task_id="lonely", durable=Durability(replicas=1, timeout=0.05))
    assert time.monotonic() - t0 < 2
    assert r.exists(keys.task("default", "lonely"))  # the primary has it; the caller knows it may not survive


def test_durable_arguments_are_checked(redis_url: str) -> None:
    c = Client(redis_url)
    with pytest.raises(InvalidArgumentError, match="durable must be True, False or a Durability") as info:
        c.enqueue(Task("t", b""), durable="yes")
    assert info.value.argument == "durable"
    with pytest.raises(InvalidArgumentError, match="durable must be"):
        TaskOptions(durable=1)  # type: ignore[arg-type]
    assert TaskOptions(durable=True).resolve(0).durable == Durability()
    assert TaskOptions().resolve(0).durable is None
    with pytest.raises(InvalidArgumentError, match="durable_acks must be") as info:
        ServerConfig(durable_acks="yes")  # type: ignore[arg-type]
    assert info.value.argument == "durable_acks"
    assert ServerConfig(durable_acks=True).durable_acks == Durability()
    with pytest.raises(InvalidArgumentError, match="replicas"):
        Durability(replicas=0)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        Durability(timeout=0)


def test_durable_enqueue_on_sentinel_is_confirmed(redis_sentinel: LocalSentinel) -> None:
    redis_sentinel.flushall()
    c = Client(redis_sentinel.url)
    info = c.enqueue(Task("t", b"x"), durable=True)

    async def go() -> None:
        async with AsyncClient(redis_sentinel.url) as ac:
            await ac.enqueue(Task("t", b"y"), task_id="async-durable", durable=True)

    asyncio.run(go())
    with redis.Redis(*redis_sentinel.primary_addr()) as primary:
        assert primary.llen(keys.pending("default")) == 2
    replica = next(n for n in redis_sentinel.data if (n.host, n.port) != redis_sentinel.primary_addr())
    with redis.Redis(replica.host, replica.port) as rc:  # WAIT returned: the replica has both already
        assert rc.exists(keys.task("default", info.id), keys.task("default", "async-durable")) == 2
    c.close()


def test_durable_acks_on_sentinel(redis_sentinel: LocalSentinel) -> None:
    redis_sentinel.flushall()
    mux = ServeMux()
    seen: list[str] = []

    @mux.handler("t")
    async def handle(t: object) -> None:
        seen.append(t.id)  # type: ignore[attr-defined]

    c = Client(redis_sentinel.url)
    ids = [c.enqueue(Task("t", b""), durable=True).id for _ in range(20)]
    with running(redis_sentinel.url, mux, durable_acks=True):
        wait_for(lambda: sorted(seen) == sorted(ids), what="all 20 tasks")
        with redis.Redis(*redis_sentinel.primary_addr()) as primary:
            wait_for(lambda: primary.get(keys.processed_total("default")) == b"20", what="acks")
    c.close()


def test_durable_on_cluster_waits_on_the_owning_node(cluster_url: str) -> None:
    """The cluster has no replicas: WAIT runs on the node of the task's slot and reports 0 replicas."""
    c = Client(cluster_url)
    for q in ("a", "b", "c"):
        with pytest.raises(NotDurableError):
            c.enqueue(Task("t", b""), queue=q, durable=Durability(timeout=0.02))
        assert c.redis.llen(keys.pending(q)) == 1

    async def go() -> None:
        async with AsyncClient(cluster_url) as ac:
            with pytest.raises(NotDurableError):
                await ac.enqueue(Task("t", b""), queue="d", durable=Durability(timeout=0.02))

    asyncio.run(go())
    c.close()


def test_durable_enqueue_many(redis_sentinel: LocalSentinel, redis_url: str) -> None:
    redis_sentinel.wait_replicas_synced()
    redis_sentinel.flushall()
    with Client(redis_sentinel.url) as c:
        out = c.enqueue_many([Task("t", str(i).encode()) for i in range(50)], durable=True, chunk=20)
        assert all(not isinstance(o, Exception) for o in out) and len(out) == 50
    with Client(redis_url) as lonely:  # no replica: every task of the batch says it is not confirmed
        out = lonely.enqueue_many([Task("t", b"") for _ in range(3)], durable=Durability(timeout=0.02))
        assert [type(o) for o in out] == [NotDurableError] * 3

    async def go() -> list[object]:
        async with AsyncClient(redis_sentinel.url) as ac:
            return await ac.enqueue_many([Task("t", b"a")], durable=True)  # type: ignore[return-value]

    assert not isinstance(asyncio.run(go())[0], Exception)
