"""The seam tracing plugs into: producers and the processor ask `current()` and do nothing more when it is None.

Off by default. `asynqpy.otel.instrument()` installs an OpenTelemetry tracer here; this module imports nothing
of OpenTelemetry, so with tracing off the enqueue and handler paths pay one global read and no import.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from asynqpy.outcome import OutcomeHook, TaskOutcome
from asynqpy.task import ReceivedTask, Task

AsyncHandler = Callable[[ReceivedTask], Awaitable[Any]]


class PublishSpan(Protocol):
    """A producer span begun for one task; headers are the task's headers with the trace context added."""

    headers: Mapping[str, str]

    def sent(self, task_id: str, queue: str) -> None:
        """The task was stored: record its id and queue and end the span."""

    def failed(self, exc: BaseException) -> None:
        """The enqueue failed: record exc and end the span."""

    def skipped(self, reason: str) -> None:
        """Nothing was stored, and nothing went wrong (a scheduler tick another replica enqueued): end the span."""


class Tracer(Protocol):
    def publish(self, task_type: str, queue: str | None, headers: Mapping[str, str]) -> PublishSpan:
        """Begin a producer span for a task about to be enqueued."""

    def wrap_handler(self, handler: AsyncHandler) -> AsyncHandler:
        """The handler run inside a consumer span continued from the task's headers."""

    def finished(self, outcome: TaskOutcome) -> None:
        """The processor decided a task's outcome: record it on its consumer span and end the span."""


_tracer: Tracer | None = None


def current() -> Tracer | None:
    """The installed tracer, or None when tracing is off."""
    return _tracer


def install(tracer: Tracer | None) -> None:
    """Install tracer (None turns tracing off). Servers started afterwards trace their handlers."""
    global _tracer
    _tracer = tracer


def wrap_handler(handler: AsyncHandler) -> AsyncHandler:
    """handler itself when tracing is off (a server started then never traces), else the traced handler."""
    t = _tracer
    return handler if t is None else t.wrap_handler(handler)


def outcome_hooks(hooks: Sequence[OutcomeHook]) -> tuple[OutcomeHook, ...]:
    """hooks, with the tracer's when tracing is on (it ends each consumer span with the task's outcome)."""
    t = _tracer
    return tuple(hooks) if t is None else (t.finished, *hooks)


def publishing(t: Tracer, tasks: Sequence[Task], queue: str | None) -> tuple[list[Task], list[PublishSpan]]:
    """A producer span per task, and the tasks with the trace context in their headers."""
    spans = [t.publish(task.type, queue, task.headers) for task in tasks]
    return [replace(task, headers=s.headers) for task, s in zip(tasks, spans, strict=True)], spans


def settle(spans: Sequence[PublishSpan], results: Sequence[Any]) -> None:
    """End each producer span with its task's result: a TaskInfo, or the exception the task met."""
    for span, res in zip(spans, results, strict=True):
        if isinstance(res, BaseException):
            span.failed(res)
        else:
            span.sent(res.id, res.queue)


def fail_all(spans: Sequence[PublishSpan], exc: BaseException) -> None:
    for span in spans:
        span.failed(exc)


def trace_id(headers: Mapping[str, str]) -> str | None:
    """The trace id (32 lowercase hex digits) of the W3C traceparent in a task's headers, or None when it has
    none or it is malformed (the dashboard shows it; no OpenTelemetry needed)."""
    parts = headers.get("traceparent", "").strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    tid = parts[1].lower()
    return tid if all(c in "0123456789abcdef" for c in tid) else None
