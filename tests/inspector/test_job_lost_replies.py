"""A background job's counts stay exact when a reply is lost after its script ran (Redis stopped while the
reply was due, the client timing out): the chunk is sent again with its sequence number and answered from its
receipt, and a count sent again counts once (inspector.jobstep). Where a chunk may have run uncounted, the job
says its counts are lower bounds."""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.connection import connect
from asynqpy.embedded import EmbeddedServer
from asynqpy.rdb import keys
from inspector import Inspector, views
from inspector.progress import run_with_progress
from tests.redisfaults import ReplyLost, fault_redis, fault_server, fault_url

__all__ = ["fault_redis", "fault_server", "fault_url"]  # fixtures

TIMEOUT = 0.3  # the client's socket timeout: how long a reply is waited for (ReplyLost thaws after 1 s)


def _pending(url: str, n: int) -> None:
    with Client(url) as c:
        for k in range(n):
            c.enqueue(Task("email" if k % 2 else "sms", b"{}"), queue="mail", task_id=f"t{k:02d}")


def _inspector(url: str, clock: ReplyLost) -> Inspector:
    return Inspector(url, connection=connect(url, socket_timeout=TIMEOUT), clock=clock)


def _archived(n: int) -> Callable[[redis.Redis], bool]:
    return lambda admin: bool(admin.zcard(keys.archived("mail")) >= n)


def test_a_chunk_whose_reply_was_lost_is_counted_once(fault_server: EmbeddedServer, fault_url: str) -> None:
    _pending(fault_url, 40)
    # chunks of 10 (rate 100: ten a second); the second chunk runs, and its reply is lost
    with ReplyLost(fault_server, at="step", n=2, ran=_archived(20)) as lost, _inspector(fault_url, lost) as insp:
        final = insp.run_job(insp.start_job("archive", "mail", "pending", rate=100).id)
        assert lost.settled() == 1
        assert (final.status, final.done, final.changed) == ("done", 40, 40)
        assert insp.queue_info("mail", memory=False).archived == 40 and not final.uncounted


def test_a_count_whose_reply_was_lost_is_counted_once(fault_server: EmbeddedServer, fault_url: str) -> None:
    _pending(fault_url, 40)
    # _progress takes the time for a heartbeat, then for the chunk's count: the 4th is the second chunk's count
    with ReplyLost(fault_server, at="_progress", n=4, ran=_counted(20)) as lost, \
            _inspector(fault_url, lost) as insp:
        final = insp.run_job(insp.start_job("delete", "mail", "pending", rate=100).id)
        assert lost.settled() == 1
        assert (final.status, final.done, final.changed) == ("done", 40, 40)
        assert insp.queue_info("mail", memory=False).pending == 0 and final.seq == 4


def _counted(n: int) -> Callable[[redis.Redis], bool]:
    def done(admin: redis.Redis) -> bool:  # the runner may have gone on since: at least n
        (job_id,) = admin.zrange(keys.JOBS, 0, -1)
        return int(admin.hget(keys.job(job_id.decode()), "done") or 0) >= n
    return done


def test_a_find_step_whose_reply_was_lost_is_counted_once(fault_server: EmbeddedServer, fault_url: str) -> None:
    _pending(fault_url, 40)
    # steps of 5 matches (rate 50); the second step's action runs, and its reply is lost
    with ReplyLost(fault_server, at="_act", n=2, ran=_archived(10)) as lost, _inspector(fault_url, lost) as insp:
        final = insp.run_job(insp.start_find_job("archive", "mail", "state:pending type:email", rate=50).id)
        assert lost.settled() == 1
        assert (final.status, final.changed) == ("done", 20)
        assert insp.count_matches("mail", "state:pending type:email").matched == 0
        assert insp.queue_info("mail", memory=False).archived == 20 and not final.uncounted


@pytest.mark.cluster_too
@pytest.mark.parametrize("action", ["archive", "delete"])
def test_numbered_chunks_on_a_cluster_too(redis_url: str, action: str) -> None:
    _pending(redis_url, 30)
    with Inspector(redis_url, chunk=7) as insp:
        final = insp.run_job(insp.start_job(action, "mail", "pending").id)
        assert (final.status, final.done, final.changed, final.seq) == ("done", 30, 30, 5)
        again = insp.run_job(insp.start_job("run", "mail", "archived", rate=1000).id) if action == "archive" else None
        assert again is None or (again.status, again.changed) == ("done", 30)
        found = insp.run_job(insp.start_find_job("delete", "mail", "type:email").id)
        assert found.changed == (15 if action == "archive" else 0)


class StopsAt:
    """A clock that raises `error` the n-th time the function named `at` takes the time: the runner stops right
    there, in the middle of a chunk (no fault of Redis)."""

    def __init__(self, at: str, n: int, error: BaseException) -> None:
        self.at, self.left, self.error = at, n, error

    def __call__(self) -> float:
        if self.left > 0 and sys._getframe(2).f_code.co_name == self.at:  # 1: Ctx.now, 2: its caller
            self.left -= 1
            if self.left == 0:
                raise self.error
        return time.time()


def test_ctrl_c_between_a_chunk_and_its_count_then_cancel_counts_it(redis_url: str) -> None:
    _pending(redis_url, 40)
    # the 4th time _progress takes the time is the second chunk's count: Ctrl-C there (the chunk has run)
    with Inspector(redis_url, clock=StopsAt("_progress", 4, KeyboardInterrupt())) as insp:
        final = run_with_progress(insp, "archive", "mail", "pending", rate=100, out=io.StringIO())
    assert (final.status, final.changed, final.uncounted) == ("canceled", 20, False)  # the CLI cancels, runs again
    with Inspector(redis_url) as insp:
        assert insp.queue_info("mail", memory=False).archived == 20


def test_a_job_failing_with_a_chunk_uncounted_says_at_least(redis_url: str) -> None:
    _pending(redis_url, 40)
    args = argparse.Namespace(queue="mail", task_ids=[], state="pending", group=None, rate=100, yes=True)
    # an error other than Redis being unreachable between the second chunk and its count: the job fails
    with Inspector(redis_url, clock=StopsAt("_progress", 4, RuntimeError("the count could not be sent"))) as insp:
        out = views._on_all(insp, args, "archive")
    assert not out.ok and out.text.startswith("at least 10 pending tasks archived") and "failed" in out.text
    with Inspector(redis_url) as insp:
        (job,) = insp.jobs()
        assert (job.status, job.changed, job.uncounted) == ("failed", 10, True)
        assert job.error == "the count could not be sent"
        assert insp.queue_info("mail", memory=False).archived == 20  # two chunks ran: 10 is a lower bound
