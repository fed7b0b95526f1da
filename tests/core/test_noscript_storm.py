"""Scripts flushed again and again (SCRIPT FLUSH while running): every runner's retry after NOSCRIPT sends the
script's text with EVAL, which cannot answer NOSCRIPT, so no call fails however often the cache is emptied."""

from __future__ import annotations

import asyncio
import threading

import redis

from asynqpy import AsyncClient, Client, Task
from asynqpy.rdb import broker
from asynqpy.rdb.syncdoor import SyncDoor
from inspector import Inspector


def _flushing(url: str, stop: threading.Event) -> threading.Thread:
    def loop() -> None:
        r = redis.Redis.from_url(url)
        while not stop.is_set():
            r.script_flush()
        r.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def test_clients_inspector_and_door_never_fail_while_scripts_are_flushed(redis_url: str) -> None:
    stop = threading.Event()
    flusher = _flushing(redis_url, stop)
    errors: list[BaseException] = []
    try:
        with Client(redis_url) as c:
            for i in range(300):
                try:
                    c.enqueue(Task("storm", str(i).encode()), queue="storm")
                except Exception as exc:
                    errors.append(exc)
            results = c.enqueue_many([Task("storm", b"m%d" % i) for i in range(300)], queue="storm")
            errors += [x for x in results if isinstance(x, Exception)]

        async def produce() -> None:
            ac = AsyncClient(redis_url)
            out = await asyncio.gather(*(ac.enqueue(Task("storm", b"a%d" % i), queue="storm") for i in range(300)),
                                       return_exceptions=True)
            errors.extend(x for x in out if isinstance(x, BaseException))
            await ac.redis.aclose()

        asyncio.run(produce())
        insp = Inspector(redis_url)
        door = SyncDoor.of(insp.redis)
        for _ in range(100):
            try:
                insp.queue_info("storm", memory=False)
                door.run_many([broker.forward("storm", now=0.0)])
            except Exception as exc:
                errors.append(exc)
        insp.close()
    finally:
        stop.set()
        flusher.join()
    assert not errors, errors[:3]
    assert Inspector(redis_url).queue_info("storm", memory=False).pending == 900
