"""Scheduler entries: a spec, a task and its enqueue options, with an id every replica derives alike and the
option strings Go asynq writes (Queue("cron"), MaxRetry(3), ...) so Go's Inspector can read them back."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from asynqpy.cron import Schedule, go_duration, parse
from asynqpy.errors import InvalidArgumentError
from asynqpy.options import EnqueueOptions, build_options
from asynqpy.task import Task
from asynqpy.wire import SchedulerEntry, timestamp

# The enqueue keywords, in the order Go's option strings are written when given as a mapping.
OPTION_NAMES = ("queue", "max_retry", "timeout", "deadline", "unique", "process_at", "process_in", "retention",
                "group", "task_id")


def _seconds(v: Any) -> float:
    return v.total_seconds() if isinstance(v, timedelta) else float(v)


def _unix_date(v: datetime) -> str:
    """Go's time.UnixDate layout ("Mon Jan  2 15:04:05 UTC 2006"), in UTC."""
    u = v.astimezone(UTC)
    return f"{u:%a %b} {u.day:>2} {u:%H:%M:%S} UTC {u.year}"


def _quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def option_string(name: str, value: Any) -> str:
    """Go's Option.String() for one enqueue keyword and its (already checked) value."""
    match name:
        case "queue":
            return f"Queue({_quote(value)})"
        case "max_retry":
            return f"MaxRetry({int(value)})"
        case "timeout":
            return f"Timeout({go_duration(_seconds(value))})"
        case "deadline":
            return f"Deadline({_unix_date(value)})"
        case "unique":
            return f"Unique({go_duration(_seconds(value))})"
        case "process_at":
            return f"ProcessAt({_unix_date(value)})"
        case "process_in":
            return f"ProcessIn({go_duration(_seconds(value))})"
        case "retention":
            return f"Retention({go_duration(_seconds(value))})"
        case "group":
            return f"Group({_quote(value)})"
        case "task_id":
            return f"TaskID({_quote(value)})"
    raise InvalidArgumentError(f"unknown enqueue option {name!r}", argument=name)


def option_fields(options: Any, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The enqueue keywords given: those of options (a mapping, or an options dataclass whose fields differ from
    their defaults), then fields (which win). None values are left out (they mean "asynq's default").
    """
    merged: dict[str, Any] = {}
    if options is None:
        pass
    elif isinstance(options, Mapping):
        merged.update(options)
    elif dataclasses.is_dataclass(options) and not isinstance(options, type):  # an options type: its set fields
        merged.update({f.name: getattr(options, f.name) for f in dataclasses.fields(options)
                       if getattr(options, f.name) != f.default})
    else:
        raise InvalidArgumentError(f"options must be a mapping of enqueue options, not {type(options).__name__}",
                                   argument="options")
    merged.update(fields)
    return {k: v for k, v in merged.items() if v is not None}


def resolve(fields: Mapping[str, Any], now: float) -> EnqueueOptions:
    """The checked options of one enqueue. Raises InvalidArgumentError naming the option."""
    unknown = sorted(set(fields) - set(OPTION_NAMES))
    if "durable" in unknown:  # an enqueue keyword, but not one Go's entries can carry
        raise InvalidArgumentError("durable is not a scheduler option: an entry's options are Go asynq's, which "
                                   f"has no such option (the options: {', '.join(OPTION_NAMES)})",
                                   argument="durable")
    if unknown:
        raise InvalidArgumentError(f"unknown enqueue option {unknown[0]!r} (options: {', '.join(OPTION_NAMES)})",
                                   argument=unknown[0])
    try:
        return build_options(now=now, **fields)
    except InvalidArgumentError:
        raise
    except (TypeError, ValueError) as exc:
        arg = next((n for n in OPTION_NAMES if str(exc).startswith(n)), "options")
        raise InvalidArgumentError(str(exc), argument=arg) from exc


def derive_id(spec: str, task: Task, opts: list[str], location: str) -> str:
    """A UUID-shaped id from the spec, task type, payload and sorted option strings (and the location when it
    is not UTC), so replicas registering the same entry agree on its id without talking to each other."""
    h = hashlib.sha256()
    for part in (spec.encode(), task.type.encode(), task.payload, *(o.encode() for o in sorted(opts))):
        h.update(len(part).to_bytes(8, "big") + part)
    if location != "UTC":
        h.update(b"location:" + location.encode())
    return str(uuid.UUID(bytes=h.digest()[:16], version=4))


@dataclass
class Entry:
    """One registered periodic task, and the ticks this replica knows about (Unix seconds)."""

    id: str
    spec: str
    schedule: Schedule
    task: Task
    fields: dict[str, Any]
    opts: list[str]
    next_tick: float | None = None
    prev_tick: float | None = None
    enqueued: int = field(default=0)

    @property
    def queue(self) -> str:
        return str(self.fields.get("queue", "default"))


def make_entry(spec: str, task: Task, options: Any, fields: Mapping[str, Any], *, location: str,
               entry_id: str | None, now: float) -> Entry:
    """A checked Entry. Raises InvalidArgumentError naming the spec, zone or option that is wrong."""
    if not isinstance(task, Task):
        raise InvalidArgumentError(f"task must be an asynqpy.Task, not {type(task).__name__}", argument="task")
    schedule = parse(spec, location)
    given = option_fields(options, fields)
    resolve(given, now)  # checked now, at register time; resolved again at every tick (process_in, task ids)
    opts = [option_string(k, v) for k, v in given.items()]
    if entry_id is not None and (not isinstance(entry_id, str) or not entry_id.strip()):
        raise InvalidArgumentError("entry_id must be a non-blank str", argument="entry_id")
    eid = entry_id or derive_id(spec, task, opts, location)
    return Entry(eid, spec, schedule, task, given, opts)


def encode_entry(e: Entry) -> bytes:
    """The protobuf SchedulerEntry asynq's Inspector reads (a never-run entry's previous time is Go's zero time)."""
    return SchedulerEntry(
        id=e.id, spec=e.spec, task_type=e.task.type, task_payload=e.task.payload, enqueue_options=e.opts,
        next_enqueue_time=timestamp(e.next_tick), prev_enqueue_time=timestamp(e.prev_tick)).SerializeToString()
