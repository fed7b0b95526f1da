"""The producer's hot path: the enqueue of many tasks sharing resolved options, packed from templates.

broker.enqueue_call() is the one definition of the enqueue script calls. EnqueuePacker builds it once with
placeholders for what differs per task (task id, message bytes, unique key), packs the rest once, and then
fills in each task's own values: per task, the message bytes (MessageTemplate) and a few RESP segments.
The bytes sent are exactly those of pack(broker.enqueue(...)) (tests/core/test_packer.py checks it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Any

from asynqpy.options import EnqueueOptions
from asynqpy.rdb import broker, keys
from asynqpy.rdb.resp import encode_arg, evalsha_head, pack
from asynqpy.rdb.scripts import Script
from asynqpy.wire import TaskMessage

_TID = "\x00tid\x00"
_DATA = b"\x00data\x00"
_UKEY = "\x00ukey\x00"
DRAWN_ID_LENGTH = 36  # a UUID's text, as new_task_id draws it


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


@lru_cache(maxsize=256)
def _type_field(task_type: str) -> bytes:
    return _field(0x0A, task_type.encode())


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
        self._after_id = self.mid + self.tail  # no unique key (field 10) between them

    def encode_drawn(self, task_type: str, payload: bytes, task_id: str) -> bytes:
        """encode() of a task without headers or unique key whose id is a drawn UUID (36 characters, so its
        field's tag and length are constant): the hot path of enqueue_many."""
        return b"%s%s\x1a$%s%s" % (_type_field(task_type), _field(0x12, payload), task_id.encode(), self._after_id)

    def encode(self, task_type: str, payload: bytes | None, headers: Mapping[str, str], task_id: str,
               unique_key: str) -> bytes:
        if headers:
            msg = broker.build_message(task_type, payload, headers, self.opts, task_id=task_id)
            return msg.SerializeToString()
        return b"".join((_type_field(task_type), _field(0x12, payload or b""), _field(0x1A, task_id.encode()),
                         self.mid, _field(0x52, unique_key.encode()) if unique_key else b"", self.tail))


def _seg(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


class EnqueuePacker:
    """Packs enqueue commands for tasks with these resolved options at time now (wake: the command publishes
    on the wake channel when no idle worker takes the task)."""

    def __init__(self, opts: EnqueueOptions, now: float, *, wake: bool) -> None:
        self.opts = opts
        call = broker.enqueue_call(_DATA, _TID, _UKEY, opts, now=now, wake=wake)
        self.script: Script = call.script
        # The command as a bytes %-format: constant arguments packed once, a %s for each argument that holds
        # the task's id (before, after), its message (None) or its unique key ("").
        fmt = [evalsha_head(call.script.sha, len(call.keys) + len(call.args), len(call.keys)).replace(b"%", b"%%")]
        holes: list[tuple[str, str] | str | None] = []
        # pack_drawn's format: the same, with the length and the text around a drawn id packed too (its length is
        # known), and the message as its length and bytes; the values are picked from (id, message length, message).
        drawn: list[bytes] | None = list(fmt)
        picks: list[int] = []
        for value in (*call.keys, *call.args):
            if value == _DATA:
                holes.append(None)
                seg = b"$%d\r\n%s\r\n"
                picks += (1, 2)
            elif value == _UKEY:
                holes.append("")
                seg, drawn = b"", None  # a unique key varies in length: pack() only
            elif isinstance(value, str) and _TID in value:
                before, after = value.split(_TID)
                holes.append((before, after))
                b, a = before.encode(), after.encode()
                seg = b"$%d\r\n%s%%s%s\r\n" % (len(b) + DRAWN_ID_LENGTH + len(a), b.replace(b"%", b"%%"),
                                                a.replace(b"%", b"%%"))
                picks.append(0)
            else:
                seg = _seg(encode_arg(value)).replace(b"%", b"%%")
                fmt.append(seg)
                if drawn is not None:
                    drawn.append(seg)
                continue
            if drawn is not None:
                drawn.append(seg)
            fmt.append(b"%s")
        self._fmt = b"".join(fmt)
        self._holes = holes
        # pack_drawn's format and picker (itemgetter gives a tuple from two picks on: the message is always two)
        self._drawn = (b"".join(drawn), itemgetter(*picks)) if drawn is not None and len(picks) > 1 else None

    def pack(self, tid: str, data: bytes, ukey: str) -> bytes:
        vals = []
        for h in self._holes:
            if h is None:
                b = data
            elif h == "":
                b = ukey.encode()
            else:
                b = f"{h[0]}{tid}{h[1]}".encode()
            vals.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return self._fmt % tuple(vals)

    def pack_drawn(self, tid: str, data: bytes) -> bytes:
        """pack(tid, data, "") for a drawn id (DRAWN_ID_LENGTH characters) and options without a unique key, from
        one %-format: the enqueue of a single task (Client.enqueue's hot path)."""
        if self._drawn is None or len(tid) != DRAWN_ID_LENGTH:
            return self.pack(tid, data, "")
        fmt, pick = self._drawn
        out: bytes = fmt % pick((tid.encode(), len(data), data))
        return out

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


class SingleEnqueue:
    """The enqueue command of one task with these plain resolved options (no schedule, group or unique key), no
    headers and a drawn id, from the templates: the bytes pack(broker.enqueue(...)) gives, from two %-formats
    instead of a TaskMessage, a Call and their packing (Client.enqueue's hot path)."""

    def __init__(self, opts: EnqueueOptions, now: float) -> None:
        self.opts = opts
        self.template = MessageTemplate(opts)
        self.packer = EnqueuePacker(opts, now, wake=True)
        self.script = self.packer.script

    def command(self, task_type: str, payload: bytes, task_id: str) -> bytes:
        """The command of a task with a drawn id (new_task_id)."""
        return self.packer.pack_drawn(task_id, self.template.encode_drawn(task_type, payload, task_id))


class ManyPacker:
    """Packs enqueue_many script commands (several plain tasks in one command) for tasks with these resolved
    options at time now: the queue's keys and arguments packed once, each task's id and message appended."""

    def __init__(self, opts: EnqueueOptions, now: float, *, wake: bool) -> None:
        call = broker.enqueue_many_call([], opts, now=now, wake=wake)
        self.script: Script = call.script
        self._nkeys = len(call.keys)
        self._nconst = len(call.keys) + len(call.args)
        self._const = pack(call)[len(evalsha_head(call.script.sha, self._nconst, self._nkeys)):]

    def pack(self, tasks: Sequence[tuple[str, bytes]]) -> bytes:
        segs = [b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(tid), tid.encode(), len(data), data) for tid, data in tasks]
        return evalsha_head(self.script.sha, self._nconst + 2 * len(tasks), self._nkeys) + self._const + b"".join(segs)


def unique_key(queue: str, task_type: str, payload: bytes | None, opts: EnqueueOptions) -> str:
    """The task's unique lock key, or "" when opts are not unique."""
    return keys.unique(queue, task_type, payload) if opts.unique_ttl else ""
