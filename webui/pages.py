"""Read-only pages: the overview with its charts, the last errors, servers, scheduler entries, Redis, /healthz."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, current_app, request, send_from_directory

from asynqpy.errors import RedisUnavailableError
from inspector import bounds
from inspector.models import QueueInfo
from inspector.samples import TOTAL, SizeSample
from webui import access, charts, health_inspector, inspector, params, snapshot
from webui.auth import public, require_role
from webui.pollcache import polled
from webui.render import page

bp = Blueprint("pages", __name__)
bp.add_app_template_filter(bounds.clipped, "clipped")
bp.add_app_template_global(bounds.FULL, "FULL")
CHART_DAYS = (7, 30, 90)
HISTORY_QUEUES = 200  # the daily chart sums at most this many queues (one read each)
ENTRIES_PAGE = 50
HISTORY_PAGE = 30


def _totals(infos: list[QueueInfo]) -> dict[str, int]:
    keys = ("size", "pending", "active", "scheduled", "retry", "archived", "completed", "aggregating",
            "processed", "failed")
    return {k: sum(int(getattr(i, k)) for i in infos) for k in keys}


@bp.get("/")
@require_role("viewer")
def overview() -> Any:
    infos = access.visible_infos(snapshot.queue_infos())
    sort = request.args.get("sort", "queue")
    if sort in ("size", "latency", "failed", "processed", "archived", "retry", "pending"):
        infos.sort(key=lambda i: getattr(i, sort), reverse=True)
    return page("overview.html", "partials/_overview.html", infos=infos, totals=_totals(infos), sort=sort,
                now=inspector().now())


@bp.get("/charts/daily")
@require_role("viewer")
def daily_chart() -> Any:
    """Processed and failed per UTC day over 7, 30 or 90 days: all queues, or ?queue=."""
    days = request.args.get("days", 7, type=int)
    days = days if days in CHART_DAYS else 7
    insp = inspector()
    queue = request.args.get("queue") or None
    if queue:
        access.require(queue, "viewer")
    names = [queue] if queue else access.visible(insp.queues())[:HISTORY_QUEUES]
    sums: dict[str, list[int]] = {}
    for q in names:
        for d in insp.history(q, days):
            s = sums.setdefault(d.date.isoformat(), [0, 0])
            s[0] += d.processed
            s[1] += d.failed
    bars = [charts.Day(k, v[0], v[1]) for k, v in sorted(sums.items())]
    label = f"Tasks processed per day, last {days} days" + (f", queue {bounds.clip(queue)}" if queue else "")
    return page("partials/_daily_chart.html", chart=charts.daily_bars(bars, label), days=days, queue=queue,
                choices=CHART_DAYS, total_processed=sum(b.processed for b in bars),
                total_failed=sum(b.failed for b in bars))


@bp.get("/charts/sizes")
@require_role("viewer")
def sizes_chart() -> Any:
    """Queue sizes over the last hour from the samples every app process shares: all queues, or ?queue=."""
    insp = inspector()
    queue = request.args.get("queue") or None
    if queue:
        access.require(queue, "viewer")
    if queue is None and access.hides_some():  # the stored totals count hidden queues: sum the visible ones
        shown = set(access.visible(insp.queues()))
        samples = [SizeSample(s.t, {q: v for q, v in s.sizes.items() if q in shown})
                   for s in insp.size_samples(since=insp.now() - 3600)]
        return page("partials/_sizes_chart.html", chart=charts.size_lines(samples, "Queue sizes, last hour"),
                    queue=None)
    samples = polled(("size_samples", queue), lambda: insp.size_samples(since=insp.now() - 3600, totals=queue is None))
    label = "Queue sizes, last hour" + (f", queue {bounds.clip(queue)}" if queue else "")
    return page("partials/_sizes_chart.html", chart=charts.size_lines(samples, label, queue or TOTAL), queue=queue)


@bp.get("/errors")
@require_role("viewer")
def errors() -> Any:
    queue = request.args.get("queue") or None
    insp = inspector()
    if queue:
        access.require(queue, "viewer")
    names = access.visible(polled(("queues",), insp.queues))
    which = [queue] if queue else names if access.hides_some() else None
    limit = current_app.config["ASYNQPY_FAILURES_LIMIT"]
    found = polled(("recent_failures", tuple(which) if which is not None else None, limit),
                   lambda: insp.recent_failures(which, limit=limit))
    return page("errors.html", "partials/_errors.html", found=found, queue=queue, queues=names,
                limit=current_app.config["ASYNQPY_FAILURES_LIMIT"])


@bp.get("/servers")
@require_role("viewer")
def servers() -> Any:
    return page("servers.html", "partials/_servers.html", servers=access.servers(polled(("servers",),
                                                                                        inspector().servers)),
                now=inspector().now())


@bp.get("/scheduler")
@require_role("viewer")
def scheduler() -> Any:
    entries = access.entries(inspector().scheduler_entries())
    num = params.whole("page", 1, minimum=1)
    pages = max(1, -(-len(entries) // ENTRIES_PAGE))
    shown = entries[(num - 1) * ENTRIES_PAGE:num * ENTRIES_PAGE]
    entry = request.args.get("entry")
    if entry and access.hides_some() and entry not in {e.id for e in entries}:
        entry = None  # an entry of a hidden queue: its history is not shown either
    hnum = params.whole("hpage", 1, minimum=1)
    history = inspector().scheduler_history(entry, page=hnum, size=HISTORY_PAGE) if entry else []
    kept = inspector().scheduler_history_size(entry) if entry else 0
    statuses = {st.entry.id: st for st in inspector().cron_statuses(shown)}  # pause, plain words, last task
    return page("scheduler.html", "partials/_scheduler.html", entries=shown, total=len(entries), page_num=num,
                pages=pages, entry=entry, history=history, history_page=hnum, history_kept=kept,
                history_pages=max(1, -(-kept // HISTORY_PAGE)), history_size=HISTORY_PAGE, now=inspector().now(),
                statuses=statuses)


@bp.get("/redis")
@require_role("viewer")
def redis_page() -> Any:
    return page("redis.html", info=inspector().redis_info())


@bp.get("/favicon.ico")
@public
def favicon() -> Any:
    """Browsers ask for /favicon.ico whatever the page links: answer it rather than log a 404 per page."""
    return send_from_directory(current_app.static_folder or "static", "favicon.ico", mimetype="image/x-icon",
                               max_age=86400)


@bp.get("/healthz")
def healthz() -> Any:
    """200 when Redis answers, 503 with the reason when not (within ASYNQPY_HEALTH_TIMEOUT); no login."""
    try:
        health_inspector().queues()
    except RedisUnavailableError as exc:
        return {"status": "unavailable", "reason": str(exc)}, 503
    return {"status": "ok", "time": datetime.now(UTC).isoformat(timespec="seconds")}, 200
