"""Find jobs: replay, archive or delete every task matching a query, in bounded steps, at a rate, cancellable;
a task changed since it was judged is left alone."""

from __future__ import annotations

import pytest
import redis

from asynqpy import Client, InvalidArgumentError, Task
from asynqpy.rdb import keys
from inspector import Inspector, findjob
from tests.inspector.worker import Worker

pytestmark = pytest.mark.cluster_too


@pytest.fixture
def failures(client: Client, worker: Worker) -> None:
    """Queue q: 60 retry tasks (every third failed with "SMTP busy"), 20 pending (every other of type mail)."""
    for i in range(60):
        client.enqueue(Task("mail" if i % 2 else "sms", b'{"n": %d}' % i), queue="q", task_id=f"r{i:02d}")
    for tid in worker.take("q", 60):
        worker.fail("q", tid, "SMTP busy" if int(tid[1:]) % 3 == 0 else "bad address")
    for i in range(20):
        client.enqueue(Task("mail" if i % 2 else "sms"), queue="q", task_id=f"p{i:02d}")


def test_replay_all_that_match(insp: Inspector, failures: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findjob, "WINDOW", 7)  # many steps, with tasks leaving the set before the cursor
    job = insp.start_find_job("run", "q", 'state:retry error:"smtp busy"', user="ada")
    assert (job.total, job.query, job.user) == (60, 'state:retry error:"smtp busy"', "ada")
    final = insp.run_job(job.id)
    assert (final.status, final.changed) == ("done", 20)
    assert insp.count_matches("q", "state:retry error:smtp").matched == 0
    assert insp.queue_info("q", memory=False).retry == 40
    assert insp.count_matches("q", "state:pending id:r*").matched == 20


def test_archive_pending_from_either_end_and_delete(insp: Inspector, failures: None, r: redis.Redis,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findjob, "WINDOW", 3)
    final = insp.run_job(insp.start_find_job("archive", "q", "state:pending type:mail").id)
    assert (final.status, final.changed) == ("done", 10)
    assert sorted(t.decode() for t in r.lrange(keys.pending("q"), 0, -1)) == [f"p{i:02d}" for i in range(0, 20, 2)]
    final = insp.run_job(insp.start_find_job("delete", "q", "type:mail -state:pending").id)
    assert final.changed == 30 + 10  # the mail retry tasks and those archived above
    assert insp.count_matches("q", "type:mail").matched == 0


def test_rate_counts_changes_and_cancel_stops(insp: Inspector, failures: None) -> None:
    job = insp.start_find_job("delete", "q", "state:retry", rate=50)
    out: list[str] = []

    def cancel_soon(j: object) -> None:
        if not out:
            out.append(insp.cancel_job(job.id).status)

    final = insp.run_job(job.id, progress=cancel_soon)
    assert out == ["canceling"] and final.status == "canceled"
    assert 0 < final.changed < 60 and insp.queue_info("q", memory=False).retry == 60 - final.changed


def test_a_task_changed_since_judged_is_skipped(insp: Inspector, client: Client, r: redis.Redis) -> None:
    client.enqueue(Task("t", b"old"), queue="q", task_id="a", process_in=60)
    client.enqueue(Task("t", b"old"), queue="q", task_id="b", process_in=60)
    job = insp.start_find_job("delete", "q", "payload:old")
    from inspector import find

    real = find.scan_window

    def then_change(*args: object, **kw: object) -> object:
        out = real(*args, **kw)  # type: ignore[arg-type]
        insp.update_payload("q", "a", b"new")  # between the judging and the acting
        return out

    find.scan_window = then_change  # type: ignore[assignment]
    try:
        final = insp.run_job(job.id)
    finally:
        find.scan_window = real
    assert final.changed == 1 and [t.id for t in insp.find("q", "").tasks] == ["a"]


def test_bad_find_jobs(insp: Inspector, failures: None) -> None:
    for args, kw, name in ((("smash", "q", "type:x"), {}, "action"), (("run", "q", "colour:x"), {}, "query"),
                           (("run", "q", "type:x"), {"rate": -1}, "rate"), (("delete", "q", "  "), {}, "query")):
        with pytest.raises(InvalidArgumentError) as e:
            insp.start_find_job(*args, **kw)  # type: ignore[arg-type]
        assert e.value.argument == name


@pytest.mark.parametrize("shift", [1, 600, -2])
def test_pending_tasks_that_moved_since_judged_still_leave(insp: Inspector, client: Client, r: redis.Redis,
                                                           shift: int) -> None:
    """Between the judging and the acting the list moves: tasks pushed back at the tail (shift > 0; far: by
    their own LREM), or the oldest taken by workers (shift < 0)."""
    for i in range(8):
        client.enqueue(Task("x" if i % 2 else "y"), queue="q", task_id=f"p{i}")
    job = insp.start_find_job("delete", "q", "type:x")
    from inspector import find

    real = find.scan_window

    def then_shift(*args: object, **kw: object) -> object:
        out = real(*args, **kw)  # type: ignore[arg-type]
        if shift > 0:
            r.rpush(keys.pending("q"), *["late"] * shift)  # every index from the tail moves by shift
        else:
            r.rpop(keys.pending("q"), -shift)  # a worker took the oldest (p0, then p1 or a late one)
        return out

    find.scan_window = then_shift  # type: ignore[assignment]
    try:
        final = insp.run_job(job.id)
    finally:
        find.scan_window = real
    left = [t.decode() for t in r.lrange(keys.pending("q"), 0, -1)]
    assert not [t for t in left if "\x00" in t]
    if shift > 0:
        assert final.changed == 4 and [t for t in left if t.startswith("p")] == ["p6", "p4", "p2", "p0"]
    else:
        assert not [t for t in left if t in ("p3", "p5", "p7")] and "p6" in left and "p4" in left


def test_scripts_flushed_mid_job_are_loaded_again(insp: Inspector, failures: None, r: redis.Redis,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findjob, "WINDOW", 10)
    job = insp.start_find_job("delete", "q", "state:retry type:sms")
    final = insp.run_job(job.id, progress=lambda j: r.script_flush())  # NOSCRIPT at every step
    assert (final.status, final.changed) == ("done", 30)
    assert insp.find("q", "type:sms state:retry").tasks == ()
    r.script_flush()
    assert len(insp.find("q", "type:mail").tasks) == 40
