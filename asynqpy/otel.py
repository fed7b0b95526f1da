"""OpenTelemetry traces from enqueue to handler: `asynqpy.otel.instrument()` turns them on (the `otel` extra).

Enqueue (Client, AsyncClient, enqueue_many, the scheduler) makes a PRODUCER span "send <queue>" and writes
its W3C trace context (`traceparent`, `tracestate`) into the task's headers, which asynq v0.26 stores with the
task (older readers ignore headers). A server started after instrument() runs each handler in a CONSUMER span
"process <queue>", a child of the enqueue span continued from those headers, so every attempt (each retry, the
final archive) is a span of the enqueue's trace. Go services on asynq with go.opentelemetry.io/otel's W3C
propagator read and write the same two headers.

Attributes follow OpenTelemetry's messaging conventions (messaging.system = "asynq",
messaging.destination.name = the queue, messaging.message.id = the task id) plus asynq.task.type,
asynq.task.retry_count, asynq.task.max_retry and asynq.task.outcome (success, retry, archived, revoked,
canceled, or "stopped" for a handler stopped by shutdown or a lost lease).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from asynqpy import tracing
from asynqpy.errors import InvalidArgumentError
from asynqpy.outcome import TaskOutcome
from asynqpy.task import ReceivedTask

SYSTEM = "asynq"
DEFAULT_QUEUE = "default"


def instrument(tracer_provider: trace.TracerProvider | None = None,
               propagator: TextMapPropagator | None = None) -> None:
    """Trace enqueues from now on, and the handlers of servers started from now on.

    tracer_provider: the provider to take the tracer from (default: OpenTelemetry's global one).
    propagator: how the context is written into task headers (default: the global one, W3C trace context
    unless configured otherwise). Calling it again replaces the earlier setup. Raises InvalidArgumentError
    for a tracer_provider or propagator that is not one.
    """
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise InvalidArgumentError(f"tracer_provider must be an OpenTelemetry TracerProvider, not "
                                   f"{type(tracer_provider).__name__}", argument="tracer_provider")
    if propagator is not None and not all(callable(getattr(propagator, m, None)) for m in ("inject", "extract")):
        # checked now: it is first used by an enqueue or a handler, where it would fail every one of them
        raise InvalidArgumentError(f"propagator must be an OpenTelemetry TextMapPropagator, not "
                                   f"{type(propagator).__name__}", argument="propagator")
    provider = tracer_provider or trace.get_tracer_provider()
    tracing.install(OtelTracer(provider.get_tracer("asynqpy"), propagator or propagate.get_global_textmap()))


def uninstrument() -> None:
    """Stop tracing enqueues (servers already running keep tracing their handlers until they stop)."""
    tracing.install(None)


def _error(span: Span, exc: BaseException | None, text: str) -> None:
    if exc is not None:
        span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, text))


class _Publish:
    """One enqueue's PRODUCER span; headers carry its context to the worker."""

    __slots__ = ("headers", "span")

    def __init__(self, tracer: trace.Tracer, propagator: TextMapPropagator, task_type: str, queue: str | None,
                 headers: Mapping[str, str]) -> None:
        q = queue or DEFAULT_QUEUE
        self.span = tracer.start_span(f"send {q}", kind=SpanKind.PRODUCER, attributes={
            "messaging.system": SYSTEM, "messaging.operation.type": "send", "messaging.operation.name": "send",
            "messaging.destination.name": q, "asynq.task.type": task_type})
        carrier = dict(headers)
        propagator.inject(carrier, context=trace.set_span_in_context(self.span))
        self.headers: Mapping[str, str] = carrier

    def sent(self, task_id: str, queue: str) -> None:
        self.span.set_attribute("messaging.message.id", task_id)
        self.span.set_attribute("messaging.destination.name", queue)
        self.span.end()

    def failed(self, exc: BaseException) -> None:
        _error(self.span, exc, f"{type(exc).__name__}: {exc}")
        self.span.end()

    def skipped(self, reason: str) -> None:
        self.span.set_attribute("asynq.scheduler.skipped", reason)
        self.span.end()


class OtelTracer:
    """The tracer asynqpy.tracing calls: producer spans, and a CONSUMER span per handler run that the
    processor's outcome ends."""

    def __init__(self, tracer: trace.Tracer, propagator: TextMapPropagator) -> None:
        self.tracer = tracer
        self.propagator = propagator
        self._open: dict[str, Span] = {}  # task id -> its running attempt's span, until the outcome

    def publish(self, task_type: str, queue: str | None, headers: Mapping[str, str]) -> _Publish:
        return _Publish(self.tracer, self.propagator, task_type, queue, headers)

    def wrap_handler(self, handler: tracing.AsyncHandler) -> tracing.AsyncHandler:
        async def traced(task: ReceivedTask) -> Any:
            span = self.tracer.start_span(
                f"process {task.queue}", context=self.propagator.extract(dict(task.headers)),
                kind=SpanKind.CONSUMER, attributes={
                    "messaging.system": SYSTEM, "messaging.operation.type": "process",
                    "messaging.operation.name": "process", "messaging.destination.name": task.queue,
                    "messaging.message.id": task.id, "asynq.task.type": task.type,
                    "asynq.task.retry_count": task.retry_count, "asynq.task.max_retry": task.max_retry})
            self._open[task.id] = span
            running = asyncio.current_task()
            if running is not None:  # a run that ends with no outcome (shutdown, lost lease) still ends its span
                running.add_done_callback(lambda _: self._stopped(task.id, span))
            token = context.attach(trace.set_span_in_context(span))
            try:
                return await handler(task)
            except Exception as exc:
                span.record_exception(exc)
                raise
            finally:
                context.detach(token)
        return traced

    def finished(self, outcome: TaskOutcome) -> None:
        span = self._open.pop(outcome.task_id, None)
        if span is None:
            return
        span.set_attribute("asynq.task.outcome", outcome.outcome)
        if outcome.outcome not in ("success", "revoked"):
            _error(span, None, outcome.error)
        elif outcome.error:
            span.set_attribute("asynq.task.revoke_reason", outcome.error)
        span.end()

    def _stopped(self, task_id: str, span: Span) -> None:
        if self._open.get(task_id) is span:
            del self._open[task_id]
            span.set_attribute("asynq.task.outcome", "stopped")
            _error(span, None, "stopped before it finished (shutdown or lost lease); the task runs again")
            span.end()

