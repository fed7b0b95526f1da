"""Dashboard actions through real HTTP after a real login: replay/archive/delete/cancel on one task, on selected
rows and on a whole state; pause/resume/delete a queue; background jobs with a rate, progress and cancel; every
change audited with its outcome and count."""

from __future__ import annotations

import time
from typing import Any

import redis
from flask.testing import FlaskClient

from asynqpy import Client, Task
from inspector import Inspector
from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from tests.helpers import wait_for
from tests.webui.authkit import token


def _post(c: FlaskClient, path: str, data: dict[str, Any] | None = None, *, htmx: bool = True) -> Any:
    headers = {"X-CSRF-Token": token(c)}
    if htmx:
        headers["HX-Request"] = "true"
    return c.post(path, data=data or {}, headers=headers)


def _records(r: redis.Redis) -> list[Any]:
    return list(reversed(AuditLog(r).list().records))  # oldest first


def _count(redis_url: str, q: str, st: str) -> int:
    with Inspector(redis_url) as insp:
        return insp.queue_info(q, memory=False).count(st)


def test_replay_one_archived_task(as_role: Any, state: dict[str, Any], redis_url: str, r: redis.Redis) -> None:
    c = as_role("operator")
    tid = state["archived"][1]
    resp = _post(c, f"/queues/mail/tasks/{tid}/run")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200, html[:500]
    assert f"task {tid} replayed" in html
    assert html.lstrip().startswith('<section id="queue-body"')  # the partial: rows and counters in place
    assert tid not in html.split("<tbody>")[1] if "<tbody>" in html else True
    assert _count(redis_url, "mail", "archived") == 2 and _count(redis_url, "mail", "pending") == 2
    rec = _records(r)[-1]
    assert (rec.action, rec.user, rec.role, rec.queue, rec.outcome) == ("task.run", "otto", "operator", "mail", "ok")
    assert list(rec.task_ids) == [tid]


def test_run_now_archive_delete_cancel_per_state(as_role: Any, state: dict[str, Any], redis_url: str) -> None:
    c = as_role("operator")
    assert "queued to run now" in _post(c, f"/queues/mail/tasks/{state['scheduled']}/run").get_data(as_text=True)
    assert "archived" in _post(c, f"/queues/mail/tasks/{state['retry'][0]}/archive").get_data(as_text=True)
    assert "deleted" in _post(c, f"/queues/mail/tasks/{state['completed']}/delete").get_data(as_text=True)
    html = _post(c, f"/queues/mail/tasks/{state['active']}/cancel").get_data(as_text=True)
    assert "no server heard the cancel request" in html
    with Inspector(redis_url) as insp:
        info = insp.queue_info("mail", memory=False)
    assert (info.scheduled, info.retry, info.completed, info.archived) == (0, 1, 0, 4)


def test_an_action_the_state_does_not_allow_changes_nothing(as_role: Any, state: dict[str, Any],
                                                            redis_url: str) -> None:
    c = as_role("operator")
    resp = _post(c, f"/queues/mail/tasks/{state['pending']}/run")
    assert resp.status_code == 400 and "does not apply to pending tasks" in resp.get_data(as_text=True)
    assert _post(c, f"/queues/mail/tasks/{state['pending']}/explode").status_code == 404
    assert _post(c, "/queues/mail/tasks/nope/delete").status_code == 404
    assert _count(redis_url, "mail", "pending") == 1


def test_selected_rows_with_a_partial_result(as_role: Any, state: dict[str, Any], redis_url: str,
                                             r: redis.Redis) -> None:
    c = as_role("operator")
    ids = [*state["archived"][:2], "gone-1", "gone-2"]
    resp = _post(c, "/queues/mail/archived/delete", {"ids": ids})
    html = resp.get_data(as_text=True)
    assert "2 of 4 deleted: 2 were already gone" in html
    assert _count(redis_url, "mail", "archived") == 1
    rec = _records(r)[-1]
    assert (rec.action, rec.outcome, rec.count) == ("tasks.delete", "partial", 2)
    assert "select at least one task" in _post(c, "/queues/mail/archived/delete").get_data(as_text=True)


