"""A Go-only fleet beside our dashboard (issue 19, item 18): a Go asynq server running and failing tasks, a Go
scheduler, and asynqmon reading the same Redis. Every page of ours shows that state, with the numbers
asynqmon and our exporter give: queue counts, running tasks on their Go server (never "no server seen"), the
server itself and the Go scheduler's entry."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.goasynq import GoPeer, redis_args, wait_until
from tests.interop.test_asynqmon import Monitor, asynqmon, asynqmon_binary
from tests.webui.authkit import app, client, users_path
from tests.webui.webkit import as_role

__all__ = ["app", "as_role", "asynqmon", "asynqmon_binary", "client", "users_path"]  # fixtures used here
Q = "gofleet"
STATES = ("active", "pending", "scheduled", "retry", "archived", "completed", "aggregating")


def _html(c: Any, path: str) -> str:
    resp = c.get(path)
    assert resp.status_code == 200, (path, resp.status_code)
    return resp.get_data(as_text=True)


def _overview_counts(page: str) -> dict[str, int]:
    row = page[page.index(f'>{Q}</a>'):]
    row = row[:row.index("</tr>")]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r'<td class="num"[^>]*>(.*?)</td>', row)]
    size, *states = cells[:8]  # the overview's columns: asynqmon's order
    order = ("active", "pending", "aggregating", "scheduled", "retry", "archived", "completed")
    return {"size": int(size), **dict(zip(order, map(int, states), strict=True))}


@pytest.mark.slow
def test_a_go_only_fleet_shows_as_asynqmon_and_the_exporter_see_it(go_peer: GoPeer, go_binary: Path, redis_url: str,
                                                                    asynqmon: Monitor, as_role: Any) -> None:
    go_peer.enqueue([{"type": "sleep:long", "payload_b64": "MjUwMDA=", "queue": Q} for _ in range(3)]  # 25 s
                    + [{"type": "fail:once", "queue": Q, "max_retry": 3} for _ in range(2)]
                    + [{"type": "ok:later", "queue": Q, "process_in_s": 3600}]
                    + [{"type": "sleep:long", "payload_b64": "MjUwMDA=", "queue": Q} for _ in range(2)])
    work = subprocess.Popen([str(go_binary), "work", *redis_args(redis_url), "--queues", f"{Q}=1", "--concurrency",
                             "5", "--duration", "30s", "--retry-delay-s", "3600"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    sched = subprocess.Popen([str(go_binary), "schedule", *redis_args(redis_url), "--spec", "@every 1s", "--type",
                              "go:tick", "--queue", "gocron", "--duration", "30s"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    try:
        assert sched.stdout is not None
        entry = json.loads(sched.stdout.readline())["id"]

        def settled() -> dict[str, Any] | None:
            (mine,) = [x for x in asynqmon.get("/queues")["queues"] if x["queue"] == Q] or [None]
            servers = asynqmon.get("/servers")["servers"]
            busy = sum(len(s["active_workers"]) for s in servers)
            entries = asynqmon.get("/scheduler_entries")["entries"]
            ok = mine and mine["active"] == 5 and mine["retry"] == 2 and busy == 5 and entries
            return {"queue": mine, "servers": servers, "entries": entries} if ok else None

        seen = wait_until(settled, "the Go server's heartbeat with 5 running tasks and the Go scheduler's entry",
                          timeout=25)
        c = as_role("viewer")
        counts = _overview_counts(_html(c, "/"))
        mon = seen["queue"]
        assert counts == {"size": mon["size"], **{s: mon[s] for s in STATES}}

        metrics = c.get("/metrics").get_data(as_text=True)
        for s in STATES:
            m = re.search(rf'asynqpy_queue_tasks\{{queue="{Q}",state="{s}"\}} (\d+)', metrics)
            assert m and int(m.group(1)) == mon[s], s
        m = re.search(rf'asynq_queue_size\{{queue="{Q}"\}} (\d+)', metrics)
        assert m and int(m.group(1)) == mon["size"]

        active = _html(c, f"/queues/{Q}/active")
        (srv,) = seen["servers"]
        assert "no server seen" not in active and "started after the last heartbeat" not in active
        assert active.count(f"running on <span class=\"server\" title=\"{srv['id']}\">{srv['host']}:{srv['pid']}") == 5
        assert active.count("<time") >= 10  # started and lease until, for each of the five
        servers = _html(c, "/servers")
        assert f"{srv['host']}:{srv['pid']}" in servers and "5 / 5" in servers
        scheduler = _html(c, "/scheduler")
        assert entry in scheduler and "go:tick" in scheduler and "@every 1s" in scheduler
        assert "Events 1-" in _html(c, f"/scheduler?entry={entry}")
        assert _html(c, f"/queues/{Q}/retry").count("boom ") >= 2
        errors = _html(c, "/errors")  # the two Go failures are one group: "boom <uuid>"
        assert "boom &lt;uuid&gt;</span>" in errors and '<td class="num">2</td>' in errors
    finally:
        for proc in (work, sched):
            proc.terminate()
            proc.wait(20)
