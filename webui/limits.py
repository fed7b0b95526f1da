"""The flow-control page: every limit with its use now (viewer and operator see it; admin sets and removes
limits, each change audited as limit.set / limit.remove)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, request

from asynqpy.errors import InvalidArgumentError
from asynqpy.limits import Limit, parse_rate
from inspector.limitviews import go_consumers
from webui import audit, inspector
from webui.auth import can, require_role
from webui.render import page

bp = Blueprint("limits", __name__)


def _show(message: str = "", level: str = "ok", status: int = 200) -> Any:
    insp = inspector()
    usage = insp.limit_usage()
    return page("limits.html", limits=insp.limits(), usage=usage, warnings=go_consumers(insp, usage),
                message=message, level=level, status=status)


@bp.get("/limits")
@require_role("viewer")
def limits_page() -> Any:
    return _show()


def _admin(what: str) -> None:
    if not can("admin"):
        audit.refused_request(f"{what} needs the admin role")
        abort(403, description=f"{what} needs the admin role")


@bp.post("/limits")
@require_role("operator")
def limit_set() -> Any:
    _admin("setting a limit")
    f = request.form
    try:
        rate = parse_rate(f["rate"]) if f.get("rate", "").strip() else 0.0
        lim = Limit(f.get("pattern", "").strip(), concurrency=int(f.get("concurrency") or 0), rate=rate,
                    burst=float(f.get("burst") or 0), key=f.get("key", "").strip())
    except (InvalidArgumentError, ValueError) as exc:
        return _show(f"limit not set: {exc}", "error", 400)
    inspector().set_limit(lim)
    audit.record("limit.set", outcome="ok", detail=f"{lim.pattern}: {lim.describe()}")
    return _show(f"limit {lim.pattern} set: {lim.describe()}")


@bp.post("/limits/remove")
@require_role("operator")
def limit_remove() -> Any:
    _admin("removing a limit")
    pattern = request.form.get("pattern", "")
    gone = inspector().remove_limit(pattern)
    audit.record("limit.remove", outcome="ok" if gone else "missing", detail=pattern)
    return _show(f"limit {pattern} removed; its waiting tasks are pending again" if gone
                 else f"no limit {pattern}", "ok" if gone else "error")
