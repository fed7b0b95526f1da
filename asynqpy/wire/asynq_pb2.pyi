import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskMessage(_message.Message):
    __slots__ = ("type", "payload", "id", "queue", "retry", "retried", "error_msg", "timeout", "deadline", "unique_key", "last_failed_at", "retention", "completed_at", "group_key", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    ERROR_MSG_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_KEY_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    GROUP_KEY_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    type: str
    payload: bytes
    id: str
    queue: str
    retry: int
    retried: int
    error_msg: str
    timeout: int
    deadline: int
    unique_key: str
    last_failed_at: int
    retention: int
    completed_at: int
    group_key: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, type: _Optional[str] = ..., payload: _Optional[bytes] = ..., id: _Optional[str] = ..., queue: _Optional[str] = ..., retry: _Optional[int] = ..., retried: _Optional[int] = ..., error_msg: _Optional[str] = ..., timeout: _Optional[int] = ..., deadline: _Optional[int] = ..., unique_key: _Optional[str] = ..., last_failed_at: _Optional[int] = ..., retention: _Optional[int] = ..., completed_at: _Optional[int] = ..., group_key: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("host", "pid", "server_id", "concurrency", "queues", "strict_priority", "status", "start_time", "active_worker_count")
    class QueuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    STRICT_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_WORKER_COUNT_FIELD_NUMBER: _ClassVar[int]
    host: str
    pid: int
    server_id: str
    concurrency: int
    queues: _containers.ScalarMap[str, int]
    strict_priority: bool
    status: str
    start_time: _timestamp_pb2.Timestamp
    active_worker_count: int
    def __init__(self, host: _Optional[str] = ..., pid: _Optional[int] = ..., server_id: _Optional[str] = ..., concurrency: _Optional[int] = ..., queues: _Optional[_Mapping[str, int]] = ..., strict_priority: _Optional[bool] = ..., status: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active_worker_count: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("host", "pid", "server_id", "task_id", "task_type", "task_payload", "queue", "start_time", "deadline")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    host: str
    pid: int
    server_id: str
    task_id: str
    task_type: str
    task_payload: bytes
    queue: str
    start_time: _timestamp_pb2.Timestamp
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, host: _Optional[str] = ..., pid: _Optional[int] = ..., server_id: _Optional[str] = ..., task_id: _Optional[str] = ..., task_type: _Optional[str] = ..., task_payload: _Optional[bytes] = ..., queue: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SchedulerEntry(_message.Message):
    __slots__ = ("id", "spec", "task_type", "task_payload", "enqueue_options", "next_enqueue_time", "prev_enqueue_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    TASK_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ENQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    PREV_ENQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    spec: str
    task_type: str
    task_payload: bytes
    enqueue_options: _containers.RepeatedScalarFieldContainer[str]
    next_enqueue_time: _timestamp_pb2.Timestamp
    prev_enqueue_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., spec: _Optional[str] = ..., task_type: _Optional[str] = ..., task_payload: _Optional[bytes] = ..., enqueue_options: _Optional[_Iterable[str]] = ..., next_enqueue_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., prev_enqueue_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SchedulerEnqueueEvent(_message.Message):
    __slots__ = ("task_id", "enqueue_time")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    enqueue_time: _timestamp_pb2.Timestamp
    def __init__(self, task_id: _Optional[str] = ..., enqueue_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
