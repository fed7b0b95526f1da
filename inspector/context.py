"""The connection the Inspector's parts share, pipelined reads with script reloading, and argument checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError

from asynqpy.errors import QueueNotFoundError
from asynqpy.options import check_queue
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, SyncRunner, queue_call
from asynqpy.task import TaskState
from inspector.scripts import script

SCRIPTS = ("queue_info", "list_tasks", "get_task", "search")
MAX_PAGE_SIZE = 1000
LIST_STATES = (TaskState.PENDING, TaskState.ACTIVE)


@dataclass
class Ctx:
    """A binary Redis connection, its script runner and the clock (Unix seconds) every 'now' comes from."""

    redis: redis.Redis
    clock: Callable[[], float] = time.time
    runner: SyncRunner = field(init=False)

    def __post_init__(self) -> None:
        self.runner = SyncRunner(self.redis)

    def now(self) -> float:
        return float(self.clock())

    def read(self, fill: Callable[[Pipeline], object]) -> list[Any]:
        """Run the read-only commands fill() queues, in one round trip; reload the scripts once on NOSCRIPT.

        Raises the first error reply (or redis.ConnectionError when Redis cannot be reached).
        """
        for attempt in range(2):
            pipe = self.redis.pipeline(transaction=False)
            fill(pipe)
            out = list(pipe.execute(raise_on_error=False))
            if attempt == 0 and any(isinstance(x, NoScriptError) for x in out):
                self._load_scripts()
                continue
            for x in out:
                if isinstance(x, Exception):
                    raise x
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    def _load_scripts(self) -> None:
        for name in SCRIPTS:  # one by one: a cluster client loads each on every primary
            self.redis.script_load(script(name).text)

    def run(self, call: Call) -> Any:
        """Run one (mutating) script Call: EVALSHA, EVAL on NOSCRIPT."""
        return self.runner.run(call)

    def require_queue(self, q: str) -> None:
        """Raises QueueNotFoundError unless q is registered in asynq:queues."""
        if not self.redis.sismember(keys.QUEUES, q):
            raise QueueNotFoundError(f"queue {q!r} does not exist", queue=q)


def evalsha(pipe: Pipeline, call: Call) -> Pipeline:
    """Queue one script Call on a pipeline."""
    return queue_call(pipe, call)


def queue_missing(q: str) -> QueueNotFoundError:
    return QueueNotFoundError(f"queue {q!r} does not exist", queue=q)


def check_state(state: TaskState | str) -> TaskState:
    """The TaskState named by state. Raises ValueError naming the valid states."""
    try:
        return TaskState(state)
    except ValueError:
        names = ", ".join(s.value for s in TaskState)
        raise ValueError(f"unknown task state {state!r}; expected one of: {names}") from None


def check_page(page: int, size: int) -> tuple[int, int]:
    """The 0-based first and last index of a 1-based page. Raises ValueError for a bad page or size."""
    for name, v in (("page", page), ("size", size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if page < 1:
        raise ValueError(f"page must be >= 1, got {page}")
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise ValueError(f"page size must be between 1 and {MAX_PAGE_SIZE}, got {size}")
    start = size * (page - 1)
    return start, start + size - 1


def check_queue_name(q: str) -> str:
    """Raises TypeError/ValueError for a name that cannot be a queue."""
    return check_queue(q)


def check_ids(task_ids: Sequence[str]) -> list[str]:
    """The ids as a list. Raises TypeError for a bare string or a non-str id, ValueError for a blank one."""
    if isinstance(task_ids, (str, bytes)):
        raise TypeError("task_ids must be a sequence of ids, not a single string")
    out = list(task_ids)
    for tid in out:
        check_id(tid)
    return out


def check_id(task_id: str) -> str:
    if not isinstance(task_id, str):
        raise TypeError(f"task id must be a str, not {type(task_id).__name__}")
    if not task_id.strip():
        raise ValueError("task id must not be blank")
    return task_id


def state_source(q: str, state: TaskState, group: str | None) -> tuple[str, str]:
    """The key holding a state's tasks and its kind ("list" or "zset"). Raises ValueError when a group is needed."""
    if state is TaskState.AGGREGATING:
        if not group:
            raise ValueError("aggregating tasks live in groups: give group=")
        return keys.group(q, group), "zset"
    if group:
        raise ValueError(f"group= applies to aggregating tasks only, not {state.value}")
    return keys.state_key(q, state.value), "list" if state in LIST_STATES else "zset"


def list_window(start: int, stop: int) -> tuple[int, int]:
    """LRANGE indexes for asynq's order of a list: oldest (rightmost, next to run) first."""
    return -(stop + 1), -(start + 1)


def from_unix(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, tz=UTC) if t is not None else None


def text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
