"""Cron controls on the scheduler page: pause, resume and enqueue-now of an entry (operator on the entry's
queue), each audited whatever the outcome. Go schedulers' entries are refused (they cannot honour a pause)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, g, redirect, url_for

from asynqpy.errors import AsynqError
from webui import access, audit, inspector
from webui.auth import require_role

bp = Blueprint("cron", __name__)
ACTIONS = ("pause", "resume", "run")


@bp.post("/scheduler/<entry_id>/<action>")
@require_role("operator")
def cron_action(entry_id: str, action: str) -> Any:
    if action not in ACTIONS:
        abort(404)
    insp = inspector()
    name = f"cron.{action}"
    try:
        st = insp.cron_status(entry_id)
    except AsynqError as exc:
        audit.record(name, outcome="error", detail=f"entry {entry_id}: {exc}")
        raise
    if access.role_on(st.queue) == access.NO_ACCESS:
        abort(404)  # an entry of a queue this user may not see: as if it did not exist
    if not access.can("operator", st.queue):
        audit.record_refused(name, outcome="denied", queue=st.queue, detail="this needs the operator role")
        abort(403)
    try:
        if action == "run":
            tid = insp.cron_enqueue_now(entry_id)
            msg = f"entry {entry_id} ({st.entry.task_type}): task {tid} enqueued now"
            audit.record(name, queue=st.queue, task_ids=[tid], count=1, outcome="ok", detail=msg)
        else:
            who = str(getattr(g.get("user"), "name", "") or "")
            changed = insp.cron_pause(entry_id, by=who) if action == "pause" else insp.cron_resume(entry_id)
            done = "paused" if action == "pause" else "resumed"
            msg = f"entry {entry_id} ({st.entry.task_type}) {done}" if changed else \
                f"entry {entry_id} was {'already paused' if action == 'pause' else 'not paused'}"
            audit.record(name, queue=st.queue, outcome="ok", detail=msg)
    except (AsynqError, ValueError) as exc:
        audit.record(name, queue=st.queue, outcome="error", detail=f"entry {entry_id}: {exc}")
        raise
    flash(msg, "ok")
    return redirect(url_for("pages.scheduler", entry=entry_id), 303)
