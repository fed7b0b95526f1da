"""SIGTSTP (Processor.pause_fetching) while a dequeue is on its way: the tasks it takes are given back to the front
of their queue, not started. The dequeue is held back for real: CLIENT PAUSE makes Redis answer nobody for a
moment, right after the queue was resumed, while the worker's next poll is on its way."""

from __future__ import annotations

import threading
import time

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from inspector import Inspector
from tests.helpers import running, wait_for


def test_tasks_a_dequeue_in_flight_takes_after_the_pause_go_back_to_their_queue(redis_url: str,
                                                                                r: redis.Redis) -> None:
    mux = ServeMux()
    ran = threading.Event()
    mux.handle("t", lambda t: ran.set())
    with Inspector(redis_url) as insp, Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="tstp")  # registers the queue
        insp.pause("tstp")
        ids = [c.enqueue(Task("t", str(i).encode()), queue="tstp").id for i in range(3)]
        with running(redis_url, mux, queues={"tstp": 1}, idle_poll_interval=0.05) as srv:
            wait_for(lambda: srv.health()[1], what="ready")
            time.sleep(0.2)  # polling the paused queue
            pipe = r.pipeline(transaction=False)
            pipe.delete(keys.paused("tstp"))  # resumed (no wake-up: the poll finds it)...
            pipe.execute_command("CLIENT", "PAUSE", 1000, "ALL")  # ...and nobody is answered for a second
            pipe.execute()
            time.sleep(0.2)  # the worker's next poll is on its way, held by Redis
            assert srv._loop is not None and srv._processor is not None
            srv._loop.call_soon_threadsafe(srv._processor.pause_fetching)  # as SIGTSTP does
            wait_for(lambda: r.llen(keys.pending("tstp")) == 4 and r.llen(keys.active("tstp")) == 0, timeout=10,
                     what="the tasks back in their queue")
            time.sleep(0.3)
            assert not ran.is_set()
            assert r.zcard(keys.lease("tstp")) == 0
            assert set(ids) <= {x.decode() for x in r.lrange(keys.pending("tstp"), 0, -1)}
