"""Background replay/archive/delete-all jobs: started in a thread of the process that received the request,
their progress read from Redis by any process (a widget that polls itself while the job runs), cancellable."""

from __future__ import annotations

import logging
import threading
from typing import Any

from flask import Blueprint, Flask, current_app

from asynqpy.errors import AsynqError
from inspector.find import Mask
from inspector.jobs import Job, JobNotFoundError
from webui import access, audit, inspector
from webui.auth import require_role
from webui.render import page
from webui.users import NO_ACCESS

bp = Blueprint("jobs", __name__)
log = logging.getLogger("asynqpy.web")
OUTCOME = {"done": "ok", "canceled": "partial", "failed": "error"}


def launch(job_id: str, *, mask: Mask | None = None) -> threading.Thread:
    """Run the job in a daemon thread; when it ends, write the audit record with its final count. mask: how the
    user who started a find job may see tasks (webui.findviews.viewer_mask)."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    who = audit.capture()
    insp = inspector()

    def work() -> None:
        with app.test_request_context():
            try:
                job = insp.run_job(job_id, mask=mask)
                audit.restore(who)
                what = f"tasks matching {job.query!r} ({job.done} scanned)" if job.query \
                    else f"{job.state.value} tasks"
                audit.record(f"tasks.{job.action}_{'matching' if job.query else 'all'}", queue=job.queue,
                             count=job.changed, outcome=OUTCOME.get(job.status, "error"),
                             detail=f"job {job.id} {job.status}: {job.changed_text} of {job.total} {what} changed"
                                    + (f"; {job.error}" if job.error else ""))
            except Exception:  # the audit write must not kill the thread silently
                log.exception("could not write the audit record of job %s", job_id)

    t = threading.Thread(target=work, name=f"asynqpy-job-{job_id}", daemon=True)
    t.start()
    return t


def _visible_job(job_id: str) -> Job:
    """The job, as if it did not exist when its queue is hidden from the user. Raises JobNotFoundError."""
    job = inspector().job(job_id)
    if access.role_on(job.queue) == NO_ACCESS:
        raise JobNotFoundError(f"no job {job_id!r} (finished jobs are kept for 7 days)")
    return job


def _show(job: Job, message: str = "") -> Any:
    return page("partials/_job.html", job=job, job_message=message, now=inspector().now())


@bp.get("/jobs/<job_id>")
@require_role("viewer")
def job_status(job_id: str) -> Any:
    job = _visible_job(job_id)
    access.act_on(job.queue)  # the widget's Cancel button asks can("admin") for the job's queue
    return _show(job)


@bp.post("/jobs/<job_id>/cancel")
@require_role("viewer")
def job_cancel(job_id: str) -> Any:
    if not access.anywhere("admin"):
        access.require(None, "admin")  # refused (and audited) before the job is even looked up
    queue = _visible_job(job_id).queue
    access.require(queue, "admin")  # admin on the job's queue
    try:
        job = inspector().cancel_job(job_id)
    except AsynqError as exc:  # Redis refused or went away: audited as every failed action is
        audit.record("job.cancel", queue=queue, outcome="error", detail=f"job {job_id}: {exc}")
        raise
    access.act_on(job.queue)
    audit.record("job.cancel", queue=job.queue, count=job.done, outcome="ok", detail=f"job {job.id} canceled")
    return _show(job, "the job stops after its current chunk")
