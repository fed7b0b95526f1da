"""LoopWatch: notices when a worker's event loop stops turning, and says where it is stuck.

An async handler that calls blocking code (time.sleep, a blocking HTTP client, a long computation) holds the
whole worker: no other task starts, no lease is renewed, no heartbeat is written, and after lease_duration its
tasks are taken back by other workers' recoverers and run again. Nothing in the worker can act meanwhile, so a
thread watches: a callback on the loop notes the time every `tick` seconds; when the thread finds it older than
`threshold`, it logs once, with the line the loop's thread is running (the blocking call's caller), and the
server reports itself not ready (Server.health) until the loop turns again, which is logged with how long it was
blocked. Costs one loop callback and one thread wake-up per tick; no Redis command.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from types import FrameType

log = logging.getLogger("asynqpy")


def _where(frame: FrameType | None) -> str:
    """file:line in function of the innermost Python frame (a blocking C call's caller)."""
    if frame is None:
        return "an unknown place"
    code = frame.f_code
    path = code.co_filename
    if path.startswith(os.getcwd() + os.sep):
        path = os.path.relpath(path)
    return f"{path}:{frame.f_lineno} in {code.co_name}()"


class LoopWatch:
    """Watches one running event loop from a thread (see the module docstring). start() and stop() on the loop."""

    def __init__(self, threshold: float = 2.0, tick: float = 0.5) -> None:
        self.threshold = threshold
        self.tick = tick
        self._last = time.monotonic()
        self._blocked_at: str | None = None  # where the loop was stuck when the thread last looked (None: turning)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._beat()
        self._thread = threading.Thread(target=self._watch, name="asynqpy-loopwatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(timeout=self.tick * 4)

    def blocked(self) -> tuple[float, str] | None:
        """(seconds the loop has not turned, where it is stuck) while past the threshold, else None; any thread."""
        lag = time.monotonic() - self._last
        where = self._blocked_at
        return (lag, where) if where is not None and lag > self.threshold else None

    def _beat(self) -> None:
        now = time.monotonic()
        if self._blocked_at is not None:
            log.warning("the event loop turns again after %.1f s blocked at %s", now - self._last, self._blocked_at)
            self._blocked_at = None
        self._last = now
        assert self._loop is not None
        self._handle = self._loop.call_later(self.tick, self._beat)

    def _watch(self) -> None:
        while not self._stop.wait(self.tick):
            lag = time.monotonic() - self._last
            if lag <= self.threshold or self._blocked_at is not None:
                continue
            where = _where(sys._current_frames().get(self._loop_thread))
            self._blocked_at = where
            log.warning("the event loop has not turned for %.1f s: it is blocked at %s. No task starts, no lease "
                        "is renewed and the worker reports not ready meanwhile; an async handler must not call "
                        "blocking code (make it a plain def handler, or await asyncio.to_thread(...))", lag, where)
