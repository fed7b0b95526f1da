"""Interop on a real Redis Cluster: Go asynq v0.26.0 (RedisClusterClientOpt) and asynqpy enqueue for and work
each other's tasks across three primaries, and each one's Inspector reads the other's."""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from asynqpy import Client, ServeMux, Task
from asynqpy.connection import connect, parse
from asynqpy.rdb import keys
from inspector import Inspector
from tests.helpers import running, wait_for

from .goasynq import GoPeer, GoPeerError, b64, unb64


@dataclass(frozen=True)
class ClusterGoPeer(GoPeer):
    """The Go peer's subcommands run as `goapp cluster <cmd> --addrs h1:p1,...` (tests/interop/goapp/cluster.go)."""

    def _run(self, cmd: str, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        addrs = ",".join(f"{h}:{p}" for h, p in parse(self.redis_url).hosts)
        proc = subprocess.run([str(self.binary), "cluster", cmd, "--addrs", addrs, *args],
                              input=None if stdin is None else stdin.encode(), capture_output=True,
                              timeout=timeout, check=False)
        if proc.returncode != 0:
            raise GoPeerError(f"goapp cluster {cmd} exited {proc.returncode}: "
                              f"{proc.stderr.decode(errors='backslashreplace').strip()}")
        return proc.stdout.decode()


@pytest.fixture
def go_cluster(go_binary: Path, cluster_url: str) -> ClusterGoPeer:
    return ClusterGoPeer(go_binary, cluster_url)


@pytest.fixture
def spread_queues(cluster_url: str) -> list[str]:
    """Three queue names whose slots live on the three different primaries."""
    rc = connect(cluster_url)
    by_node: dict[str, str] = {}
    for i in range(100):
        by_node.setdefault(rc.get_node_from_key(keys.pending(f"iq{i}")).name, f"iq{i}")  # type: ignore[attr-defined]
    rc.close()
    assert len(by_node) == 3
    return sorted(by_node.values())


def test_go_works_python_tasks_on_the_cluster(go_cluster: ClusterGoPeer, cluster_url: str,
                                              spread_queues: list[str]) -> None:
    with Client(cluster_url) as c:
        sent = {c.enqueue(Task("ok:py", f"{q}-{i}".encode()), queue=q, retention=600).id: q
                for q in spread_queues for i in range(3)}
        later = c.enqueue(Task("ok:later", b"L"), queue=spread_queues[0], process_in=3600)
    calls = go_cluster.work(dict.fromkeys(spread_queues, 1), expect=len(sent))
    assert {x["id"]: x["queue"] for x in calls} == sent
    assert {x["id"]: unb64(x["payload_b64"]) for x in calls} == {
        tid: f"{q}-{i}".encode() for (tid, q), i in zip(sent.items(), [0, 1, 2] * 3, strict=True)}

    seen = go_cluster.inspect((spread_queues[0], later.id))
    assert seen["tasks"][0]["state"] == "scheduled"  # Go's Inspector reads a Python task on the cluster
    for q in spread_queues:
        done = {t["id"]: t["result"] for t in seen["per_queue"][q]["completed"]}
        assert done == {tid: f"ok:{tid}" for tid, qq in sent.items() if qq == q}
    with Inspector(cluster_url) as insp:  # ours reads what Go wrote, node by node
        infos = {i.queue: i for i in insp.queue_infos()}
        assert {q: (infos[q].processed, infos[q].completed) for q in spread_queues} == dict.fromkeys(
            spread_queues, (3, 3))
        assert insp.get_task(spread_queues[1], next(t for t, q in sent.items() if q == spread_queues[1])).result


def test_python_works_go_tasks_on_the_cluster(go_cluster: ClusterGoPeer, cluster_url: str,
                                              spread_queues: list[str]) -> None:
    specs = [{"type": "go:task", "payload_b64": b64(f"{q}-{i}".encode()), "queue": q, "task_id": f"go-{q}-{i}"}
             for q in spread_queues for i in range(4)]
    specs.append({"type": "go:later", "queue": spread_queues[2], "task_id": "go-later", "process_in_s": 3600})
    out = go_cluster.enqueue(specs)
    assert [o["event"] for o in out] == ["enqueued"] * len(specs)
    with Inspector(cluster_url) as insp:  # ours reads Go's tasks before they run
        assert insp.get_task(spread_queues[2], "go-later").state.value == "scheduled"
        q0 = spread_queues[0]
        assert insp.get_task(q0, f"go-{q0}-0").info.payload == f"{q0}-0".encode()

    runs: dict[str, int] = {}
    lock = threading.Lock()
    mux = ServeMux()

    @mux.handler("go:")
    async def handle(t: Task) -> None:
        with lock:
            runs[t.id] = runs.get(t.id, 0) + 1  # type: ignore[attr-defined]

    with running(cluster_url, mux, queues=dict.fromkeys(spread_queues, 1)):
        wait_for(lambda: len(runs) == 12, what="the Go tasks run by Python")
        rc = connect(cluster_url)
        wait_for(lambda: all(rc.get(keys.processed_total(q)) == b"4" for q in spread_queues), what="acks")
        rc.close()
    assert runs == {s["task_id"]: 1 for s in specs if s["type"] == "go:task"}
    seen = go_cluster.inspect()  # Go's Inspector reads what Python left: counts and our server's traces
    for q in spread_queues:
        assert seen["per_queue"][q]["info"]["processed"] == 4
        assert seen["per_queue"][q]["info"]["pending"] == 0
    assert set(seen["queues"]) >= set(spread_queues)
