"""20 queues spread over the three primaries of a real cluster, drained by two worker processes
(`asynqpy worker --processes 2 --cluster`), every task exactly once; the Inspector sees both servers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from asynqpy import Client, Task
from asynqpy.connection import connect
from asynqpy.rdb import keys
from inspector import Inspector
from tests.core.apps import SEEN
from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
QUEUES = [f"q{i:02d}" for i in range(20)]
PER_QUEUE = 100


def test_twenty_queues_over_three_primaries_two_processes_exactly_once(cluster_url: str) -> None:
    r = connect(cluster_url)
    nodes = {r.get_node_from_key(keys.pending(q)).name for q in QUEUES}  # type: ignore[attr-defined]
    assert len(nodes) == 3, "the queues' slots must cover every primary"
    c = Client(cluster_url)
    ids: set[str] = set()
    for q in QUEUES:
        ids |= {o.id for o in c.enqueue_many([Task("count", b"") for _ in range(PER_QUEUE)], queue=q)}  # type: ignore[union-attr]
    seed = "redis://" + cluster_url.split("://", 1)[1].split(",", 1)[0]  # one node is enough with --cluster
    cmd = [sys.executable, "-m", "asynqpy.cli", "worker", "tests.core.apps:counting", "--cluster", "--redis-url", seed,
           "--processes", "2", "--concurrency", "8", "--queues", ",".join(QUEUES)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "TEST_REDIS_URL": cluster_url})
    try:
        with Inspector(cluster_url) as insp:
            servers = wait_for(lambda: len(insp.servers()) == 2 and insp.servers(), timeout=30, what="two servers")
            assert {s.pid for s in servers} != {proc.pid} and all(set(s.queues) == set(QUEUES) for s in servers)
            wait_for(lambda: r.hlen(SEEN) >= len(ids), timeout=120, interval=0.2, what="every task handled")
            infos = wait_for(lambda: (lambda xs: all(x.processed == PER_QUEUE and x.size == 0 for x in xs) and xs)(
                insp.queue_infos()), timeout=30, what="all acknowledged")
            assert sorted(i.queue for i in infos) == QUEUES
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    seen = {k.decode(): int(v) for k, v in r.hgetall(SEEN).items()}
    assert set(seen) == ids and set(seen.values()) == {1}  # each exactly once
    for q in QUEUES:
        assert r.get(keys.processed_total(q)) == str(PER_QUEUE).encode()
        assert r.llen(keys.pending(q)) == 0 and r.llen(keys.active(q)) == 0 and r.zcard(keys.lease(q)) == 0
    assert proc.returncode == 0
