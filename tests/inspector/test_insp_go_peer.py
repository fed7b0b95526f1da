"""The Go Inspector and ours report the same numbers for the same Redis, written by the Go client and worker,
by our client and worker, and by a running asynqpy Server. Needs Go (the peer in tests/interop/goapp)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from asynqpy import Client, ServeMux, Task
from inspector import Inspector
from tests.helpers import running, wait_for
from tests.inspector.gocompare import compare_queue, compare_servers, first_time
from tests.inspector.worker import Clock
from tests.interop.goasynq import GoPeer, b64, build, built_or_skip

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def go_binary() -> Path:
    return built_or_skip(build, "Go interop peer")


@pytest.fixture
def go_peer(go_binary: Path, redis_url: str) -> GoPeer:
    return GoPeer(go_binary, redis_url)


def test_same_numbers_as_the_go_inspector(go_peer: GoPeer, redis_url: str, clock: Clock,
                                          one_of_each: dict[str, str]) -> None:
    go_peer.enqueue([
        {"type": "g:plain", "payload_b64": b64(b"hello"), "queue": "gq", "task_id": "g-plain"},
        {"type": "g:opts", "payload_b64": b64(b'{"a":1}'), "queue": "gq", "task_id": "g-opts", "max_retry": 3,
         "timeout_s": 45, "retention_s": 600, "headers": {"k": "v"}},
        {"type": "g:sched", "payload_b64": b64(b"later"), "queue": "gq", "task_id": "g-sched",
         "process_in_s": 3600},
        {"type": "g:grp", "payload_b64": b64(b"g"), "queue": "gq", "task_id": "g-grp", "group": "G"},
        {"type": "g:uniq", "payload_b64": b64(b"u"), "queue": "gq", "task_id": "g-uniq", "unique_s": 300},
    ])
    go_peer.enqueue([
        {"type": "fail:a", "queue": "gw", "task_id": "w-retry", "max_retry": 2},
        {"type": "fail:b", "queue": "gw", "task_id": "w-arch", "max_retry": 0},
        {"type": "ok:c", "queue": "gw", "task_id": "w-keep", "retention_s": 600},
        {"type": "skip:d", "queue": "gw", "task_id": "w-skip"},
        {"type": "ok:e", "queue": "gw", "task_id": "w-done"},
    ])
    assert len(go_peer.work({"gw": 1}, expect=5, duration=20)) == 5
    report = go_peer.inspect()
    assert sorted(report["queues"]) == ["gq", "gw", "q"]
    clock.t = first_time(report)
    with Inspector(redis_url, clock=clock) as insp:
        assert insp.queues() == sorted(report["queues"])
        for q in report["per_queue"]:
            compare_queue(insp, clock, report, q, latency_tol=0.05)
        compare_servers(insp, report)


def test_go_and_we_see_our_server_alike(go_peer: GoPeer, redis_url: str, client: Client) -> None:
    release = threading.Event()
    mux = ServeMux()

    @mux.handler("slow")
    def slow(task: object) -> None:
        release.wait(20)

    client.enqueue(Task("slow", b"zzz"), queue="pw", task_id="p-active")
    client.enqueue(Task("later", b"x"), queue="pw", task_id="p-sched", process_in=600)
    try:
        with Inspector(redis_url) as insp, running(redis_url, mux, queues={"pw": 2, "other": 1}, concurrency=1):
            wait_for(lambda: any(s.active_workers for s in insp.servers()), what="an active worker")
            report = go_peer.inspect()
            compare_servers(insp, report)
            clock = Clock(first_time(report))
            compare_queue(Inspector(connection=insp.redis, clock=clock), clock, report, "pw")
    finally:
        release.set()
