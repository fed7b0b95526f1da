"""Per-queue roles through real HTTP: users see only the queues they may see (lists, counts, totals, errors,
charts, search, jobs), a hidden queue answers 404 like one that does not exist, and every action checks the
role on its own queue on the server, refusals audited."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from flask import Flask, g
from flask.testing import FlaskClient

from asynqpy import Client, Task
from inspector.audit import AuditLog
from inspector.auditrefused import RefusedLog
from inspector.models import ActiveWorker, SchedulerEntry, ServerInfo
from tests.inspector.worker import Worker
from tests.webui.authkit import PASSWORD, app_on, form_token, login, queue_roles_file, token
from webui import access
from webui.users import User

# bill: viewer, operator on billing:*; onlyb: billing:* only; hank: everything but hr:*
USERS = {"bill": ("viewer", {"billing:*": "operator"}), "onlyb": ("viewer", {"billing:*": "operator", "*": "none"}),
         "hank": ("admin", {"hr:*": "none"}), "vic": ("viewer", {})}


@pytest.fixture(scope="module")
def queue_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return queue_roles_file(tmp_path_factory.mktemp("qusers") / "users.toml", USERS, PASSWORD)


@pytest.fixture
def qapp(redis_url: str, queue_users: Path) -> Iterator[Flask]:
    with app_on(redis_url, queue_users) as a:
        yield a


@pytest.fixture
def queues(redis_url: str) -> dict[str, Any]:
    """billing:eu: 2 archived; hr:pay: 1 archived, 1 active, 1 pending; mail: 1 archived."""
    r = redis.Redis.from_url(redis_url)
    w = Worker(r, time.time)
    ids: dict[str, Any] = {}
    with Client(redis_url) as c:
        for q, n in (("billing:eu", 2), ("hr:pay", 2), ("mail", 1)):
            ids[q] = [c.enqueue(Task("payment:charge" if q == "billing:eu" else "job", b'{"n": 1}'), queue=q).id
                      for _ in range(n)]
        ids["hr:pending"] = c.enqueue(Task("job", b"{}"), queue="hr:pay").id
    for q in ("billing:eu", "mail"):
        for tid in w.take(q, len(ids[q])):
            w.kill(q, tid, f"boom in {q}")
    first, second = ids["hr:pay"]
    w.take("hr:pay", 2)
    w.kill("hr:pay", first, "boom in hr")
    w.held.pop(second)  # stays active
    ids["hr:active"] = second
    r.close()
    return ids


def log_in(app: Flask, name: str) -> FlaskClient:
    c = app.test_client()
    assert login(c, name, PASSWORD).status_code == 303
    return c


def body(resp: Any) -> str:
    return str(resp.get_data(as_text=True))


def error_text(resp: Any) -> str:
    m = re.search(r'<section class="error-page">.*?</section>', body(resp), re.S)
    assert m, body(resp)[:300]
    return m.group(0)


def test_lists_counts_and_totals_show_only_visible_queues(qapp: Flask, queues: dict[str, Any]) -> None:
    c = log_in(qapp, "onlyb")
    page = body(c.get("/"))
    assert "billing:eu" in page and "hr:pay" not in page and "mail" not in page
    totals = re.search(r'<div class="totals">(.*?)</div>\s*(?:<div class="table-wrap">\s*)?<table', page, re.S)
    assert totals and '<span class="n">1</span> queues' in totals.group(1)
    assert '<span class="n">2</span> tasks' in totals.group(1)  # billing's 2, not the 6 of every queue
    errors = body(c.get("/errors"))
    assert "boom in billing:eu" in errors and "boom in hr" not in errors and "boom in mail" not in errors
    assert "hr:pay" not in errors  # nor in the queue chooser
    assert "hr:pay" not in body(c.get("/charts/daily")) and c.get("/charts/sizes").status_code == 200
    full = body(log_in(qapp, "vic").get("/"))
    assert "hr:pay" in full and '<span class="n">3</span> queues' in full
    hank = body(log_in(qapp, "hank").get("/errors"))  # an admin with one pattern hidden
    assert "boom in mail" in hank and "boom in hr" not in hank


def test_a_hidden_queue_is_a_404_like_a_missing_one(qapp: Flask, queues: dict[str, Any]) -> None:
    c = log_in(qapp, "onlyb")
    missing = c.get("/queues/nosuchqueue")
    assert missing.status_code == 404
    tid = queues["hr:pay"][0]
    for url in ("/queues/hr:pay", "/queues/hr:pay/archived", f"/queues/hr:pay/tasks/{tid}",
                "/errors?queue=hr:pay", "/charts/daily?queue=hr:pay", "/charts/sizes?queue=hr:pay",
                "/queues/hr:pay/archived?text=boom"):
        resp = c.get(url)
        assert resp.status_code == 404, url
        assert error_text(resp).replace("hr:pay", "Q") == error_text(missing).replace("nosuchqueue", "Q"), url
        assert "boom in hr" not in body(resp)
    assert log_in(qapp, "bill").get(f"/queues/hr:pay/tasks/{tid}").status_code == 200


def audit_records(redis_url: str) -> list[Any]:
    return list(AuditLog(redis.Redis.from_url(redis_url)).list().records)


def refused_counts(redis_url: str) -> list[Any]:
    return RefusedLog(redis.Redis.from_url(redis_url)).list()


def test_actions_check_the_role_on_their_own_queue(qapp: Flask, queues: dict[str, Any], redis_url: str) -> None:
    c = log_in(qapp, "bill")
    tok = token(c)
    h = {"X-CSRF-Token": tok}
    billing, mail = queues["billing:eu"][0], queues["mail"][0]
    ok = c.post(f"/queues/billing:eu/tasks/{billing}/run", headers=h)
    assert ok.status_code == 200 and "replayed" in body(ok)
    refused = c.post(f"/queues/mail/tasks/{mail}/run", headers=h)
    assert refused.status_code == 403 and "viewer" in body(refused)
    assert c.post("/queues/mail/archived/run", data={"ids": mail}, headers=h).status_code == 403
    assert c.post("/queues/mail/pause", headers=h).status_code == 403
    assert c.post("/queues/billing:eu/pause", headers=h).status_code == 200
    # all-in-state and deleting a queue need admin on that queue: bill is operator there
    assert c.post("/queues/billing:eu/archived/delete", data={"all": "1"}, headers=h).status_code == 403
    recs = audit_records(redis_url)
    denied = refused_counts(redis_url)  # refusals are counted apart from the chain, naming the verb
    assert any(x.queue == "mail" and x.task_ids == (mail,) and "bill is viewer on queue mail" in (x.detail or "")
               for x in denied), denied
    assert any(x.queue == "mail" and x.task_ids == (mail,) and x.action == "tasks.run" for x in denied)
    assert any(x.queue == "mail" and x.task_ids == (mail,) and x.action == "task.run" for x in denied)
    assert not [x for x in recs if x.outcome == "denied"]
    assert any(x.action == "task.run" and x.queue == "billing:eu" and x.outcome == "ok" for x in recs)
    with redis.Redis.from_url(redis_url) as r:  # nothing changed in mail
        assert r.zcard("asynq:{mail}:archived") == 1


def test_a_post_to_a_hidden_queue_is_a_404_and_audited(qapp: Flask, queues: dict[str, Any], redis_url: str) -> None:
    c = log_in(qapp, "onlyb")
    h = {"X-CSRF-Token": token(c)}
    tid = queues["hr:pay"][0]
    for url in (f"/queues/hr:pay/tasks/{tid}/run", "/queues/hr:pay/archived/delete", "/queues/hr:pay/pause"):
        assert c.post(url, data={"ids": tid}, headers=h).status_code == 404, url
    with redis.Redis.from_url(redis_url) as r:
        assert r.zcard("asynq:{hr:pay}:archived") == 1
    denied = {x.action: x for x in refused_counts(redis_url) if x.outcome == "denied" and x.queue == "hr:pay"}
    assert set(denied) == {"task.run", "tasks.delete", "queue.pause"}
    assert all("no access to this queue" in x.detail for x in denied.values())
    assert denied["task.run"].task_ids == denied["tasks.delete"].task_ids == (tid,)


def test_cancel_by_id_only_reaches_tasks_of_the_queue(qapp: Flask, queues: dict[str, Any]) -> None:
    c = log_in(qapp, "bill")
    resp = c.post("/queues/billing:eu/active/cancel", data={"ids": queues["hr:active"]},
                  headers={"X-CSRF-Token": token(c)})
    assert resp.status_code == 200 and "cancel requested for 0 task(s)" in body(resp)


def test_jobs_of_hidden_queues_do_not_exist(qapp: Flask, queues: dict[str, Any]) -> None:
    insp = qapp.extensions["asynqpy.inspector"]
    job = insp.start_job("delete", "hr:pay", "archived", user="ada")
    onlyb = log_in(qapp, "onlyb")
    assert onlyb.get(f"/jobs/{job.id}").status_code == 404
    assert error_text(onlyb.get(f"/jobs/{job.id}")) == error_text(onlyb.get("/jobs/nosuch")).replace("nosuch", job.id)
    assert log_in(qapp, "bill").get(f"/jobs/{job.id}").status_code == 200
    hank = log_in(qapp, "hank")
    assert hank.post(f"/jobs/{job.id}/cancel", headers={"X-CSRF-Token": token(hank)}).status_code == 404
    bjob = insp.start_job("delete", "billing:eu", "archived", user="ada")
    bill = log_in(qapp, "bill")
    assert bill.post(f"/jobs/{bjob.id}/cancel", headers={"X-CSRF-Token": token(bill)}).status_code == 403


def test_buttons_follow_the_role_on_the_page_queue(qapp: Flask, queues: dict[str, Any]) -> None:
    c = log_in(qapp, "bill")
    assert "Replay" in body(c.get("/queues/billing:eu/archived"))
    assert "Replay" not in body(c.get("/queues/mail/archived"))
    assert 'name="csrf_token"' in body(c.get(f"/queues/billing:eu/tasks/{queues['billing:eu'][1]}"))
    form_token(body(c.get("/queues/billing:eu/archived")))


def test_servers_and_scheduler_entries_of_hidden_queues_are_left_out(qapp: Flask) -> None:
    w = ActiveWorker("t1", "job", b'{"password": "pw"}', "hr:pay", None, None)
    v = ActiveWorker("t2", "job", b'{"password": "pw2", "n": 1}', "billing:eu", None, None)
    servers = [ServerInfo("s1", "h", 1, 2, {"hr:pay": 1}, False, None, "active", (w,)),
               ServerInfo("s2", "h", 2, 2, {"hr:pay": 1, "billing:eu": 1}, False, None, "active", (w, v))]
    entries = [SchedulerEntry("e1", "@every 1m", "job", b"{}", ('Queue("hr:pay")',), None, None, "x"),
               SchedulerEntry("e2", "@every 1m", "job", b'{"token": "t"}', (), None, None, "x")]
    with qapp.test_request_context("/servers"):
        g.user = User("onlyb", "viewer", queues=(("billing:*", "operator"), ("*", "none")))
        shown = access.servers(servers)
        assert [s.id for s in shown] == ["s2"] and dict(shown[0].queues) == {"billing:eu": 1}
        assert [x.task_id for x in shown[0].active_workers] == ["t2"]
        assert b"pw2" not in shown[0].active_workers[0].task_payload
        assert access.entries(entries) == []  # "default" is hidden from onlyb too
        g.user = User("vic", "viewer")
        seen = access.entries(entries)
        assert [e.id for e in seen] == ["e1", "e2"] and b'"t"' not in seen[1].task_payload
