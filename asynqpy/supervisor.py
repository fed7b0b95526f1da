"""Runs N worker processes, each its own Server, forwards signals to them and restarts any that crash."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from asynqpy.config import ServerConfig
from asynqpy.errors import UsageError

log = logging.getLogger("asynqpy")

# Seconds without a self-check (every 0.25 s) after which the supervisor calls a child frozen: not live, not ready.
FROZEN_AFTER = 10.0


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker process runs: the mux to import and the Server settings (sent to spawned children,
    so a config's callables must be importable functions)."""

    mux: str
    redis_url: str | None = None
    config: ServerConfig = field(default_factory=ServerConfig)
    metrics_port: int | None = None  # serve /metrics, /livez, /readyz on this port (None: no metrics)
    metrics_host: str = "0.0.0.0"
    max_task_types: int = 100


def serve_one(spec: WorkerSpec, serve_http: bool = True, supervisor: int | None = None) -> None:
    """Entry of one worker process (also used in-process when processes == 1). With metrics, a child of a
    supervisor (serve_http=False) writes them to the shared multiprocess directory; a lone process serves them.
    supervisor: the pid of the supervisor this child was spawned by (see _own_session)."""
    if supervisor is not None:
        _own_session(supervisor)
    from asynqpy.failurelog import FailureLog
    from asynqpy.loader import load_mux
    from asynqpy.server import Server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    mux = load_mux(spec.mux)
    metrics = None
    if spec.metrics_port is not None:
        from prometheus_client import REGISTRY

        from asynqpy.metrics.worker import WorkerMetrics

        metrics = WorkerMetrics(REGISTRY, max_task_types=spec.max_task_types)
    hooks = (*spec.config.outcome_hooks, metrics.observe) if metrics else spec.config.outcome_hooks
    hooks = (*hooks, FailureLog())  # a plain worker says when a task fails
    server = Server(spec.redis_url, spec.config, outcome_hooks=hooks)
    http = None
    if metrics is not None:
        metrics.watch(server)
        if serve_http:
            http = _single_process_http(spec, server)
    try:
        server.run(mux)
    finally:
        if metrics is not None:
            metrics.stop()
        if http is not None:
            http.stop()
    _exit_past_stuck_handlers()


