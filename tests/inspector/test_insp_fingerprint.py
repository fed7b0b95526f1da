"""Errors group by fingerprint, not exact text (issue 19, item 15): the parts that vary from task to task are
placeholders, so one cause is one group with its count and one real message; the same in `asynqpy errors`."""

from __future__ import annotations

import json
import time

import pytest
import redis

from asynqpy import Client, Task
from asynqpy.cli import main
from inspector import Inspector
from inspector.fingerprint import fingerprint
from tests.inspector.worker import Worker


@pytest.mark.parametrize(("message", "expected"), [
    ("SMTP server busy while sending to user405@example.com", "SMTP server busy while sending to <email>"),
    ("order 12345 not found", "order <n> not found"),
    ("task 3f2a9c1e-1111-2222-3333-444455556666 failed", "task <uuid> failed"),
    ("timed out after 1m30s talking to 10.0.0.7:6379", "timed out after <duration> talking to <ip>"),
    ('no key "acct-17" in map, digest 9f86d081884c7d65', 'no key "<str>" in map, digest <hex>'),
    ("KeyError: 'user_9'", "KeyError: '<str>'"),
    ("GET https://api.example.com/v1/users/77 answered 503", "GET <url> answered <n>"),
    ("it's a plain message", "it's a plain message"),
])
def test_fingerprint_replaces_what_varies(message: str, expected: str) -> None:
    assert fingerprint(message) == expected


def test_failures_of_one_cause_are_one_group_in_the_inspector_and_the_cli(
        capsys: pytest.CaptureFixture[str], redis_url: str, r: redis.Redis) -> None:
    w = Worker(r, time.time)
    with Client(redis_url) as c:
        ids = [c.enqueue(Task("email:send", b"{}"), queue="mail").id for _ in range(6)]
    taken = w.take("mail", 6)
    assert sorted(taken) == sorted(ids)
    for i, tid in enumerate(taken):
        err = f"SMTP server busy while sending to user{400 + i}@example.com" if i < 5 else "mailbox full"
        (w.kill if i % 2 else w.fail)("mail", tid, err)
    with Inspector(redis_url) as insp:
        groups = insp.recent_failures().groups
    assert sorted((g.fingerprint, g.count) for g in groups) == [
        ("SMTP server busy while sending to <email>", 5), ("mailbox full", 1)]
    busy = next(g for g in groups if g.count == 5)
    assert busy.error.startswith("SMTP server busy while sending to user4") and busy.error.endswith("@example.com")
    assert main(["errors", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("mail")]
    assert len(rows) == 2
    assert "sending to <email> (e.g. SMTP server busy while sending to user4" in out and " 5 " in rows[0] + rows[1]
    assert main(["errors", "--json", "--redis-url", redis_url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {g["fingerprint"]: g["count"] for g in data["groups"]}["SMTP server busy while sending to <email>"] == 5


def test_cli_tables_cut_long_queue_names_and_types(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    from tests.webui.livekit import go_enqueue

    queue, typ = "q" * 300, "t" * 300
    go_enqueue(redis_url, queue, typ)
    assert main(["queue", "ls", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    assert "q" * 59 + "…" in out and "q" * 60 not in out
    assert main(["task", "ls", queue, "--state", "pending", "--redis-url", redis_url]) == 0
    out = capsys.readouterr().out
    assert "t" * 59 + "…" in out and "t" * 60 not in out
    assert main(["queue", "ls", "--json", "--redis-url", redis_url]) == 0
    assert queue in capsys.readouterr().out  # JSON keeps the full name
