"""Queue and task pages: state tabs with counts, paginated task tables with each state's columns, search,
and one task in full with the Inspector's answer to "why hasn't it run"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Blueprint, abort, current_app, request

from asynqpy.task import TaskState
from asynqpy.tracing import trace_id
from inspector import display
from inspector.jobs import Job
from inspector.models import ActiveWorker, QueueInfo, SearchResult, ServerInfo, TaskPage
from webui import access, inspector, params, queuenames, snapshot, trace_link
from webui.auth import require_role
from webui.pollcache import polled
from webui.render import STATES, page

bp = Blueprint("queues", __name__)
bp.record_once(queuenames.register)  # before the routes: they use <queue:...>
SEARCH_FIELDS = ("type", "id_prefix", "text", "error")


def default_state(info: QueueInfo) -> str:
    """The tab to open: the first non-empty one in asynqmon's order, else pending."""
    return next((s for s in STATES if info.count(s) and s != "aggregating"), "pending")


def paging() -> tuple[int, int]:
    """?page= (1 or more) and ?size= (1 to ASYNQPY_MAX_PAGE_SIZE). Raises ValueError (a 400) for anything else."""
    cfg = current_app.config
    num = params.whole("page", 1, minimum=1)
    size = params.whole("size", cfg["ASYNQPY_PAGE_SIZE"], minimum=1, maximum=cfg["ASYNQPY_MAX_PAGE_SIZE"])
    return num, size


def search_args() -> dict[str, str]:
    return {k: v for k in SEARCH_FIELDS if (v := request.args.get(k, "").strip())}


def state_view(queue: str, state: str, *, message: str = "", kind: str = "ok", status: int = 200,
               started_job: str = "", oob: bool = False) -> Any:
    """The queue page on one state's tab (also what actions render after changing something); started_job: a
    background job this answer started, whose card the browser scrolls to (by the "all" buttons); oob: the
    partial marked for an out-of-band swap (beside an error message, webui.actions.failed_with_fresh_rows)."""
    if state not in STATES:
        abort(404)
    info = snapshot.queue_info(queue)
    num, size = paging()
    group = request.values.get("group") or None
    groups = inspector().groups(queue) if state == "aggregating" else []
    if state == "aggregating" and group is None and groups:
        group = groups[0].group
    flt = search_args()
    result: TaskPage | SearchResult | None = None
    if flt:
        cursor = params.whole("cursor", 0)
        result = inspector().search(queue, state, type=flt.get("type"), id_prefix=flt.get("id_prefix"),
                                    text=flt.get("text"), error=flt.get("error"), limit=size, cursor=cursor,
                                    group=group)
        result = access.search(result, flt.get("text"))  # masked; a match only in a hidden value is dropped
        tasks = result.tasks
    elif state == "aggregating" and group is None:
        tasks = ()
    else:
        result = access.page(polled(("list_tasks", queue, state, num, size, group),
                                    lambda: inspector().list_tasks(queue, state, page=num, size=size, group=group)))
        tasks = result.tasks
    running = join_active(queue) if state == "active" else None
    total = info.count(state) if not group else next((g.size for g in groups if g.group == group), 0)
    pages = max(1, -(-total // size))
    return page("queue.html", "partials/_queue.html", status=status, info=info, state=state, tasks=tasks,
                result=result, search=flt, page_num=num, page_size=size, pages=pages, total=total,
                groups=groups, group=group, message=message, kind=kind, now=inspector().now(), running=running,
                jobs=recent_jobs(queue), started_job=started_job, oob=oob)


@dataclass(frozen=True)
class Running:
    """The Active tab's join with the live servers: who runs which task since when, and who serves the queue.

    A server lists its running tasks once per heartbeat (5 s by default, Go's and ours), so a task started since
    the last beat is not listed yet; it is still "running" when a live server serves the queue."""

    on: dict[str, tuple[ServerInfo, ActiveWorker]]
    serving: tuple[ServerInfo, ...]

    def busy(self) -> bool:
        """Every serving server has all its workers taken (as of its last heartbeat)."""
        return bool(self.serving) and all(len(s.active_workers) >= s.concurrency for s in self.serving)


def join_active(queue: str) -> Running:
    found = access.servers(polled(("servers",), inspector().servers))
    on = {w.task_id: (s, w) for s in found for w in s.active_workers if w.queue == queue}
    return Running(on, tuple(s for s in found if queue in s.queues))


def recent_jobs(queue: str) -> list[Job]:
    """The queue's running jobs and those that ended in the last half minute (their final count shows)."""
    now = inspector().now()
    jobs = polled(("jobs", queue), lambda: inspector().jobs(queue=queue, limit=5))
    return [j for j in jobs if not j.finished or now - j.updated_at < 30]


@bp.get("/queues/<queue:queue>")
@require_role("viewer")
def queue_page(queue: str) -> Any:
    return state_view(queue, request.args.get("state") or default_state(snapshot.queue_info(queue)))


@bp.get("/queues/<queue:queue>/<state>")
@require_role("viewer")
def queue_state(queue: str, state: str) -> Any:
    return state_view(queue, state)


@bp.get("/queues/<queue:queue>/tasks/<taskid:task_id>")
@require_role("viewer")
def task_page(queue: str, task_id: str, *, message: str = "", kind: str = "ok") -> Any:
    insp = inspector()
    task = access.task(insp.get_task(queue, task_id))
    why = insp.explain(queue, task_id) if task.state not in (TaskState.COMPLETED,) else None
    raw = display.view(task.info.payload) if task.payload.kind == "call" else None  # info.payload is masked too
    mismatch = raw is not None and f"payload of {task.info.type!r}" in task.info.last_err  # a PayloadMismatch
    trace = trace_id(task.info.headers)
    return page("task.html", task=task, info=task.info, why=why, message=message, kind=kind, now=insp.now(),
                raw=raw, mismatch=mismatch, lock=insp.unique_lock(queue, task_id), trace_id=trace,
                trace_url=trace_link(trace))
