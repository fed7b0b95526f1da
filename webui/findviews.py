"""The find page: a queue's tasks of every state matching a query (inspector.query) carried in the URL
(?q=...&cursor=...), so a filtered view can be bookmarked and shared; a preview of how many match; replay,
archive or delete of all that match as a background job (webui.jobs), audited with the query and its count."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, g, request

from asynqpy.errors import InvalidArgumentError
from inspector.find import FindCount, FindResult, Mask
from inspector.models import TaskRecord
from webui import access, audit, inspector, jobs, queuenames, snapshot
from webui.auth import can, require_role
from webui.render import page

bp = Blueprint("find", __name__)
bp.record_once(queuenames.register)  # before the routes: they use <queue:...>
ACTIONS = {"run": "Replay", "archive": "Archive", "delete": "Delete"}
PAGE_SCAN = 10_000  # tasks one page of results scans at most (bounded windows of 500)
PREVIEW_SCAN = 100_000  # tasks the preview counts through before saying "at least"
MAX_QUERY = 2000


def viewer_mask(queue: str) -> Mask:
    """How the signed-in user may see a task of queue: payload and header terms are judged on this view, so a
    masked value cannot be matched (the policy and role are taken now, for use in a job's thread too)."""
    pol, role = access.policy(), access.role_on(queue)

    def mask(rec: TaskRecord) -> TaskRecord:
        return pol.task(rec, role, full=False)

    return mask


def _query() -> str:
    q = request.values.get("q", "")
    return q.strip()[:MAX_QUERY]


def _show(queue: str, query: str, *, result: FindResult | None = None, count: FindCount | None = None,
          error: str = "", message: str = "", action: str = "", status: int = 200) -> Any:
    info = snapshot.queue_info(queue)
    now = inspector().now()
    recent = [j for j in inspector().jobs(queue=queue, limit=5)
              if j.query and (not j.finished or now - j.updated_at < 30)]  # an ended one shows its count a while
    return page("find.html", "partials/_find.html", status=status, info=info, query=query, result=result,
                count=count, error=error, message=message, action=action, actions=ACTIONS, now=now, jobs=recent)


@bp.get("/queues/<queue:queue>/find")
@require_role("viewer")
def find_page(queue: str) -> Any:
    query = _query()
    cursor = request.args.get("cursor", "")
    try:
        result = inspector().find(queue, query, limit=50, cursor=cursor, max_scan=PAGE_SCAN,
                                  mask=viewer_mask(queue)) if query or cursor else None
    except InvalidArgumentError as exc:
        if exc.argument not in ("query", "cursor"):
            raise
        return _show(queue, query, error=str(exc), status=400)
    return _show(queue, query, result=result)


def _admin(queue: str, action: str, query: str) -> None:
    """403 (audited) unless an admin asks; then 404 for an unknown action. The role first: a viewer learns
    nothing from trying actions."""
    if not can("admin"):
        audit.record_refused(f"tasks.{action if action in ACTIONS else 'act'}_matching", outcome="denied",
                             queue=queue, detail="acting on every task that matches needs the admin role")
        abort(403, description="acting on every task that matches needs the admin role")
    if action not in ACTIONS:
        abort(404)


@bp.post("/queues/<queue:queue>/find/preview")
@require_role("viewer")
def find_preview(queue: str) -> Any:
    """How many match (or at least how many so far), and a confirm button: nothing changes yet."""
    query = _query()
    action = request.form.get("action", "")
    _admin(queue, action, query)
    try:
        count = inspector().count_matches(queue, query, max_scan=PREVIEW_SCAN, mask=viewer_mask(queue))
    except InvalidArgumentError as exc:
        if exc.argument != "query":
            raise
        return _show(queue, query, error=str(exc), status=400)
    return _show(queue, query, count=count, action=action)


@bp.post("/queues/<queue:queue>/find/<action>")
@require_role("viewer")
def find_action(queue: str, action: str) -> Any:
    query = _query()
    _admin(queue, action, query)
    name = f"tasks.{action}_matching"
    if not query:
        raise InvalidArgumentError("give a query: acting on every task of a queue is the tabs' job", argument="q")
    raw_rate = request.form.get("rate", "").strip()
    try:
        rate = float(raw_rate) if raw_rate else 0.0
    except ValueError:
        raise InvalidArgumentError(f"rate must be a number of tasks per second, got {raw_rate[:40]!r}",
                                   argument="rate") from None
    try:
        job = inspector().start_find_job(action, queue, query, rate=rate, user=getattr(g.user, "name", ""))
    except InvalidArgumentError as exc:
        audit.record(name, queue=queue, outcome="error", detail=f"query {query!r}: {exc}")
        raise
    jobs.launch(job.id, mask=viewer_mask(queue))
    msg = f"started a background job to {ACTIONS[action].lower()} the tasks matching {query!r}" + (
        f" at {rate:g} tasks/s" if rate else "")
    audit.record(name, queue=queue, outcome="ok", detail=f"job {job.id} started: {msg}")
    return _show(queue, query, message=msg)
