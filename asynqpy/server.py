"""Server: starts the worker loops in order, stops them in reverse order on request or signal, and says why."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
import time
from typing import Any

from asynqpy.acker import Acker
from asynqpy.aggregator import Aggregator
from asynqpy.config import ServerConfig
from asynqpy.connection import parse as parse_url
from asynqpy.connection import socket_timeout_of
from asynqpy.embedded import default_redis_url
from asynqpy.errors import InvalidArgumentError
from asynqpy.forwarder import Forwarder
from asynqpy.heartbeat import Heartbeat
from asynqpy.janitor import Janitor
from asynqpy.loop import Loop
from asynqpy.loopwatch import LoopWatch
from asynqpy.mux import ServeMux
from asynqpy.processor import Processor
from asynqpy.rdb.failures import Degraded, reaching
from asynqpy.rdb.flow import apply_defaults
from asynqpy.rdb.ping import ping
from asynqpy.recoverer import Recoverer
from asynqpy.runtime import Runtime
from asynqpy.stopping import Stopping, stop_together
from asynqpy.subscriber import Subscriber
from asynqpy.syncer import Syncer
from asynqpy.typestats import TypeStats, TypeStatsFlusher

log = logging.getLogger("asynqpy")
_DEFAULT_CONFIG = ServerConfig()
STOP_MARGIN = 0.5  # past shutdown_timeout + a socket timeout: the requeue's own timeout comes first, and says so


def _run(coro: Any) -> None:
    """asyncio.run, on uvloop when it is installed (it halves the cost of each Redis round trip)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


