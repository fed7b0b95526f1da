"""asynqpy's Server processes tasks the real Go Client enqueued; Go's Inspector reads the state it leaves."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from asynqpy import Client, RevokeTask, ServeMux, Server, SkipRetry, Task

from .goasynq import GoPeer, b64, go_time, unb64, wait_until

BINARY = b"\x00\xff\xfe go bytes \x80\xc3("  # not UTF-8
DEADLINE = datetime(2100, 1, 1, tzinfo=UTC)


class Recorder:
    """What the Python handlers saw, call by call (handlers run in threads and in the event loop)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, task: Any) -> None:
        with self._lock:
            self.calls.append({"id": task.id, "type": task.type, "payload": task.payload,
                               "headers": dict(task.headers), "queue": task.queue,
                               "retry_count": task.retry_count, "max_retry": task.max_retry,
                               "deadline": task.deadline})

    def ids(self) -> list[str]:
        with self._lock:
            return [c["id"] for c in self.calls]

    def wait(self, n: int, what: str = "handler calls") -> list[dict[str, Any]]:
        wait_until(lambda: len(self.ids()) >= n, f"{n} {what}")
        with self._lock:
            return list(self.calls)


@contextmanager
def running_server(redis_url: str, mux: ServeMux, **settings: Any) -> Iterator[Server]:
    """A started asynqpy Server with test-friendly intervals; always shut down on exit."""
    defaults: dict[str, Any] = {"concurrency": 4, "shutdown_timeout": 3, "heartbeat_interval": 0.5}
    srv = Server(redis_url, **{**defaults, **settings})
    srv.start(mux)
    try:
        yield srv
    finally:
        srv.shutdown()


def go_state(go_peer: GoPeer, queue: str, task_id: str) -> Callable[[], str | None]:
    """A probe for wait_until: the task's state as Go's GetTaskInfo reports it ("gone" once deleted)."""
    def probe() -> str:
        (info,) = go_peer.inspect((queue, task_id))["tasks"]
        if info.get("error") == "asynq: task not found":
            return "gone"
        return info.get("state", info.get("error"))
    return probe


def wait_state(go_peer: GoPeer, queue: str, task_id: str, state: str) -> None:
    probe = go_state(go_peer, queue, task_id)
    wait_until(lambda: probe() == state, f"task {task_id} to be {state} (Go sees {probe()!r})")


def test_python_handler_sees_go_payload_headers_and_options(go_peer: GoPeer, redis_url: str) -> None:
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("py:")
    def handle(task: Any) -> None:
        rec.record(task)
        task.write_result(b"res:\xff:" + task.payload)

    go = go_peer.enqueue([
        {"type": "py:ok", "payload_b64": b64(BINARY), "queue": "pq", "max_retry": 5, "timeout_s": 40,
         "retention_s": 600, "headers": {"trace": "t-1", "ünï": "cødé"}, "task_id": "go-ok"},
        {"type": "py:in", "payload_b64": b64(b"later"), "queue": "pq", "process_in_s": 1},
        {"type": "py:uniq", "payload_b64": b64(b"u"), "queue": "pq", "unique_s": 600},
        {"type": "py:deadline", "queue": "pq", "deadline_unix": DEADLINE.timestamp(), "timeout_s": 20},
    ])
    assert [g["event"] for g in go] == ["enqueued"] * 4
    started = time.time()
    with running_server(redis_url, mux, queues={"pq": 1}):
        calls = {c["id"]: c for c in rec.wait(4)}
        assert set(calls) == {g["id"] for g in go}
        ok = calls["go-ok"]
        assert (ok["type"], ok["payload"], ok["queue"]) == ("py:ok", BINARY, "pq")
        assert ok["headers"] == {"trace": "t-1", "ünï": "cødé"}
        assert (ok["retry_count"], ok["max_retry"]) == (0, 5)
        # The handler deadline comes from Go's Timeout (40 s), or the earlier of Timeout and Deadline.
        assert started + 39 <= ok["deadline"].timestamp() <= time.time() + 41
        dl = calls[go[3]["id"]]
        assert dl["payload"] == b"" and dl["headers"] == {}
        assert started + 19 <= dl["deadline"].timestamp() <= time.time() + 21

        wait_state(go_peer, "pq", "go-ok", "completed")
        wait_state(go_peer, "pq", go[2]["id"], "gone")
    done = go_peer.task_info("pq", "go-ok")
    assert unb64(done["result_b64"]) == b"res:\xff:" + BINARY
    assert done["headers"] == {"trace": "t-1", "ünï": "cødé"}
    assert (done["retention_s"], done["max_retry"], done["timeout_s"]) == (600, 5, 40)
    assert go_time(done["completed_at"]) is not None
    # Python's Done released the unique lock Go took, so Go can enqueue the same task again.
    (again,) = go_peer.enqueue([{"type": "py:uniq", "payload_b64": b64(b"u"), "queue": "pq",
                                 "unique_s": 600}])
    assert again["event"] == "enqueued"


