"""Counts what a worker's handlers did (succeeded, will retry, archived) for `asynqpy dev`'s summary line."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

from asynqpy.errors import RevokeTask, SkipRetry
from asynqpy.mux import AsyncHandler
from asynqpy.task import ReceivedTask


class Activity:
    """A ServeMux middleware (`mux.use(activity.middleware)`) and the counts it keeps since the last take()."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def middleware(self, task: ReceivedTask, call_next: AsyncHandler) -> object:
        try:
            result = await call_next(task)
        except asyncio.CancelledError:  # stopped at shutdown: requeued, not an outcome
            raise
        except (SkipRetry, RevokeTask):
            self._add("archived")
            raise
        except BaseException:
            self._add("retried" if task.retry_count < task.max_retry else "archived")
            raise
        self._add("succeeded")
        return result

    def _add(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1

    def take(self) -> Counter[str]:
        """The counts since the previous take(), and start again from zero."""
        with self._lock:
            out, self._counts = self._counts, Counter()
        return out

    @staticmethod
    def line(counts: Counter[str], seconds: float) -> str:
        done = sum(counts.values())
        if not done:
            return f"last {seconds:.0f}s: no tasks processed"
        return (f"last {seconds:.0f}s: {done} {_plural(done, 'task')} processed: {counts['succeeded']} succeeded, "
                f"{counts['retried']} failed and will retry, {counts['archived']} failed and archived")


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"
