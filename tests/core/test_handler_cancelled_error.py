"""A handler that raises CancelledError itself (an inner task's cancel let through), when the worker cancelled
nothing, fails like any other error: retried, then archived, with the error recorded. It used to be taken for a
stop request and left active for as long as the worker lived, its lease renewed."""

from __future__ import annotations

import asyncio

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from tests.helpers import msg_of, running, wait_for


def test_a_handlers_own_cancelled_error_is_a_failure(redis_url: str, r: redis.Redis) -> None:
    mux = ServeMux()

    @mux.handler("own-cancel")
    async def own_cancel(t):  # type: ignore[no-untyped-def]
        inner = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        inner.cancel()
        await inner  # raises CancelledError into the handler, which lets it through

    @mux.handler("own-cancel-sync")
    def own_cancel_sync(t):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError()

    with Client(redis_url) as c:
        archived = c.enqueue(Task("own-cancel", b""), queue="owncancel", max_retry=0).id
        retried = c.enqueue(Task("own-cancel", b""), queue="owncancel", max_retry=5).id
        sync = c.enqueue(Task("own-cancel-sync", b""), queue="owncancel", max_retry=0).id
    with running(redis_url, mux, queues={"owncancel": 1}):
        wait_for(lambda: r.zscore(keys.archived("owncancel"), archived) and r.zscore(keys.archived("owncancel"), sync)
                 and r.zscore(keys.retry("owncancel"), retried), timeout=15, what="archived and retried")
    assert msg_of(r, "owncancel", archived).error_msg == "CancelledError"
    assert msg_of(r, "owncancel", sync).error_msg == "CancelledError"
    assert msg_of(r, "owncancel", retried).retried == 1
    assert r.llen(keys.active("owncancel")) == 0 and r.zcard(keys.lease("owncancel")) == 0
