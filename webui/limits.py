"""The flow-control page: every limit with its use now (viewer and operator see it; admin sets and removes
limits, each change audited as limit.set / limit.remove).

Per-queue roles: a limit is per task-type pattern and holds in every queue its types run in, so its rule is
shown to everyone, its use only in the queues the user may see (warnings too), and setting or removing one needs
admin on every queue (the user's role and each per-queue role of theirs)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, request

from asynqpy.errors import AsynqError, InvalidArgumentError
from asynqpy.limits import Limit, parse_rate
from inspector.limitviews import go_consumers
from webui import access, audit, inspector, security
from webui.auth import require_role
from webui.render import page

bp = Blueprint("limits", __name__)


def _show(message: str = "", level: str = "ok", status: int = 200) -> Any:
    insp = inspector()
    usage = access.visible_infos(insp.limit_usage())  # one row per limit and queue: hidden queues' left out
    held = {u.limit.pattern for u in usage}
    limits = insp.limits()
    return page("limits.html", limits=limits, usage=usage, idle=[x for x in limits if x.pattern not in held],
                warnings=go_consumers(insp, usage), hides=access.hides_some(),
                may_change=access.everywhere("admin") and not security.read_only(),
                message=message, level=level, status=status)


@bp.get("/limits")
@require_role("viewer")
def limits_page() -> Any:
    return _show()


def _admin(what: str) -> None:
    """403 (counted as refused) unless the user is admin on every queue: a limit holds in all of them."""
    if not access.everywhere("admin"):
        why = f"{what} needs the admin role" + (" on every queue (a limit holds in all of them)"
                                                 if access.anywhere("admin") else "")
        audit.refused_request(why)
        abort(403, description=why)


@bp.post("/limits")
@require_role("admin")  # on every queue, too: _admin()
def limit_set() -> Any:
    _admin("setting a limit")
    f = request.form
    try:
        rate = parse_rate(f["rate"]) if f.get("rate", "").strip() else 0.0
        lim = Limit(f.get("pattern", "").strip(), concurrency=int(f.get("concurrency") or 0), rate=rate,
                    burst=float(f.get("burst") or 0), key=f.get("key", "").strip())
    except (InvalidArgumentError, ValueError) as exc:
        return _show(f"limit not set: {exc}", "error", 400)
    try:
        inspector().set_limit(lim)
    except AsynqError as exc:  # Redis refused or went away: the attempt is audited as every failed action is
        audit.record("limit.set", outcome="error", detail=f"{lim.pattern}: {exc}")
        raise
    audit.record("limit.set", outcome="ok", detail=f"{lim.pattern}: {lim.describe()}")
    return _show(f"limit {lim.pattern} set: {lim.describe()}")


@bp.post("/limits/remove")
@require_role("admin")  # on every queue, too: _admin()
def limit_remove() -> Any:
    _admin("removing a limit")
    pattern = request.form.get("pattern", "")
    try:
        gone = inspector().remove_limit(pattern)
    except AsynqError as exc:
        audit.record("limit.remove", outcome="error", detail=f"{pattern}: {exc}")
        raise
    audit.record("limit.remove", outcome="ok" if gone else "missing", detail=pattern)
    return _show(f"limit {pattern} removed; its waiting tasks are pending again" if gone
                 else f"no limit {pattern}", "ok" if gone else "error")
