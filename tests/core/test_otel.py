"""OpenTelemetry traces: enqueue's PRODUCER span and the traceparent it writes into the task's headers, one
CONSUMER span per attempt continuing it, the scheduler's enqueues; off by default with no import of it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest
import redis
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from asynqpy import AsyncClient, Client, InvalidArgumentError, ReceivedTask, ServeMux, Task, otel, tracing
from asynqpy.rdb import keys
from asynqpy.scheduler import Scheduler
from asynqpy.testing import TestWorker
from asynqpy.wire import decode_task_message
from tests.helpers import wait_for
from tests.otelkit import spans

__all__ = ["spans"]  # a fixture

Worker = Callable[..., TestWorker]


def stored_headers(url: str, queue: str, task_id: str) -> dict[str, str]:
    r = redis.Redis.from_url(url)
    try:
        data = r.hget(keys.task(queue, task_id), "msg")
    finally:
        r.close()
    assert data is not None
    return dict(decode_task_message(data, queue=queue, task_id=task_id).headers)


def of_kind(exporter: InMemorySpanExporter, kind: SpanKind) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.kind == kind]


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def test_enqueue_makes_a_producer_span_and_writes_its_traceparent(spans: InMemorySpanExporter,
                                                                 asynqpy_redis: str) -> None:
    with Client(asynqpy_redis) as client:
        info = client.enqueue(Task("email:send", b"x", {"tenant": "acme"}), queue="mail")
    (span,) = of_kind(spans, SpanKind.PRODUCER)
    assert span.name == "send mail"
    assert span.attributes == {"messaging.system": "asynq", "messaging.operation.type": "send",
                               "messaging.operation.name": "send", "messaging.destination.name": "mail",
                               "asynq.task.type": "email:send", "messaging.message.id": info.id}
    headers = stored_headers(asynqpy_redis, "mail", info.id)
    assert headers["tenant"] == "acme"  # the user's headers stay
    assert tracing.trace_id(headers) == hex_trace(span)
    assert span.context is not None and headers["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"
    assert info.headers["traceparent"] == headers["traceparent"]


def test_enqueue_many_and_async_enqueue_trace_each_task(spans: InMemorySpanExporter, asynqpy_redis: str) -> None:
    with Client(asynqpy_redis) as client:
        infos = client.enqueue_many([Task("a"), Task("b"), Task("c")])
    async def one() -> str:
        async with AsyncClient(asynqpy_redis) as ac:
            return (await ac.enqueue(Task("d"))).id
    async_id = asyncio.run(one())
    producers = {s.attributes["messaging.message.id"]: s for s in of_kind(spans, SpanKind.PRODUCER)}
    ids = [i.id for i in infos if not isinstance(i, Exception)] + [async_id]
    assert sorted(producers) == sorted(ids)
    for tid in ids:
        assert tracing.trace_id(stored_headers(asynqpy_redis, "default", tid)) == hex_trace(producers[tid])
    assert len({hex_trace(s) for s in producers.values()}) == 4  # one trace per task


def test_a_failed_enqueue_ends_its_span_with_the_error(spans: InMemorySpanExporter, asynqpy_redis: str) -> None:
    with Client(asynqpy_redis) as client:
        client.enqueue(Task("t"), task_id="same")
        with pytest.raises(Exception, match="same"):
            client.enqueue(Task("t"), task_id="same")
    first, second = of_kind(spans, SpanKind.PRODUCER)
    assert first.status.status_code == StatusCode.UNSET
    assert second.status.status_code == StatusCode.ERROR and second.events[0].name == "exception"


def test_every_attempt_is_a_consumer_span_of_the_enqueue_trace(spans: InMemorySpanExporter, asynqpy_redis: str,
                                                              asynqpy_worker: Worker) -> None:
    mux = ServeMux()
    installed = tracing.current()
    assert isinstance(installed, otel.OtelTracer)
    user_tracer = installed.tracer  # the test's provider, so the in-memory exporter sees the handler's spans
    attempts: list[int] = []

    @mux.handler("flaky")
    def flaky(task: ReceivedTask) -> None:  # a plain function: run in a worker thread
        attempts.append(task.retry_count)
        with user_tracer.start_as_current_span("user work"):
            pass
        if len(attempts) < 3:
            raise RuntimeError(f"boom {len(attempts)}")
    worker = asynqpy_worker(mux)
    with Client(asynqpy_redis) as client:
        info = client.enqueue(Task("flaky"), max_retry=5)
    assert worker.drain(advance_time=True)[info.id].outcomes == ["retry", "retry", "success"]
    (producer,) = of_kind(spans, SpanKind.PRODUCER)
    consumers = sorted(of_kind(spans, SpanKind.CONSUMER), key=lambda s: s.start_time or 0)
    assert [s.attributes["asynq.task.retry_count"] for s in consumers] == [0, 1, 2]
    assert [s.attributes["asynq.task.outcome"] for s in consumers] == ["retry", "retry", "success"]
    assert [s.status.status_code for s in consumers] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    assert consumers[0].status.description == "RuntimeError: boom 1"
    assert producer.context is not None
    for c in consumers:
        assert c.name == "process default" and hex_trace(c) == hex_trace(producer)
        assert c.parent is not None and c.parent.span_id == producer.context.span_id
        assert c.attributes["messaging.message.id"] == info.id
    user = [s for s in spans.get_finished_spans() if s.name == "user work"]
    assert len(user) == 3  # the handler's own spans are children of its attempt's span, across the thread
    assert sorted(s.parent.span_id for s in user if s.parent) == sorted(
        c.context.span_id for c in consumers if c.context)


def test_the_final_archive_is_a_span_of_the_same_trace(spans: InMemorySpanExporter, asynqpy_redis: str,
                                                      asynqpy_worker: Worker) -> None:
    mux = ServeMux()

    @mux.handler("doomed")
    async def doomed(task: ReceivedTask) -> None:
        raise ValueError("never")
    worker = asynqpy_worker(mux)
    with Client(asynqpy_redis) as client:
        info = client.enqueue(Task("doomed"), max_retry=1)
    assert worker.drain(advance_time=True)[info.id].outcomes == ["retry", "archived"]
    (producer,) = of_kind(spans, SpanKind.PRODUCER)
    consumers = of_kind(spans, SpanKind.CONSUMER)
    assert sorted(str(c.attributes["asynq.task.outcome"]) for c in consumers) == ["archived", "retry"]
    assert {hex_trace(c) for c in consumers} == {hex_trace(producer)}
    assert all(c.events and c.events[0].name == "exception" for c in consumers)


def test_a_task_without_traceparent_gets_a_consumer_span_of_its_own(spans: InMemorySpanExporter,
                                                                   asynqpy_redis: str,
                                                                   asynqpy_worker: Worker) -> None:
    otel.uninstrument()
    with Client(asynqpy_redis) as client:  # enqueued untraced: no headers added
        info = client.enqueue(Task("plain"))
    assert "traceparent" not in stored_headers(asynqpy_redis, "default", info.id)
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    otel.instrument(tracer_provider=tracer_provider)
    mux = ServeMux()
    mux.handle("plain", lambda task: None)
    asynqpy_worker(mux).drain()
    (consumer,) = of_kind(spans, SpanKind.CONSUMER)
    assert consumer.parent is None and consumer.attributes["asynq.task.outcome"] == "success"


def test_a_handler_stopped_by_shutdown_still_ends_its_span(spans: InMemorySpanExporter, asynqpy_redis: str) -> None:
    mux = ServeMux()
    started = threading.Event()

    @mux.handler("long")
    async def long(task: ReceivedTask) -> None:
        started.set()
        await asyncio.sleep(30)
    worker = TestWorker(asynqpy_redis, mux, shutdown_timeout=0.2)
    with Client(asynqpy_redis) as client:
        client.enqueue(Task("long"))
    assert started.wait(10)
    worker.stop()
    (consumer,) = of_kind(spans, SpanKind.CONSUMER)
    assert consumer.attributes["asynq.task.outcome"] == "stopped"


def test_scheduler_enqueues_are_traced(spans: InMemorySpanExporter, asynqpy_redis: str) -> None:
    s = Scheduler(asynqpy_redis, heartbeat_interval=3600)
    s.register("@every 1s", Task("tick"), queue="cron")
    t = threading.Thread(target=lambda: asyncio.run(s.arun()))
    t.start()
    try:
        r = redis.Redis.from_url(asynqpy_redis)
        ids = wait_for(lambda: r.lrange(keys.pending("cron"), 0, -1), what="a scheduled enqueue")
        r.close()
    finally:
        s.stop()
        t.join(10)
    tid = ids[0].decode()
    sent = [p for p in of_kind(spans, SpanKind.PRODUCER) if p.attributes.get("messaging.message.id") == tid]
    assert len(sent) == 1 and sent[0].attributes["messaging.destination.name"] == "cron"
    assert tracing.trace_id(stored_headers(asynqpy_redis, "cron", tid)) == hex_trace(sent[0])


def test_off_by_default_and_working_without_opentelemetry(asynqpy_redis: str) -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if not installed: any import of it raises ImportError\n"
        "from asynqpy import Client, ServeMux, Task\n"
        "from asynqpy.testing import TestWorker\n"
        "mux = ServeMux()\n"
        "mux.handle('t', lambda task: None)\n"
        "w = TestWorker(sys.argv[1], mux)\n"
        "c = Client(sys.argv[1])\n"
        "info = c.enqueue(Task('t'))\n"
        "c.enqueue_many([Task('t')])\n"
        "assert 'traceparent' not in info.headers\n"
        "assert len(w.drain()) == 2\n"
        "w.stop()\n"
        "assert 'asynqpy.otel' not in sys.modules\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code, asynqpy_redis], capture_output=True, text=True, timeout=60,
                         env={**os.environ})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_trace_id_reads_only_a_well_formed_traceparent() -> None:
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert tracing.trace_id({"traceparent": good}) == "4bf92f3577b34da6a3ce929d0e0e4736"
    for bad in ("", "junk", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "00-4bf92f35zzb34da6a3ce929d0e0e4736-00-01"):
        assert tracing.trace_id({"traceparent": bad}) is None
    assert tracing.trace_id({}) is None


def test_instrument_refuses_what_is_not_a_provider_or_propagator() -> None:
    for kw, argument in [({"tracer_provider": "jaeger"}, "tracer_provider"), ({"propagator": "w3c"}, "propagator")]:
        with pytest.raises(InvalidArgumentError) as err:  # the propagator was taken, then failed every enqueue
            otel.instrument(**kw)  # type: ignore[arg-type]
        assert err.value.argument == argument
        assert tracing.current() is None  # nothing installed
