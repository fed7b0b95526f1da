"""Encode and decode helpers around the generated protobuf module (times, checked decoding)."""

from __future__ import annotations

from datetime import datetime

from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from asynqpy.errors import MalformedTaskError
from asynqpy.unixtime import utc_from_unix
from asynqpy.wire.asynq_pb2 import TaskMessage

_from_string = TaskMessage.FromString  # a new message parsed from bytes (one call: a worker decodes every task)

# Go's zero time.Time (0001-01-01T00:00:00Z) as a protobuf Timestamp: Go writes it rather than omitting it.
GO_ZERO_TIME_SECONDS = -62135596800


def decode_task_message(data: bytes, *, queue: str = "", task_id: str = "") -> TaskMessage:
    """Parse a TaskMessage; unknown fields (from a newer Go) are kept and survive re-encoding.

    Raises MalformedTaskError (naming the queue and task) when the bytes are not a TaskMessage.
    """
    try:
        return _from_string(data)
    except (DecodeError, ValueError) as exc:
        raise MalformedTaskError(f"task message is not valid protobuf: {exc}", queue=queue, task_id=task_id) from exc


def timestamp(t: float | None) -> Timestamp:
    """A protobuf Timestamp for Unix time t, or Go's zero time when t is None."""
    ts = Timestamp()
    if t is None:
        ts.seconds = GO_ZERO_TIME_SECONDS
        return ts
    sec = int(t // 1)
    ts.seconds = sec
    ts.nanos = round((t - sec) * 1e9) % 1_000_000_000
    return ts


def timestamp_to_datetime(ts: Timestamp) -> datetime | None:
    """The aware UTC datetime of a Timestamp, or None for Go's zero time (and for an unset one)."""
    if ts.seconds <= GO_ZERO_TIME_SECONDS or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return utc_from_unix(ts.seconds + ts.nanos / 1e9)
