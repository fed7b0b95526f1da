"""The Inspector, its jobs and the dashboard's session store under real Redis faults: every error is asynqpy's
(a real OOM is RedisOutOfMemoryError, BUSY RedisBusyError, READONLY RedisReadOnlyError), reads go on while Redis
refuses writes, a background job waits out BUSY and finishes; a bulk job's cancel never leaves a finished job
"canceling"; the CLI says one line and exits 1."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.cli import main
from asynqpy.errors import RedisBusyError, RedisOutOfMemoryError, RedisReadOnlyError, RedisUnavailableError
from inspector import Inspector
from inspector.throttle import LoginThrottle
from inspector.webstate import SessionStore
from tests.redisfaults import busy, fault_redis, fault_server, fault_url, out_of_memory, read_only_keeping_data

__all__ = ["fault_redis", "fault_server", "fault_url"]  # fixtures

# Writes that add data: refused under OOM and READONLY.
WRITES: dict[str, Callable[[Inspector], Any]] = {
    "pause": lambda i: i.pause("mail"),
    "start_job": lambda i: i.start_job("run", "mail", "archived"),
    "claim_size_sample": lambda i: i.claim_size_sample(1),
    "record_size_sample": lambda i: i.record_size_sample([]),
}
# Moves that remove before they add: a replica refuses them; under OOM Redis lets a script whose first write
# frees memory go on, so they may succeed there.
MOVES: dict[str, Callable[[Inspector], Any]] = {
    "archive_task": lambda i: i.archive_task("mail", "one"),
    "run_all": lambda i: i.run_all("mail", "archived"),
}
READS: dict[str, Callable[[Inspector], Any]] = {
    "queues": lambda i: i.queues(),
    "queue_infos": lambda i: i.queue_infos(),
    "list_tasks": lambda i: i.list_tasks("mail", "pending"),
    "get_task": lambda i: i.get_task("mail", "one"),
    "search": lambda i: i.search("mail", "pending", type="email"),
    "servers": lambda i: i.servers(),
    "redis_info": lambda i: i.redis_info(),
    "recent_failures": lambda i: i.recent_failures(),
    "explain": lambda i: i.explain("mail", "one"),
    "queue_snapshot": lambda i: i.queue_snapshot(0),
    "jobs": lambda i: i.jobs(),
    "size_samples": lambda i: i.size_samples(),
}


def _mail(url: str, n: int = 1) -> None:
    with Client(url) as c:
        for k in range(n):
            c.enqueue(Task("email", b"{}"), queue="mail", task_id="one" if k == 0 else f"t{k}")


def _archived(url: str, n: int) -> None:
    _mail(url, n)
    with Inspector(url) as i:
        i.archive_all("mail", "pending")


@pytest.mark.parametrize("fault", ["OOM", "READONLY"])
def test_writes_refused_reads_go_on_and_writes_raise_ours(fault_url: str, fault: str) -> None:
    _mail(fault_url, 2)
    with Inspector(fault_url) as i:
        i.archive_task("mail", "t1")
    expected = RedisOutOfMemoryError if fault == "OOM" else RedisReadOnlyError
    with Inspector(fault_url) as insp, (out_of_memory if fault == "OOM" else read_only_keeping_data)(fault_url):
        for read in READS.values():
            read(insp)  # no error
        assert insp.queue_snapshot(0).unshared == fault and insp.queue_info("mail").pending == 1
        for name, write in WRITES.items():
            with pytest.raises(expected) as err:
                write(insp)
            assert err.value.kind == fault, name
        for move in MOVES.values():
            if fault == "READONLY":
                with pytest.raises(expected):
                    move(insp)
            else:
                try:
                    move(insp)
                except expected:
                    pass
        store = SessionStore(insp.redis)
        with pytest.raises(expected):
            store.create("ada")
        with pytest.raises(expected):
            LoginThrottle(insp.redis).attempt("ada", "127.0.0.1")


def test_busy_every_call_raises_ours(fault_url: str) -> None:
    _mail(fault_url)
    with Inspector(fault_url) as insp, busy(fault_url):
        for name, call in {**READS, **WRITES, **MOVES}.items():
            with pytest.raises(RedisBusyError) as err:
                call(insp)
            assert err.value.kind == "BUSY", name
        with pytest.raises(RedisBusyError):
            insp.ping()
        with pytest.raises(RedisBusyError):
            SessionStore(insp.redis).get("some-session-id")
        with pytest.raises(RedisBusyError):
            LoginThrottle(insp.redis).attempt("ada", "127.0.0.1")


def test_a_session_lives_on_while_redis_refuses_writes(fault_url: str) -> None:
    now = [time.time()]
    store = SessionStore(redis.Redis.from_url(fault_url), clock=lambda: now[0])
    s = store.create("ada")
    now[0] += 60  # past the touch interval: get() would extend the session
    with out_of_memory(fault_url):
        got = store.get(s.id)
        assert got is not None and got.user == "ada" and got.seen == s.seen  # read, not extended
    got = store.get(s.id)
    assert got is not None and got.seen == now[0]  # extended again once Redis takes writes


def test_a_job_waits_out_busy_and_finishes(fault_url: str) -> None:
    _archived(fault_url, 20)
    with Inspector(fault_url) as insp:
        job = insp.start_job("run", "mail", "archived")
        done: list[Any] = []
        with busy(fault_url):
            t = threading.Thread(target=lambda: done.append(insp.run_job(job.id)), daemon=True)
            t.start()
            time.sleep(0.5)  # it meets BUSY and backs off, not failing
            assert not done
        t.join(15)
        assert done and (done[0].status, done[0].changed, done[0].error) == ("done", 20, "")
        assert insp.queue_info("mail", memory=False).pending == 20


class FinishingClock:
    """A clock that, once armed, runs another process's job to its end when it is next read: the moment between
    a cancel's read of the job and its write, had the cancel those two steps."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.job_id = ""

    def __call__(self) -> float:
        if self.job_id:
            job_id, self.job_id = self.job_id, ""
            with Inspector(self.url) as other:
                assert other.run_job(job_id).status == "done"
        return time.time()


