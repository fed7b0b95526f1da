"""A command re-sent after its reply was lost (the runners send once more after a broken connection) must not
turn a task we enqueued into TaskIDConflictError for an id the caller never saw. The re-send is made real here:
a runner that sends every round trip twice to the real server, answering with the second replies."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from asynqpy import AsyncClient, Client, Task, TaskIDConflictError
from asynqpy.rdb.scripts import AsyncRunner, SyncRunner
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
