"""The OpenTelemetry fixture of the trace tests: asynqpy.otel instrumented for one test, its spans kept in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asynqpy import otel


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The finished spans of the test (asynqpy.otel.instrument on a provider of its own, undone after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        otel.uninstrument()
        provider.shutdown()
