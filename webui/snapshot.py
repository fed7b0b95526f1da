"""The queue infos the overview and the queue pages show, from one place: the shared snapshot
(Inspector.queue_snapshot, kept in Redis for every app process and the exporter) when the Inspector has it, else
queue_infos().

Pages read a snapshot up to one live-refresh interval (ASYNQPY_POLL_SECONDS) old, so however many browsers poll,
Redis computes one snapshot per interval; a POST (an action) takes a new one, so the page shows the change.
Memory use is sampled (MEMORY USAGE on ~100 keys per queue, asynq's own estimate) at most once a minute per
queue, by the snapshot's taker, for every process (inspector.snapshot); on every refresh it would be most of
the dashboard's Redis load (asynq #1160, asynqmon #296). Without the snapshot, at most once a minute per process.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from flask import current_app, request

from inspector.models import QueueInfo
from webui import inspector
from webui.auth import is_background

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


def _shared() -> list[QueueInfo] | None:
    """The snapshot every app process shares, when the Inspector offers it (Inspector.queue_snapshot)."""
    snap = getattr(inspector(), "queue_snapshot", None)
    if snap is None:
        return None
    # After an action (a POST) take a new snapshot: the page must show the change, and the stored snapshot
    # every other viewer reads is then the new one too.
    max_age = 0.0 if request.method == "POST" else float(current_app.config["ASYNQPY_POLL_SECONDS"])
    last = getattr(inspector(), "last_snapshot", None)
    if max_age and is_background() and last is not None:  # a live refresh: this process's snapshot, if young
        mine = last()
        if mine is not None and not mine.unshared and mine.age() <= max_age:
            return list(mine.queues)
    return list(snap(max_age=max_age).queues)


def queue_infos() -> list[QueueInfo]:
    """Every queue's info, in one Inspector round trip (or none, from the shared snapshot).

    Raises RedisUnavailableError."""
    shared = _shared()
    if shared is not None:
        return shared
    sample = _due(None)
    return _merge(list(inspector().queue_infos(memory=sample)), sample)


def queue_info(queue: str) -> QueueInfo:
    """One queue's info. Raises QueueNotFoundError, RedisUnavailableError."""
    found = next((i for i in _shared() or () if i.queue == queue), None)
    if found is not None:
        return found
    sample = _due([queue])  # not in the snapshot (yet): ask Redis, which also says whether it exists
    return _merge([inspector().queue_info(queue, memory=sample)], sample)[0]
