"""The queue infos the overview and the queue pages show: one call, so moving to the shared snapshot
(Inspector.queue_snapshot, kept in Redis for a second or two for every app process) is a one-line change."""

from __future__ import annotations

from inspector.models import QueueInfo
from webui import inspector


def queue_infos() -> list[QueueInfo]:
    """Every queue's info, in one Inspector round trip. Raises RedisUnavailableError."""
    return list(inspector().queue_infos())


def queue_info(queue: str) -> QueueInfo:
    """One queue's info (from the same snapshot). Raises QueueNotFoundError, RedisUnavailableError."""
    return inspector().queue_info(queue)
