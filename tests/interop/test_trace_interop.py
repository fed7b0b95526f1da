"""Traces cross the language line: a Go handler (real asynq v0.26 and go.opentelemetry.io/otel) continues a
trace a Python enqueue started, and a Python worker continues one a Go enqueue started; compared by trace id
and parent span id."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from asynqpy import Client, ServeMux, Task
from asynqpy.testing import TestWorker
from tests.otelkit import spans

from .goasynq import build_gootel, built_or_skip, redis_args

__all__ = ["spans"]  # a fixture


@pytest.fixture(scope="module")
def gootel() -> Path:
    return built_or_skip(build_gootel, "Go trace peer (asynq v0.26 + OpenTelemetry)")


def run_go(binary: Path, redis_url: str, *args: str) -> dict[str, str]:
    out = subprocess.run([str(binary), *args, *redis_args(redis_url)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result: dict[str, str] = json.loads(out.stdout)
    return result


def test_a_go_handler_continues_a_trace_started_by_a_python_enqueue(gootel: Path, redis_url: str,
                                                                   spans: InMemorySpanExporter) -> None:
    with Client(redis_url) as client:
        info = client.enqueue(Task("trace:py2go", b"{}"), queue="interop")
    (producer,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert producer.context is not None
    got = run_go(gootel, redis_url, "work", "--type", "trace:py2go", "--queue", "interop")
    assert got["task_id"] == info.id
    assert got["trace_id"] == f"{producer.context.trace_id:032x}"
    assert got["parent_span_id"] == f"{producer.context.span_id:016x}"


def test_a_python_worker_continues_a_trace_started_by_a_go_enqueue(gootel: Path, redis_url: str,
                                                                  spans: InMemorySpanExporter) -> None:
    sent = run_go(gootel, redis_url, "enqueue", "--type", "trace:go2py", "--queue", "interop")
    mux = ServeMux()
    mux.handle("trace:go2py", lambda task: None)
    worker = TestWorker(redis_url, mux, queues={"interop": 1})
    try:
        assert worker.drain()[sent["task_id"]].outcome == "success"
    finally:
        worker.stop()
    (consumer,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert consumer.context is not None and consumer.parent is not None
    assert f"{consumer.context.trace_id:032x}" == sent["trace_id"]
    assert f"{consumer.parent.span_id:016x}" == sent["span_id"]
    assert consumer.attributes is not None and consumer.attributes["messaging.message.id"] == sent["task_id"]
