"""The producer's hot path: the enqueue of many tasks sharing resolved options, packed from templates.

broker.enqueue_call() is the one definition of the enqueue script calls. EnqueuePacker builds it once with
placeholders for what differs per task (task id, message bytes, unique key), packs the rest once, and then
fills in each task's own values: per task, the message bytes (MessageTemplate) and a few RESP segments.
The bytes sent are exactly those of pack(broker.enqueue(...)) (tests/core/test_packer.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asynqpy.options import EnqueueOptions
from asynqpy.rdb import broker, keys
from asynqpy.rdb.scripts import Script, _arg, _head
from asynqpy.wire import TaskMessage

_TID = "\x00tid\x00"
_DATA = b"\x00data\x00"
_UKEY = "\x00ukey\x00"


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, value: bytes) -> bytes:
    """A length-delimited protobuf field (tag = field number << 3 | 2); empty values are omitted (proto3)."""
    if not value:
        return b""
    n = len(value)
    return bytes((tag, n)) + value if n < 0x80 else bytes((tag,)) + _varint(n) + value


class MessageTemplate:
    """TaskMessage bytes for tasks that share their options: fields 1-3 (type, payload, id) and 10 (unique key)
    are encoded per task around the pre-encoded options (fields 4-9, then 12-14), in field-number order as
    protobuf serializes them. A task with headers (field 15, a map) goes through TaskMessage itself."""

    def __init__(self, opts: EnqueueOptions) -> None:
        self.opts = opts
        mid = TaskMessage(queue=opts.queue, retry=opts.max_retry, timeout=opts.timeout, deadline=opts.deadline)
        tail = TaskMessage(retention=opts.retention, group_key=opts.group)
        self.mid = mid.SerializeToString()
        self.tail = tail.SerializeToString()

    def encode(self, task_type: str, payload: bytes | None, headers: Mapping[str, str], task_id: str,
               unique_key: str) -> bytes:
        if headers:
            msg = broker.build_message(task_type, payload, headers, self.opts, task_id=task_id)
            return msg.SerializeToString()
        return b"".join((_field(0x0A, task_type.encode()), _field(0x12, payload or b""),
                         _field(0x1A, task_id.encode()), self.mid, _field(0x52, unique_key.encode()), self.tail))


def _around(before: str, after: str) -> Callable[[str, bytes, str], bytes]:
    return lambda tid, data, ukey: f"{before}{tid}{after}".encode()


def _seg(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


class EnqueuePacker:
    """Packs enqueue commands for tasks with these resolved options at time now (wake: the command publishes
    on the wake channel when no idle worker takes the task)."""

    def __init__(self, opts: EnqueueOptions, now: float, *, wake: bool) -> None:
        self.opts = opts
        call = broker.enqueue_call(_DATA, _TID, _UKEY, opts, now=now, wake=wake)
        self.script: Script = call.script
        # Each piece is constant bytes, or a function of (tid, data, ukey) giving one argument's bytes.
        pieces: list[bytes | Callable[[str, bytes, str], bytes]] = [
            _head(call.script.sha, len(call.keys) + len(call.args), len(call.keys))]
        for value in (*call.keys, *call.args):
            if value == _DATA:
                pieces.append(lambda tid, data, ukey: data)
            elif value == _UKEY:
                pieces.append(lambda tid, data, ukey: ukey.encode())
            elif isinstance(value, str) and _TID in value:
                pieces.append(_around(*value.split(_TID)))
            else:
                seg = _seg(_arg(value))
                if pieces and isinstance(pieces[-1], bytes):
                    pieces[-1] += seg
                else:
                    pieces.append(seg)
        self._pieces = pieces

    def pack(self, tid: str, data: bytes, ukey: str) -> bytes:
        return b"".join([p if isinstance(p, bytes) else _seg(p(tid, data, ukey)) for p in self._pieces])

    def check_reply(self, raw: Any, tid: str) -> Exception | None:
        """The error an enqueue reply stands for (DuplicateTaskError, TaskIDConflictError), or None."""
        if isinstance(raw, Exception):
            return raw
        if raw == 1:
            return None
        try:
            broker.enqueue_reply(self.opts.queue, tid)(raw)
        except Exception as exc:
            return exc
        return None


def unique_key(queue: str, task_type: str, payload: bytes | None, opts: EnqueueOptions) -> str:
    """The task's unique lock key, or "" when opts are not unique."""
    return keys.unique(queue, task_type, payload) if opts.unique_ttl else ""
