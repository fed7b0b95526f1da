"""A cancel that Redis refuses is audited like every other action that fails: with a Redis user that may not
publish (Redis 7's default for a new ACL user: no channels), the cancel of one task, of the selected ones and of
all active ones is a 502 saying why, and the audit log holds the attempt (outcome error, how many were sent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from inspector.audit import AuditLog
from tests.webui.authkit import app_on, login, token

USER, PASSWORD = "asynqpy-no-publish", "no-publish-password-for-the-test"


@pytest.fixture
def no_publish_url(redis_url: str, r: redis.Redis) -> Any:
    """redis_url as a Redis user that may run every command on every key but publish on no channel."""
    r.execute_command("ACL", "SETUSER", USER, "reset", "on", f">{PASSWORD}", "~*", "+@all", "resetchannels")
    parts = urlsplit(redis_url)
    netloc = f"{USER}:{PASSWORD}@{parts.netloc}"
    try:
        yield urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    finally:
        r.execute_command("ACL", "DELUSER", USER)


@pytest.mark.parametrize(("path", "form", "action"), [
    ("/queues/mail/tasks/{active}/cancel", {"state": "active"}, "task.cancel"),
    ("/queues/mail/active/cancel", {"ids": "{active}"}, "tasks.cancel"),
    ("/queues/mail/active/cancel", {"all": "1"}, "tasks.cancel_all"),
])
def test_a_refused_cancel_is_audited(path: str, form: dict[str, str], action: str, no_publish_url: str,
                                     users_path: Path, state: dict[str, Any], r: redis.Redis) -> None:
    role = "ada" if form.get("all") else "otto"
    with app_on(no_publish_url, users_path) as app:
        c = app.test_client()
        assert login(c, role).status_code == 303
        resp = c.post(path.format(active=state["active"]), headers={"X-CSRF-Token": token(c)},
                      data={k: v.format(active=state["active"]) for k, v in form.items()})
        body = resp.get_data(as_text=True)
        assert resp.status_code == 502 and "Redis refused a command" in body and "permission" in body, body[:500]
    rec = AuditLog(r).list().records[0]
    assert (rec.action, rec.outcome, rec.queue, rec.user) == (action, "error", "mail", role)
    assert rec.task_ids == (state["active"],)
    if action != "task.cancel":
        assert rec.count == 0 and "cancel requested for 0 of 1 task(s), then:" in rec.detail
