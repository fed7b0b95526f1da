"""asynq's protobuf messages and the helpers that turn them into bytes and back."""

from asynqpy.wire.asynq_pb2 import (
    SchedulerEnqueueEvent,
    SchedulerEntry,
    ServerInfo,
    TaskMessage,
    WorkerInfo,
)
from asynqpy.wire.codec import (
    GO_ZERO_TIME_SECONDS,
    decode_task_message,
    timestamp,
    timestamp_to_datetime,
)

__all__ = [
    "GO_ZERO_TIME_SECONDS",
    "SchedulerEnqueueEvent",
    "SchedulerEntry",
    "ServerInfo",
    "TaskMessage",
    "WorkerInfo",
    "decode_task_message",
    "timestamp",
    "timestamp_to_datetime",
]
