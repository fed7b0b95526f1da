"""Finding the tasks of a queue that match a query (inspector.query), in bounded windows resumed by a cursor.

Every Redis call is one script over at most `window` tasks of one state (inspector/lua/find.lua judges the
terms that need no payload); payload and header terms are judged here, on the task as the viewer may see it
(`mask`), so a masked value can never be matched. A cursor names the state (and group) and the position the
next scan starts at: "retry:500", "aggregating:0:<group>".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.options import check_int
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call
from asynqpy.task import TaskState
from inspector import query as ql
from inspector import records
from inspector.context import Ctx, check_queue_name, list_window, text
from inspector.models import TaskRecord
from inspector.scripts import script

Mask = Callable[[TaskRecord], TaskRecord]
SIZED = ("pending", "active", "scheduled", "retry", "archived", "completed")
ORDER = (*SIZED, "aggregating")  # the scanning order of states
MAX_WINDOW = 1000
ROWS_WINDOW = 250  # tasks per call when whole rows come back (payload terms): ~5 ms on a loaded machine


@dataclass(frozen=True)
class Source:
    """One list or sorted set a find scans: a state (and group, for aggregating tasks) and its size."""

    state: TaskState
    group: str
    key: str
    kind: str
    size: int

    @property
    def name(self) -> str:
        return f"aggregating/{self.group}" if self.group else self.state.value


@dataclass(frozen=True)
class FindResult:
    """Matches of one bounded find. scanned: tasks judged by this call; position: tasks before next_cursor
    (in the scanning order: asynqmon's tab order, each state in its own order) out of total, the size of the
    states the query can match when it ran. next_cursor resumes the scan (None: scanned to the end)."""

    queue: str
    query: str
    tasks: tuple[TaskRecord, ...]
    scanned: int
    position: int
    total: int
    cursor: str
    next_cursor: str | None
    sources: tuple[Source, ...]

    @property
    def done(self) -> bool:
        return self.next_cursor is None


@dataclass(frozen=True)
class Match:
    """A task the scan matched: its id, where it is (state and position), the sha1 of its message as
    judged (an action on it checks the task is still the one judged) and its record (rows scans only)."""

    id: str
    source: Source
    offset: int
    digest: str
    record: TaskRecord | None


def sources(ctx: Ctx, q: str, query: ql.Query) -> list[Source]:
    """The lists and sets the query can match, in scanning order, with their sizes (one script call)."""
    wanted = query.states()
    raw = ctx.read_script(Call(script("find_sizes"), [*(keys.state_key(q, s) for s in SIZED), keys.groups(q)],
                               [keys.group_prefix(q)], list))
    out = []
    for name, size in zip(SIZED, raw[:6], strict=True):
        st = TaskState(name)
        if st in wanted:
            kind = "list" if name in ("pending", "active") else "zset"
            out.append(Source(st, "", keys.state_key(q, name), kind, int(size)))
    if TaskState.AGGREGATING in wanted:
        for i in range(6, len(raw), 2):
            g = text(raw[i])
            out.append(Source(TaskState.AGGREGATING, g, keys.group(q, g), "zset", int(raw[i + 1])))
    return out


def parse_cursor(cursor: str) -> tuple[str, int, str]:
    """(state, position, group) of a cursor ("" is the start). Raises InvalidArgumentError."""
    if cursor == "":
        return "", 0, ""
    if not isinstance(cursor, str):
        raise InvalidArgumentError(f"cursor must be a str, not {type(cursor).__name__}", argument="cursor")
    state, _, rest = cursor.partition(":")
    pos, _, group = rest.partition(":")
    if state not in {s.value for s in TaskState} or not pos.isdecimal() or bool(group) != (state == "aggregating"):
        raise InvalidArgumentError(f"bad cursor {cursor!r} (one a find returned, like 'retry:500')",
                                   argument="cursor")
    return state, int(pos), group


def make_cursor(src: Source, pos: int) -> str:
    return f"{src.state.value}:{pos}" + (f":{src.group}" if src.group else "")


def start_at(srcs: Sequence[Source], cursor: str) -> tuple[int, int]:
    """The index of the source a cursor points into and the position in it (a source gone since: the next)."""
    state, pos, group = parse_cursor(cursor)
    if not state:
        return 0, 0
    for i, s in enumerate(srcs):
        if s.state.value == state and s.group == group:
            return i, pos
        if ORDER.index(s.state.value) > ORDER.index(state) or (s.state.value == state and s.group > group):
            return i, 0
    return len(srcs), 0


def scan_window(ctx: Ctx, q: str, query: ql.Query, src: Source, pos: int, n: int, *, rows: bool,
                most: int = 0) -> tuple[int, int, list[Match]]:
    """Judge up to n tasks of src from position pos by the query's cheap terms, in asynq's order, stopping after
    `most` matches (0: none); one script call. Returns how many were judged, how many the window held (fewer
    than n: the source ends there) and the matches in order; rows=True fetches what a TaskRecord needs."""
    lo, hi = list_window(pos, pos + n - 1) if src.kind == "list" else (pos, pos + n - 1)
    now = ctx.now()
    width = records.ROW_WIDTH + 1 if rows else 3

    def parse(raw: Sequence[Any]) -> tuple[int, int, list[Match]]:
        found = []
        for i in range(2, len(raw), width):
            offset, tid = pos + int(raw[i]) - 1, text(raw[i + 1])
            if rows:
                sc, *fields = raw[i + 2:i + width]
                msg = records.value(fields[0])
                rec = records.record(q, tid, src.state, fields, sc, now=now)
                found.append(Match(tid, src, offset, hashlib.sha1(msg).hexdigest() if msg else "", rec))
            else:
                found.append(Match(tid, src, offset, text(raw[i + 2]), None))
        return int(raw[0]), int(raw[1]), found

    args = [src.kind, lo, hi, keys.task_prefix(q), src.state.value, now, "rows" if rows else "ids", most,
            *ql.script_terms(query)]
    return ctx.read_script(Call(script("find"), [src.key], args, parse))


def count_window(ctx: Ctx, q: str, query: ql.Query, src: Source, pos: int, n: int) -> tuple[int, int, int]:
    """How many of n tasks of src from pos the query's cheap terms hold for (one script call): (judged, in the
    window, matches)."""
    lo, hi = list_window(pos, pos + n - 1) if src.kind == "list" else (pos, pos + n - 1)
    args = [src.kind, lo, hi, keys.task_prefix(q), src.state.value, ctx.now(), "count", 0, *ql.script_terms(query)]
    return ctx.read_script(Call(script("find"), [src.key], args, lambda raw: (int(raw[0]), int(raw[1]),
                                                                              int(raw[2]))))


def judged(query: ql.Query, m: Match, mask: Mask | None) -> TaskRecord | None:
    """The record of a match as the viewer sees it, when the payload and header terms hold for that view."""
    if m.record is None:
        return None
    rec = mask(m.record) if mask is not None else m.record
    if query.needs_record() and (rec.problem or not ql.record_matches(query, rec.info.payload, rec.info.headers)):
        return None
    return rec


def check_bounds(limit: int, max_scan: int, window: int) -> None:
    check_int(limit, "limit", minimum=1)
    check_int(max_scan, "max_scan", minimum=1)
    check_int(window, "window", minimum=1, maximum=MAX_WINDOW)


def find(ctx: Ctx, q: str, query: ql.Query, *, limit: int, cursor: str, max_scan: int, window: int,
         mask: Mask | None) -> FindResult:
    """Matches of query among at most max_scan tasks from cursor, window tasks per script call."""
    check_queue_name(q)
    check_bounds(limit, max_scan, window)
    parse_cursor(cursor)
    ctx.require_queue(q)
    srcs = sources(ctx, q, query)
    idx, pos = start_at(srcs, cursor)
    window = min(window, ROWS_WINDOW)
    total = sum(s.size for s in srcs)
    before = sum(s.size for s in srcs[:idx]) + pos
    found: list[TaskRecord] = []
    scanned = 0

    def result(next_cursor: str | None) -> FindResult:
        position = total if next_cursor is None else min(total, before + scanned)
        return FindResult(q, query.text, tuple(found), scanned, position, total, cursor, next_cursor, tuple(srcs))

    while idx < len(srcs) and scanned < max_scan:
        src = srcs[idx]
        n = min(window, max_scan - scanned)
        taken, got, hits = scan_window(ctx, q, query, src, pos, n, rows=True, most=limit - len(found))
        for m in hits:
            rec = judged(query, m, mask)
            if rec is None:
                continue
            found.append(rec)
            if len(found) == limit:
                scanned += m.offset + 1 - pos
                return result(make_cursor(src, m.offset + 1))
        scanned += taken
        pos += taken
        if got < n:
            idx, pos = idx + 1, 0
    if idx >= len(srcs):
        return result(None)
    return result(make_cursor(srcs[idx], pos))


@dataclass(frozen=True)
class FindCount:
    """How many tasks match among the scanned ones: matched is exact when complete, else "at least"."""

    queue: str
    query: str
    matched: int
    scanned: int
    total: int
    complete: bool
    next_cursor: str | None


def count(ctx: Ctx, q: str, query: ql.Query, *, max_scan: int, window: int, mask: Mask | None,
          cursor: str = "") -> FindCount:
    """Count the matches among at most max_scan tasks from cursor (ids only, unless a payload term needs rows)."""
    check_queue_name(q)
    check_bounds(1, max_scan, window)
    parse_cursor(cursor)
    ctx.require_queue(q)
    srcs = sources(ctx, q, query)
    idx, pos = start_at(srcs, cursor)
    matched = scanned = 0
    rows = query.needs_record()
    window = min(window, ROWS_WINDOW) if rows else window
    while idx < len(srcs) and scanned < max_scan:
        n = min(window, max_scan - scanned)
        if rows:
            taken, got, hits = scan_window(ctx, q, query, srcs[idx], pos, n, rows=True)
            matched += sum(1 for m in hits if judged(query, m, mask) is not None)
        else:
            taken, got, found = count_window(ctx, q, query, srcs[idx], pos, n)
            matched += found
        scanned += taken
        pos += taken
        if got < n:
            idx, pos = idx + 1, 0
    done = idx >= len(srcs)
    return FindCount(q, query.text, matched, scanned, sum(s.size for s in srcs), done,
                     None if done else make_cursor(srcs[idx], pos))
