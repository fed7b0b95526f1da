"""TaskOutcome: what the processor decided about one finished task, handed to the server's outcome hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger("asynqpy")

Outcome = Literal["success", "retry", "archived", "revoked", "canceled"]
OUTCOMES: tuple[Outcome, ...] = ("success", "retry", "archived", "revoked", "canceled")


@dataclass(frozen=True)
class TaskOutcome:
    """One task's end of a run, as the processor decided it.

    outcome: success (done or completed), retry (failed, will run again), archived (failed for good, or
    SkipRetry), revoked (the handler raised RevokeTask), canceled (asynq:cancel; the task is retried or
    archived as asynq does). started_at: Unix seconds the handler started. duration: seconds the handler
    ran. wait: seconds from the task becoming pending (asynq's pending_since) to its start; 0.0 for a task
    handed straight to an idle worker by our enqueue script, None when unknown (a Go producer's task
    without pending_since). error: the error text stored with the task ('' on success). limit: the name of
    the flow-control limit (asynqpy.limits) the task waited on before it started, None when it did not wait.
    """

    queue: str
    task_type: str
    task_id: str
    outcome: Outcome
    started_at: float
    duration: float
    wait: float | None
    error: str = ""
    limit: str | None = None


OutcomeHook = Callable[[TaskOutcome], None]

_new = object.__new__


def task_outcome(queue: str, task_type: str, task_id: str, outcome: Outcome, started_at: float, duration: float,
                 wait: float | None, error: str = "", limit: str | None = None) -> TaskOutcome:
    """TaskOutcome(...) at half the cost: the processor makes one per task, and a frozen dataclass's __init__
    sets each field through object.__setattr__."""
    o = _new(TaskOutcome)
    d = o.__dict__  # (stored one by one: update(**fields) would build a dict of them first)
    d["queue"] = queue
    d["task_type"] = task_type
    d["task_id"] = task_id
    d["outcome"] = outcome
    d["started_at"] = started_at
    d["duration"] = duration
    d["wait"] = wait
    d["error"] = error
    d["limit"] = limit
    return o


def call_hooks(hooks: Sequence[OutcomeHook], outcome: TaskOutcome) -> None:
    """Call each hook; one that raises is logged and the others still run (a hook never breaks processing)."""
    for hook in hooks:
        try:
            hook(outcome)
        except Exception:
            log.exception("outcome hook %r raised for task %s", hook, outcome.task_id)
