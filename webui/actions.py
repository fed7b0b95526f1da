"""Actions: replay (run), archive, delete and cancel on one task, on selected ids or on all tasks of a state;
pause, resume and delete a queue. Each view parses its input, checks the role, makes one Inspector call,
writes an audit record (whatever the outcome) and renders the page again with a message saying what happened.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, abort, current_app, flash, g, redirect, request, url_for
from werkzeug.exceptions import HTTPException

from asynqpy.errors import (
    AsynqError,
    FailedPreconditionError,
    QueueNotFoundError,
    TaskAlreadyArchivedError,
    TaskNotFoundError,
)
from inspector.models import BatchResult
from webui import audit, inspector, jobs, queuenames, render, snapshot, status_for
from webui.auth import require_role
from webui.queues import state_view
from webui.render import is_htmx

bp = Blueprint("actions", __name__)
bp.record_once(queuenames.register)  # before the routes: they use <queue:...>

# What each state allows, in asynqmon's table (single and selected rows; "all" is the same list).
ALLOWED: dict[str, tuple[str, ...]] = {
    "active": ("cancel",),
    "pending": ("archive", "delete"),
    "scheduled": ("run", "archive", "delete"),
    "retry": ("run", "archive", "delete"),
    "archived": ("run", "delete"),
    "completed": ("delete",),
    "aggregating": ("run", "archive", "delete"),
}
TASK_ACTIONS = ("run", "archive", "delete", "cancel")
# A row's action failing with these means the row was stale (the task is gone or in another state now), not
# that Redis is in trouble (RedisUnavailableError, RedisCommandError: no refresh is tried then).
STALE = (TaskNotFoundError, QueueNotFoundError, FailedPreconditionError, TaskAlreadyArchivedError, ValueError)
MAX_IDS = 1000


def label(action: str, state: str) -> str:
    """The button's visible label: Replay, Run now, Archive, Delete, Cancel."""
    if action == "run":
        return "Replay" if state in ("archived", "retry") else "Run now"
    return action.capitalize()


def past(action: str, state: str) -> str:
    if action == "run":
        return "replayed" if state in ("archived", "retry") else "queued to run now"
    return {"archive": "archived", "delete": "deleted", "cancel": "asked to cancel"}[action]


def _audit(action: str, queue: str, outcome: str, **kw: Any) -> None:
    """One audit record; action is object.verb: task.run, tasks.delete, tasks.run_all, queue.pause..."""
    audit.record(action, queue=queue, outcome=outcome, **kw)


def _guarded(action: str, queue: str, fn: Callable[[], Any], **kw: Any) -> Any:
    """Run the Inspector call; an error is audited as failed, then shown by the app's error table."""
    try:
        return fn()
    except (AsynqError, ValueError) as exc:
        _audit(action, queue, "error", detail=str(exc), **kw)
        raise


def _ids() -> list[str]:
    raw = request.form.getlist("ids")
    ids = [i.strip() for part in raw for i in part.split(",") if i.strip()]
    if len(ids) > MAX_IDS:
        raise ValueError(f"at most {MAX_IDS} ids per request (use all=1 for every task of a state)")
    return list(dict.fromkeys(ids))


def _check(action: str, state: str) -> None:
    if state not in ALLOWED:
        abort(404)
    if action not in ALLOWED[state]:
        raise ValueError(f"{label(action, state)} does not apply to {state} tasks")


@bp.post("/queues/<queue:queue>/tasks/<taskid:task_id>/<action>")
@require_role("operator")
def task_action(queue: str, task_id: str, action: str) -> Any:
    if action not in TASK_ACTIONS:
        abort(404)
    try:
        return _task_action(queue, task_id, action)
    except STALE as exc:
        if is_htmx() and request.form.get("back") != "task":
            return failed_with_fresh_rows(exc, queue, request.form.get("state", ""))
        if not isinstance(exc, (TaskNotFoundError, QueueNotFoundError)) or request.form.get("back") != "task" \
                or is_htmx():
            raise  # htmx: the message in place (#messages); a row's action: the error page
        # a plain form on the task page: redirect after the POST, so a reload does not send it again
        flash(f"{label(action, 'archived')} failed: {exc}", "error")
        to = "pages.overview" if isinstance(exc, QueueNotFoundError) else "queues.queue_page"
        return redirect(url_for(to, **({} if isinstance(exc, QueueNotFoundError) else {"queue": queue})), 303)


