"""asynqpy: a Python task queue on Redis that speaks the wire format of Go's hibiken/asynq v0.26.

The public names are loaded on first use (module __getattr__), so `import asynqpy` and `asynqpy --version`
do not pay for redis-py, protobuf and the server before anything needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asynqpy.client import AsyncClient, Client
    from asynqpy.config import ServerConfig
    from asynqpy.errors import (
        AsynqError,
        DuplicateTaskError,
        InvalidArgumentError,
        QueueFullError,
        QueueNotFoundError,
        RedisUnavailableError,
        RevokeTask,
        SkipRetry,
        TaskIDConflictError,
        TaskNotFoundError,
    )
    from asynqpy.limits import Limit
    from asynqpy.mux import ServeMux
    from asynqpy.options import TaskOptions
    from asynqpy.server import Server
    from asynqpy.task import ReceivedTask, Task, TaskInfo, TaskState
    from asynqpy.typed import PayloadMismatch, TypedTask

__version__ = "0.1.0"

# Each public name and the module that defines it.
_HOME = {
    "AsyncClient": "client", "Client": "client",
    "ServerConfig": "config",
    "AsynqError": "errors", "DuplicateTaskError": "errors", "InvalidArgumentError": "errors",
    "QueueFullError": "errors", "QueueNotFoundError": "errors", "RedisUnavailableError": "errors",
    "RevokeTask": "errors",
    "SkipRetry": "errors", "TaskIDConflictError": "errors", "TaskNotFoundError": "errors",
    "Limit": "limits",
    "ServeMux": "mux",
    "TaskOptions": "options",
    "Server": "server",
    "ReceivedTask": "task", "Task": "task", "TaskInfo": "task", "TaskState": "task",
    "PayloadMismatch": "typed", "TypedTask": "typed",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'asynqpy' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"asynqpy.{home}"), name)
    globals()[name] = value  # later look-ups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])


__all__ = [
    "AsyncClient",
    "AsynqError",
    "Client",
    "DuplicateTaskError",
    "InvalidArgumentError",
    "Limit",
    "PayloadMismatch",
    "QueueFullError",
    "QueueNotFoundError",
    "ReceivedTask",
    "RedisUnavailableError",
    "RevokeTask",
    "ServeMux",
    "Server",
    "ServerConfig",
    "SkipRetry",
    "Task",
    "TaskIDConflictError",
    "TaskInfo",
    "TaskNotFoundError",
    "TaskOptions",
    "TaskState",
    "TypedTask",
]
