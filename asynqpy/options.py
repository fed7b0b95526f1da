"""Enqueue options: TaskOptions declares every keyword of Client.enqueue once and checks it, in one place.

Adding an option is one field on TaskOptions (it names its check) plus its use in resolve() and the
broker. Client, AsyncClient, enqueue_many and the Scheduler all take a TaskOptions, keywords of the same names,
or both (keywords win).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from asynqpy.errors import InvalidArgumentError
from asynqpy.rdb.durability import Durability

DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 25
DEFAULT_TIMEOUT = 1800  # seconds; asynq writes it only when neither timeout nor deadline is given

Duration = int | float | timedelta


# The version (4) and variant (RFC 4122) bits of a UUIDv4 set in bytes 6 and 8 of each 16, by translation tables:
# the whole batch at once, not per id.
_VERSION4 = bytes((x & 0x0F) | 0x40 for x in range(256))
_VARIANT = bytes((x & 0x3F) | 0x80 for x in range(256))


def new_task_ids(n: int) -> list[str]:
    """n random UUIDv4s in their text form, as str(uuid.uuid4()) gives them, from one read of the OS's random
    source."""
    b = bytearray(os.urandom(16 * n))
    b[6::16] = b[6::16].translate(_VERSION4)
    b[8::16] = b[8::16].translate(_VARIANT)
    h = b.hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-{h[i + 12:i + 16]}-{h[i + 16:i + 20]}-{h[i + 20:i + 32]}"
            for i in range(0, 32 * n, 32)]


_AHEAD = 64  # ids new_task_id() draws at a time
_drawn: list[str] = []  # drawn ahead, not handed out yet


def new_task_id() -> str:
    """A random UUIDv4 in its text form (see new_task_ids), from a batch drawn ahead: one read of the OS's random
    source for 64 ids, and a one-off enqueue (as an idle producer makes them) does a list pop, not the drawing.
    Threads take distinct ids (list pop and extend are atomic); a forked child draws its own."""
    try:
        return _drawn.pop()
    except IndexError:
        _drawn.extend(new_task_ids(_AHEAD))
        return _drawn.pop()


os.register_at_fork(after_in_child=_drawn.clear)  # never the parent's ids again: ids drawn by one are its own


def _bad(argument: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, argument=argument)


# The longest duration asynq can hold: a Go time.Duration is int64 nanoseconds (about 292 years). Past it a due
# time, a retention or a timeout would be one no Go reader can represent (and past year 9999 no Python one).
MAX_DURATION_S = (2**63 - 1) // 1_000_000_000


def seconds(value: Duration, name: str, *, allow_zero: bool = True) -> float:
    """A duration in seconds from a number or timedelta, at most MAX_DURATION_S (Go's longest Duration). Raises
    InvalidArgumentError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise _bad(name, f"{name} must be seconds (int or float) or a timedelta, not {type(value).__name__}")
    try:
        s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    except OverflowError:  # an int past float's range
        if value > 0:  # type: ignore[operator]
            raise _too_long(name, "a number past float's range") from None
        s = -math.inf
    if math.isnan(s) or math.isinf(s):
        raise _bad(name, f"{name} must be a finite duration")
    if s < 0 or (s == 0 and not allow_zero):
        raise _bad(name, f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {s}")
    if s > MAX_DURATION_S:
        raise _too_long(name, f"{s:.3g}")
    return s


def _too_long(name: str, got: str) -> InvalidArgumentError:
    return _bad(name, f"{name} must be at most {MAX_DURATION_S} seconds (about 292 years, asynq's longest "
                      f"duration), got {got}")


def unix_time(value: datetime, name: str) -> float:
    """Unix seconds of an aware datetime. Raises InvalidArgumentError naming the argument."""
    if not isinstance(value, datetime):
        raise _bad(name, f"{name} must be an aware datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise _bad(name, f"{name} must be an aware datetime (give it a tzinfo, e.g. datetime.now(UTC))")
    return value.timestamp()


def check_utf8(value: str, name: str) -> str:
    """Raises InvalidArgumentError for a str that has no UTF-8 form (a lone surrogate, as json.loads makes of a
    string cut inside an emoji, or a surrogateescape'd file name): asynq stores it in a protobuf string, which
    must be UTF-8 (Go refuses the message otherwise). An ASCII str is not encoded to be checked."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _bad(name, f"{name} {value[:40]!r} is not valid UTF-8 (a lone surrogate at position {exc.start}); "
                             "asynq stores it as a protobuf string") from None
    return value


def check_queue(queue: str, name: str = "queue") -> str:
    """Raises InvalidArgumentError for a queue name asynq cannot store (not a str, blank, with braces, or not
    UTF-8)."""
    if not isinstance(queue, str):
        raise _bad(name, f"{name} must be a str, not {type(queue).__name__}")
    if not queue.strip():
        raise _bad(name, "queue name must not be blank")
    check_utf8(queue, name)
    if "{" in queue or "}" in queue:
        raise _bad(name, f"queue name {queue!r} must not contain '{{' or '}}' (they form the Redis hash tag)")
    return queue


MAX_QUEUE_BYTES = 256  # Go asynq sets no limit (so longer Go-written names are still read); nobody means more


def check_new_queue(queue: str, name: str = "queue") -> str:
    """check_queue, and the length limit of a queue we enqueue into: raises InvalidArgumentError for a name
    longer than MAX_QUEUE_BYTES in UTF-8 (reading, serving and inspecting longer names still works)."""
    check_queue(queue, name)
    size = len(queue.encode("utf-8", "surrogatepass"))
    if size > MAX_QUEUE_BYTES:
        raise _bad(name, f"queue name is {size} bytes long; the limit is {MAX_QUEUE_BYTES} bytes: {queue[:40]!r}...")
    return queue


MAX_TYPE_BYTES = 1024  # Go asynq sets no limit; a longer type is a producer's bug and hangs every list showing it


def check_task_type(task_type: str, name: str = "type") -> str:
    """Raises InvalidArgumentError for a task type longer than MAX_TYPE_BYTES in UTF-8, or one with nothing
    visible in it (only spaces and zero-width or other format characters); the Task checks the rest."""
    size = len(task_type.encode("utf-8", "surrogatepass"))
    if size > MAX_TYPE_BYTES:
        raise _bad(name, f"task type is {size} bytes long; the limit is {MAX_TYPE_BYTES} bytes (put data in the "
                         f"payload): {task_type[:40]!r}...")
    if not task_type.isprintable() and not any(c.isprintable() and not c.isspace() for c in task_type):
        raise _bad(name, f"task type {task_type!r} has nothing visible in it")
    return task_type


# Redis refuses a value longer than its proto-max-bulk-len (512 MB by default) by closing the connection, which
# reads as "cannot reach Redis"; a task's message is its payload plus a few hundred bytes.
MAX_PAYLOAD_BYTES = 512 * 1024 * 1024 - 64 * 1024


def check_payload_size(payload: bytes, name: str = "payload") -> bytes:
    """Raises InvalidArgumentError for a payload Redis would refuse to store (MAX_PAYLOAD_BYTES)."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise _bad(name, f"task payload is {len(payload)} bytes; Redis stores at most 512 MB in one value "
                         "(proto-max-bulk-len): store the data elsewhere and pass a reference")
    return payload


def check_int(value: int, name: str, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int:
    """Raises InvalidArgumentError unless value is an int (not a bool) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise _bad(name, f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise _bad(name, f"{name} must be <= {maximum}, got {value}")
    return value


def check_text(value: str, name: str) -> str:
    """Raises InvalidArgumentError unless value is a non-blank str that has a UTF-8 form."""
    if not isinstance(value, str):
        raise _bad(name, f"{name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise _bad(name, f"{name} must not be blank")
    return check_utf8(value, name)


@dataclass(frozen=True)
class EnqueueOptions:
    """The resolved options of one enqueue, as the broker writes them. Times are Unix seconds; durations seconds.

    timeout: 1800 when neither timeout nor deadline is given, else 0 if not given. deadline: 0 (none).
    process_at: 0 means now. process_in: the delay when process_in was given (0: none); the broker sends it,
    not process_at (its estimate by this machine's clock), so that the due time is by Redis's clock.
    unique_ttl: 0 (not unique). group: "" (no aggregation). durable: None (done once the primary has the task);
    a Durability makes the enqueue wait (Redis WAIT) until that many replicas have it.
    """

    queue: str
    max_retry: int
    timeout: int
    deadline: int
    process_at: float
    unique_ttl: int
    task_id: str
    retention: int
    group: str
    durable: Durability | None = None
    process_in: float = 0.0


def _check_timeout(value: Duration, name: str) -> None:
    if seconds(value, name, allow_zero=False) < 1:
        raise _bad(name, f"{name} must be at least 1 second (asynq stores whole seconds)")


def _check_unique(value: Duration, name: str) -> None:
    if seconds(value, name) < 1:
        raise _bad(name, f"{name} must be at least 1 second")


def check_durable(value: bool | Durability | None, name: str = "durable") -> Durability | None:
    """True means one replica within a second; a Durability says how many and how long; False or None: off.
    Raises InvalidArgumentError naming the argument for anything else."""
    if value is None or isinstance(value, Durability):
        return value
    if not isinstance(value, bool):
        raise _bad(name, f"{name} must be True, False or a Durability, not {type(value).__name__}")
    return Durability() if value else None


@dataclass(frozen=True)
class TaskOptions:
    """The options of an enqueue, checked when made (InvalidArgumentError naming the field).

    queue: "default". max_retry: 25 (retries after the first attempt). timeout: seconds or timedelta per
    attempt (30 minutes when neither timeout nor deadline is given). deadline: an aware datetime after which
    the task fails. process_in / process_at: run later (one of them). unique: seconds or timedelta during which
    the same type and payload in the same queue is refused (DuplicateTaskError). task_id: your own id (a new
    UUIDv4 otherwise). retention: keep the task as completed for this long after success. group: aggregate
    with other tasks of the group (see the Server's group_aggregator). durable: True (or a Durability: how
    many replicas, how long) returns only once a replica also holds the task (Redis WAIT), so a failover
    cannot lose it; NotDurableError says the replicas did not confirm in time.

    Make one once and reuse it: `Client.enqueue(task, opts)`, `Client.enqueue(task, opts, queue="low")`.
    A new option is one field here, with its check, plus its use in resolve() and the broker.
    """

    queue: str = field(default=DEFAULT_QUEUE, metadata={"check": check_new_queue})
    max_retry: int = field(default=DEFAULT_MAX_RETRY, metadata={"check": check_int})
    timeout: Duration | None = field(default=None, metadata={"check": _check_timeout})
    deadline: datetime | None = field(default=None, metadata={"check": unix_time})
    process_in: Duration | None = field(default=None, metadata={"check": seconds})
    process_at: datetime | None = field(default=None, metadata={"check": unix_time})
    unique: Duration | None = field(default=None, metadata={"check": _check_unique})
    task_id: str | None = field(default=None, metadata={"check": check_text})
    retention: Duration | None = field(default=None, metadata={"check": seconds})
    group: str | None = field(default=None, metadata={"check": check_text})
    durable: bool | Durability = field(default=False, metadata={"check": check_durable})

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            value = getattr(self, name)
            if value is not None:
                check(value, name)
            elif name in _DEFAULTS:  # None for an option with a default (queue, max_retry, durable): not given
                object.__setattr__(self, name, _DEFAULTS[name])
        if self.process_in is not None and self.process_at is not None:
            raise _bad("process_in", "give process_in or process_at, not both")

    def merge(self, fields: Mapping[str, Any]) -> TaskOptions:
        """These options with fields replacing theirs (fields win). A process_in field drops a process_at of
        these options and vice versa. Raises InvalidArgumentError for an unknown name or a bad value.

        Only the given fields are checked (these options were checked when made): the enqueue hot path.
        """
        if not fields:
            return self
        given = True
        for name, value in fields.items():
            check = _CHECKS.get(name)
            if check is None:
                raise _bad(name, f"unknown option {name!r}; the options are: {', '.join(_CHECKS)}")
            if value is not None:
                check(value, name)
            elif name in _DEFAULTS:
                given = False
        if not given:  # None for an option with a default: not given, these options' value stands
            fields = {k: v for k, v in fields.items() if v is not None or k not in _DEFAULTS}
        merged = object.__new__(type(self))
        values = merged.__dict__  # frozen: filled directly, as dataclasses.replace would after the same checks
        values.update(self.__dict__)
        values.update(fields)
        if fields.get("process_in") is not None and "process_at" not in fields:
            values["process_at"] = None
        elif fields.get("process_at") is not None and "process_in" not in fields:
            values["process_in"] = None
        if values["process_in"] is not None and values["process_at"] is not None:
            raise _bad("process_in", "give process_in or process_at, not both")
        return merged

    def resolve(self, now: float | None = None, *, task_id: str | None = None) -> EnqueueOptions:
        """The broker's form of these options at time now (Unix seconds): absolute times, whole seconds,
        asynq's defaults, and an id (task_id, else this one's, else a new UUIDv4)."""
        now = time.time() if now is None else now
        at = delay = 0.0
        if self.process_in is not None:
            delay = seconds(self.process_in, "process_in")
            at = now + delay if delay > 0 else 0.0
        elif self.process_at is not None:
            at = self.process_at.timestamp()
        if self.timeout is not None:
            t = int(seconds(self.timeout, "timeout"))
        else:
            t = DEFAULT_TIMEOUT if self.deadline is None else 0
        return EnqueueOptions(
            queue=self.queue, max_retry=self.max_retry, timeout=t,
            deadline=int(self.deadline.timestamp()) if self.deadline is not None else 0, process_at=at,
            unique_ttl=int(seconds(self.unique, "unique")) if self.unique is not None else 0,
            task_id=task_id or self.task_id or new_task_id(),
            retention=int(seconds(self.retention, "retention")) if self.retention is not None else 0,
            group=self.group or "", durable=check_durable(self.durable), process_in=delay,
        )


_CHECKS: dict[str, Callable[[Any, str], object]] = {f.name: f.metadata["check"]
                                                    for f in dataclasses.fields(TaskOptions)}
# the options whose default is not None: None given for one of them means "not given" (its default, or the value
# of the options merged into)
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(TaskOptions) if f.default is not None}
DEFAULT_OPTIONS = TaskOptions()


_MERGED: dict[tuple[tuple[str, type, Any], ...], TaskOptions] = {}  # options_from(None, fields) by fields


def options_from(options: TaskOptions | None, fields: Mapping[str, Any]) -> TaskOptions:
    """The options of one call: options (or the defaults) with the keyword fields winning.

    Raises InvalidArgumentError for an options argument that is not a TaskOptions, an unknown keyword or a bad
    value.
    """
    if options is None:
        if not fields:
            return DEFAULT_OPTIONS
        try:  # the same keywords again (`enqueue(t, queue="emails")` in a loop): the same (immutable) options
            key = tuple((k, type(v), v) for k, v in fields.items())  # True == 1: the type tells them apart
            merged = _MERGED.get(key)
        except TypeError:  # a value that is no dict key (a list...): merged anew, and checked there
            return DEFAULT_OPTIONS.merge(fields)
        if merged is None:
            merged = DEFAULT_OPTIONS.merge(fields)
            if len(_MERGED) >= 256:  # e.g. a process_at per call: keep the cache small
                _MERGED.clear()
            _MERGED[key] = merged
        return merged
    if not isinstance(options, TaskOptions):
        raise _bad("options", f"options must be a TaskOptions, not {type(options).__name__}")
    return options.merge(fields)


def build_options(*, now: float | None = None, **fields: Any) -> EnqueueOptions:
    """Check the keyword options and resolve them at time now. Raises InvalidArgumentError naming the argument."""
    return options_from(None, fields).resolve(now)
