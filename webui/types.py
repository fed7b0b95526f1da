"""The types pages: per-task-type runs, failures, run-time and wait percentiles over 1 h / 24 h / 72 h with
sparklines and deploy marks (/types), one type's timeline and run-time histogram (/types/<type>), and adding
a deploy mark (operator, audited). Go workers write no per-type data: the page shows asynq's per-queue counts.

Per-queue roles: the figures are summed over the queues the user may see only (the aggregates are kept per queue
and type); a type recorded in none of them in the last 72 h answers 404 for such a user, as one never recorded."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, g, redirect, request, url_for

from asynqpy.errors import AsynqError
from asynqpy.unixtime import utc_from_unix
from inspector.typestats import WINDOWS
from webui import access, audit, inspector, snapshot, typecharts
from webui.auth import require_role
from webui.queuenames import QueueConverter
from webui.render import page

bp = Blueprint("types", __name__)
NOT_RECORDED = ("No task of this type ran in the last 72 hours (asynqpy workers record each type's runs; Go asynq "
                "workers record none): the task types page lists those that did.")


class TypeNameConverter(QueueConverter):
    """A task type in one path segment, escaped as queue names are (webui.queuenames)."""


bp.record_once(lambda state: state.app.url_map.converters.setdefault("typename", TypeNameConverter))
bp.add_app_template_global(typecharts.sparkline, "type_sparkline")
bp.add_app_template_global(typecharts.firings, "cron_firings")


@bp.app_template_filter("seconds")
def seconds(v: float | None) -> str:
    """A duration for the types tables: 12ms, 3.40s, 2m05s; "-" without data."""
    if v is None:
        return "-"
    if v < 1:
        return f"{v * 1000:.0f}ms"
    if v < 60:
        return f"{v:.2f}s"
    m, s = divmod(int(v), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


@bp.app_template_filter("unix_when")
def unix_when(t: float) -> str:
    return utc_from_unix(t).strftime("%Y-%m-%d %H:%M:%S UTC")


def _window() -> str:
    w = request.args.get("window", "1h")
    if w not in WINDOWS:
        abort(404)
    return w


@bp.get("/types")
@require_role("viewer")
def types_page() -> Any:
    window = _window()
    insp = inspector()
    now = insp.now()
    stats = insp.type_stats(window, queues=access.queue_filter())
    marks = insp.marks(now - WINDOWS[window])
    infos = access.visible_infos(snapshot.queue_infos())
    return page("types.html", stats=stats, marks=marks, window=window, windows=list(WINDOWS), infos=infos,
                now=now, fleet=sum(s.run_total for s in stats))


@bp.get("/types/<typename:task_type>")
@require_role("viewer")
def type_page(task_type: str) -> Any:
    window = _window()
    insp = inspector()
    visible = access.queue_filter()
    if task_type not in insp.task_types("72h", queues=visible):  # never, or only in queues hidden from this user
        abort(404, description=NOT_RECORDED)  # the same answer for both
    st = insp.one_type_stats(task_type, window, queues=visible)
    marks = insp.marks(insp.now() - WINDOWS[window])
    label = f"{task_type}: runs per {'minute' if st.step == 60 else 'hour'}, last {window}"
    return page("type.html", st=st, marks=marks, window=window, windows=list(WINDOWS),
                timeline=typecharts.timeline(st.points, st.step, marks, label),
                histogram=typecharts.histogram(st.run_buckets, f"{task_type}: run-time histogram, last {window}"),
                bucket_names=typecharts.bucket_labels())


@bp.post("/types/marks")
@require_role("operator")
def add_mark() -> Any:
    label = request.form.get("label", "")
    user = getattr(g.get("user"), "name", "") or ""
    try:
        m = inspector().mark(label, by=str(user))
    except (AsynqError, ValueError) as exc:
        audit.record("mark.add", outcome="error", detail=str(exc))
        raise
    audit.record("mark.add", outcome="ok", detail=f"deploy mark {m.label!r}")
    flash(f"deploy mark {m.label!r} recorded", "ok")
    return redirect(url_for("types.types_page", window=request.form.get("window", "1h")), 303)