def test_python_failures_are_what_go_reads(go_peer: GoPeer, redis_url: str) -> None:
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("py:fail")
    def fail(task: Any) -> None:
        rec.record(task)
        raise ValueError("boom")

    @mux.handler("py:later")
    async def fail_later(task: Any) -> None:
        rec.record(task)
        raise RuntimeError(f"later {task.id}")

    @mux.handler("py:skip")
    def skip(task: Any) -> None:
        rec.record(task)
        raise SkipRetry("nope")

    @mux.handler("py:revoke")
    def revoke(task: Any) -> None:
        rec.record(task)
        raise RevokeTask("drop it")

    go = {g["type"]: g for g in go_peer.enqueue([
        {"type": "py:fail", "payload_b64": b64(BINARY), "queue": "eq", "max_retry": 1, "headers": {"h": "v"}},
        {"type": "py:later", "queue": "eq", "max_retry": 3},
        {"type": "py:skip", "queue": "eq", "max_retry": 9},
        {"type": "py:revoke", "queue": "eq", "unique_s": 300, "payload_b64": b64(b"r")},
    ])}

    def retry_delay(n: int, exc: BaseException, task: Any) -> float:
        return 0 if task.type == "py:fail" else 3600

    with running_server(redis_url, mux, queues={"eq": 1}, retry_delay=retry_delay):
        calls = rec.wait(5)
        wait_state(go_peer, "eq", go["py:fail"]["id"], "archived")
        wait_state(go_peer, "eq", go["py:later"]["id"], "retry")
        wait_state(go_peer, "eq", go["py:skip"]["id"], "archived")
        wait_state(go_peer, "eq", go["py:revoke"]["id"], "gone")
    fail_calls = [(c["retry_count"], c["max_retry"]) for c in calls if c["type"] == "py:fail"]
    assert fail_calls == [(0, 1), (1, 1)]

    eq = go_peer.inspect()["per_queue"]["eq"]
    archived = {t["type"]: t for t in eq["archived"]}
    assert (archived["py:fail"]["retried"], archived["py:fail"]["last_err"]) == (1, "ValueError: boom")
    assert archived["py:fail"]["headers"] == {"h": "v"}
    assert unb64(archived["py:fail"]["payload_b64"]) == BINARY
    assert go_time(archived["py:fail"]["last_failed_at"]) is not None
    assert (archived["py:skip"]["retried"], archived["py:skip"]["last_err"]) == (0, "SkipRetry: nope")
    (later,) = eq["retry"]
    assert (later["retried"], later["last_err"]) == (1, f"RuntimeError: later {later['id']}")
    next_at = go_time(later["next_process_at"])
    assert next_at is not None and next_at.timestamp() > time.time() + 3000
    info = eq["info"]
    # fail: retry + archive; later: retry; skip: archive (each counts processed and failed); revoke: done.
    assert {k: info[k] for k in ("processed", "failed", "processed_total", "failed_total", "archived",
                                 "retry", "pending", "active", "completed", "size")} == {
        "processed": 5, "failed": 4, "processed_total": 5, "failed_total": 4, "archived": 2, "retry": 1,
        "pending": 0, "active": 0, "completed": 0, "size": 3}
    assert eq["today"]["processed"] == 5 and eq["today"]["failed"] == 4
    # RevokeTask went through Done, which released the unique lock Go took.
    (again,) = go_peer.enqueue([{"type": "py:revoke", "queue": "eq", "unique_s": 300,
                                 "payload_b64": b64(b"r")}])
    assert again["event"] == "enqueued"