def test_a_job_finishing_during_a_cancel_stays_finished(fault_url: str) -> None:
    _archived(fault_url, 5)
    clock = FinishingClock(fault_url)
    with Inspector(fault_url, clock=clock) as insp:
        job = insp.start_job("run", "mail", "archived")
        clock.job_id = job.id  # the job ends while the cancel runs
        after = insp.cancel_job(job.id)
        assert after.status == "done" and insp.job(job.id).status == "done"
        assert insp.cancel_job(job.id).status == "done"  # a finished job stays as it is


def test_a_running_job_is_canceling_then_canceled(fault_url: str) -> None:
    _archived(fault_url, 40)
    with Inspector(fault_url) as insp:
        job = insp.start_job("run", "mail", "archived", rate=20)
        states: list[str] = []

        def cancel_once(j: Any) -> None:
            if not states:
                states.append(insp.cancel_job(job.id).status)

        final = insp.run_job(job.id, progress=cancel_once)
        assert states == ["canceling"] and final.status == "canceled" and 0 < final.done < 40


def _cli(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--redis-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_cli_says_one_line_and_exits_1(capsys: pytest.CaptureFixture[str], fault_url: str) -> None:
    _mail(fault_url)
    with busy(fault_url):
        for argv in (("stats",), ("task", "ls", "mail"), ("queue", "pause", "mail"), ("errors",)):
            code, out, err = _cli(capsys, fault_url, *argv)
            assert code == 1 and out == "" and "answers BUSY" in _one_line(err), argv
    with out_of_memory(fault_url):
        assert _cli(capsys, fault_url, "stats")[0] == 0  # reads still answered
        code, _, err = _cli(capsys, fault_url, "queue", "pause", "mail")
        assert code == 1 and "answers OOM" in _one_line(err)
    code, _, err = _cli(capsys, "redis://127.0.0.1:1/0", "queue", "ls")
    assert code == 1 and "cannot reach Redis" in _one_line(err)


def test_no_redis_py_error_leaves_the_inspector_unreachable() -> None:
    with Inspector("redis://:pw@127.0.0.1:1/0") as insp:
        for name, call in {**READS, **WRITES, **MOVES}.items():
            with pytest.raises(RedisUnavailableError) as err:
                call(insp)
            assert err.value.kind == "connection" and "pw" not in str(err.value), name
