"""One log line per failed task (type, id, queue, error, what happens next), at most so many a minute: an
outcome hook that `asynqpy worker` installs, so a plain worker says when its tasks fail."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from asynqpy.outcome import TaskOutcome

log = logging.getLogger("asynqpy.failures")

ERROR_CHARS = 300  # a traceback-sized error text is cut; the task keeps the whole of it


class FailureLog:
    """An outcome hook: logs each retry, archive and cancel; past `per_minute` lines in a minute it counts them
    instead and says how many it left out when the minute is over (a burst of failures is not a log flood)."""

    def __init__(self, per_minute: int = 20, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()  # hooks run on the event loop, and on the children's with --processes
        self._window = clock()
        self._logged = 0
        self._skipped = 0

    def __call__(self, o: TaskOutcome) -> None:
        if o.outcome not in ("retry", "archived", "canceled"):
            return
        with self._lock:
            now = self._clock()
            if now - self._window >= 60:
                if self._skipped:
                    log.warning("%d more task failures in the last minute were not logged one by one "
                                "(`asynqpy errors` groups them)", self._skipped)
                self._window, self._logged, self._skipped = now, 0, 0
            if self._logged >= self.per_minute:
                self._skipped += 1
                return
            self._logged += 1
        log.warning("task %s failed: %s", o.task_id, describe(o))


def describe(o: TaskOutcome) -> str:
    """`email:send in queue critical: SMTP busy; retried later (asynqpy task ls critical --state retry)`."""
    error = o.error if len(o.error) <= ERROR_CHARS else o.error[:ERROR_CHARS] + "..."
    if o.outcome == "archived":
        then = f"archived, no more retries (asynqpy task info {o.queue} {o.task_id})"
    elif o.outcome == "canceled":
        then = f"canceled (asynqpy task info {o.queue} {o.task_id})"
    else:
        then = f"retried later (asynqpy task ls {o.queue} --state retry)"
    return f"{o.task_type} in queue {o.queue}: {error or 'no error text'}; {then}"