def failed_with_fresh_rows(exc: Exception, queue: str, state: str) -> Any:
    """A row's action failed because the row was stale (its task deleted, or moved on to another state, by a
    worker or another user): the error in #messages, as any error, and the tab the row was on (state) rendered
    again out of band, so the row leaves the table (or shows its new state) with the message. When the tab
    cannot be rendered (no state sent, the queue gone too), the message alone."""
    body, status, headers = render.error_page(exc, status_for(exc))
    if state in ALLOWED:
        try:
            fresh, _ = state_view(queue, state, oob=True)
        except (AsynqError, HTTPException):
            pass
        else:
            body += fresh
    return body, status, headers


def _task_action(queue: str, task_id: str, action: str) -> Any:
    insp = inspector()
    name = f"task.{action}"
    state = _guarded(name, queue, lambda: insp.get_task(queue, task_id).state.value, task_ids=[task_id])
    _guarded(name, queue, lambda: _check(action, state), task_ids=[task_id])
    if action == "cancel":
        n = _guarded(name, queue, lambda: insp.cancel(task_id), task_ids=[task_id])
        msg = f"asked {n} server(s) to cancel task {task_id}" if n else "no server heard the cancel request"
    else:
        _guarded(name, queue, lambda: getattr(insp, f"{action}_task")(queue, task_id), task_ids=[task_id])
        msg = f"task {task_id} {past(action, state)}"
    _audit(name, queue, "ok", task_ids=[task_id], count=1, detail=msg)
    if request.form.get("back") == "task":
        if action == "delete":  # the page is gone: go to the tab it was on
            return go_to(url_for("queues.queue_state", queue=queue, state=state), msg)
        # redirect after the POST: the result shows on the task's own address, and a reload does not re-submit
        return go_to(url_for("queues.task_page", queue=queue, task_id=task_id), msg)
    return state_view(queue, state, message=msg)


def go_to(url: str, message: str) -> Any:
    """After a change that removed the page it was made from: the message waits in the session, the browser
    loads url (htmx follows HX-Redirect; a plain form follows the 303)."""
    flash(message, "ok")
    if is_htmx():
        return "", 204, {"HX-Redirect": url}
    return redirect(url, 303)


@bp.post("/queues/<queue:queue>/<state>/<action>")
@require_role("operator", stronger=lambda _: request.form.get("all") == "1")  # every task of a state: admin
def state_action(queue: str, state: str, action: str) -> Any:
    _check(action, state)
    if request.form.get("all") == "1":
        return _on_all(queue, state, action)
    ids = _ids()
    if not ids:
        raise ValueError("select at least one task")
    insp = inspector()
    if action == "cancel":
        # a cancel goes by task id alone: only ids active in this queue, so a per-queue operator cannot
        # cancel another queue's tasks through a queue they may operate on
        ids = [tid for tid in ids if _active_in(insp, queue, tid)]
        heard = _cancel_each("tasks.cancel", queue, ids)
        msg = f"cancel requested for {len(ids)} task(s); {sum(1 for h in heard if h)} heard by a server"
        _audit("tasks.cancel", queue, "ok", task_ids=ids, count=len(ids), detail=msg)
        return state_view(queue, state, message=msg)
    res: BatchResult = _guarded(f"tasks.{action}", queue, lambda: getattr(insp, f"{action}_tasks")(queue, ids),
                                task_ids=ids)
    msg = _batch_message(action, state, res)
    _audit(f"tasks.{action}", queue, "ok" if not res.failed else "partial", task_ids=ids, count=len(res.succeeded),
           detail=msg)
    return state_view(queue, state, message=msg, kind="ok" if not res.failed else "warn")


def _cancel_each(action: str, queue: str, ids: list[str]) -> list[int]:
    """Ask the servers to cancel each task; how many servers heard each. When Redis refuses or goes away
    midway, the cancels already sent are audited (outcome error, with how many) before the error is shown."""
    insp = inspector()
    heard: list[int] = []
    try:
        for tid in ids:
            heard.append(insp.cancel(tid))
    except (AsynqError, ValueError) as exc:
        _audit(action, queue, "error", task_ids=ids, count=len(heard),
               detail=f"cancel requested for {len(heard)} of {len(ids)} task(s), then: {exc}")
        raise
    return heard


