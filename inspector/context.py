"""What the Inspector's parts share: the door to Redis, the clock, and argument checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from asynqpy.errors import InvalidArgumentError, QueueNotFoundError
from asynqpy.options import check_int, check_queue
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, KeyOrArg
from asynqpy.rdb.syncdoor import Batch, SyncDoor
from asynqpy.task import TaskState
from asynqpy.unixtime import utc_from_unix

T = TypeVar("T")
MAX_PAGE_SIZE = 1000
LIST_STATES = (TaskState.PENDING, TaskState.ACTIVE)


@dataclass
class Ctx:
    """The door to Redis (asynqpy.rdb.syncdoor: every command of the Inspector goes through it, its errors
    translated into asynqpy's) and the clock (Unix seconds) every 'now' comes from.

    last_snapshot: the newest queue snapshot this Inspector took (inspector.snapshot), for when it cannot be
    shared through Redis. stored_snapshot: the bytes of the snapshot stored in Redis it last read or wrote, and
    their decoded form (inspector.snapshot decodes a GET's bytes only when they differ).
    """

    door: SyncDoor
    clock: Callable[[], float] = time.time
    last_snapshot: Any = field(default=None, compare=False)
    stored_snapshot: Any = field(default=None, compare=False)

    def now(self) -> float:
        return float(self.clock())

    def read(self, fill: Callable[[Batch], object]) -> list[Any]:
        """The replies of the commands and scripts fill(batch) queues, in one round trip (SyncDoor.read)."""
        return self.door.read(fill)

    def read_script(self, call: Call[T]) -> T:
        """Run one read-only script Call on its own and return its parsed reply."""
        return self.door.read_script(call)

    def command(self, *args: KeyOrArg, **options: Any) -> Any:
        """One plain command (SyncDoor.command)."""
        return self.door.command(*args, **options)

    def run(self, call: Call[T]) -> T:
        """Run one (mutating) script Call: EVALSHA, the script loaded on NOSCRIPT."""
        return self.door.run(call)

    def require_queue(self, q: str) -> None:
        """Raises QueueNotFoundError unless q is registered in asynq:queues."""
        if not self.command("SISMEMBER", keys.QUEUES, q):
            raise QueueNotFoundError(f"queue {q!r} does not exist", queue=q)


def queue_missing(q: str) -> QueueNotFoundError:
    return QueueNotFoundError(f"queue {q!r} does not exist", queue=q)


def check_state(state: TaskState | str) -> TaskState:
    """The TaskState named by state. Raises InvalidArgumentError naming the valid states."""
    try:
        return TaskState(state)
    except ValueError:
        names = ", ".join(s.value for s in TaskState)
        raise InvalidArgumentError(f"unknown task state {state!r}; expected one of: {names}",
                                   argument="state") from None


def check_page(page: int, size: int) -> tuple[int, int]:
    """The 0-based first and last index of a 1-based page. Raises InvalidArgumentError for a bad page or size."""
    check_int(page, "page", minimum=1)
    check_int(size, "size", minimum=1, maximum=MAX_PAGE_SIZE)
    start = size * (page - 1)
    return start, start + size - 1


def check_queue_name(q: str) -> str:
    """Raises InvalidArgumentError for a name that cannot be a queue (not a str, or blank). Unlike the Client's
    check, braces pass: Go asynq accepts them, and its queues must be readable and actionable here."""
    if isinstance(q, str) and "{" not in q and "}" not in q:
        return check_queue(q)
    if not isinstance(q, str) or not q.strip():
        return check_queue(q)  # raises the Client's error for it
    return q


def check_ids(task_ids: Sequence[str]) -> list[str]:
    """The ids as a list. Raises InvalidArgumentError for a bare string, a non-str id or a blank one."""
    if isinstance(task_ids, (str, bytes)):
        raise InvalidArgumentError("task_ids must be a sequence of ids, not a single string", argument="task_ids")
    out = list(task_ids)
    for tid in out:
        check_id(tid, "task_ids")
    return out


def check_id(task_id: str, argument: str = "task_id") -> str:
    if not isinstance(task_id, str):
        raise InvalidArgumentError(f"task id must be a str, not {type(task_id).__name__}", argument=argument)
    if not task_id.strip():
        raise InvalidArgumentError("task id must not be blank", argument=argument)
    return task_id


def state_source(q: str, state: TaskState, group: str | None) -> tuple[str, str]:
    """The key holding a state's tasks and its kind ("list" or "zset"). Raises InvalidArgumentError when a group
    is needed or given where it does not apply."""
    if state is TaskState.AGGREGATING:
        if not group:
            raise InvalidArgumentError("aggregating tasks live in groups: give group=", argument="group")
        return keys.group(q, group), "zset"
    if group:
        raise InvalidArgumentError(f"group= applies to aggregating tasks only, not {state.value}", argument="group")
    return keys.state_key(q, state.value), "list" if state in LIST_STATES else "zset"


def list_window(start: int, stop: int) -> tuple[int, int]:
    """LRANGE indexes for asynq's order of a list: oldest (rightmost, next to run) first."""
    return -(stop + 1), -(start + 1)


def from_unix(t: float | None) -> datetime | None:
    return utc_from_unix(t) if t is not None else None


def text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