def test_all_in_state_is_for_admins(as_role: Any, state: dict[str, Any], redis_url: str, r: redis.Redis) -> None:
    c = as_role("operator")
    resp = _post(c, "/queues/mail/archived/run", {"all": "1"})
    assert resp.status_code == 403 and _count(redis_url, "mail", "archived") == 3
    assert _post(c, "/queues/mail/delete").status_code == 403
    refused = {x.action: x for x in RefusedLog(r).list()}
    assert refused["tasks.run_all"].detail == "this needs the admin role; otto is operator"
    assert refused["queue.delete"].queue == "mail" and refused["queue.delete"].user == "otto"
    assert refused["queue.delete"].detail == "this needs the admin role; otto is operator"
    c.post("/logout", data={"csrf_token": token(c)})
    c = as_role("admin")
    html = _post(c, "/queues/mail/archived/run", {"all": "1"}).get_data(as_text=True)
    assert "replayed 3 tasks" in html and _count(redis_url, "mail", "archived") == 0
    rec = _records(r)[-1]
    assert (rec.action, rec.user, rec.count, rec.outcome) == ("tasks.run_all", "ada", 3, "ok")


def test_pause_resume_and_delete_a_queue(as_role: Any, state: dict[str, Any], redis_url: str, r: redis.Redis) -> None:
    c = as_role("admin")
    html = _post(c, "/queues/low/pause").get_data(as_text=True)
    assert "queue low paused" in html and ">Resume</button>" in html
    assert _post(c, "/queues/low/pause").status_code == 409
    assert "queue low resumed" in _post(c, "/queues/low/resume").get_data(as_text=True)
    resp = _post(c, "/queues/low/delete")
    assert resp.status_code == 409 and "not empty" in resp.get_data(as_text=True)
    with Client(redis_url) as cl:
        cl.enqueue(Task("x", b""), queue="empty-soon")
    with Inspector(redis_url) as insp:
        insp.delete_all("empty-soon", "pending")
    resp = _post(c, "/queues/empty-soon/delete", htmx=False)
    assert resp.status_code == 303 and resp.headers["Location"] == "/"
    assert "queue empty-soon deleted" in c.get("/").get_data(as_text=True)  # once
    assert "queue empty-soon deleted" not in c.get("/").get_data(as_text=True)
    with Inspector(redis_url) as insp:
        assert "empty-soon" not in insp.queues()
    actions = [(x.action, x.outcome) for x in _records(r)]
    assert ("queue.pause", "ok") in actions and ("queue.pause", "error") in actions
    assert ("queue.delete", "error") in actions and ("queue.delete", "ok") in actions


def test_a_plain_form_post_works_without_htmx(as_role: Any, state: dict[str, Any], redis_url: str) -> None:
    c = as_role("operator")
    html = c.get("/queues/mail/archived").get_data(as_text=True)
    assert 'name="csrf_token"' in html
    resp = _post(c, f"/queues/mail/tasks/{state['archived'][0]}/run", {"back": "task"}, htmx=False)
    assert resp.status_code == 303  # redirect after the POST: a reload does not replay again
    page = c.get(resp.headers["Location"]).get_data(as_text=True)
    assert "<html" in page and "replayed" in page


def archived_tasks(redis_url: str, q: str, n: int) -> None:
    with Client(redis_url) as cl:
        ids = [cl.enqueue(Task("t", b""), queue=q).id for _ in range(n)]
    with Inspector(redis_url) as insp:
        insp.archive_tasks(q, ids)


