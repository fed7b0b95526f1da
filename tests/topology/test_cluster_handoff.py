"""The hand-off on a cluster: one BLPOP lane per slot, and an idle worker still gets each task from the
enqueue script itself (one hop) on every primary."""

from __future__ import annotations

import asyncio
import threading
import time

from asynqpy import Client, ServeMux, Task
from asynqpy.config import ServerConfig
from asynqpy.connection import connect
from asynqpy.handoff import HandoffListener
from asynqpy.rdb import keys
from asynqpy.runtime import Runtime
from tests.helpers import running, wait_for


def test_idle_worker_gets_tasks_handed_over_on_every_primary(cluster_url: str) -> None:
    rc = connect(cluster_url)
    queues = [f"h{i}" for i in range(12)]
    assert len({rc.get_node_from_key(keys.pending(q)).name for q in queues}) == 3  # type: ignore[attr-defined]
    got: list[str] = []
    done = threading.Event()
    mux = ServeMux()

    @mux.handler("t")
    async def handle(t: Task) -> None:
        got.append(t.id)  # type: ignore[attr-defined]
        if len(got) == len(queues):
            done.set()

    with running(cluster_url, mux, queues=dict.fromkeys(queues, 1), idle_poll_interval=5.0) as srv:
        sid = srv.runtime.server_id  # type: ignore[union-attr]
        wait_for(lambda: all(rc.zscore(keys.waiters(q), sid) for q in queues), what="registration on every queue")
        with Client(cluster_url) as c:
            for q in queues:
                wait_for(lambda q=q: rc.zscore(keys.waiters(q), sid), what=f"registered on {q}")
                tid = c.enqueue(Task("t", q.encode()), queue=q).id
                # Handed over by the enqueue script: never pending, even with the idle poll 5 s away.
                assert rc.hget(keys.task(q, tid), "state") in (b"active", None)
                time.sleep(0.01)
        assert done.wait(5)
    rc.close()


def test_one_lane_per_slot_on_a_cluster_one_lane_on_one_server(cluster_url: str, redis_url: str) -> None:
    queues = [f"h{i}" for i in range(12)]
    for url, expect in ((cluster_url, len(queues)), (redis_url, 1)):
        rt = Runtime(ServerConfig(queues=dict.fromkeys(queues, 1)), url)
        listener = HandoffListener(rt, None)  # type: ignore[arg-type]
        assert len(listener.lanes) == expect  # twelve queues, twelve slots on the cluster
        assert sorted(q for lane in listener.lanes for q in lane.queues) == sorted(queues)

        async def close(listener: HandoffListener = listener, rt: Runtime = rt) -> None:
            await listener.conn.aclose()
            await rt.close()

        asyncio.run(close())
