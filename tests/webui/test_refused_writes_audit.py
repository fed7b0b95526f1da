"""Changes that Redis refuses (here: out of memory, maxmemory with noeviction) are audited as every failed action
is: a flow-control limit set, a background job canceled (removing a limit deletes, which Redis allows when full).
The record cannot reach Redis then, so it is the asynqpy.audit log line marked stored=false, naming the action,
the user and outcome error; the page says why."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from asynqpy import Client, Task
from tests.webui.authkit import login, token


@pytest.fixture
def out_of_memory(r: redis.Redis) -> Iterator[None]:
    """Redis refusing every write (OOM) for the test's duration."""
    old = r.config_get("maxmemory")["maxmemory"], r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        yield
    finally:
        r.config_set("maxmemory", old[0])
        r.config_set("maxmemory-policy", old[1])


def _unstored(caplog: pytest.LogCaptureFixture, action: str) -> list[dict[str, Any]]:
    lines = [json.loads(rec.getMessage()) for rec in caplog.records if rec.name == "asynqpy.audit"
             and rec.getMessage().startswith("{")]
    return [x for x in lines if x.get("action") == action and x.get("stored") is False]


@pytest.mark.parametrize(("path", "form", "action"), [
    ("/limits", {"pattern": "email:*", "concurrency": "2"}, "limit.set"),
    ("/jobs/{job}/cancel", {}, "job.cancel"),
])
def test_a_change_redis_refuses_is_audited(path: str, form: dict[str, str], action: str, client: FlaskClient,
                                           r: redis.Redis, caplog: pytest.LogCaptureFixture,
                                           request: pytest.FixtureRequest) -> None:
    assert login(client, "ada").status_code == 303
    tok = token(client)
    job = ""
    with Client(client.application.config["ASYNQPY_REDIS_URL"]) as c:
        c.enqueue(Task("email:send", b"{}"), queue="mail")  # a queue, which a limit is also written to
    if action == "job.cancel":
        job = client.application.extensions["asynqpy.inspector"].start_job("delete", "mail", "pending").id
    request.getfixturevalue("out_of_memory")
    caplog.set_level(logging.INFO, logger="asynqpy.audit")
    resp = client.post(path.format(job=job), data=form, headers={"X-CSRF-Token": tok})
    assert resp.status_code == 503 and "OOM" in resp.get_data(as_text=True), resp.get_data(as_text=True)[:300]
    lines = _unstored(caplog, action)
    assert len(lines) == 1, caplog.text
    assert lines[0]["outcome"] == "error" and lines[0]["user"] == "ada" and "OOM" in lines[0]["detail"]
