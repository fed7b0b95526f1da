"""Per-queue roles on the power tools, through real HTTP (werkzeug serving the app on a loopback port): the types
pages count only the queues a user may see (a type recorded only in hidden queues answers 404 as one never
recorded), cron controls judge the role on the queue an entry enqueues into (a hidden queue's entry answers as an
unknown entry), limits show their use only in visible queues and change only for admins of every queue, and
refusals are counted apart from the audit chain, naming the verb and the queue."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from asynqpy import Client, Limit, Task
from asynqpy.rdb import broker, keys
from asynqpy.rdb.flow import limits, set_limit
from asynqpy.rdb.state import record_type_stats
from asynqpy.rdb.sync_runner import SyncRunner
from asynqpy.scheduler import Scheduler
from asynqpy.typestats import bucket
from inspector import Inspector
from inspector.auditrefused import RefusedLog
from tests.helpers import wait_for
from tests.webui.authkit import PASSWORD, queue_roles_file
from tests.webui.browserkit import CHROMIUM, expect, sign_in
from tests.webui.livekit import Browser, Reply, live_app, signed_in

# bill: viewer, operator on billing:*; onlyb: billing:* only; hank: admin but hr:* hidden; boss: admin everywhere
USERS = {"bill": ("viewer", {"billing:*": "operator"}), "onlyb": ("viewer", {"billing:*": "operator", "*": "none"}),
         "hank": ("admin", {"hr:*": "none"}), "boss": ("admin", {})}


@pytest.fixture(scope="module")
def power_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return queue_roles_file(tmp_path_factory.mktemp("pusers") / "users.toml", USERS, PASSWORD)


@pytest.fixture
def live(redis_url: str, power_users: Path) -> Iterator[str]:
    with live_app(redis_url, power_users) as base:
        yield base


def as_user(base: str, name: str) -> Browser:
    return signed_in(base, name, PASSWORD)


def post(b: Browser, path: str, **form: str) -> Reply:
    return b.open(path, {**form, "csrf_token": b.token("/")})


def error_text(reply: Reply) -> str:
    m = re.search(r'<section class="error-page">.*?</section>', reply.text, re.S)
    assert m, reply.text[:300]
    return m.group(0)


def refused(r: redis.Redis) -> list[Any]:
    return RefusedLog(r).list()


def _record(r: redis.Redis, queue: str, ttype: str, n: int, failed: int, seconds: float, at: float) -> None:
    fields = {"n": n, "f": failed, "rt": round(n * seconds * 1000), f"r{bucket(seconds)}": n}
    SyncRunner(r).run(record_type_stats([(queue, ttype, int(at // 60), fields)]))


def _record_legacy(r: redis.Redis, ttype: str, n: int, at: float) -> None:
    """What a worker of an earlier version wrote: per type, no queue."""
    minute = int(at // 60)
    for k in (keys.type_minute(ttype, minute), keys.type_hour(ttype, minute // 60)):
        r.hset(k, mapping={"n": n, "rt": n * 100, f"r{bucket(0.1)}": n})
    r.zadd(keys.TYPE_INDEX, {ttype: minute})


@pytest.fixture
def recorded(r: redis.Redis) -> None:
    """payment:charge in billing:eu (10 runs, 1 failed) and hr:pay (5, all failed); payroll:run only in hr:pay;
    mail:send in mail; legacy:type and 7 more payment:charge runs written without a queue by an earlier worker."""
    now = time.time()
    _record(r, "billing:eu", "payment:charge", 10, 1, 0.2, now)
    _record(r, "hr:pay", "payment:charge", 5, 5, 30.0, now - 60)
    _record(r, "hr:pay", "payroll:run", 3, 0, 1.0, now)
    _record(r, "mail", "mail:send", 4, 0, 0.05, now)
    _record_legacy(r, "legacy:type", 2, now)
    _record_legacy(r, "payment:charge", 7, now)


def _types_rows(page: Reply) -> dict[str, tuple[int, int]]:
    rows = re.findall(r'<tr>\s*<td><a href="/types/[^"?]+\?window=1h">([^<]+)</a></td>\s*<td>(\d+)</td><td>(\d+)</td>',
                      page.text)
    return {t: (int(n), int(f)) for t, n, f in rows}


def test_the_inspector_sums_queues_and_filters_them(redis_url: str, recorded: None) -> None:
    with Inspector(redis_url) as insp:
        every = {s.task_type: s for s in insp.type_stats("1h")}
        pay = every["payment:charge"]
        assert (pay.processed, pay.failed) == (22, 6) and pay.queues == ("billing:eu", "hr:pay") and pay.unqueued
        assert set(every) == {"payment:charge", "payroll:run", "mail:send", "legacy:type"}
        billing = insp.type_stats("72h", queues=lambda q: q.startswith("billing:"))
        assert [(s.task_type, s.processed, s.failed, s.queues, s.unqueued) for s in billing] == \
            [("payment:charge", 10, 1, ("billing:eu",), False)]
        assert billing[0].run_p50 is not None and billing[0].run_p50 < 1  # hr's 30 s runs left out
        assert insp.task_types("24h", queues=lambda q: q == "hr:pay") == ["payment:charge", "payroll:run"]
        assert insp.one_type_stats("payroll:run", "1h", queues=lambda q: q != "hr:pay").processed == 0


def test_types_pages_show_only_what_visible_queues_ran(live: str, recorded: None) -> None:
    onlyb = as_user(live, "onlyb")
    page = onlyb.open("/types")
    assert page.status == 200
    assert _types_rows(page) == {"payment:charge": (10, 1)}
    assert "hr:pay" not in page.text and "payroll" not in page.text and "legacy:type" not in page.text
    one = onlyb.open("/types/payment:charge?window=24h")
    assert one.status == 200 and "hr:pay" not in one.text
    assert re.search(r"<dt>Processed</dt><dd>10</dd><dt>Failed</dt><dd>1 ", one.text)
    assert 'Recorded in queue <a href="/queues/billing:eu">billing:eu</a>.' in one.text
    hidden, never = onlyb.open("/types/payroll:run"), onlyb.open("/types/never:seen")
    assert hidden.status == never.status == 404 and error_text(hidden) == error_text(never)
    assert "payroll" not in hidden.text
    hank = as_user(live, "hank")  # an admin with hr:* hidden: no hr figures, and none that may be hr's
    assert _types_rows(hank.open("/types")) == {"payment:charge": (10, 1), "mail:send": (4, 0)}
    assert hank.open("/types/payroll:run?window=72h").status == 404
    bill = as_user(live, "bill")  # sees every queue: every queue's figures and the earlier workers' too
    assert _types_rows(bill.open("/types")) == {"payment:charge": (22, 6), "payroll:run": (3, 0),
                                                "mail:send": (4, 0), "legacy:type": (2, 0)}
    full = bill.open("/types/payment:charge")
    assert "by earlier asynqpy workers, which recorded no queue" in full.text and "hr:pay" in full.text
    assert bill.open("/types/never:seen").status == 404  # nothing hidden from bill: a 404 all the same


def test_deploy_marks_follow_the_overall_role(live: str, r: redis.Redis) -> None:
    bill = as_user(live, "bill")  # operator on billing only: a mark is on every queue's charts
    assert post(bill, "/types/marks", label="v9").status == 403
    assert r.zcard(keys.MARKS) == 0
    assert post(as_user(live, "hank"), "/types/marks", label="v9").status == 303
    assert [x.action for x in refused(r) if x.user == "bill"] == ["types.add_mark"]


@pytest.fixture
def entries(redis_url: str, r: redis.Redis) -> Iterator[dict[str, str]]:
    """One live asynqpy scheduler with an hourly entry into each of billing:eu, hr:pay and mail."""
    s = Scheduler(redis_url, heartbeat_interval=1)
    ids = {q: s.register("@every 1h", Task(f"sync:{q}", b"{}"), queue=q) for q in ("billing:eu", "hr:pay", "mail")}
    t = threading.Thread(target=lambda: asyncio.run(s.arun()))
    t.start()
    try:
        wait_for(lambda: r.zcard(keys.SCHEDULERS) == 1, what="the scheduler's entries")
        yield ids
    finally:
        s.stop()
        t.join(10)


def test_cron_controls_check_the_role_on_the_entry_queue(live: str, r: redis.Redis, entries: dict[str, str]) -> None:
    bill = as_user(live, "bill")
    page = bill.open("/scheduler").text
    assert all(eid in page for eid in entries.values())  # bill sees every queue
    assert page.count(">Pause</button>") == 1 and page.count(">Enqueue now</button>") == 1  # billing's only
    assert page.count(">view only</span>") == 2
    assert post(bill, f"/scheduler/{entries['billing:eu']}/pause").status == 303
    assert r.exists(keys.cron_paused("billing:eu", entries["billing:eu"]))
    for action in ("pause", "run"):
        resp = post(bill, f"/scheduler/{entries['mail']}/{action}")
        assert resp.status == 403 and "bill is viewer on queue mail" in resp.text
    assert not r.exists(keys.cron_paused("mail", entries["mail"])) and r.llen("asynq:{mail}:pending") == 0
    got = {(x.action, x.queue): x for x in refused(r) if x.user == "bill"}
    assert set(got) == {("cron.pause", "mail"), ("cron.run", "mail")}
    assert all(x.outcome == "denied" and "operator role" in x.detail for x in got.values())


def test_a_hidden_queue_entry_is_as_unknown(live: str, r: redis.Redis, entries: dict[str, str]) -> None:
    onlyb = as_user(live, "onlyb")
    page = onlyb.open("/scheduler").text
    assert entries["billing:eu"] in page and entries["hr:pay"] not in page and "sync:hr:pay" not in page
    assert "Enqueue history of" not in onlyb.open(f"/scheduler?entry={entries['hr:pay']}").text
    unknown = post(onlyb, "/scheduler/nosuchentry/pause")
    for action in ("pause", "resume", "run"):
        resp = post(onlyb, f"/scheduler/{entries['hr:pay']}/{action}")
        assert resp.status == unknown.status == 400, action
        assert error_text(resp).replace(entries["hr:pay"], "E") == error_text(unknown).replace("nosuchentry", "E")
    assert not r.exists(keys.cron_paused("hr:pay", entries["hr:pay"])) and r.llen("asynq:{hr:pay}:pending") == 0
    got = {x.action: x for x in refused(r) if x.user == "onlyb"}
    assert set(got) == {"cron.pause", "cron.resume", "cron.run"}
    assert all(x.queue == "hr:pay" and "no access to this queue" in x.detail for x in got.values())
    assert post(onlyb, f"/scheduler/{entries['billing:eu']}/run").status == 303
    assert r.llen("asynq:{billing:eu}:pending") == 1


def test_limits_show_use_in_visible_queues_and_change_only_for_admins_of_every_queue(
        live: str, r: redis.Redis, redis_url: str) -> None:
    with Client(redis_url) as c:
        for q in ("billing:eu", "hr:pay"):
            c.enqueue(Task("payment:charge", b""), queue=q)
    set_limit(r, Limit("payment:*", concurrency=3))
    for q in ("billing:eu", "hr:pay"):
        SyncRunner(r).run(broker.dequeue_timed(q, lease_expiry=time.time() + 30, count=10))
    onlyb = as_user(live, "onlyb").open("/limits").text
    assert "payment:*" in onlyb and "billing:eu" in onlyb and "hr:pay" not in onlyb
    assert "Set limit" not in onlyb
    hank = as_user(live, "hank")
    page = hank.open("/limits").text
    assert "billing:eu" in page and "hr:pay" not in page and "Set limit" not in page and "Remove" not in page
    resp = post(hank, "/limits/remove", pattern="payment:*")  # it would free hr's tasks too
    assert resp.status == 403 and "admin role on every queue" in resp.text
    assert post(hank, "/limits", pattern="sync:*", concurrency="1").status == 403
    assert [lim.pattern for lim in limits(r)] == ["payment:*"]
    assert {x.action for x in refused(r) if x.user == "hank"} == {"limits.limit_remove", "limits.limit_set"}
    boss = as_user(live, "boss")
    assert "hr:pay" in boss.open("/limits").text
    assert "limit payment:* removed" in post(boss, "/limits/remove", pattern="payment:*").text


def test_find_actions_on_hidden_queues_are_counted_with_their_verb(live: str, r: redis.Redis, redis_url: str) -> None:
    with Client(redis_url) as c:
        c.enqueue(Task("payroll:run", b""), queue="hr:pay")
    onlyb = as_user(live, "onlyb")
    assert onlyb.open("/queues/hr:pay/find?q=type:payroll:*").status == 404
    assert post(onlyb, "/queues/hr:pay/find/delete", q="type:payroll:*").status == 404
    assert post(onlyb, "/queues/hr:pay/find/preview", q="type:payroll:*", action="delete").status == 404
    assert r.llen("asynq:{hr:pay}:pending") == 1
    got = {x.action for x in refused(r) if x.user == "onlyb" and x.queue == "hr:pay"}
    assert got == {"tasks.delete_matching", "find.find_preview"}


def test_read_only_refuses_cron_controls_before_looking_entries_up(redis_url: str, power_users: Path,
                                                                   r: redis.Redis, entries: dict[str, str]) -> None:
    with live_app(redis_url, power_users, ASYNQPY_READ_ONLY=True) as base:
        onlyb = as_user(base, "onlyb")
        hidden = post(onlyb, f"/scheduler/{entries['hr:pay']}/pause")
        unknown = post(onlyb, "/scheduler/nosuchentry/pause")
        mine = post(onlyb, f"/scheduler/{entries['billing:eu']}/pause")
        assert hidden.status == unknown.status == mine.status == 403
        assert error_text(hidden) == error_text(unknown) and "read-only" in error_text(hidden)
    assert not r.exists(keys.cron_paused("billing:eu", entries["billing:eu"]))


needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")


@needs_chromium
def test_browser_billing_operator_sees_billing_figures_and_pauses_its_entry(
        live: str, browser: Any, r: redis.Redis, recorded: None, entries: dict[str, str]) -> None:
    ctx = browser.new_context(viewport={"width": 1600, "height": 900})
    page = ctx.new_page()
    sign_in(page, live, "onlyb", PASSWORD)
    page.get_by_role("link", name="Types").click()
    expect(page.locator("#types-table tbody tr")).to_have_count(1)
    page.get_by_role("link", name="payment:charge").click()
    expect(page.locator("#type-summary")).to_contain_text("10")
    expect(page.locator("#type-queues")).to_have_text("Recorded in queue billing:eu.")
    page.get_by_role("link", name="Scheduler").click()
    expect(page.locator("table.entries tbody tr")).to_have_count(1)  # hr's and mail's entries are hidden
    expect(page.locator("table.entries")).to_contain_text("sync:billing:eu")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#messages")).to_contain_text("paused")
    expect(page.locator(".cron-state")).to_have_text("paused")
    assert r.exists(keys.cron_paused("billing:eu", entries["billing:eu"]))
    ctx.close()
    ctx = browser.new_context(viewport={"width": 1600, "height": 900})
    page = ctx.new_page()
    sign_in(page, live, "bill", PASSWORD)  # every entry shown; only billing's with buttons
    page.get_by_role("link", name="Scheduler").click()
    expect(page.locator("table.entries tbody tr")).to_have_count(3)
    expect(page.get_by_role("button", name="Enqueue now")).to_have_count(1)
    expect(page.locator(".view-only")).to_have_count(2)
    ctx.close()