def test_replay_all_runs_as_a_job_at_a_rate(as_role: Any, redis_url: str, r: redis.Redis) -> None:
    archived_tasks(redis_url, "big", 40)
    c = as_role("admin")
    t0 = time.monotonic()
    html = _post(c, "/queues/big/archived/run", {"all": "1", "rate": "100"}).get_data(as_text=True)
    assert "started a background job to replay 40 archived tasks at 100 tasks/s" in html
    assert "<progress" in html
    with Inspector(redis_url) as insp:
        job = insp.jobs(queue="big")[0]
        wait_for(lambda: insp.job(job.id).finished, timeout=10, what="the job to finish")
        done = insp.job(job.id)
    assert time.monotonic() - t0 >= 0.25  # 40 tasks at 100/s, 10 at a time: the rate held it back
    assert (done.status, done.done, done.changed) == ("done", 40, 40)
    assert _count(redis_url, "big", "pending") == 40
    wait_for(lambda: _records(r)[-1].detail.startswith(f"job {job.id} done"), what="the job's audit record")
    rec = _records(r)[-1]
    assert (rec.action, rec.user, rec.count, rec.outcome) == ("tasks.run_all", "ada", 40, "ok")
    page = c.get(f"/jobs/{job.id}", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "40 of 40 (100%)" in page and "hx-trigger" not in page  # a finished job stops polling


def test_a_job_can_be_cancelled(as_role: Any, redis_url: str, r: redis.Redis) -> None:
    archived_tasks(redis_url, "slow", 50)
    c = as_role("admin")
    _post(c, "/queues/slow/archived/delete", {"all": "1", "rate": "10"})
    with Inspector(redis_url) as insp:
        job = insp.jobs(queue="slow")[0]
        html = _post(c, f"/jobs/{job.id}/cancel").get_data(as_text=True)
        assert "stops after its current chunk" in html
        wait_for(lambda: insp.job(job.id).finished, timeout=10, what="the job to stop")
        assert insp.job(job.id).status == "canceled"
    assert 0 < _count(redis_url, "slow", "archived") < 50
    wait_for(lambda: any(x.detail.startswith(f"job {job.id} canceled") for x in _records(r)), what="audit")


def test_deleting_from_the_task_page_goes_back_to_its_tab(as_role: Any, state: dict[str, Any]) -> None:
    c = as_role("operator")
    tid = state["archived"][0]
    resp = _post(c, f"/queues/mail/tasks/{tid}/delete", {"back": "task"})
    assert resp.status_code == 204 and resp.headers["HX-Redirect"] == "/queues/mail/archived"
    html = c.get("/queues/mail/archived").get_data(as_text=True)
    assert f"task {tid} deleted" in html and f'data-task-id="{tid}"' not in html


def test_a_viewers_refusal_names_the_role_the_action_needs(as_role: Any, state: dict[str, Any],
                                                           r: redis.Redis) -> None:
    """Deleting a queue, acting on every task of a state and setting a limit need admin: a viewer's refusal said
    "operator"."""
    c = as_role("viewer")
    for path, form in (("/queues/mail/delete", {}), ("/queues/mail/archived/delete", {"all": "1"}),
                       ("/queues/mail/pause", {}), ("/queues/mail/archived/delete", {"ids": state["archived"][:1]}),
                       ("/limits", {"pattern": "email:*", "concurrency": "1"})):
        resp = _post(c, path, form)
        assert resp.status_code == 403, path
    refused = {x.action: x.detail for x in RefusedLog(r).list()}
    assert refused == {"queue.delete": "this needs the admin role; vera is viewer",
                       "tasks.delete_all": "this needs the admin role; vera is viewer",
                       "queue.pause": "this needs the operator role; vera is viewer",
                       "tasks.delete": "this needs the operator role; vera is viewer",
                       "limits.limit_set": "this needs the admin role; vera is viewer"}
    assert "needs the admin role" in _post(c, "/queues/mail/delete").get_data(as_text=True)


def test_an_action_on_a_task_that_vanished_stays_on_the_task_page_or_redirects(as_role: Any, state: dict[str, Any],
                                                                                r: redis.Redis) -> None:
    """The task page's Archive and Replay were plain posts landing on a 404 page at .../archive (a reload posted
    again); now every button posts through htmx like Delete (the message in place), and without htmx the post
    redirects to the queue with the message."""
    c = as_role("operator")
    tid = state["retry"][0]
    html = c.get(f"/queues/mail/tasks/{tid}").get_data(as_text=True)
    for action in ("run", "archive", "delete"):
        assert f'hx-post="/queues/mail/tasks/{tid}/{action}"' in html, action
    r.delete(f"asynq:{{mail}}:t:{tid}")
    r.zrem("asynq:{mail}:retry", tid)
    inline = _post(c, f"/queues/mail/tasks/{tid}/archive", {"back": "task"})
    assert inline.status_code == 404 and inline.headers["HX-Retarget"] == "#messages"
    plain = _post(c, f"/queues/mail/tasks/{tid}/run", {"back": "task"}, htmx=False)
    assert plain.status_code == 303 and plain.headers["Location"] == "/queues/mail"
    shown = c.get("/queues/mail").get_data(as_text=True)
    assert "Replay failed:" in shown and tid in shown and 'class="message error"' in shown
    assert [x.outcome for x in _records(r)[-2:]] == ["error", "error"]  # both attempts audited
