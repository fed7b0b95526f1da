"""What the Inspector adds for the dashboard: recent_failures (grouped, bounded), queue-size samples taken once
per interval by many processes, background jobs (rate, progress, cancel), and the CLI's `errors` and
`task run --all --rate`."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.cli import main
from asynqpy.errors import FailedPreconditionError, QueueNotFoundError, RedisUnavailableError
from inspector import Inspector
from inspector.jobs import JobNotFoundError
from tests.inspector.worker import Worker


def _fail_some(r: redis.Redis, redis_url: str, q: str, n: int, error: str, *, kill: bool, typ: str = "t") -> list[str]:
    w = Worker(r, time.time)
    with Client(redis_url) as c:
        ids = [c.enqueue(Task(typ, b"{}"), queue=q).id for _ in range(n)]
    for tid in w.take(q, n):
        (w.kill if kill else w.fail)(q, tid, error)
    return ids


def test_recent_failures_groups_by_queue_type_and_error(redis_url: str, r: redis.Redis) -> None:
    _fail_some(r, redis_url, "a", 3, "boom", kill=True)
    _fail_some(r, redis_url, "a", 2, "boom", kill=False)
    _fail_some(r, redis_url, "a", 1, "other", kill=True, typ="u")
    _fail_some(r, redis_url, "b", 2, "boom", kill=False)
    with Inspector(redis_url) as insp:
        found = insp.recent_failures()
        groups = {(g.queue, g.task_type, g.error): g for g in found.groups}
        assert set(groups) == {("a", "t", "boom"), ("a", "u", "other"), ("b", "t", "boom")}
        g = groups[("a", "t", "boom")]
        assert (g.count, g.retry, g.archived, len(g.task_ids)) == (5, 2, 3, 5)
        assert g.first_seen is not None and g.last_seen is not None and g.first_seen <= g.last_seen
        assert found.scanned == 8 and not found.truncated
        only_b = insp.recent_failures(["b"])
        assert [(x.queue, x.count) for x in only_b.groups] == [("b", 2)]
        bounded = insp.recent_failures(limit=1)  # one retry and one archived task per queue, no more
        assert bounded.scanned == 3 and bounded.truncated
        with pytest.raises(QueueNotFoundError):
            insp.recent_failures(["nope"])
        with pytest.raises(ValueError):
            insp.recent_failures(limit=0)


def test_size_samples_are_taken_once_per_interval_by_many_processes(redis_url: str) -> None:
    insps = [Inspector(redis_url) for _ in range(5)]
    with Client(redis_url) as c:
        c.enqueue(Task("t", b""), queue="q")
    try:
        wins = []
        barrier = threading.Barrier(5)

        def sample(i: Inspector) -> None:
            barrier.wait()
            if i.claim_size_sample(60):
                wins.append(i)
                i.record_size_sample(i.queue_infos(memory=False), keep=3)

        threads = [threading.Thread(target=sample, args=(i,)) for i in insps]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1
        samples = insps[0].size_samples()
        assert len(samples) == 1 and samples[0].sizes == {"q": (1, 0, 0, 0, 0)}
        assert insps[0].size_samples(totals=True)[0].sizes == {"*": (1, 0, 0, 0, 0)}
        for _ in range(5):
            insps[0].record_size_sample(insps[0].queue_infos(memory=False), keep=3)
        assert len(insps[0].size_samples()) == 3 and len(insps[0].size_samples(totals=True)) == 3  # capped
    finally:
        for i in insps:
            i.close()


def _archived(redis_url: str, q: str, n: int) -> None:
    with Client(redis_url) as c:
        ids = [c.enqueue(Task("t", b""), queue=q).id for _ in range(n)]
    with Inspector(redis_url) as insp:
        insp.archive_tasks(q, ids)


def test_a_job_keeps_its_rate_and_reports_progress(redis_url: str) -> None:
    _archived(redis_url, "q", 30)
    with Inspector(redis_url) as insp:
        job = insp.start_job("run", "q", "archived", rate=100, user="ada")
        assert (job.total, job.done, job.status, job.user) == (30, 0, "running", "ada")
        seen: list[int] = []
        t0 = time.monotonic()
        final = insp.run_job(job.id, progress=lambda j: seen.append(j.done))
        assert time.monotonic() - t0 >= 0.15
        assert (final.status, final.done, final.changed, final.percent) == ("done", 30, 30, 100)
        assert seen == sorted(seen) and seen[-1] == 30 and len(seen) >= 3
        assert insp.queue_info("q", memory=False).pending == 30
        assert insp.jobs(queue="q")[0].id == job.id
        with pytest.raises(FailedPreconditionError):
            insp.start_job("archive", "q", "archived")
        with pytest.raises(JobNotFoundError):
            insp.job("nope")


def test_a_cancelled_job_stops_after_its_chunk(redis_url: str) -> None:
    _archived(redis_url, "q", 40)
    with Inspector(redis_url) as insp:
        job = insp.start_job("delete", "q", "archived", rate=20)
        out: list[str] = []

        def cancel_soon(j: object) -> None:
            if not out:
                out.append(insp.cancel_job(job.id).status)

        final = insp.run_job(job.id, progress=cancel_soon)
        assert out == ["canceling"] and final.status == "canceled"
        assert 0 < final.done < 40 and insp.queue_info("q", memory=False).archived == 40 - final.done


def test_the_inspector_turns_connection_errors_into_redis_unavailable() -> None:
    from asynqpy.embedded import free_port

    insp = Inspector(f"redis://:secret@127.0.0.1:{free_port()}/0")
    with pytest.raises(RedisUnavailableError) as err:
        insp.queues()
    assert "secret" not in str(err.value) and "***" in str(err.value)
    insp.close()


def test_errors_command_and_task_run_with_a_rate(capsys: pytest.CaptureFixture[str], redis_url: str,
                                                 r: redis.Redis) -> None:
    _fail_some(r, redis_url, "mail", 2, "SMTP down", kill=True, typ="email")
    assert main(["errors", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["QUEUE", "TYPE", "ERROR", "COUNT"]
    assert "mail" in out and "SMTP down" in out
    assert main(["errors", "--json", "--redis-url", redis_url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["groups"][0]["count"] == 2 and data["groups"][0]["archived"] == 2
    code = main(["task", "run", "mail", "--all", "--state", "archived", "--rate", "50", "--yes",
                 "--redis-url", redis_url])
    out, err = capsys.readouterr()
    assert code == 0 and "2 archived tasks moved to pending" in out
    assert "[" in err and "2/2 100%" in err  # the progress bar
    with Inspector(redis_url) as insp:
        assert insp.queue_info("mail", memory=False).pending == 2
        assert insp.jobs(queue="mail")[0].user == "cli"


def test_a_stalled_job_is_shown_and_cancelled_at_once(redis_url: str) -> None:
    _archived(redis_url, "q", 5)
    now = [time.time()]
    with Inspector(redis_url) as real:
        job = real.start_job("run", "q", "archived")  # nobody runs it: its process "died"
    with Inspector(redis_url, clock=lambda: now[0]) as insp:
        assert not insp.job(job.id).stalled(now[0])
        now[0] += 120
        assert insp.job(job.id).stalled(now[0])
        assert insp.cancel_job(job.id).status == "canceled"
