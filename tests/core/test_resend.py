"""A command re-sent after its reply was lost (the runners send once more after a broken connection) must not
turn a task we enqueued into TaskIDConflictError for an id the caller never saw. The re-send is made real here:
a runner that sends every round trip twice to the real server, answering with the second replies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from asynqpy import AsyncClient, Client, Task, TaskIDConflictError
from asynqpy.rdb.async_runner import AsyncRunner
from asynqpy.rdb.sync_runner import SyncRunner
from inspector import Inspector


class ResendingRunner(SyncRunner):
    def send(self, packed: Sequence[bytes]) -> list[Any]:
        super().send(packed)  # it ran; its replies are "lost"
        return super().send(packed)


class AsyncResendingRunner(AsyncRunner):
    async def send(self, packed: Sequence[bytes]) -> list[Any]:
        await super().send(packed)
        return await super().send(packed)


def test_sync_enqueue_and_enqueue_many_with_drawn_ids_survive_a_resend(redis_url: str) -> None:
    c = Client(redis_url)
    c._runner = ResendingRunner(c.redis)
    info = c.enqueue(Task("resend", b"one"), queue="rs")
    assert Inspector(redis_url).get_task("rs", info.id).info.type == "resend"
    out = c.enqueue_many([Task("resend", b"%d" % i) for i in range(5)], queue="rs")
    assert not [x for x in out if isinstance(x, Exception)], out
    with pytest.raises(TaskIDConflictError):  # an id the caller chose: a conflict is theirs to hear of
        c.enqueue(Task("resend", b"mine"), queue="rs", task_id="chosen-id")
    assert Inspector(redis_url).queue_info("rs", memory=False).pending == 7


def test_async_enqueue_with_drawn_ids_survives_a_resend(redis_url: str) -> None:
    async def go() -> list[Any]:
        ac = AsyncClient(redis_url)
        runner = AsyncResendingRunner(ac.redis)
        ac._runner = runner
        if ac._enqueuer is not None:
            ac._enqueuer.runner = runner
        out = await asyncio.gather(*(ac.enqueue(Task("resend", b"a%d" % i), queue="ars") for i in range(20)),
                                   return_exceptions=True)
        await ac.redis.aclose()
        return out

    out = asyncio.run(go())
    assert not [x for x in out if isinstance(x, BaseException)], out
    assert Inspector(redis_url).queue_info("ars", memory=False).pending == 20


class _LosesFirstReplies:
    """A connection whose first read finds the connection gone once the server has run what was sent: the
    replies are lost (the socket is closed with them unread), as when a network drops mid round trip."""

    def __init__(self, conn: Any, ran: Any) -> None:
        self._conn, self._ran, self._lost = conn, ran, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def read_response(self, *args: Any, **kw: Any) -> Any:
        if not self._lost:
            self._lost = True
            self._ran()
            self._conn.disconnect()
            raise redis.ConnectionError("connection lost (test)")
        return self._conn.read_response(*args, **kw)


class LosingRunner(SyncRunner):
    ran: Any = None

    @contextmanager
    def connection(self) -> Iterator[Any]:
        with super().connection() as conn:
            yield _LosesFirstReplies(conn, self.ran)


def test_enqueue_many_with_chunks_in_flight_survives_lost_replies(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    c = Client(redis_url)
    runner = LosingRunner(c.redis)

    def ran() -> None:  # the first chunk (at least) is in Redis before its replies are lost
        end = time.time() + 5
        while r.llen("asynq:{lost}:pending") < 50 and time.time() < end:
            time.sleep(0.005)

    runner.ran = ran
    c._runner = runner
    out = c.enqueue_many([Task("lost", b"%d" % i) for i in range(300)], queue="lost", chunk=50)
    assert not [x for x in out if isinstance(x, Exception)], out
    ids = [x.id for x in out if not isinstance(x, Exception)]
    assert [x.decode() for x in reversed(r.lrange("asynq:{lost}:pending", 0, -1))] == ids


def test_async_enqueue_many_with_chunks_in_flight_survives_lost_replies(redis_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from asynqpy.rdb import overlap

    r = redis.Redis.from_url(redis_url)
    first = overlap._AsyncPipe._reply
    lost: list[bool] = []

    async def reply(self: Any) -> Any:  # the first reply: lost with the connection, after the server ran it
        if not lost:
            lost.append(True)
            end = time.time() + 5
            while r.llen("asynq:{alost}:pending") < 50 and time.time() < end:
                await asyncio.sleep(0.005)
            await self.conn.disconnect()
            raise redis.ConnectionError("connection lost (test)")
        return await first(self)

    monkeypatch.setattr(overlap._AsyncPipe, "_reply", reply)

    async def go() -> list[Any]:
        async with AsyncClient(redis_url) as ac:
            return await ac.enqueue_many([Task("lost", b"%d" % i) for i in range(300)], queue="alost", chunk=50)

    out = asyncio.run(go())
    assert lost and not [x for x in out if isinstance(x, Exception)], out
    ids = [x.id for x in out if not isinstance(x, Exception)]
    assert [x.decode() for x in reversed(r.lrange("asynq:{alost}:pending", 0, -1))] == ids
