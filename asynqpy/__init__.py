"""asynqpy: a Python task queue on Redis that speaks the wire format of Go's hibiken/asynq v0.26."""

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