def _own_session(supervisor: int) -> None:
    """On Linux, a supervised worker process leads its own session, as a worker started on its own would: the
    scheduler's autogroups (sched_autogroup_enabled, on by default outside cgroups) share the CPU between sessions,
    so N workers left in the supervisor's session got one session's share between them, and under any other load
    two processes drained no faster than one. The supervisor relays the signals a terminal sends its process
    group (see run_workers), and the kernel sends SIGTERM (a graceful stop) to a child whose supervisor dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        os.setsid()
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # stays in the supervisor's session, as before
    if os.getppid() != supervisor:  # it died before the death signal was armed
        os._exit(0)


def _single_process_http(spec: WorkerSpec, server: Any) -> Any:
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    from asynqpy.metrics.http import MetricsHTTPServer, health_probes

    assert spec.metrics_port is not None
    return MetricsHTTPServer(spec.metrics_host, spec.metrics_port,
                             lambda: (generate_latest(REGISTRY), CONTENT_TYPE_LATEST),
                             health_probes(server.health)).start()


def _exit_past_stuck_handlers() -> None:
    """A plain-function handler that ignores its cancel event keeps its thread; its task was requeued at
    shutdown, so the process exits now instead of waiting for the thread (as Go's server does)."""
    stuck = [t for t in threading.enumerate() if t.name.startswith("asynqpy-handler") and t.is_alive()]
    if stuck:
        log.warning("%d handler thread(s) still running after shutdown; exiting without them", len(stuck))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def given_multiproc_dir() -> str | None:
    """PROMETHEUS_MULTIPROC_DIR when set, made if missing; raises UsageError (one line) when it cannot be a
    directory this process can write its metric files in (prometheus_client's own error was a traceback)."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not given:
        return None
    try:
        os.makedirs(given, exist_ok=True)
        if not os.access(given, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        raise UsageError(f"PROMETHEUS_MULTIPROC_DIR={given!r}: {why} (it must be a directory the worker processes "
                         "can write their metric files in)") from None
    return given


def run_workers(spec: WorkerSpec, processes: int) -> int:
    """Serve in this process (processes == 1) or supervise N spawned children until SIGTERM/SIGINT."""
    if spec.metrics_port is not None:
        given_multiproc_dir()  # a bad one is a usage error now, not a traceback from prometheus_client later
    if processes == 1:
        serve_one(spec)
        return 0
    ctx = mp.get_context("spawn")
    children: list[Any] = []
    stopping = False
    shared = SharedMetrics(spec, processes, lambda: children, lambda: stopping) \
        if spec.metrics_port is not None else None

    def spawn() -> Any:
        p = ctx.Process(target=serve_one, args=(spec, False, os.getpid()), name="asynqpy-worker")
        p.start()
        return p

    def relay(sig: int) -> None:
        for p in children:  # the children lead their own sessions: a terminal's signal reaches only this process
            if p.is_alive() and p.pid:
                os.kill(p.pid, sig)

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        relay(signal.SIGTERM)  # each child shuts down gracefully

    def on_tstp(signum: int, _frame: Any) -> None:
        relay(signal.SIGTSTP)  # each child stops fetching new tasks

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)  # the terminal closed: stop them all, gracefully
    signal.signal(signal.SIGTSTP, on_tstp)
    children.extend(spawn() for _ in range(processes))
    log.info("supervising %d worker processes: %s", processes, [p.pid for p in children])
    while not stopping:
        time.sleep(0.2)
        for i, p in enumerate(children):
            if not p.is_alive() and not stopping:
                log.warning("worker process %s exited with %s; starting another", p.pid, p.exitcode)
                if shared is not None:
                    shared.process_died(p.pid)
                time.sleep(1)
                children[i] = spawn()
    for p in children:
        p.join(spec.config.shutdown_timeout + 10)
    if shared is not None:
        shared.close()
    return 0


class SharedMetrics:
    """The supervisor's side of prometheus_client's multiprocess mode: the children write their metrics to files
    in PROMETHEUS_MULTIPROC_DIR (set here, before they are spawned); this process serves their sum on one port,
    with /livez and /readyz computed from the liveness and readiness each child reports."""

    def __init__(self, spec: WorkerSpec, processes: int, children: Any, stopping: Any) -> None:
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        from asynqpy.metrics.http import MetricsHTTPServer

        given = given_multiproc_dir()
        self.own_dir = not given
        self.dir = given or tempfile.mkdtemp(prefix="asynqpy-metrics-")
        for name in os.listdir(self.dir):  # files of an earlier run would be added to this one's counts
            if name.endswith(".db"):
                os.remove(os.path.join(self.dir, name))
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = self.dir  # inherited by the spawned children
        self.processes = processes
        self.children = children
        self.stopping = stopping
        self.registry = CollectorRegistry()
        MultiProcessCollector(self.registry, path=self.dir)  # type: ignore[no-untyped-call]
        assert spec.metrics_port is not None
        try:
            self.http = MetricsHTTPServer(spec.metrics_host, spec.metrics_port, self.render,
                                          {"/livez": self.livez, "/readyz": self.readyz}).start()
        except BaseException:  # the port in use, a bad host: leave no directory of ours behind
            if self.own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def reports(self, name: str) -> dict[int, float]:
        """pid -> the value a live child reported for a liveall gauge."""
        out: dict[int, float] = {}
        for fam in self.registry.collect():
            if fam.name == name:
                for smp in fam.samples:
                    out[int(smp.labels.get("pid", 0))] = smp.value
        return out

    def _alive(self) -> list[int]:
        return [p.pid for p in self.children() if p.is_alive() and p.pid]

    def _frozen(self, alive: list[int]) -> list[int]:
        """Live children whose last self-check is older than FROZEN_AFTER seconds: stopped (SIGSTOP) or wedged,
        their gauges are what they wrote before, not what they are."""
        checked = self.reports("asynqpy_worker_last_check_timestamp_seconds")
        now = time.time()
        return [pid for pid in alive if pid in checked and now - checked[pid] > FROZEN_AFTER]

    def livez(self) -> tuple[bool, str]:
        live = self.reports("asynqpy_worker_live")
        alive = self._alive()
        dead = [pid for pid in alive if live.get(pid, 1.0) == 0]
        if dead:
            return False, f"worker process(es) {dead} have stopped loops"
        frozen = self._frozen(alive)
        if frozen:
            return False, f"worker process(es) {frozen} have not checked themselves for {FROZEN_AFTER:g} s (frozen)"
        return True, f"{len(alive)} of {self.processes} worker processes alive"

    def readyz(self) -> tuple[bool, str]:
        if self.stopping():
            return False, "shutting down"
        ready = self.reports("asynqpy_worker_ready")
        alive = self._alive()
        frozen = self._frozen(alive)
        n = sum(1 for pid in alive if ready.get(pid) == 1 and pid not in frozen)
        why = f"{n} of {self.processes} worker processes ready"
        return n == self.processes, why + (f"; {frozen} frozen" if frozen else "")

    def process_died(self, pid: int | None) -> None:
        from prometheus_client import multiprocess

        if pid:
            multiprocess.mark_process_dead(pid, self.dir)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self.http.stop()
        for p in self.children():
            if p.pid:
                self.process_died(p.pid)
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