def _active_in(insp: Any, queue: str, task_id: str) -> bool:
    try:
        return bool(insp.get_task(queue, task_id).state.value == "active")
    except TaskNotFoundError:
        return False


def _batch_message(action: str, state: str, res: BatchResult) -> str:
    n, total = len(res.succeeded), len(res.succeeded) + len(res.failed)
    if not res.failed:
        return f"{past(action, state)} {n} task{'s' if n != 1 else ''}"
    gone = sum(isinstance(f.error, TaskNotFoundError) for f in res.failed)
    why = f"{gone} were already gone" if gone == len(res.failed) else "; ".join(
        f"{f.task_id}: {f.error}" for f in res.failed[:5])
    return f"{n} of {total} {past(action, state)}: {why}"


def _rate(raw: str) -> float:
    """Tasks per second from the form (blank: as fast as bounded chunks go). Raises ValueError."""
    if not raw.strip():
        return 0.0
    try:
        rate = float(raw)
    except ValueError:
        raise ValueError(f"rate must be a number of tasks per second, got {raw[:40]!r}") from None
    if not 0 <= rate <= 1e6:
        raise ValueError("rate must be between 0 and 1,000,000 tasks per second")
    return rate


def _on_all(queue: str, state: str, action: str) -> Any:
    name = f"tasks.{action}_all"  # the admin role on the queue: state_action's require_role checked it
    insp = inspector()
    count = snapshot.queue_info(queue).count(state)
    rate = _rate(request.form.get("rate", ""))
    if action == "cancel":
        ids = [t.id for t in insp.list_tasks(queue, "active", size=min(max(count, 1), 1000)).tasks]
        _cancel_each(name, queue, ids)
        msg = f"cancel requested for all {len(ids)} active tasks"
        _audit(name, queue, "ok", count=len(ids), detail=msg)
        return state_view(queue, state, message=msg)
    if count > current_app.config["ASYNQPY_PAGE_SIZE"] or rate > 0 or state == "aggregating":
        group = request.form.get("group", "")
        job = _guarded(name, queue, lambda: insp.start_job(
            action, queue, state, rate=rate, group=group, user=getattr(g.user, "name", "")), count=count)
        jobs.launch(job.id)
        msg = f"started a background job to {label(action, state).lower()} {job.total} {state} tasks" + (
            f" at {rate:g} tasks/s" if rate else "")
        _audit(name, queue, "ok", count=job.total, detail=f"job {job.id} started: {msg}")
        return state_view(queue, state, message=msg, started_job=job.id)
    n = _guarded(name, queue, lambda: getattr(insp, f"{action}_all")(queue, state), count=count)
    msg = f"{past(action, state)} {n} task{'s' if n != 1 else ''}"
    _audit(name, queue, "ok", count=n, detail=msg)
    return state_view(queue, state, message=msg)


@bp.post("/queues/<queue:queue>/<action>")
@require_role("operator", stronger=lambda args: args.get("action") == "delete")  # deleting a queue: admin
def queue_action(queue: str, action: str) -> Any:
    insp = inspector()
    if action == "pause":
        _guarded("queue.pause", queue, lambda: insp.pause(queue, known_only=True))  # (not one deleted meanwhile)
        msg = f"queue {queue} paused: servers take none of its tasks until it is resumed"
    elif action == "resume":
        _guarded("queue.resume", queue, lambda: insp.unpause(queue))
        msg = f"queue {queue} resumed"
    elif action == "delete":
        _guarded("queue.delete", queue, lambda: insp.delete_queue(queue))
        _audit("queue.delete", queue, "ok", detail=f"queue {queue} deleted")
        return go_to(url_for("pages.overview"), f"queue {queue} deleted")
    else:
        abort(404)
    _audit(f"queue.{action}", queue, "ok", detail=msg)
    state = request.form.get("state") or "pending"
    return state_view(queue, state if state in ALLOWED else "pending", message=msg)
