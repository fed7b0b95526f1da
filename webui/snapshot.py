"""The queue infos the overview and the queue pages show: one call, so moving to the shared snapshot
(Inspector.queue_snapshot, kept in Redis for a second or two for every app process) is a one-line change.

Memory use is sampled (MEMORY USAGE on ~100 keys per queue, asynq's own estimate) at most once a minute per
queue and process: on every refresh it would be most of the dashboard's Redis load (asynq #1160, asynqmon #296).
"""

from __future__ import annotations

import dataclasses
import threading
import time

from inspector.models import QueueInfo
from webui import inspector

MEMORY_SECONDS = 60.0
_memory: dict[str, tuple[int | None, float]] = {}  # queue -> (bytes, when sampled, monotonic)
_lock = threading.Lock()


def _due(queues: list[str] | None) -> bool:
    now = time.monotonic()
    with _lock:
        if queues is None:
            return not _memory or any(now - at >= MEMORY_SECONDS for _, at in _memory.values())
        return any(q not in _memory or now - _memory[q][1] >= MEMORY_SECONDS for q in queues)


def _merge(infos: list[QueueInfo], sampled: bool) -> list[QueueInfo]:
    with _lock:
        if sampled:
            now = time.monotonic()
            _memory.update({i.queue: (i.memory_usage, now) for i in infos})
            return infos
        return [dataclasses.replace(i, memory_usage=_memory.get(i.queue, (None, 0.0))[0]) for i in infos]


def queue_infos() -> list[QueueInfo]:
    """Every queue's info, in one Inspector round trip. Raises RedisUnavailableError."""
    sample = _due(None)
    return _merge(list(inspector().queue_infos(memory=sample)), sample)


def queue_info(queue: str) -> QueueInfo:
    """One queue's info. Raises QueueNotFoundError, RedisUnavailableError."""
    sample = _due([queue])
    return _merge([inspector().queue_info(queue, memory=sample)], sample)[0]
