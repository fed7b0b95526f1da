"""The admin-only /audit page: records newest first, filtered by user, action, queue and time range, what the
cap has trimmed, the counts of refused requests, and /audit.jsonl exporting the records as JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, abort, render_template, request, stream_with_context

from asynqpy.errors import AsynqError, InvalidArgumentError
from inspector.audit import check_stream_id
from webui import audit
from webui.auth import require_role

bp = Blueprint("audit", __name__)
PAGE = 50
REFUSED_SHOWN = 50
EXPORT_MAX = 100_000


def _when(value: str | None, name: str) -> float | None:
    """Unix seconds from an ISO date or date-time (UTC unless it names a zone); None when blank; 400 when bad."""
    if not value or not value.strip():
        return None
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        abort(400, description=f"{name}: {value[:40]!r} is not a date or time (use YYYY-MM-DD or YYYY-MM-DDTHH:MM)")
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _filters() -> dict[str, Any]:
    a = request.args
    return {"user": a.get("user", "").strip()[:200] or None, "action": a.get("action", "").strip()[:100] or None,
            "queue": a.get("queue", "").strip()[:200] or None, "since": _when(a.get("since"), "since"),
            "until": _when(a.get("until"), "until")}


@bp.route("/audit")
@require_role("admin")
def audit_page() -> Any:
    flt = _filters()
    before = request.args.get("before", "").strip() or None
    if before:
        try:
            check_stream_id(before)
        except InvalidArgumentError as exc:
            abort(400, description=str(exc))
    log = audit.audit_log()
    page = log.list(**flt, before=before, limit=PAGE)
    filters = {k: v for k in ("user", "action", "queue", "since", "until") if (v := request.args.get(k, "").strip())}
    if request.headers.get("HX-Request"):
        return render_template("partials/_audit_rows.html", page=page, filters=filters)
    refused = audit.refused_log().list(since=flt["since"], until=flt["until"], limit=REFUSED_SHOWN)
    return render_template("audit.html", page=page, filters=filters, trimmed=log.trimmed(), refused=refused,
                           spill_file=log.spill_to, window=audit.refused_log().window)


@bp.route("/audit.jsonl")
@require_role("admin")
def audit_export() -> Response:
    flt = _filters()
    log = audit.audit_log()

    def lines() -> Iterator[str]:
        before = None
        sent = 0
        while sent < EXPORT_MAX:
            try:
                page = log.list(**flt, before=before, limit=1000, max_scan=100_000)
            except AsynqError as exc:
                yield json.dumps({"error": str(exc)}) + "\n"
                return
            for rec in page.records:
                yield rec.to_json() + "\n"
            sent += len(page.records)
            if page.next_before is None:
                return
            before = page.next_before

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Response(stream_with_context(lines()), mimetype="application/x-ndjson",
                    headers={"Content-Disposition": f'attachment; filename="asynqpy-audit-{stamp}.jsonl"',
                             "Cache-Control": "no-store"})
