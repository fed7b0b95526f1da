"""The CLI's per-type metrics (`asynqpy stats --types`), deploy marks (`asynqpy mark`) and cron controls
(`asynqpy cron ls|pause|resume|run`): what each asks the Inspector and how it shows the answer."""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from asynqpy.errors import AsynqError
from inspector import bounds
from inspector.api import Inspector
from inspector.croncontrols import EntryNotFoundError
from inspector.display import preview, span
from inspector.textout import cell, table, when
from inspector.typestats import TypeStats
from inspector.views import Out, _masked

MISSING = ("per-type figures come from asynqpy workers only (Go asynq workers write none; their tasks show in "
           "the per-queue processed/failed counts of `asynqpy stats`)")


def _secs(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.0f}ms" if v < 1 else span(v) if v >= 60 else f"{v:.2f}s"


def type_rows(stats: list[TypeStats]) -> str:
    rows = [[s.task_type, s.processed, s.failed, f"{s.failure_rate:.1%}", _secs(s.run_p50), _secs(s.run_p95),
             _secs(s.run_p99), _secs(s.wait_p50), _secs(s.wait_p95), _secs(s.wait_p99), span(s.run_total)]
            for s in stats]
    return table(["TYPE", "PROCESSED", "FAILED", "FAIL%", "RUN P50", "P95", "P99", "WAIT P50", "P95", "P99",
                  "TOTAL RUN"], rows)


def _queue_globs(globs: list[str] | None) -> Callable[[str], bool] | None:
    """--queue GLOB...: whether a queue matches one of them (None without any: every queue, and what earlier
    workers wrote without a queue)."""
    if not globs:
        return None
    return lambda q: any(fnmatch.fnmatchcase(q, g) for g in globs)


def stats_types(insp: Inspector, args: argparse.Namespace) -> Out:
    stats = insp.type_stats(args.window, queues=_queue_globs(getattr(args, "queue", None)))
    marks = insp.marks(insp.now() - {"1h": 3600, "24h": 86400, "72h": 259200}[args.window])
    text = type_rows(stats) if stats else f"no task types recorded in the last {args.window}"
    if marks:
        text += "\n\nmarks: " + ", ".join(f"{m.label} ({when(datetime.fromtimestamp(m.at, UTC), insp.now())})"
                                          for m in marks)
    return Out({"window": args.window, "types": stats, "marks": marks}, f"{text}\n({MISSING})")


def mark(insp: Inspector, args: argparse.Namespace) -> Out:
    m = insp.mark(args.label)
    return Out(m, f"marked {m.label!r} at {datetime.fromtimestamp(m.at, UTC).isoformat(timespec='seconds')}")


def cron_ls(insp: Inspector, args: argparse.Namespace) -> Out:
    found = insp.cron_statuses()
    if not found:
        return Out(found, "no live scheduler entries")
    now = insp.now()
    rows: list[list[Any]] = []
    for st in found:
        e = _masked(args, "entry", st.entry)
        state = "paused" if st.paused else "running" if st.ours else "go (read-only)"
        last = f"{st.last_task_id} {st.last_state}".strip() or "-"
        payload = bounds.clip(cell(preview(e.task_payload, task_type=e.task_type).text), bounds.NAME)
        rows.append([e.id, st.when, bounds.name(e.task_type), payload, state,
                     when(e.next_enqueue_at, now) if not st.paused else "-", last])
    text = table(["ID", "SCHEDULE", "TYPE", "PAYLOAD", "STATE", "NEXT", "LAST TASK"], rows)
    if any(not st.ours for st in found):
        text += "\n(go: a Go asynq scheduler's entry; Go does not read the pause flag, so it cannot be paused here)"
    return Out(found, text)


def cron_action(action: str) -> Any:
    def handler(insp: Inspector, args: argparse.Namespace) -> Out:
        try:
            return act(insp, args)
        except EntryNotFoundError as exc:  # not found: a runtime answer (exit 1), not a usage error
            raise AsynqError(str(exc)) from exc

    def act(insp: Inspector, args: argparse.Namespace) -> Out:
        if action == "run":
            tid = insp.cron_enqueue_now(args.entry_id)
            return Out({"task_id": tid}, f"enqueued task {tid} of entry {args.entry_id}")
        changed = insp.cron_pause(args.entry_id) if action == "pause" else insp.cron_resume(args.entry_id)
        done = "paused" if action == "pause" else "resumed"
        already = "already paused" if action == "pause" else "not paused"
        return Out({"changed": changed}, f"entry {args.entry_id} {done}" if changed else
                   f"entry {args.entry_id} was {already}")
    return handler
