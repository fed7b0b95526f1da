"""Find jobs: replay, archive or delete every task that matches a query, as a background job of inspector.jobs
(same record, progress, rate, cancel). Each step judges a few bounded windows from the job's cursor and acts on
their matches with one script (inspector/lua/find_act.lua) that skips a task changed since it was judged, and
keeps the step's receipt (inspector.jobstep), so a step sent again after a lost reply is counted as it happened.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb import keys
from asynqpy.rdb.broker import ARCHIVE_MAX_AGE, ARCHIVE_MAX_SIZE
from asynqpy.rdb.scripts import Call
from asynqpy.task import TaskState
from inspector import find
from inspector import query as ql
from inspector.context import Ctx, check_queue_name, text
from inspector.jobstep import Receipt
from inspector.scripts import script

if TYPE_CHECKING:
    from inspector.jobs import Job

ACTIONS = ("run", "archive", "delete")
WINDOW = 500  # tasks judged per find script call
GATHER = 10  # find calls per step at most (fewer when the matches the rate allows are found)
TOMBSTONE = "\x00asynqpy:find:gone:"  # no task id starts with NUL: what a removed pending slot holds a moment


def create(ctx: Ctx, action: str, q: str, query_text: str, *, rate: float = 0.0, user: str = "") -> Job:
    """Record a running job doing action to every task matching query_text (run it with jobs.run).

    total is the number of tasks the query's states held (the scan stops there). Raises InvalidArgumentError
    for a bad action, query or rate, QueueNotFoundError."""
    from inspector import jobs

    if action not in ACTIONS:
        raise InvalidArgumentError(f"unknown action {action!r}; expected run, archive or delete", argument="action")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1e6:
        raise InvalidArgumentError(f"rate must be a number of tasks per second >= 0, got {rate!r}", argument="rate")
    check_queue_name(q)
    query = ql.parse(query_text)
    if not query.terms:
        raise InvalidArgumentError("give a query: every task of a queue is not a find (act on a whole state "
                                   "with run_all, archive_all or delete_all)", argument="query")
    ctx.require_queue(q)
    srcs = find.sources(ctx, q, query)
    states = query.states()
    return jobs.store(ctx, {"action": action, "queue": q, "state": states[0].value if states else "pending",
                            "group": "", "total": sum(s.size for s in srcs), "rate": float(rate), "user": user,
                            "query": query.text, "cursor": ""})


def step(ctx: Ctx, job: Job, n: int, mask: find.Mask | None, receipt: Receipt) -> tuple[int, int]:
    """Judge up to GATHER windows from the job's cursor and act on up to n of their matches (one action call, the
    job's numbered chunk). Returns (changed, scanned); scanned 0 means the scan reached its end. The new cursor is
    written to the job.

    A step sent again after its action's reply was lost (same receipt number) is answered with the first step's
    outcome (changed, how far it scanned), whatever the scan finds now, so it is counted as it happened."""
    matched, size, memo = _judge(ctx, job, n, mask)
    changed, memo = _act(ctx, job.action, job.queue, matched, size, receipt, memo)
    return finish(ctx, job, changed, memo)


def finish(ctx: Ctx, job: Job, changed: int, memo: str) -> tuple[int, int]:
    """After a step's action (changed tasks, the step's memo): write where the scan goes on. Returns (changed,
    scanned), as step does."""
    scanned_text, _, reached = memo.partition(" ")
    scanned = int(scanned_text)
    if scanned:
        ctx.run(Call(script("find_cursor"), [keys.job(job.id)], [_after(job.action, reached, changed)], int))
    return changed, scanned


def _judge(ctx: Ctx, job: Job, n: int, mask: find.Mask | None) -> tuple[list[find.Match], int, str]:
    """Up to n matches from the job's cursor on, the size of the source they are in, and the memo of the step:
    "<scanned> <cursor scanned up to>" ("0 " when the scan has reached its end)."""
    q = job.queue
    query = ql.parse(job.query)
    srcs = find.sources(ctx, q, query)
    idx, pos = find.start_at(srcs, job.cursor)
    while idx < len(srcs) and srcs[idx].size <= pos:  # an emptied source: on to the next
        idx, pos = idx + 1, 0
    if idx >= len(srcs):
        return [], 0, "0 "
    src = srcs[idx]
    rows = query.needs_record()
    window = min(WINDOW, find.ROWS_WINDOW) if rows else WINDOW
    matched: list[find.Match] = []
    end = pos
    for _ in range(GATHER):  # several windows' matches per action call: one pending-list walk for them all
        taken, got, hits = find.scan_window(ctx, q, query, src, end, window, rows=rows, most=n - len(matched))
        matched += [m for m in hits if m.record is None or find.judged(query, m, mask) is not None]
        end += taken
        if got < window or len(matched) >= n:
            break
    if len(matched) > n:  # more than the rate allows now: stop after the n-th, the rest is judged again
        matched = matched[:n]
        end = matched[-1].offset + 1
    scanned = max(1, end - pos)  # 0 would say the scan has ended
    return matched, src.size, f"{scanned} {find.make_cursor(src, end)}"


def _after(action: str, reached: str, changed: int) -> str:
    """Where the scan goes on: the tasks acted on left the source before the cursor reached, so the ones after it
    moved up by as many."""
    state, pos, group = find.parse_cursor(reached)
    if _leaves_source(action, TaskState(state)):
        pos -= changed
    return f"{state}:{pos}" + (f":{group}" if group else "")


def _leaves_source(action: str, state: TaskState) -> bool:
    """Whether acting on a task of this state takes it out of the list or set being scanned."""
    return not (action == "run" and state is TaskState.PENDING) and not (action == "archive"
                                                                          and state is TaskState.ARCHIVED)


def _act(ctx: Ctx, action: str, q: str, matched: Sequence[find.Match], size: int, receipt: Receipt,
         memo: str) -> tuple[int, str]:
    """Apply action to the matches (one script call, made even with none: a step sent again finds the first one's
    outcome in the receipt). Returns (changed, memo): the first sending's memo when this is one sent again."""
    near_tail = not matched or matched[-1].offset < size / 2
    pairs = [x for m in matched for x in (m.id, m.digest)]
    hints = [-(m.offset + 1) for m in matched]  # the pending list's index of each, from the tail
    now = ctx.now()
    return ctx.run(Call(script("find_act"), [keys.pending(q), keys.archived(q), keys.exact_due(q), receipt.key],
                        [action, keys.queue_prefix(q), int(now * 1e9), int(now), int(now) - ARCHIVE_MAX_AGE,
                         ARCHIVE_MAX_SIZE, TOMBSTONE + secrets.token_hex(8), "tail" if near_tail else "head",
                         receipt.seq, receipt.ttl, memo, *pairs, *hints], _changed_and_memo))


def _changed_and_memo(raw: Sequence[Any]) -> tuple[int, str]:
    return int(raw[0]), text(raw[2])
