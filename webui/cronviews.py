"""Cron controls on the scheduler page: pause, resume and enqueue-now of an entry (operator on the queue the
entry enqueues into, by per-queue roles), each audited whatever the outcome. An entry of a queue hidden from
the user answers as an unknown entry does; refusals are counted as every refused action is. Go schedulers'
entries are refused (they cannot honour a pause)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, g, redirect, url_for

from asynqpy.errors import AsynqError, QueueNotFoundError
from inspector import croncontrols
from webui import access, audit, inspector
from webui.auth import require_role

bp = Blueprint("cron", __name__)
ACTIONS = ("pause", "resume", "run")


@bp.post("/scheduler/<entry_id>/<action>")
@require_role("viewer")
def cron_action(entry_id: str, action: str) -> Any:
    if not access.anywhere("operator"):
        access.require(None, "operator")  # refused (and audited) before the entry is even looked up
    if action not in ACTIONS:
        abort(404)
    insp = inspector()
    name = f"cron.{action}"
    try:
        st = insp.cron_status(entry_id)
    except AsynqError as exc:
        audit.record(name, outcome="error", detail=f"entry {entry_id}: {exc}")
        raise
    try:
        access.require(st.queue, "operator")  # the role on the queue the entry enqueues into (403, counted)
    except QueueNotFoundError:  # a hidden queue's entry (refusal counted): answered as if no scheduler had it
        raise croncontrols.no_such_entry(entry_id) from None
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