def test_go_inspector_lists_a_running_python_server(go_peer: GoPeer, redis_url: str) -> None:
    release = threading.Event()
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("py:block")
    def block(task: Any) -> None:
        rec.record(task)
        release.wait(30)

    (go,) = go_peer.enqueue([{"type": "py:block", "payload_b64": b64(b"held"), "queue": "sv",
                              "timeout_s": 120}])
    try:
        with running_server(redis_url, mux, concurrency=3, queues={"sv": 2, "idle": 1}):
            rec.wait(1)

            def our_server_with_worker() -> dict[str, Any] | None:
                servers = go_peer.inspect()["servers"]
                return next((s for s in servers if s["active_workers"]), None)

            srv = wait_until(our_server_with_worker, "Go's Inspector to list the Python server's worker")
            assert (srv["host"], srv["pid"]) == (socket.gethostname(), os.getpid())
            assert (srv["concurrency"], srv["strict_priority"]) == (3, False)
            assert srv["queues"] == {"sv": 2, "idle": 1}
            assert srv["status"] == "active"
            started = go_time(srv["started"])
            assert started is not None and started.timestamp() <= time.time()
            (w,) = srv["active_workers"]
            assert (w["task_id"], w["task_type"], w["queue"]) == (go["id"], "py:block", "sv")
            assert unb64(w["task_payload_b64"]) == b"held"
            w_started, w_deadline = go_time(w["started"]), go_time(w["deadline"])
            assert w_started is not None and w_deadline is not None
            assert abs((w_deadline - w_started).total_seconds() - 120) < 2

            sv = go_peer.inspect()["per_queue"]["sv"]
            (active,) = sv["active"]
            assert (active["id"], active["state"], active["is_orphaned"]) == (go["id"], "active", False)
            assert sv["info"]["active"] == 1
            release.set()
            wait_state(go_peer, "sv", go["id"], "gone")
    finally:
        release.set()
    # A clean shutdown removes the server from what Go lists.
    assert go_peer.inspect()["servers"] == []


def test_go_and_python_workers_share_one_queue(go_peer: GoPeer, redis_url: str) -> None:
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("sleep:")
    def nap(task: Any) -> None:
        rec.record(task)
        time.sleep(int(task.payload) / 1000)

    spec = {"type": "sleep:go", "payload_b64": b64(b"20"), "queue": "mq"}
    go_ids = [g["id"] for g in go_peer.enqueue([spec] * 15)]
    with Client(redis_url) as c:
        py_ids = [c.enqueue(Task("sleep:py", b"20"), queue="mq").id for _ in range(15)]
    with running_server(redis_url, mux, concurrency=2, queues={"mq": 1}):
        go_calls = go_peer.work({"mq": 1}, duration=2, concurrency=2)
        wait_until(lambda: len(rec.ids()) + len(go_calls) >= 30, "every task to be processed")
        wait_until(lambda: go_peer.inspect()["per_queue"]["mq"]["info"]["size"] == 0, "the queue to drain")
    handled = rec.ids() + [c["id"] for c in go_calls]
    assert sorted(handled) == sorted(go_ids + py_ids)  # each task exactly once, by one side or the other
    info = go_peer.inspect()["per_queue"]["mq"]["info"]
    assert (info["processed_total"], info["failed_total"]) == (30, 0)


def test_go_reads_the_counts_of_a_worker_of_several_queues(go_peer: GoPeer, redis_url: str) -> None:
    # A worker of several queues acknowledges a batch spanning them in one done_queues call, which builds each
    # queue's keys from its prefix: Go's Inspector must read the same per-queue counts (today's, all time) as a
    # done per queue writes, and the unique lock Go took must be released.
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("py:")
    async def ok(task: Any) -> None:
        rec.record(task)

    queues = {f"mq{i}": 1 for i in range(5)}
    specs = [{"type": "py:n", "queue": q, "payload_b64": b64(f"{q}-{j}".encode())}
             for q in queues for j in range(int(q[2:]) + 1)]  # mq0 gets 1 task ... mq4 gets 5
    specs.append({"type": "py:u", "queue": "mq4", "unique_s": 300, "payload_b64": b64(b"u")})
    go_peer.enqueue(specs)
    with running_server(redis_url, mux, concurrency=8, queues=queues):
        rec.wait(len(specs))
        wait_until(lambda: all(go_peer.inspect()["per_queue"][q]["info"]["size"] == 0 for q in queues),
                   "the queues to drain")
    per_queue = go_peer.inspect()["per_queue"]
    for i, q in enumerate(queues):
        n = i + 1 + (q == "mq4")
        info = per_queue[q]["info"]
        assert (info["processed"], info["processed_total"], info["failed"], info["failed_total"]) == (n, n, 0, 0)
        assert per_queue[q]["today"]["processed"] == n
    (again,) = go_peer.enqueue([{"type": "py:u", "queue": "mq4", "unique_s": 300, "payload_b64": b64(b"u")}])
    assert again["event"] == "enqueued"
