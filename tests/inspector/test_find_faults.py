"""find and find jobs under real Redis faults: a find during BUSY is RedisBusyError (asynqpy's, never redis-py's),
a find job waits out BUSY and finishes; the CLI's find says one line and exits 1."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from asynqpy import Client, Task
from asynqpy.cli import main
from asynqpy.errors import RedisBusyError
from inspector import Inspector
from tests.redisfaults import busy, fault_redis, fault_server, fault_url

__all__ = ["fault_redis", "fault_server", "fault_url"]  # fixtures


def _mail(url: str, n: int) -> None:
    with Client(url) as c:
        for k in range(n):
            c.enqueue(Task("email" if k % 2 else "sms", b"{}"), queue="mail", task_id=f"t{k:02d}", process_in=60)


def test_a_find_under_busy_is_ours_and_the_cli_says_one_line(fault_url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _mail(fault_url, 4)
    with Inspector(fault_url) as insp, busy(fault_url):
        with pytest.raises(RedisBusyError):
            insp.find("mail", "type:email")
        code = main(["task", "find", "mail", "type:email", "--redis-url", fault_url])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "BUSY" in err


def test_a_find_job_waits_out_busy_and_finishes(fault_url: str) -> None:
    _mail(fault_url, 20)
    with Inspector(fault_url) as insp:
        job = insp.start_find_job("delete", "mail", "type:email")
        done: list[Any] = []
        with busy(fault_url):
            t = threading.Thread(target=lambda: done.append(insp.run_job(job.id)), daemon=True)
            t.start()
            time.sleep(0.5)  # it meets BUSY and backs off, not failing
            assert not done
        t.join(15)
        assert done and (done[0].status, done[0].changed, done[0].error) == ("done", 10, "")
        assert [t.id for t in insp.find("mail", "").tasks] == [f"t{k:02d}" for k in range(0, 20, 2)]
