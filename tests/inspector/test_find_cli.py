"""`asynqpy task find QUEUE 'QUERY'`: matches, a resumable bounded scan, bad terms as one line, and bulk actions
after a preview and a confirmation."""

from __future__ import annotations

import json

import pytest

from asynqpy import Client, Task
from inspector import Inspector
from inspector.cli import main
from tests.inspector.worker import Worker


def cli(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--redis-url", url])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def failed(client: Client, worker: Worker) -> None:
    for i in range(12):
        client.enqueue(Task("email:welcome" if i % 2 else "sms", b'{"user_id": %d, "token": "s3cret"}' % i),
                       queue="q", task_id=f"t{i:02d}")
    for tid in worker.take("q", 12):
        worker.fail("q", tid, "SMTP busy" if tid in ("t01", "t03", "t05") else "other")


def test_find_lists_matches_of_every_state(capsys: pytest.CaptureFixture[str], redis_url: str, failed: None,
                                           client: Client) -> None:
    client.enqueue(Task("email:bye", b"{}"), queue="q", task_id="p1")
    code, out, _ = cli(capsys, redis_url, "task", "find", "q", "type:email:*")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["ID", "STATE", "TYPE"]
    assert "p1" in out and "t01" in out and "t02" not in out and "the end was reached" in out
    code, out, _ = cli(capsys, redis_url, "task", "find", "q", 'error:"smtp busy" -id:t05', "--json")
    assert code == 0 and sorted(t["info"]["id"] for t in json.loads(out)["tasks"]) == ["t01", "t03"]


def test_find_is_bounded_and_resumes(capsys: pytest.CaptureFixture[str], redis_url: str, failed: None) -> None:
    code, out, _ = cli(capsys, redis_url, "task", "find", "q", "type:nothing", "--max-scan", "5")
    assert code == 0 and "no matches" in out and "scanned 5 tasks, 5 of 12" in out
    assert "resume with --cursor retry:5" in out
    code, out, _ = cli(capsys, redis_url, "task", "find", "q", "type:nothing", "--cursor", "retry:5")
    assert "scanned 7 tasks, 12 of 12" in out and "the end was reached" in out


def test_a_bad_query_is_one_line_naming_the_term(capsys: pytest.CaptureFixture[str], redis_url: str,
                                                 failed: None) -> None:
    code, _, err = cli(capsys, redis_url, "task", "find", "q", "type:x age:1y")
    assert code != 0 and "'age:1y'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_masked_value_is_not_matched(capsys: pytest.CaptureFixture[str], redis_url: str, failed: None) -> None:
    assert "t01" in cli(capsys, redis_url, "task", "find", "q", "payload.token:s3cret", "--no-redact")[1]
    out = cli(capsys, redis_url, "task", "find", "q", "payload.token:s3cret", "--redact")[1]
    assert "no matches" in out


def test_replay_all_that_match_after_preview(capsys: pytest.CaptureFixture[str], redis_url: str, failed: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    code, out, err = cli(capsys, redis_url, "task", "find", "q", "error:smtp", "--run", "--json")
    # the question goes to stderr: stdout stays (here empty) parseable output
    assert code != 0 and out == "" and err.startswith("3 tasks match in queue 'q': run now all that match? [y/N] ")
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    code, out, err = cli(capsys, redis_url, "task", "find", "q", "error:smtp", "--run", "--rate", "100")
    assert code == 0 and "3 tasks moved to pending" in out and "changed (done)" in err
    with Inspector(redis_url) as insp:
        assert insp.queue_info("q", memory=False).pending == 3
        job = insp.jobs(queue="q")[0]
        assert (job.query, job.user, job.changed) == ("error:smtp", "cli", 3)
    code, out, _ = cli(capsys, redis_url, "task", "find", "q", "state:retry type:sms", "--delete", "--yes",
                       "--json")
    assert code == 0 and json.loads(out)["count"] == 6
    assert cli(capsys, redis_url, "task", "find", "q", "type:sms", "--archive", "--yes")[1].startswith(
        "no tasks match")
    code, _, err = cli(capsys, redis_url, "task", "find", "q", " ", "--delete", "--yes")
    assert code == 2 and "needs a query" in err
