"""What the signed-in user may see and do queue by queue, and which values of a task they may read.

``require(queue, need)`` is the one check every view makes (``auth.require_role`` calls it): 401 without a
user; 403 for a change in read-only mode; for a queue the user may not see (per-queue role "none") the same
404 as for a queue that does not exist; 403 for a role below need on that queue. A refused change (non-GET)
is counted in the audit log's refused requests (webui.audit.refused_request), a hidden queue's included.

``role_on(queue)``, ``visible(names)``, ``hides_some()`` filter what a page lists; ``task``, ``page``,
``search``, ``servers``, ``entries`` mask values by the redaction policy (inspector.redact), built once per app
from the ASYNQPY_REDACTION setting: the config file's [redaction] table, or a path to a TOML file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, abort, current_app, g, request

from asynqpy.errors import QueueNotFoundError
from inspector import croncontrols
from inspector.models import SchedulerEntry, SearchResult, ServerInfo, TaskPage, TaskRecord
from inspector.redact import Policy
from webui import audit, csrf, security
from webui.users import NO_ACCESS, role_allows

EXT = "asynqpy.redaction"
SAFE = csrf.SAFE_METHODS


def policy() -> Policy:
    """The app's redaction policy (init_app made it)."""
    p: Policy = current_app.extensions[EXT]
    return p


def init_app(app: Flask) -> None:
    """Build the redaction policy from ASYNQPY_REDACTION. Raises InvalidArgumentError for bad rules."""
    app.extensions[EXT] = Policy.from_setting(app.config.get("ASYNQPY_REDACTION"))


def role_on(queue: str | None) -> str:
    """g.user's role on queue (their role when queue is None); "none" without a user or access."""
    user = g.get("user")
    if user is None:
        return NO_ACCESS
    return str(user.role_on(queue)) if queue is not None else str(user.role)


def _current_queue() -> str | None:
    """The queue this request is about: one a view named (``act_on``), else the URL's <queue>."""
    q = g.get("acting_queue")
    if q is None and request.view_args:
        q = request.view_args.get("queue")
    return q if isinstance(q, str) else None


def act_on(queue: str) -> None:
    """Say which queue this request is about when the URL does not name it (a job's page): can() and the
    templates then answer for that queue."""
    g.acting_queue = queue


def can(need: str, queue: str | None = None) -> bool:
    """Whether the user may do what need allows on queue (default: this request's queue), False above viewer
    in read-only mode."""
    have = role_on(queue if queue is not None else _current_queue())
    if have == NO_ACCESS or not role_allows(have, need):
        return False
    return need == "viewer" or not security.read_only()


def not_found(queue: str) -> QueueNotFoundError:
    """The error a hidden queue gets: the Inspector's own for a queue that does not exist."""
    return QueueNotFoundError(f"queue {queue!r} does not exist", queue=queue)


def require(queue: str | None, need: str, *, task_ids: list[str] | None = None) -> None:
    """Refuse the request unless the user may do what need allows on queue (None: not about one queue).

    Raises QueueNotFoundError (404) for a hidden queue; aborts 401 without a user, 403 in read-only mode for a
    change or for a role below need. Refused changes are audited."""
    user = g.get("user")
    if user is None:
        abort(401)
    change = request.method not in SAFE
    have = role_on(queue)
    reason = None
    if need != "viewer" and change and security.read_only():
        reason = "the dashboard is read-only: no changes can be made"
    elif have == NO_ACCESS:
        if change:
            _denied(queue, f"{user.name} has no access to this queue", task_ids)
        raise not_found(queue or "")
    elif not role_allows(have, need):
        on = f" on queue {queue}" if queue is not None and user.queues else ""
        reason = f"this needs the {need} role; {user.name} is {have}{on}"
    if reason is not None:
        if change:
            _denied(queue, reason, task_ids)
        abort(403, description=reason)


def _denied(queue: str | None, reason: str, task_ids: list[str] | None) -> None:
    """Count the refusal apart from the audit chain, naming the verb, queue and task ids (webui.audit)."""
    audit.refused_request(reason, queue=queue, task_ids=task_ids)


def anywhere(need: str) -> bool:
    """Whether the user's role, or their role on some queue pattern, allows need."""
    user = g.get("user")
    if user is None:
        return False
    return any(role_allows(r, need) for r in (user.role, *(r for _, r in user.queues)))


def everywhere(need: str) -> bool:
    """Whether the user's role and every per-queue role of theirs allow need: for what acts on every queue at
    once (a flow-control limit holds for a task type in whichever queue it runs)."""
    user = g.get("user")
    if user is None:
        return False
    return all(role_allows(r, need) for r in (user.role, *(r for _, r in user.queues)))


def hides_some() -> bool:
    """Whether some queue may be hidden from the user (lists must then be filtered)."""
    user = g.get("user")
    return bool(user is not None and user.restricted)


def visible(names: Iterable[str]) -> list[str]:
    """The queue names the user may see, in their order."""
    names = list(names)
    if not hides_some():
        return names
    return [q for q in names if role_on(q) != NO_ACCESS]


def queue_filter() -> Callable[[str], bool] | None:
    """For Inspector reads that take a queue predicate (per-type metrics): None when the user may see every
    queue, else whether they may see a given one."""
    if not hides_some():
        return None
    return lambda q: role_on(q) != NO_ACCESS


def visible_infos(infos: Iterable[Any]) -> list[Any]:
    """Queue infos (anything with .queue) of the queues the user may see."""
    return [i for i in infos if not hides_some() or role_on(i.queue) != NO_ACCESS]


# -- redaction, by the user's role on each task's queue ------------------------------------------------------

def task(rec: TaskRecord, *, full: bool = True) -> TaskRecord:
    return policy().task(rec, role_on(rec.info.queue), full=full)


def page(tp: TaskPage) -> TaskPage:
    return policy().page(tp, role_on(tp.queue))


def search(res: SearchResult, text: str | None) -> SearchResult:
    return policy().search(res, role_on(res.queue), text)


def servers(found: Iterable[ServerInfo]) -> list[ServerInfo]:
    """Servers as the user may see them: queues they may not see left out (a server with none left out
    entirely), running tasks' payloads masked."""
    out = []
    pol = policy()
    for s in found:
        queues = {q: w for q, w in s.queues.items() if role_on(q) != NO_ACCESS}
        if s.queues and not queues:
            continue
        workers = tuple(pol.worker(w, role_on(w.queue)) for w in s.active_workers if role_on(w.queue) != NO_ACCESS)
        out.append(dataclasses.replace(s, queues=queues, active_workers=workers))
    return out


def entry_queue(e: SchedulerEntry) -> str:
    """The queue a scheduler entry enqueues into: the one the cron controls act on (inspector.croncontrols)."""
    return croncontrols.entry_queue(e)


def entries(found: Iterable[SchedulerEntry]) -> list[SchedulerEntry]:
    """Scheduler entries of queues the user may see, payloads masked."""
    pol = policy()
    return [pol.entry(e, role_on(entry_queue(e))) for e in found if role_on(entry_queue(e)) != NO_ACCESS]
