"""The dashboard's audit trail: ``record()`` writes one record for every change, login, failed login and logout.

``record(action, *, queue=None, task_ids=None, count=None, outcome, detail=None)`` fills in the time, the
signed-in user and role, the browser's address and the request id; it writes one JSON line to the
``asynqpy.audit`` logger and appends the record to the hash-chained stream asynqpy:audit (through
inspector.audit.AuditLog). outcome: a short word: "ok", "partial" (some of the tasks), "failed", "denied".
Action names are an object and a verb, e.g. "task.run", "tasks.archive", "queue.pause"; auth writes "login",
"login.failed" and "logout". When Redis is unavailable the JSON line still goes to the log (stored=false).
The admin-only /audit page is in webui.auditviews.

Outside the request (a background job's thread): ``ctx = capture()`` in the request, then, in the thread
inside ``app.test_request_context()``, ``restore(ctx)`` before ``record(...)``: the record names the user,
role, address and request id of the request that started the job.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flask import g

from asynqpy.errors import RedisUnavailableError
from inspector.audit import AuditRecord
from webui import security

log = logging.getLogger("asynqpy.audit")


def record(action: str, *, queue: str | None = None, task_ids: list[str] | tuple[str, ...] | None = None,
           count: int | None = None, outcome: str, detail: str | None = None, user: str | None = None,
           role: str | None = None) -> AuditRecord | None:
    """Write one audit record for the current request and return it; None when Redis was unavailable and only
    the log line was written. user/role default to g.user's (auth gives them for a failed login).

    Raises InvalidArgumentError for a blank action or an outcome that is not a short word.
    """
    ctx = g.get("audit_ctx") or capture()
    fields: dict[str, Any] = {
        "user": user if user is not None else ctx["user"], "role": role if role is not None else ctx["role"],
        "addr": ctx["addr"], "request_id": ctx["request_id"], "queue": queue, "task_ids": task_ids,
        "count": count, "detail": detail}
    st = security.state()
    try:
        rec = st.audit.append(action, outcome=outcome, **fields)
    except RedisUnavailableError as exc:
        line = {**fields, "action": action, "outcome": outcome, "time": st.clock(), "stored": False,
                "error": str(exc)}
        log.warning("%s", json.dumps(line, sort_keys=True, default=list))
        return None
    log.info("%s", rec.to_json())
    return rec


def capture() -> dict[str, str]:
    """Who is acting in this request (user, role, addr, request_id), for a record written later elsewhere."""
    u = g.get("user")
    return {"user": u.name if u else "", "role": u.role if u else "", "addr": security.client_address(),
            "request_id": security.request_id()}


def restore(ctx: dict[str, str]) -> None:
    """Make the records of this (substitute) request carry ctx's user, role, address and request id."""
    g.audit_ctx = dict(ctx)
