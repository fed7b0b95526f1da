"""Task, TaskInfo and TaskState: what producers hand in and what the broker reports back."""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.options import check_utf8
from asynqpy.unixtime import utc_from_unix
from asynqpy.wire import TaskMessage


class TaskState(enum.StrEnum):
    """asynq's state names, exactly as stored in the task hash's `state` field."""

    ACTIVE = "active"
    PENDING = "pending"
    SCHEDULED = "scheduled"
    RETRY = "retry"
    ARCHIVED = "archived"
    COMPLETED = "completed"
    AGGREGATING = "aggregating"


_EMPTY: Mapping[str, str] = MappingProxyType({})


class _NilPayload(bytes):
    """Empty bytes standing for Go's nil payload: the payload of a Task made without one."""

    def __reduce__(self) -> str:
        return "NIL_PAYLOAD"  # pickled and copied as this module's one instance


NIL_PAYLOAD: bytes = _NilPayload()


@dataclass(frozen=True)
class Task:
    """A unit of work: a type that routes it to a handler, opaque payload bytes, and string headers.

    `Task(type)` without a payload is Go's `asynq.NewTask(type, nil)`: its payload reads as b"", and with
    `unique=` its lock is Go's nil form `asynq:{queue}:unique:<type>:` (no checksum), so the same unique task
    from Go and from Python collide. `Task(type, b"")` is Go's empty, non-nil payload: the lock ends with the
    MD5 of no bytes, as Go's `[]byte{}` does.

    Raises InvalidArgumentError (a ValueError) naming the argument: a type that is not a non-blank str, a
    payload that is not bytes, headers that do not map str to str, a type or header with no UTF-8 form (a lone
    surrogate).
    """

    type: str
    payload: bytes = NIL_PAYLOAD
    headers: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.type, str):
            raise InvalidArgumentError(f"task type must be a str, not {type(self.type).__name__}", argument="type")
        if not self.type.strip():
            raise InvalidArgumentError("task type must not be blank", argument="type")
        check_utf8(self.type, "type")
        payload = self.payload
        if payload is not NIL_PAYLOAD and payload.__class__ is not bytes:  # (bytes as they are: the common case)
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(
                    f"task payload must be bytes, not {type(payload).__name__} "
                    "(encode it first, e.g. json.dumps(obj).encode())", argument="payload")
            object.__setattr__(self, "payload", bytes(payload))
        if self.headers is _EMPTY:  # the default: already empty and read-only
            return
        headers = dict(self.headers or {})  # a private read-only copy
        for k, v in headers.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgumentError("task headers must map str to str", argument="headers")
            check_utf8(k, "headers")
            check_utf8(v, "headers")
        object.__setattr__(self, "headers", MappingProxyType(headers))

    @property
    def nil_payload(self) -> bool:
        """True for a Task made without a payload (Go's nil payload; see the class docstring)."""
        return self.payload is NIL_PAYLOAD


def _when(unix_s: float) -> datetime | None:
    return utc_from_unix(unix_s) if unix_s else None


@dataclass(frozen=True)
class TaskInfo:
    """Everything known about a stored task, as asynq's TaskInfo has it.

    Durations are in seconds (0 = none); times are aware UTC datetimes or None.
    """

    id: str
    queue: str
    type: str
    payload: bytes
    headers: Mapping[str, str]
    state: TaskState
    max_retry: int
    retried: int
    last_err: str
    last_failed_at: datetime | None
    timeout: int
    deadline: datetime | None
    group: str
    next_process_at: datetime | None
    is_orphaned: bool = False
    retention: int = 0
    completed_at: datetime | None = None
    result: bytes | None = None

    @classmethod
    def from_message(cls, msg: TaskMessage, state: TaskState | str, *,
                     next_process_at: datetime | None = None, is_orphaned: bool = False,
                     result: bytes | None = None) -> TaskInfo:
        return cls(
            id=msg.id, queue=msg.queue, type=msg.type, payload=bytes(msg.payload),
            headers=MappingProxyType(dict(msg.headers)), state=TaskState(state),
            max_retry=msg.retry, retried=msg.retried, last_err=msg.error_msg,
            last_failed_at=_when(msg.last_failed_at), timeout=msg.timeout, deadline=_when(msg.deadline),
            group=msg.group_key, next_process_at=next_process_at, is_orphaned=is_orphaned,
            retention=msg.retention, completed_at=_when(msg.completed_at), result=result,
        )


class ReceivedTask:
    """What a handler receives: the task with its id, queue, attempt count, deadline and a result writer.

    `cancelled` is set when the task is cancelled or times out, so plain-function handlers running in a
    thread can stop early (asyncio handlers are cancelled directly).
    """

    __slots__ = ("_cancelled", "_deadline", "_done", "_writer", "headers", "id", "max_retry", "payload", "queue",
                 "retry_count", "type")

    def __init__(self, msg: TaskMessage, *, deadline: float, writer: Any) -> None:
        self.type: str = msg.type
        self.payload: bytes = msg.payload
        self.headers: Mapping[str, str] = MappingProxyType(dict(msg.headers)) if msg.headers else _EMPTY
        self.id: str = msg.id
        self.queue: str = msg.queue
        self.retry_count: int = msg.retried
        self.max_retry: int = msg.retry
        self._deadline = deadline
        self._cancelled: threading.Event | None = None  # made on first use: most handlers never look
        self._done = False
        self._writer = writer

    @property
    def deadline(self) -> datetime:
        """When the task times out (its timeout or deadline; 30 minutes when it has neither)."""
        return datetime.fromtimestamp(self._deadline, tz=UTC)

    @property
    def cancelled(self) -> threading.Event:
        """Set when the task is cancelled or times out: a plain-function handler can wait on it or poll it."""
        if self._cancelled is None:
            self._cancelled = threading.Event()
            if self._done:
                self._cancelled.set()
        return self._cancelled

    def cancel(self) -> None:
        """Mark the task as cancelled (the processor calls this; handlers read `cancelled`)."""
        self._done = True
        if self._cancelled is not None:
            self._cancelled.set()

    def write_result(self, data: bytes) -> int:
        """Store data as this task's result (kept as long as the task; see retention). Returns its length.

        Raises TypeError for non-bytes, RuntimeError once the task was cancelled or timed out, and
        RedisUnavailableError (RedisBusyError, RedisOutOfMemoryError, ...) or RedisCommandError when Redis refuses
        the write (never redis-py's own errors).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"result must be bytes, not {type(data).__name__}")
        if self._done:
            raise RuntimeError("task is done (cancelled or timed out); its result can no longer be written")
        self._writer(self.queue, self.id, bytes(data))
        return len(data)

    @property
    def task(self) -> Task:
        return Task(self.type, self.payload, dict(self.headers))

    def __repr__(self) -> str:
        return f"ReceivedTask(type={self.type!r}, id={self.id!r}, queue={self.queue!r}, retry={self.retry_count})"
