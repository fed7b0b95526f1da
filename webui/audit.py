"""The dashboard's audit trail: ``record()`` writes one record for every change, login and logout;
``record_refused()`` counts a refused or failed request (a failed or throttled login, a refused action).

``record(action, *, queue=None, task_ids=None, count=None, outcome, detail=None)`` fills in the time, the
signed-in user and role, the browser's address and the request id; it writes one JSON line to the
``asynqpy.audit`` logger and appends the record to the HMAC-chained stream asynqpy:{audit} (through
inspector.audit.AuditLog, with the key, anchor and spill file of the audit directory: ASYNQPY_AUDIT_DIR, else
beside the users file). outcome: a short word: "ok", "partial" (some of the tasks), "failed", "error".
Action names are an object and a verb, e.g. "task.run", "tasks.archive", "queue.pause"; auth writes "login"
and "logout". When Redis is unavailable the JSON line still goes to the log (stored=false).

``record_refused(action, *, outcome, user=None, queue=None, task_ids=None, detail="")`` counts the request in
its window's aggregate (inspector.auditrefused), never in the chain, so a flood of refused requests cannot push
an action out; the first of each aggregate in a window is also logged. ``refused_request(reason, outcome)``
does it for the current request, naming its verb, queue and task ids. The admin-only /audit page is in
webui.auditviews.

Outside the request (a background job's thread): ``ctx = capture()`` in the request, then, in the thread
inside ``app.test_request_context()``, ``restore(ctx)`` before ``record(...)``: the record names the user,
role, address and request id of the request that started the job.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flask import current_app, g, request

from asynqpy.errors import RedisUnavailableError
from inspector.audit import AuditLog, AuditRecord
from inspector.auditrefused import RefusedLog
from webui import security

log = logging.getLogger("asynqpy.audit")
EXT = "asynqpy.audit"
MAX_REFUSED_IDS = 20


def record(action: str, *, queue: str | None = None, task_ids: list[str] | tuple[str, ...] | None = None,
           count: int | None = None, outcome: str, detail: str | None = None, user: str | None = None,
           role: str | None = None) -> AuditRecord | None:
    """Write one audit record for the current request and return it; None when Redis was unavailable and only
    the log line was written (Redis unavailable, or the audit key unreadable). user/role default to g.user's.

    Raises InvalidArgumentError for a blank action or an outcome that is not a short word.
    """
    ctx = g.get("audit_ctx") or capture()
    fields: dict[str, Any] = {
        "user": user if user is not None else ctx["user"], "role": role if role is not None else ctx["role"],
        "addr": ctx["addr"], "request_id": ctx["request_id"], "queue": queue, "task_ids": task_ids,
        "count": count, "detail": detail}
    try:
        rec = audit_log().append(action, outcome=outcome, **fields)
    except (RedisUnavailableError, OSError) as exc:  # Redis away, or the audit key cannot be read or made
        line = {**fields, "action": action, "outcome": outcome, "time": security.state().clock(), "stored": False,
                "error": str(exc)}
        log.warning("%s", json.dumps(line, sort_keys=True, default=list))
        return None
    log.info("%s", rec.to_json())
    return rec


def record_refused(action: str, *, outcome: str, user: str | None = None, queue: str | None = None,
                   task_ids: list[str] | tuple[str, ...] | None = None, detail: str = "") -> int:
    """Count one refused or failed request of this request's address (and user: g.user's unless given) in
    its window's aggregate; returns the aggregate's count (0 when Redis was unavailable: logged instead).

    detail should not vary between requests of one kind (no counters or times in it), or each is counted
    apart. Raises InvalidArgumentError for a blank action or outcome.
    """
    ctx = g.get("audit_ctx") or capture()
    who = user if user is not None else ctx["user"]
    try:
        n = refused_log().count(action, outcome=outcome, user=who, addr=ctx["addr"], queue=queue,
                                task_ids=task_ids, detail=detail)
    except RedisUnavailableError as exc:
        n, detail = 0, f"{detail} (not counted: {exc})"
    if n <= 1:  # the first of its kind in this window, or not counted at all
        log.warning("%s", json.dumps({"refused": action, "outcome": outcome, "user": who, "addr": ctx["addr"],
                                      "queue": queue or "", "task_ids": list(task_ids or ())[:MAX_REFUSED_IDS],
                                      "detail": detail, "request_id": ctx["request_id"], "counted": n},
                                     sort_keys=True))
    return n


def refused_request(reason: str, outcome: str = "denied", *, queue: str | None = None,
                    task_ids: list[str] | None = None) -> int:
    """record_refused() for the current request: its verb (e.g. "tasks.delete", "queue.pause", "task.run", or
    the page's endpoint for a read), queue and task ids come from its URL and form unless given."""
    args = request.view_args or {}
    verb = args.get("action")
    if verb and "entry_id" in args:  # a cron control
        action = f"cron.{verb}"
    elif verb and (request.endpoint or "").startswith("find."):  # acting on every task matching a query
        action = f"tasks.{verb}_matching"
    elif verb:
        thing = "task" if "task_id" in args else "tasks" if "state" in args else "queue"
        action = f"{thing}.{verb}" + ("_all" if thing == "tasks" and request.form.get("all") == "1" else "")
    else:
        action = request.endpoint or request.path[:100]
    ids = list(task_ids or ())
    if task_ids is None:
        ids = [str(args["task_id"])] if "task_id" in args else []
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            ids += [i.strip() for part in request.form.getlist("ids") for i in part.split(",") if i.strip()]
    where = queue if queue is not None else args.get("queue") or args.get("q")
    return record_refused(action, outcome=outcome, queue=str(where) if where else None,
                          task_ids=list(dict.fromkeys(ids))[:MAX_REFUSED_IDS], detail=reason)


def audit_dir() -> Path:
    """The app's audit directory: ASYNQPY_AUDIT_DIR, else the users file's directory (beside the session key)."""
    configured = current_app.config.get("ASYNQPY_AUDIT_DIR")
    return Path(configured) if configured else Path(current_app.config["ASYNQPY_USERS"]).resolve().parent


def _stores() -> dict[str, Any]:
    stores: dict[str, Any] = current_app.extensions.setdefault(EXT, {})
    return stores


def audit_log() -> AuditLog:
    """The app's audit log (made once per app): key, anchor and spill file from audit_dir()."""
    stores = _stores()
    if "log" not in stores:
        st = security.state()
        stores["log"] = AuditLog.open(st.get_inspector().door, audit_dir(), writer=True,
                                      cap=current_app.config.get("ASYNQPY_AUDIT_CAP") or 100_000, clock=st.clock)
    log_: AuditLog = stores["log"]
    return log_


def refused_log() -> RefusedLog:
    """The app's counts of refused requests (window: ASYNQPY_AUDIT_REFUSED_WINDOW seconds, default 300)."""
    stores = _stores()
    if "refused" not in stores:
        st = security.state()
        stores["refused"] = RefusedLog(st.get_inspector().door,
                                       window=int(current_app.config.get("ASYNQPY_AUDIT_REFUSED_WINDOW") or 300),
                                       clock=st.clock)
    counts: RefusedLog = stores["refused"]
    return counts


def capture() -> dict[str, str]:
    """Who is acting in this request (user, role, addr, request_id), for a record written later elsewhere."""
    u = g.get("user")
    return {"user": u.name if u else "", "role": u.role if u else "", "addr": security.client_address(),
            "request_id": security.request_id()}


def restore(ctx: dict[str, str]) -> None:
    """Make the records of this (substitute) request carry ctx's user, role, address and request id."""
    g.audit_ctx = dict(ctx)
