"""QueueStateCollector: asynq's x/metrics names and ours, read from the Inspector's shared queue snapshot at scrape
time, plus the exporter's own health (scrape errors and duration, Redis up, round-trip time, connection errors)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from asynqpy.errors import RedisCommandError, RedisUnavailableError, unavailable_error
from asynqpy.rdb.failures import TroubleLog
from exporter import exposition
from inspector import Inspector, QueueSnapshot

log = logging.getLogger("asynqpy.exporter")

ASYNQ_STATES = ("active", "pending", "scheduled", "retry", "archived", "completed")  # asynq's: no aggregating
STATES = (*ASYNQ_STATES, "aggregating")
DEFAULT_MAX_STALE = 300.0  # seconds the last snapshot is still shown, marked stale, while Redis cannot answer
DEFAULT_WAIT = 1.0  # seconds a scrape waits for another scrape's read of Redis before answering without it


class QueueStateCollector(Collector):
    """Collects queue-state metrics from `inspector.queue_snapshot(max_age)` on every scrape.

    A scrape always answers, whatever Redis does. While Redis refuses writes but answers reads (OOM, READONLY)
    the queue series are read fresh (the snapshot is not shared then). While it cannot answer (unreachable,
    BUSY, LOADING) the queue series are those of the last snapshot read, for at most max_stale seconds, with
    asynqpy_snapshot_stale 1 and their age in asynqpy_snapshot_age_seconds; older than that, they are left out.
    In both cases asynqpy_redis_up is 0 and asynqpy_redis_degraded{kind} names the trouble. Thread-safe (Flask
    and the exporter serve scrapes from several threads): one scrape at a time reads Redis; another that has
    waited `wait` seconds for it (Redis slow to answer, or frozen: each read may take the Inspector's timeout)
    answers without reading: the last snapshot marked stale, asynqpy_redis_up 0 and the trouble the last
    finished read met (else "timeout"), so that scrapes never queue up behind a Redis that does not answer.
    """

    def __init__(self, inspector: Inspector, *, max_age: float = 2.0, max_stale: float = DEFAULT_MAX_STALE,
                 wait: float = DEFAULT_WAIT) -> None:
        self.inspector = inspector
        self.max_age = max_age
        self.max_stale = max_stale
        self.wait = wait
        self._lock = threading.Lock()
        self.scrape_errors = 0
        self.connection_errors = 0
        self.redis_up: bool | None = None  # None: not scraped yet
        self.last_latency: float | None = None
        self._last_trouble = ""  # the trouble the last finished read met ("" for none)
        self.trouble = TroubleLog("exporter", logger=log)

    def render(self) -> bytes:
        """One scrape as exposition text (the fast writer of exporter.exposition; same text as
        prometheus_client's generate_latest for a registry holding this collector)."""
        return exposition.render(self.collect())

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unchecked: the families depend on the queues found at scrape time

    def collect(self) -> Iterator[Metric]:
        t0 = time.perf_counter()
        if self._lock.acquire(timeout=self.wait):
            try:
                latency, snap, trouble = self._read()
                self.redis_up = not trouble
                self.last_latency = latency
                self._last_trouble = trouble
                errors, conn_errors = self.scrape_errors, self.connection_errors
            finally:
                self._lock.release()
        else:  # another scrape has been reading Redis for `wait` seconds: Redis is not answering in time
            latency, snap, trouble = self.last_latency, None, self._last_trouble or "timeout"
            errors, conn_errors = self.scrape_errors, self.connection_errors
        stale = snap is None
        if snap is None:
            snap = self._last_good()
        if snap is not None:
            yield from queue_families(snap)
            yield from self._flow_families(snap)  # with the queue series, of the same snapshot
        up = GaugeMetricFamily("asynqpy_redis_up", "1 when the last scrape found Redis answering normally, else 0 "
                                                   "(unreachable, or in trouble: see asynqpy_redis_degraded).")
        up.add_metric([], 0.0 if trouble else 1.0)
        yield up
        degraded = GaugeMetricFamily("asynqpy_redis_degraded", "1 for the kind of Redis trouble the last scrape met "
                                     "(connection, timeout, BUSY, OOM, READONLY, LOADING, ..., or error for a "
                                     "command Redis refused); no sample when there was none.", labels=["kind"])
        if trouble:
            degraded.add_metric([trouble], 1.0)
        yield degraded
        if snap is not None:
            st = GaugeMetricFamily("asynqpy_snapshot_stale", "1 when the queue series are those of an earlier "
                                   "snapshot because this scrape could not read Redis, else 0.")
            st.add_metric([], 1.0 if stale else 0.0)
            yield st
        if latency is not None:
            lat = GaugeMetricFamily("asynqpy_redis_latency_seconds", "Round-trip time of a PING to Redis.")
            lat.add_metric([], latency)
            yield lat
        ce = CounterMetricFamily("asynqpy_redis_connection_errors_total",
                                 "Scrapes that could not reach Redis (or met Redis trouble), since the exporter "
                                 "started.")
        ce.add_metric([], conn_errors)
        yield ce
        se = CounterMetricFamily("asynqpy_exporter_scrape_errors_total",
                                 "Scrapes that could not read the queue state, since the exporter started.")
        se.add_metric([], errors)
        yield se
        dur = GaugeMetricFamily("asynqpy_exporter_scrape_duration_seconds",
                                "Seconds this scrape spent reading the queue state.")
        dur.add_metric([], time.perf_counter() - t0)
        yield dur

    @staticmethod
    def _flow_families(snap: QueueSnapshot) -> Iterator[Metric]:
        """Flow control: enqueues refused by each queue's backpressure limit, and tasks held back by each limit
        (asynqpy.backpressure, asynqpy.limits); counters kept in Redis by the scripts, read with the snapshot."""
        ref = CounterMetricFamily("asynqpy_queue_enqueue_refused_total", "Enqueues refused because the queue was "
                                  "past its backpressure limit (asynqpy queue limit), by all asynqpy producers.",
                                  labels=["queue"])
        for q in snap.queues:
            ref.add_metric([q.queue], q.enqueue_refused)
        yield ref
        waits = CounterMetricFamily("asynqpy_limit_waits_total", "Times a task was held back by a flow-control "
                                    "limit (asynqpy limit) instead of starting.", labels=["queue", "limit"])
        for q in snap.queues:
            for name, n in q.limit_waits:
                waits.add_metric([q.queue, name], n)
        yield waits

    def _read(self) -> tuple[float | None, QueueSnapshot | None, str]:
        """PING and the snapshot: (latency or None, snapshot or None, the kind of trouble met or "")."""
        latency: float | None = None
        try:
            latency = self.inspector.ping()
            snap = self.inspector.queue_snapshot(self.max_age)
        except Exception as exc:  # a scrape answers whatever went wrong; what did is logged and counted
            self.scrape_errors += 1
            if isinstance(exc, RedisUnavailableError):
                self.connection_errors += 1
            kind = self.trouble.note(exc, "scrape")
            if kind is None and latency is not None and not isinstance(exc, (RedisCommandError, RedisError)):
                return latency, None, ""  # not Redis (a bug, or data it could not read): Redis answered the PING
            return latency, None, kind or "error"
        if snap.unshared:  # Redis answered the reads but refused the writes
            self.trouble.note(unavailable_error(self.inspector.url, "writes refused", snap.unshared), "scrape")
            return latency, snap, snap.unshared
        self.trouble.ok()
        return latency, snap, ""

    def _last_good(self) -> QueueSnapshot | None:
        """The newest snapshot the Inspector read, while it is at most max_stale seconds old."""
        last = self.inspector.last_snapshot()
        return last if last is not None and last.age() <= self.max_stale else None


def queue_families(snap: QueueSnapshot) -> Iterator[Metric]:
    """Every queue-state family of one snapshot: asynq's exact names first, then ours."""
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ("queue",)) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=list(labels))

    enq = gauge("asynq_tasks_enqueued_total", "Number of tasks enqueued; broken down by queue and state.",
                ("queue", "state"))
    size = gauge("asynq_queue_size", "Number of tasks in a queue")
    lat = gauge("asynq_queue_latency_seconds",
                "Number of seconds the oldest pending task is waiting in pending state to be processed.")
    mem = gauge("asynq_queue_memory_usage_approx_bytes",
                "Number of memory used by a given queue (approximated number by sampling).")
    processed = CounterMetricFamily("asynq_tasks_processed_total",
                                    "Number of tasks processed (both succeeded and failed); broken down by queue",
                                    labels=["queue"])
    failed = CounterMetricFamily("asynq_tasks_failed_total", "Number of tasks failed; broken down by queue",
                                 labels=["queue"])
    paused_total = gauge("asynq_queue_paused_total", "Number of queues paused")
    tasks = gauge("asynqpy_queue_tasks", "Tasks in a queue by state (aggregating included).", ("queue", "state"))
    oldest = gauge("asynqpy_queue_oldest_task_age_seconds",
                   "Age of the oldest task in a state: pending (since pending_since), retry (since its last "
                   "failure, among the 20 retry tasks due soonest), archived (since archived).", ("queue", "state"))
    paused = gauge("asynqpy_queue_paused", "1 when the queue is paused, else 0.")
    qservers = gauge("asynqpy_queue_servers", "Live servers that serve the queue.")
    busy = gauge("asynqpy_workers_busy", "Tasks of the queue running on live servers right now.")
    for q in snap.queues:
        n = q.queue
        for st in ASYNQ_STATES:
            enq.add_metric([n, st], q.count(st))
        for st in STATES:
            tasks.add_metric([n, st], q.count(st))
        size.add_metric([n], q.size)
        lat.add_metric([n], q.latency)
        mem.add_metric([n], q.memory_usage or 0)
        processed.add_metric([n], q.processed_total)
        failed.add_metric([n], q.failed_total)
        paused_total.add_metric([n], 1 if q.paused else 0)
        paused.add_metric([n], 1 if q.paused else 0)
        oldest.add_metric([n, "pending"], q.latency)
        oldest.add_metric([n, "retry"], q.oldest_retry_age)
        oldest.add_metric([n, "archived"], q.oldest_archived_age)
        qservers.add_metric([n], snap.queue_servers.get(n, 0))
        busy.add_metric([n], snap.workers_busy.get(n, 0))
    yield from (enq, size, lat, mem, processed, failed, paused_total, tasks, oldest, paused, qservers, busy)
    servers = GaugeMetricFamily("asynqpy_servers", "Live worker servers (asynqpy and Go asynq).")
    servers.add_metric([], snap.servers)
    yield servers
    age = GaugeMetricFamily("asynqpy_snapshot_age_seconds", "Age of the shared queue snapshot this scrape read.")
    age.add_metric([], snap.age())
    yield age
