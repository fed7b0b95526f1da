"""Runs N worker processes, each its own Server, forwards signals to them and restarts any that crash."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from asynqpy.config import ServerConfig

log = logging.getLogger("asynqpy")


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker process runs: the mux to import and the Server settings (sent to spawned children,
    so a config's callables must be importable functions)."""

    mux: str
    redis_url: str | None = None
    config: ServerConfig = field(default_factory=ServerConfig)


def serve_one(spec: WorkerSpec) -> None:
    """Entry of one worker process (also used in-process when processes == 1)."""
    from asynqpy.loader import load_mux
    from asynqpy.server import Server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    mux = load_mux(spec.mux)
    Server(spec.redis_url, spec.config).run(mux)
    _exit_past_stuck_handlers()


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


def run_workers(spec: WorkerSpec, processes: int) -> int:
    """Serve in this process (processes == 1) or supervise N spawned children until SIGTERM/SIGINT."""
    if processes == 1:
        serve_one(spec)
        return 0
    ctx = mp.get_context("spawn")
    children: list[Any] = []
    stopping = False

    def spawn() -> Any:
        p = ctx.Process(target=serve_one, args=(spec,), name="asynqpy-worker")
        p.start()
        return p

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for p in children:
            if p.is_alive() and p.pid:
                p.terminate()  # SIGTERM: each child shuts down gracefully

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    children.extend(spawn() for _ in range(processes))
    log.info("supervising %d worker processes: %s", processes, [p.pid for p in children])
    while not stopping:
        time.sleep(0.2)
        for i, p in enumerate(children):
            if not p.is_alive() and not stopping:
                log.warning("worker process %s exited with %s; starting another", p.pid, p.exitcode)
                time.sleep(1)
                children[i] = spawn()
    for p in children:
        p.join(spec.config.shutdown_timeout + 10)
    return 0
