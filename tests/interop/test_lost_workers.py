"""A worker dies holding tasks; the other language's recoverer finds them once their lease has lapsed: a killed
Go server's tasks are retried or archived by an asynqpy Server, a killed asynqpy worker's by a Go server, each with
asynq's "task lease expired", and Go's Inspector reads the result. (The leases are moved 31 s into the past
rather than waited out: lease + asynq's 30 s grace would make each test take a minute.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

import redis

from asynqpy import Client, ServeMux, Task
from asynqpy.rdb import keys
from tests.core.procs import ROOT, env

from .goasynq import GoPeer, b64, redis_args, wait_until
from .test_python_works_go_tasks import Recorder, running_server, wait_state

Q = "lost"
ERR_LEASE = "asynq: task lease expired"


def _lapse_leases(r: redis.Redis, *ids: str) -> None:
    """The leases of ids as they are once they lapsed more than asynq's 30 s grace ago."""
    past = int(time.time()) - 31
    assert r.zadd(keys.lease(Q), dict.fromkeys(ids, past), xx=True, ch=True) == len(ids)


def _kill(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_python_recovers_the_tasks_of_a_killed_go_worker(go_peer: GoPeer, redis_url: str,
                                                          r: redis.Redis) -> None:
    go_peer.enqueue([{"type": "sleep:a", "payload_b64": b64(b"60000"), "queue": Q, "task_id": "again",
                      "max_retry": 2},
                     {"type": "sleep:b", "payload_b64": b64(b"60000"), "queue": Q, "task_id": "last",
                      "max_retry": 0}])
    worker = subprocess.Popen([str(go_peer.binary), "work", *redis_args(redis_url), "--queues", f"{Q}=1",
                               "--duration", "60s"], stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: r.zcard(keys.lease(Q)) == 2, "the Go worker to hold both tasks")
    finally:
        _kill(worker)
    _lapse_leases(r, "again", "last")
    rec = Recorder()
    mux = ServeMux()

    @mux.handler("sleep:")
    def nap(task: Any) -> None:
        rec.record(task)

    with running_server(redis_url, mux, queues={Q: 1}, recover_interval=0.2, retry_delay=lambda n, e, t: 0):
        (call,) = rec.wait(1, "the retried task")
        wait_state(go_peer, Q, "last", "archived")
    assert (call["id"], call["retry_count"]) == ("again", 1)
    last = go_peer.task_info(Q, "last")
    assert (last["retried"], last["last_err"]) == (0, ERR_LEASE)
    info = go_peer.inspect()["per_queue"][Q]["info"]
    assert (info["processed"], info["failed"], info["active"], info["archived"]) == (3, 2, 0, 1)


def test_go_recovers_the_tasks_of_a_killed_python_worker(go_peer: GoPeer, redis_url: str,
                                                          r: redis.Redis) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("slow", b"a"), queue=Q, task_id="again", max_retry=2)
        c.enqueue(Task("slow", b"b"), queue=Q, task_id="last", max_retry=0)
    worker = subprocess.Popen([sys.executable, "-m", "tests.core.apps", redis_url, "slow",
                               f'{{"queues": {{"{Q}": 1}}, "concurrency": 2, "heartbeat_interval": 0.5}}'],
                              cwd=ROOT, env=env(HANG="1"), stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: r.zcard(keys.lease(Q)) == 2, "the Python worker to hold both tasks", timeout=30)
        # Go's Inspector lists the Python server with both tasks while it lives
        wait_until(lambda: [len(s["active_workers"]) for s in go_peer.inspect()["servers"]] == [2],
                   "Go's Inspector to list the two active workers")
    finally:
        _kill(worker)
    _lapse_leases(r, "again", "last")
    assert all(t["is_orphaned"] for t in go_peer.inspect()["per_queue"][Q]["active"])
    go_peer.work({Q: 1}, duration=2)  # Go's recoverer runs at start; its retry delay is an hour
    again, last = go_peer.task_info(Q, "again"), go_peer.task_info(Q, "last")
    assert (again["state"], again["retried"], again["last_err"]) == ("retry", 1, ERR_LEASE)
    assert (last["state"], last["retried"], last["last_err"]) == ("archived", 0, ERR_LEASE)
