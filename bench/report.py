"""Turns the raw results of bench/run.py into summary numbers, the table, asynqpy's ratios and the target checks."""

from __future__ import annotations

import math
from typing import Any

Cell = float | int | dict[str, str] | None  # a number, {"error": reason}, or None (not measured)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of unsorted values."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """One row: each metric a number, {"error": reason}, or None; plus notes for the footnotes."""
    row: dict[str, Any] = {"lib": raw["lib"], "version": raw.get("version", ""), "notes": []}
    if "error" in raw:
        row["error"] = raw["error"]
        return row

    def step(name: str) -> dict[str, Any] | None:
        v = raw.get(name)
        return v if isinstance(v, dict) else None

    for name, col in (("enqueue_single", "enqueue"), ("enqueue_batch", "batch"), ("drain", "drain")):
        v = step(name)
        if v is None:
            row[col] = None
        elif "error" in v:
            row[col] = {"error": v["error"]}
        else:
            row[col] = v["rate"]
    extras = step("producer_extras") or {}
    for name in ("async", "async_queue", "async_semaphore_queue", "wire_single", "wire_batch"):
        v = extras.get(name)
        row[name] = v["rate"] if isinstance(v, dict) and "rate" in v else None
    d = step("drain")
    row["drain_cpu_us"] = d.get("cpu_us_per_task") if d and "error" not in d else None
    d2 = step("drain2")  # asynqpy's `worker --processes 2`
    row["drain2"] = None if d2 is None else {"error": d2["error"]} if "error" in d2 else d2["rate"]
    row["drain2_cpu_us"] = d2.get("cpu_us_per_task") if d2 and "error" not in d2 else None
    if d2 and "error" not in d2:
        if d2.get("partial"):
            row["notes"].append(f"drain with 2 processes: stopped at the time limit after {d2['n']:,} of "
                                f"{d2['asked']:,} tasks")
        if d2.get("left_queued"):
            row["notes"].append(f"drain with 2 processes: {d2['left_queued']} tasks still queued after "
                                f"{d2['n']:,} ran (some ran twice?)")
    # The cold drain: from spawning the worker process (interpreter start and imports included) to its last task.
    row["cold"] = (d["n"] / d["wall_from_spawn"] if d and "error" not in d and d.get("wall_from_spawn")
                   else {"error": d["error"]} if d and "error" in d else None)
    row["bytes_per_task"] = d.get("bytes_per_pending_task") if d and "error" not in d else None
    if d and "error" not in d:
        if d.get("partial"):
            row["notes"].append(f"drain: stopped at the time limit after {d['n']:,} of {d['asked']:,} tasks")
        elif d["asked"] < raw.get("tasks", d["asked"]):
            row["notes"].append(f"drain: {d['n']:,} tasks (capped for this library)")
        if d["n"] > d["asked"]:
            row["notes"].append(f"drain: the handler ran {d['n'] - d['asked']} times more than the "
                                f"{d['asked']:,} tasks enqueued (a task ran twice)")
        if d.get("left_queued"):
            row["notes"].append(f"drain: {d['left_queued']} tasks still queued after {d['n']:,} ran "
                                "(some ran twice?)")
    p = step("pickup")
    for col, pc in (("pickup_p50", 50), ("pickup_p99", 99)):
        row[col] = None if p is None else ({"error": p["error"]} if "error" in p else percentile(p["ms"], pc))
    if p and p.get("lost"):
        row["notes"].append(f"pickup: {p['lost']} of {p['lost'] + len(p['ms'])} samples never ran")
    late = step("delayed")
    for col, pc in (("late_p50", 50), ("late_p99", 99), ("late_max", 100)):
        row[col] = None if late is None else (
            {"error": late["error"]} if "error" in late else percentile(late["ms"], pc))
    row["early"] = None if late is None else (
        {"error": late["error"]} if "error" in late else sum(1 for v in late["ms"] if v < 0))
    if late and "error" not in late:
        if row["early"]:
            row["notes"].append(f"delayed: {row['early']} of {len(late['ms'])} ran early, "
                                f"the earliest {-min(late['ms']):.0f} ms before its time")
        if late.get("lost"):
            row["notes"].append(f"delayed: {late['lost']} of {late['lost'] + len(late['ms'])} samples never ran")
    return row


COLUMNS = [  # key, header, kind
    ("enqueue", "enqueue/s", "rate"),
    ("batch", "batch/s", "rate"),
    ("drain", "drain/s", "rate"),
    ("drain2", "2 procs/s", "rate"),
    ("cold", "cold drain/s", "rate"),
    ("pickup_p50", "pickup p50", "ms"),
    ("pickup_p99", "p99 ms", "ms"),
    ("late_p50", "late p50", "ms"),
    ("late_p99", "p99", "ms"),
    ("late_max", "max ms", "ms"),
    ("early", "early", "count"),
]


