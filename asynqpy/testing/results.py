"""What a test sees of its tasks: one TaskRun per task a drain ran, and the TaskResult of one run_task call."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from asynqpy.outcome import Outcome


@dataclass(frozen=True)
class Attempt:
    """One run of a task's handler: its outcome, the error stored with it ('' on success), seconds it ran."""

    outcome: Outcome
    error: str
    duration: float


@dataclass(frozen=True)
class TaskRun:
    """Everything a drain saw of one task: each attempt in order; outcome, error: the last attempt's;
    retries: attempts that ended in a retry; result: the bytes the handler last wrote with write_result, or
    None."""

    id: str
    type: str
    queue: str
    attempts: tuple[Attempt, ...]
    result: bytes | None = None

    @property
    def outcome(self) -> Outcome:
        return self.attempts[-1].outcome

    @property
    def error(self) -> str:
        return self.attempts[-1].error

    @property
    def retries(self) -> int:
        return sum(1 for a in self.attempts if a.outcome == "retry")

    @property
    def outcomes(self) -> list[Outcome]:
        return [a.outcome for a in self.attempts]


class DrainReport(Mapping[str, TaskRun]):
    """The tasks a drain ran, by task id, in the order their first attempt ended."""

    def __init__(self, runs: Mapping[str, TaskRun]) -> None:
        self._runs = dict(runs)

    def __getitem__(self, task_id: str) -> TaskRun:
        return self._runs[task_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def of_type(self, task_type: str) -> list[TaskRun]:
        """The runs of tasks of task_type."""
        return [r for r in self._runs.values() if r.type == task_type]

    def one(self, task_type: str | None = None) -> TaskRun:
        """The one task run (of task_type, when given); AssertionError when there are none or several."""
        runs = list(self._runs.values()) if task_type is None else self.of_type(task_type)
        if len(runs) != 1:
            what = "tasks" if task_type is None else f"tasks of type {task_type!r}"
            raise AssertionError(f"expected one of the drained {what}, found {len(runs)}: {self!r}")
        return runs[0]

    def __repr__(self) -> str:
        inner = ", ".join(f"{r.type}[{r.id}]: {'/'.join(r.outcomes)}" for r in self._runs.values())
        return f"DrainReport({inner})"


@dataclass(frozen=True)
class TaskResult:
    """One handler call by run_task. outcome: what a server would decide (success, retry, archived, revoked);
    error: the error text a server would store; exception: what the handler raised; value: what it returned;
    result: what it wrote with write_result (None if nothing); retry_delay: seconds until the retry a server
    would schedule (0.0 unless outcome is retry)."""

    outcome: Outcome
    error: str = ""
    exception: BaseException | None = None
    value: Any = None
    result: bytes | None = None
    retry_delay: float = 0.0