class Server:
    """A worker server: runs handlers from a ServeMux for the configured queues.

    config: a ServerConfig (its docstring gives what each setting means); settings: any of its fields as
    keywords, which win over config: `Server(url, concurrency=50, queues={"critical": 6, "default": 3})`.
    A bad or unknown setting raises InvalidArgumentError (a ValueError) naming it. run() blocks with signal
    handling; start()/shutdown() run it in a thread; serve() runs it inside an existing event loop.
    """

    def __init__(self, redis_url: str | None = None, config: ServerConfig | None = None, **settings: Any) -> None:
        if config is not None and not isinstance(config, ServerConfig):
            raise InvalidArgumentError(f"config must be a ServerConfig, not {type(config).__name__}",
                                       argument="config")
        self.config = (config or _DEFAULT_CONFIG).replace(settings)
        self.redis_url = redis_url or default_redis_url()
        parse_url(self.redis_url)  # a bad URL is an InvalidArgumentError now, not at run()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self.runtime: Runtime | None = None
        self._loops: list[Loop] = []
        self._processor: Processor | None = None
        self._heartbeat: Heartbeat | None = None
        self._watch = LoopWatch()

    def run(self, mux: ServeMux) -> None:
        """Serve until SIGTERM or SIGINT (graceful), SIGTSTP stops fetching. Raises RedisUnavailableError.

        The process is the server's: once it has started, the objects made so far (modules, the app, the server's
        own) are set aside from Python's garbage collector (gc.freeze()), so that a full collection, which would
        walk all of them (~46,000 in a bare worker, 10-20 ms on a small VM), scans only what came later and
        cannot stall a pickup or a delayed task's start; they are handed back to it when run() returns."""
        _run(self.serve(mux, signals=True, freeze_gc=True))

    def start(self, mux: ServeMux) -> None:
        """Serve in a background thread; returns once the server is running. Raises what startup raised."""
        self._thread = threading.Thread(target=self._thread_main, args=(mux,), name="asynqpy-server", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error

    def shutdown(self) -> None:
        """Stop gracefully (requeueing what does not finish within shutdown_timeout) and wait for it."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stop(self) -> None:
        """Ask a running server to shut down (thread-safe; returns at once)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    def health(self) -> tuple[bool, bool, str]:
        """(live, ready, why) for probes; thread-safe. live: every loop of a started server still runs.
        ready: serving, taking tasks (not paused by SIGTSTP, not shutting down) and the last heartbeat reached
        Redis within three heartbeat intervals. why: "ok", or what is wrong, e.g. "degraded: Redis answers BUSY
        since 12 s" while a loop meets transient Redis trouble (it clears by itself at the loop's next good pass).
        """
        rt, hb, proc = self.runtime, self._heartbeat, self._processor
        if rt is None or hb is None or proc is None:
            return True, False, "starting"
        dead = [lp.name for lp in self._loops if not lp.alive]
        if not proc.alive:
            dead.append("processor")
        if dead:
            return False, False, "loops stopped: " + ", ".join(dead)
        if rt.status != "active":
            return True, False, f"server is {rt.status}"
        blocked = self._watch.blocked()
        if blocked is not None:
            return True, False, f"event loop blocked for {blocked[0]:.0f} s at {blocked[1]}"
        if proc.too_many_stuck:
            return True, False, (f"{proc.stuck} handler threads stuck past their tasks (max_stuck_threads "
                                 f"{self.config.max_stuck_threads}): taking no tasks")
        stale = time.monotonic() - hb.last_ok > 3 * self.config.heartbeat_interval + 1
        trouble = self.degraded()
        if trouble is not None:
            return True, not stale, trouble.describe()
        if stale:
            return True, False, "Redis not reached by the last heartbeats"
        if proc.stuck:
            return True, True, f"ok; {proc.stuck} handler thread(s) stuck past their tasks"
        return True, True, "ok"

    def degraded(self) -> Degraded | None:
        """The longest-lasting transient Redis trouble any loop of this server meets now, or None."""
        found = [d for d in (lp.degraded for lp in self._loops) if d is not None]
        proc = getattr(self._processor, "degraded", None)  # the processor's own trouble, when it keeps one
        if isinstance(proc, Degraded):
            found.append(proc)
        return min(found, key=lambda d: d.since) if found else None

    def _thread_main(self, mux: ServeMux) -> None:
        try:
            _run(self.serve(mux))
        except BaseException as exc:  # reported to start()
            self._error = exc
        finally:
            self._started.set()

    async def serve(self, mux: ServeMux, *, signals: bool = False, freeze_gc: bool = False) -> None:
        """Run in the current event loop until stop() (or a signal when signals=True). freeze_gc: once started,
        gc.freeze() what exists (unless something froze objects already), gc.unfreeze() at the end (see run())."""
        if not isinstance(mux, ServeMux):
            raise InvalidArgumentError(f"serve() takes a ServeMux, not {type(mux).__name__}", argument="mux")
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        stats = TypeStats() if self.config.type_stats else None
        config = self.config if stats is None else self.config.replace(
            {"outcome_hooks": (*self.config.outcome_hooks, stats.observe)})
        rt = self.runtime = Runtime(config, self.redis_url)
        try:
            await ping(rt.aredis, self.redis_url)
            with reaching(self.redis_url):
                # flow control (asynqpy/limits.py): code defaults, then each queue's copy of the fleet's limits
                await asyncio.to_thread(apply_defaults, rt.sredis, self.config.limits, self.config.queues)
        except BaseException:
            await rt.close()
            raise
        loops, processor, heartbeat = self._build(rt, mux)
        if stats is not None:
            loops.append(TypeStatsFlusher(rt, stats))
        self._loops, self._processor, self._heartbeat = loops, processor, heartbeat
        if signals:
            self._install_signals(processor)
        for lp in loops:
            lp.start()
        processor.start()
        self._watch = LoopWatch()
        self._watch.start()
        rt.status = "active"
        await heartbeat.write_state()  # `asynqpy server ls` lists the server from the moment it says "started"
        log.info("server %s started: pid %d, concurrency %d, queues %s", rt.server_id, rt.pid,
                 self.config.concurrency, dict(self.config.queues))
        self._started.set()
        froze = freeze_gc and gc.get_freeze_count() == 0  # (a pre-fork parent's freeze is left as it is)
        if froze:
            gc.freeze()
        try:
            await self._stop.wait()
        finally:
            await self._shutdown(rt, loops, processor, heartbeat)
            self._watch.stop()
            if froze:
                gc.unfreeze()

    def _build(self, rt: Runtime, mux: ServeMux) -> tuple[list[Loop], Processor, Heartbeat]:
        syncer = Syncer(rt)
        forwarder: Forwarder | None = None
        processor: Processor | None = None

        def acked(ids: list[str]) -> None:
            for i in ids:
                rt.active.pop(i, None)

        acker = Acker(rt, syncer, acked)
        processor = Processor(rt, mux, acker, syncer, on_retry=lambda: forwarder.wake() if forwarder else None)
        forwarder = Forwarder(rt, on_forwarded=processor.wake)
        heartbeat = Heartbeat(rt, processor.cancel, lambda: acker.held, self.degraded)

        def wake_all() -> None:
            processor.wake()
            forwarder.wake()

        loops: list[Loop] = [syncer, acker, heartbeat,
                             Subscriber(rt, cancel=lambda tid: processor.cancel(tid, "canceled"), wake=wake_all),
                             Recoverer(rt), forwarder, Janitor(rt)]
        if self.config.group_aggregator is not None:
            loops.append(Aggregator(rt))
        return loops, processor, heartbeat

    def _install_signals(self, processor: Processor) -> None:
        loop = asyncio.get_running_loop()
        stop = self._stop
        assert stop is not None

        def on_term(signame: str) -> None:
            log.info("%s received: shutting down gracefully", signame)
            stop.set()

        def on_tstp() -> None:
            log.info("SIGTSTP received: no new tasks will be fetched")
            processor.pause_fetching()
            if self.runtime is not None:
                self.runtime.status = "stopped"

        loop.add_signal_handler(signal.SIGTERM, on_term, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, on_term, "SIGINT")
        loop.add_signal_handler(signal.SIGTSTP, on_tstp)

    async def _shutdown(self, rt: Runtime, loops: list[Loop], processor: Processor, heartbeat: Heartbeat) -> None:
        """Every step runs, whatever the one before it met (each failure is logged): the server's keys must
        leave asynq:servers even after Redis trouble. While Redis does not answer, it all takes at most
        shutdown_timeout plus one socket timeout (see Stopping): the processor's requeue is sent at
        shutdown_timeout at the latest, and what still waits for Redis after that round trip is given up."""
        rt.status = "stopped"
        log.info("stopping: no new tasks; waiting up to %ss for %d running", self.config.shutdown_timeout,
                 processor.running)
        # (the socket timeout the connections use: a URL's socket_timeout= gives it)
        stopping = Stopping(asyncio.get_running_loop().time() + self.config.shutdown_timeout
                            + socket_timeout_of(rt.aredis) + STOP_MARGIN)
        await stopping.step("stopping the processor", processor.stop)
        # The acker and then the syncer (which holds what the acker could not write) stop last, each after a final
        # flush; the others stop together.
        last = [lp for name in ("acker", "syncer") for lp in loops if lp.name == name]
        await stopping.step("stopping the loops", lambda: stop_together([lp for lp in loops if lp not in last]))
        for lp in last:
            await stopping.step(f"stopping the {lp.name}", lp.stop)
        rt.status = "closed"
        await stopping.step("clearing the server state", heartbeat.clear, tries=5)
        await processor.abort()  # what a stop given up or skipped left running (a no-op for the others)
        for lp in loops:
            await lp.abort()
        await stopping.step("closing connections", rt.close, bounded=False)
        log.info("server %s stopped", rt.server_id)