def fmt(value: float | int, kind: str) -> str:
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "count":
        return str(value)
    a = abs(value)
    return f"{value:.2f}" if a < 10 else f"{value:.1f}" if a < 100 else f"{value:,.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The results table with numbered footnotes for failed cells and notes."""
    notes: list[str] = []
    lines: list[list[str]] = [["library", "version"] + [h for _, h, _ in COLUMNS]]
    whole_row: dict[int, str] = {}
    for row in rows:
        if "error" in row:
            whole_row[len(lines)] = f"n/a ({row['error']})"
            lines.append([row["lib"], row.get("version", "")])
            continue
        cells = [row["lib"], row["version"]]
        for key, _, kind in COLUMNS:
            v = row.get(key)
            if v is None:
                cells.append("-")
            elif isinstance(v, dict):
                notes.append(f"{row['lib']} {key}: {v['error']}")
                cells.append(f"n/a[{len(notes)}]")
            else:
                cells.append(fmt(v, kind))
        for note in row["notes"]:
            notes.append(f"{row['lib']} {note}")
            cells[0] += f"[{len(notes)}]"
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(len(lines[0]))]
    out = []
    for i, line in enumerate(lines):
        if i in whole_row:
            out.append(f"{line[0]:<{widths[0]}}  {line[1]:<{widths[1]}}  {whole_row[i]}")
            continue
        parts = [f"{c:<{widths[j]}}" if j < 2 else f"{c:>{widths[j]}}" for j, c in enumerate(line)]
        out.append("  ".join(parts).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    out += [f"  [{i}] {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(out)


RATIO_COLUMNS = [  # key, header, higher_is_better
    ("enqueue", "enqueue", True),
    ("batch", "batch", True),
    ("drain", "drain", True),
    ("cold", "cold drain", True),
    ("pickup_p50", "pickup p50", False),
    ("pickup_p99", "pickup p99", False),
    ("late_p99", "late p99", False),
]


def ratio(a: Any, b: Any, higher_is_better: bool) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return "-"
    r = a / b if higher_is_better else b / a
    return f"{r:.2f}x" if r < 10 else f"{r:.0f}x"


def ratios(rows: list[dict[str, Any]]) -> str:
    """asynqpy against each other library: above 1x means asynqpy is better on that metric."""
    mine = next((r for r in rows if r["lib"] == "asynqpy" and "error" not in r), None)
    others = [r for r in rows if r["lib"] != "asynqpy" and "error" not in r]
    if mine is None or not others:
        return "(no ratios: asynqpy and at least one other library must have run)"
    lines = [["asynqpy vs"] + [h for _, h, _ in RATIO_COLUMNS]]
    for r in others:
        lines.append([r["lib"]] + [ratio(mine.get(k), r.get(k), hib) for k, _, hib in RATIO_COLUMNS])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(f"{c:<{widths[j]}}" if j == 0 else f"{c:>{widths[j]}}" for j, c in enumerate(line))
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("(throughput: asynqpy / other; latency: other / asynqpy; above 1x = asynqpy better)")
    return "\n".join(out)


def num(row: dict[str, Any] | None, key: str) -> float | None:
    """A row's number, or None when it is missing or an error."""
    v = row.get(key) if row else None
    return float(v) if isinstance(v, (int, float)) else None


def targets(rows: list[dict[str, Any]]) -> str:
    """The issue's targets, checked on this run's numbers."""
    by = {r["lib"]: r for r in rows if "error" not in r}
    a = by.get("asynqpy")
    if a is None:
        return "targets: asynqpy did not run"

    out = []
    ad, gd, a2 = num(a, "drain"), num(by.get("go"), "drain"), num(a, "drain2")
    if ad is None or gd is None:
        out.append("drain, one process >= 1.5x Go's:  n/a (both must have drained)")
    else:
        out.append(f"drain, one process >= 1.5x Go's:  {_ok(ad >= 1.5 * gd)}  {ad:,.0f}/s vs {gd:,.0f}/s "
                   f"({ad / gd:.2f}x)")
    if a2 is None or gd is None:
        out.append("drain, --processes 2 >= 2x Go's:  n/a (asynqpy's two processes and Go must have drained)")
    else:
        out.append(f"drain, --processes 2 >= 2x Go's:  {_ok(a2 >= 2 * gd)}  {a2:,.0f}/s vs {gd:,.0f}/s "
                   f"({a2 / gd:.2f}x)")
    cpu = [f"{label} {v:.0f} us" for label, v in (("asynqpy", num(a, "drain_cpu_us")),
                                                  ("asynqpy --processes 2", num(a, "drain2_cpu_us")),
                                                  ("go", num(by.get("go"), "drain_cpu_us"))) if v is not None]
    if cpu:
        out.append("worker CPU per drained task (user+sys): " + ", ".join(cpu))
    ac, gc = num(a, "cold"), num(by.get("go"), "cold")
    if ac is not None and gc is not None:  # reported beside Go's; no goal of its own (the start-up goal is 0.3 s)
        out.append(f"cold drain (process start incl.): {ac:,.0f}/s vs Go's {gc:,.0f}/s ({ac / gc:.2f}x)")
    h = by.get("huey")
    a50, a99, h50, h99 = num(a, "pickup_p50"), num(a, "pickup_p99"), num(h, "pickup_p50"), num(h, "pickup_p99")
    if None in (a50, a99, h50, h99):
        out.append("idle pickup at least huey's:      n/a (both must have measured pickup)")
    else:
        assert a50 is not None and a99 is not None and h50 is not None and h99 is not None
        out.append(f"idle pickup at least huey's:      {_ok(a50 <= h50 and a99 <= h99)}  p50 {a50:.2f} vs "
                   f"{h50:.2f} ms, p99 {a99:.2f} vs {h99:.2f} ms")
    if a50 is not None and a99 is not None:  # the goal: half of huey's (measured at 1.2 / 2.4 ms)
        out.append(f"pickup p50 <= 0.6, p99 <= 1.2 ms: {_ok(a50 <= 0.6 and a99 <= 1.2)}  p50 {a50:.2f} ms, "
                   f"p99 {a99:.2f} ms")
    l99, early = num(a, "late_p99"), num(a, "early")
    if l99 is None or early is None:
        out.append("delayed p99 < 5 ms, never early: n/a (not measured)")
    else:
        out.append(f"delayed p99 < 5 ms, never early: {_ok(l99 < 5 and early == 0)}  p99 {l99:.2f} ms, "
                   f"{early:.0f} early")
    return "\n".join(out)


def producer(rows: list[dict[str, Any]], idle: dict[str, Any] | None = None) -> str:
    """asynqpy's producer beside the wire limits, memory per pending task, and the idle worker's cost."""
    out = []
    a = next((r for r in rows if r["lib"] == "asynqpy" and "error" not in r), None)
    if a is not None:
        def rate(key: str) -> str:
            v = a.get(key)
            return f"{v:>9,.0f}/s" if isinstance(v, (int, float)) else "        -  "
        out += ["asynqpy producer and the wire limits (same Redis, same run):",
                f"  Client.enqueue, one by one                         {rate('enqueue')}",
                f"  wire: bare redis-py EVALSHA round trip, pre-built  {rate('wire_single')}",
                f"  Client.enqueue_many (chunks of 1000)               {rate('batch')}",
                f"  wire: pipelined EVALSHA, pre-built arguments       {rate('wire_batch')}",
                f"  AsyncClient.enqueue, 100 coroutines, one client    {rate('async')}",
                f"    the same, queue=\"emails\" given per call          {rate('async_queue')}",
                f"    gather(n) behind Semaphore(100), queue=\"emails\"  {rate('async_semaphore_queue')}"]
    mem = [f"{r['lib']} {r['bytes_per_task']:,.0f} B" for r in rows
           if "error" not in r and isinstance(r.get("bytes_per_task"), (int, float))]
    if mem:
        out.append("Redis memory per pending task (used_memory after the drain fill): " + ", ".join(mem))
    for lib, res in (idle or {}).items():
        if "error" in res:
            out.append(f"idle worker ({lib}): n/a ({res['error']})")
            continue
        cmds = ", ".join(f"{k} {v:g}" for k, v in res["commands"].items())
        out.append(f"idle worker, three queues ({lib}): {res['per_second']:g} commands/s ({cmds})")
    return "\n".join(out)


def producer_targets(rows: list[dict[str, Any]], idle: dict[str, Any] | None = None) -> str:
    by = {r["lib"]: r for r in rows if "error" not in r}
    a = by.get("asynqpy")
    if a is None:
        return ""

    out = []
    ab, gb = num(a, "batch"), num(by.get("go"), "batch")
    if ab is not None and gb is not None:
        out.append(f"enqueue_many at least Go's batch: {_ok(ab >= gb)}  {ab:,.0f}/s vs {gb:,.0f}/s ({ab / gb:.2f}x)")
    ae, we, he = num(a, "enqueue"), num(a, "wire_single"), num(by.get("huey"), "enqueue")
    if ae is not None and we is not None:
        out.append(f"enqueue within 1.25x of the wire: {_ok(we / ae <= 1.25)}  {ae:,.0f}/s vs {we:,.0f}/s "
                   f"({we / ae:.2f}x)")
    if ae is not None and he is not None:
        out.append(f"enqueue ahead of huey:            {_ok(ae > he)}  {ae:,.0f}/s vs {he:,.0f}/s")
    aa = num(a, "async")
    if aa is not None:
        out.append(f"AsyncClient >= 50,000/s:          {_ok(aa >= 50000)}  {aa:,.0f}/s")
    mine = (idle or {}).get("asynqpy")
    if mine and "error" not in mine:
        out.append(f"idle worker <= 20 commands/s:     {_ok(mine['per_second'] <= 20)}  {mine['per_second']:g}/s")
    return "\n".join(out)


def _ok(flag: bool) -> str:
    return "PASS" if flag else "FAIL"
