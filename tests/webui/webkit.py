"""Fixtures for the dashboard's page and action tests: queues with tasks in every state (made by our client and
the stand-in worker's scripts), hostile names and payloads, and a client logged in as each role."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from asynqpy import Client, Task
from tests.inspector.worker import Worker
from tests.webui.authkit import login

HOSTILE_TYPE = '<img src=x onerror="document.body.append(Object.assign(document.createElement(\'b\'),{id:\'pwn\'}))">'
HOSTILE_PAYLOAD = b'{"html": "<script id=\\"pwn\\">alert(1)</script>", "quote": "\\" onmouseover=alert(1) x=\\""}'


def make_state(redis_url: str, *, archived: int = 3, retry: int = 2) -> dict[str, Any]:
    """Queue "mail": pending, scheduled, active, `retry` retry and `archived` archived tasks (some hostile),
    one completed; queue "low": one pending. Returns the ids by state."""
    r = redis.Redis.from_url(redis_url)
    w = Worker(r, time.time)
    ids: dict[str, Any] = {"archived": [], "retry": []}
    with Client(redis_url) as c:
        c.enqueue(Task("report", b"low"), queue="low")
        ids["pending"] = c.enqueue(Task("email:welcome", b'{"to": "ada@example.com"}'), queue="mail").id
        ids["scheduled"] = c.enqueue(Task("email:later", b"{}"), queue="mail", process_in=3600).id
        fails = [c.enqueue(Task(HOSTILE_TYPE if i == 0 else "email:send", HOSTILE_PAYLOAD), queue="mail",
                           retention=3600).id for i in range(archived + retry + 2)]
    taken = w.take("mail", len(fails) + 1)
    assert ids["pending"] in taken
    w.held.pop(ids["pending"])  # it stays active: the "active" task
    ids["active"], ids["pending"] = ids["pending"], None
    with Client(redis_url) as c:
        ids["pending"] = c.enqueue(Task("email:welcome", b'{"to": "bob@example.com"}'), queue="mail").id
    for i, tid in enumerate(fails):
        if i < archived:
            w.kill("mail", tid, "SMTP 550: <b>mailbox</b> unavailable" if i else '<script>alert("err")</script>')
            ids["archived"].append(tid)
        elif i < archived + retry:
            w.fail("mail", tid, "timeout talking to smtp")
            ids["retry"].append(tid)
        elif i == archived + retry:
            w.complete("mail", tid)
            ids["completed"] = tid
        else:
            w.done("mail", tid)
    r.close()
    return ids


@pytest.fixture
def state(redis_url: str) -> dict[str, Any]:
    return make_state(redis_url)


@pytest.fixture
def as_role(client: FlaskClient) -> Callable[[str], FlaskClient]:
    """Log the client in as vera (viewer), otto (operator) or ada (admin)."""
    names = {"viewer": "vera", "operator": "otto", "admin": "ada"}

    def log_in(role: str) -> FlaskClient:
        resp = login(client, names[role])
        assert resp.status_code == 303, resp.get_data(as_text=True)[:500]
        return client

    return log_in
