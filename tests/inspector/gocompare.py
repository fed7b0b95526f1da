"""Compares what our Inspector reports with what Go's Inspector reported (the JSON of the Go peer's `inspect`
command, also used for the golden vectors): the same numbers and decoded fields for the same Redis."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import pytest

from asynqpy.task import TaskInfo
from inspector import Inspector, TaskRecord
from tests.inspector.worker import Clock

STATES = ("pending", "active", "scheduled", "retry", "archived", "completed")
COUNTS = ("size", "groups", "pending", "active", "scheduled", "retry", "archived", "completed", "aggregating",
          "processed", "failed", "processed_total", "failed_total", "paused")


def go_time(s: str | None) -> datetime | None:
    """A Go RFC 3339 time with nanoseconds, as an aware datetime (microseconds)."""
    if s is None:
        return None
    head, _, frac = s.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")


def close(a: datetime | None, b: datetime | None, tol: float = 0.002) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a.timestamp() - b.timestamp()) <= tol


def at_queue_time(clock: Clock, report: dict[str, Any], q: str) -> None:
    """Set our clock to the moment Go read the queue, so ages and 'now' fields compare."""
    ts = go_time(report["per_queue"][q]["info"]["timestamp"])
    assert ts is not None
    clock.t = ts.timestamp()


def first_time(report: dict[str, Any]) -> float:
    times = [go_time(q["info"]["timestamp"]) for q in report["per_queue"].values()]
    return min(t.timestamp() for t in times if t is not None)


def check_task(got: TaskRecord, go: dict[str, Any], now: float) -> None:
    i: TaskInfo = got.info
    assert not got.problem, got.problem
    assert (i.id, i.queue, i.type, i.state.value) == (go["id"], go["queue"], go["type"], go["state"])
    assert (i.max_retry, i.retried, i.last_err, i.group) == (go["max_retry"], go["retried"], go["last_err"],
                                                              go["group"])
    assert (i.timeout, i.retention, i.is_orphaned) == (go["timeout_s"], go["retention_s"], go["is_orphaned"])
    assert i.payload == base64.b64decode(go["payload_b64"] or "")
    assert dict(i.headers) == (go["headers"] or {})
    assert i.result == (base64.b64decode(go["result_b64"]) if go.get("result_b64") else None)
    for field in ("last_failed_at", "deadline", "completed_at"):
        assert close(getattr(i, field), go_time(go[field])), (go["id"], field)
    if go["state"] == "pending":  # Go reports "now" for pending tasks
        assert i.next_process_at is not None and abs(i.next_process_at.timestamp() - now) < 0.05
    elif i.state.value in ("scheduled", "retry") and i.next_process_at is not None and go["next_process_at"]:
        # Go reads the whole-second score, rounded up from the exact due time that we show (and run by)
        theirs = go_time(go["next_process_at"])
        assert theirs is not None
        assert 0 <= theirs.timestamp() - i.next_process_at.timestamp() < 1, (go["id"], "next_process_at")
    else:
        assert close(i.next_process_at, go_time(go["next_process_at"])), (go["id"], "next_process_at")


def compare_queue(insp: Inspector, clock: Clock, report: dict[str, Any], q: str, *,
                  latency_tol: float = 0.01) -> None:
    """queue_info, today's history, every state's list, get_task of each task, and groups."""
    want = report["per_queue"][q]
    at_queue_time(clock, report, q)
    got = insp.queue_info(q)
    for field in COUNTS:
        assert getattr(got, field) == want["info"][field], (q, field)
    assert got.latency == pytest.approx(want["info"]["latency_s"], abs=latency_tol), q
    assert ((got.memory_usage or 0) > 0) == (want["info"]["memory_usage"] > 0), q
    today = insp.history(q, 1)[0]
    assert (str(today.date), today.processed, today.failed) == (
        want["today"]["date"], want["today"]["processed"], want["today"]["failed"])
    for state in STATES:
        page = insp.list_tasks(q, state)
        assert [t.id for t in page.tasks] == [t["id"] for t in want[state]], (q, state)
        for rec, go in zip(page.tasks, want[state], strict=True):
            check_task(rec, go, clock.t)
            check_task(insp.get_task(q, go["id"]), go, clock.t)
    assert [(g.group, g.size) for g in insp.groups(q)] == [(g["group"], g["size"]) for g in want["groups"]]
    for g in want["groups"]:
        tasks = insp.list_tasks(q, "aggregating", group=g["group"]).tasks
        assert [t.id for t in tasks] == [t["id"] for t in g["tasks"]]
        for rec, go in zip(tasks, g["tasks"], strict=True):
            check_task(rec, go, clock.t)


def compare_servers(insp: Inspector, report: dict[str, Any]) -> None:
    got = insp.servers()
    want = sorted(report["servers"], key=lambda s: (s["host"], s["pid"], s["id"]))
    assert len(got) == len(want)
    for s, go in zip(got, want, strict=True):
        assert (s.id, s.host, s.pid, s.concurrency, dict(s.queues), s.strict_priority, s.status) == (
            go["id"], go["host"], go["pid"], go["concurrency"], go["queues"], go["strict_priority"], go["status"])
        assert close(s.started, go_time(go["started"]))
        gws = sorted(go["active_workers"], key=lambda w: (w["started"], w["task_id"]))
        assert [w.task_id for w in s.active_workers] == [w["task_id"] for w in gws]
        for w, gw in zip(s.active_workers, gws, strict=True):
            assert (w.task_type, w.queue) == (gw["task_type"], gw["queue"])
            assert w.task_payload == base64.b64decode(gw["task_payload_b64"] or "")
            assert close(w.started, go_time(gw["started"])) and close(w.deadline, go_time(gw["deadline"]))


def compare_scheduler_entries(insp: Inspector, report: dict[str, Any]) -> None:
    got = insp.scheduler_entries()
    assert len(got) == len(report["scheduler_entries"])
    for e, go in zip(got, report["scheduler_entries"], strict=True):
        assert (e.id, e.spec, e.task_type, list(e.opts)) == (go["id"], go["spec"], go["task_type"], go["opts"])
        assert e.task_payload == base64.b64decode(go["task_payload_b64"] or "")
        assert close(e.next_enqueue_at, go_time(go["next"])) and close(e.prev_enqueue_at, go_time(go["prev"]))
        events = insp.scheduler_history(e.id)
        assert [ev.task_id for ev in events] == [ev["task_id"] for ev in go["enqueue_events"]]
        for ev, gev in zip(events, go["enqueue_events"], strict=True):
            assert close(ev.enqueued_at, go_time(gev["enqueued_at"]))
