"""Scheduler entries across languages: Go asynq's Inspector lists our scheduler's entries (spec, options, next
time, enqueue history), and our Inspector lists the entries of a running Go asynq.Scheduler."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from asynqpy import Task
from asynqpy.cron import parse
from asynqpy.errors import InvalidArgumentError
from asynqpy.scheduler import Scheduler
from inspector import Inspector

from .goasynq import GoPeer, go_time, redis_args, wait_until


def test_go_inspector_lists_our_entries_with_spec_options_and_next_time(go_peer: GoPeer, redis_url: str) -> None:
    s = Scheduler(redis_url)
    deadline = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    every = s.register("@every 1s", Task("py:tick", b"hello"), queue="cron", max_retry=3, timeout=90,
                       deadline=deadline, retention=3600)
    berlin_spec = "CRON_TZ=Europe/Berlin 30 2 * * *"
    berlin = s.register(berlin_spec, Task("py:report", b""), unique=600)
    thread = threading.Thread(target=lambda: asyncio.run(s.arun()))
    thread.start()
    try:
        with Inspector(redis_url) as insp:
            wait_until(lambda: len(insp.scheduler_history(every)) >= 2, "two enqueues")
        got = {e["id"]: e for e in go_peer.inspect()["scheduler_entries"]}
    finally:
        s.stop()
        thread.join(10)
    assert set(got) == {every, berlin}
    e = got[every]
    assert (e["spec"], e["task_type"], e["task_payload"]) == ("@every 1s", "py:tick", "hello")
    assert e["opts"] == ['Queue("cron")', "MaxRetry(3)", "Timeout(1m30s)",
                         "Deadline(Wed Jan  2 03:04:05 UTC 2030)", "Retention(1h0m0s)"]
    nxt, prev = go_time(e["next"]), go_time(e["prev"])
    assert nxt is not None and prev is not None
    assert nxt.timestamp() - prev.timestamp() == 1.0 and nxt.microsecond == 0
    assert len(e["enqueue_events"]) >= 2
    for ev in e["enqueue_events"][:2]:
        info = go_peer.task_info("cron", ev["task_id"])
        assert (info["type"], info["max_retry"], info["timeout_s"], info["retention_s"]) == ("py:tick", 3, 90, 3600)

    b = got[berlin]
    assert (b["spec"], b["opts"], b["prev"]) == (berlin_spec, ["Unique(10m0s)"], None)
    expected = parse(berlin_spec).next(time.time())
    assert expected is not None and go_time(b["next"]) == datetime.fromtimestamp(expected, UTC)


@pytest.mark.slow
def test_our_inspector_lists_a_go_schedulers_entries(go_binary: Path, redis_url: str) -> None:
    """Go's scheduler publishes its entries at its first heartbeat, 10 s after it starts."""
    argv = [str(go_binary), "schedule", *redis_args(redis_url), "--spec", "@every 1s", "--type", "go:tick",
            "--payload", "from go", "--queue", "cq", "--max-retry", "2", "--duration", "20s"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "registered"
        eid = first["id"]
        with Inspector(redis_url) as insp:
            (entry,) = wait_until(lambda: [e for e in insp.scheduler_entries() if e.id == eid],
                                  "the Go scheduler's entry", timeout=20)
            assert (entry.spec, entry.task_type, entry.task_payload) == ("@every 1s", "go:tick", b"from go")
            assert entry.opts == ('Queue("cq")', "MaxRetry(2)")
            assert entry.next_enqueue_at is not None and entry.prev_enqueue_at is not None
            assert abs(entry.next_enqueue_at.timestamp() - time.time()) < 12
            assert entry.scheduler_id.count(":") >= 2
            events = insp.scheduler_history(eid, size=100)
            assert len(events) >= 5
            assert events[0].enqueued_at is not None and events[-1].enqueued_at is not None
            assert events[0].enqueued_at > events[-1].enqueued_at  # newest first
            task = insp.get_task("cq", events[0].task_id).info
            assert (task.type, task.payload, task.max_retry) == ("go:tick", b"from go", 2)
            # cron controls: a Go scheduler cannot honour our pause flag, so its entry is read-only
            st = insp.cron_status(eid)
            assert not st.ours and "Go" in st.read_only_reason and st.when == "every 1 s" and st.queue == "cq"
            assert st.last_task_id and st.firings
            with pytest.raises(InvalidArgumentError, match="Go asynq scheduler"):
                insp.cron_pause(eid)
    finally:
        proc.kill()
        proc.wait()
