"""The connection the Inspector's parts share, pipelined reads with script reloading, and argument checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError

from asynqpy.errors import InvalidArgumentError, QueueNotFoundError
from asynqpy.options import check_int, check_queue
from asynqpy.rdb import keys
from asynqpy.rdb.scripts import Call, Script, SyncRunner, queue_call
from asynqpy.task import TaskState

T = TypeVar("T")
MAX_PAGE_SIZE = 1000
LIST_STATES = (TaskState.PENDING, TaskState.ACTIVE)


@dataclass
class Ctx:
    """A binary Redis connection, its script runner and the clock (Unix seconds) every 'now' comes from."""

    redis: redis.Redis
    clock: Callable[[], float] = time.time
    runner: SyncRunner = field(init=False)
    _local: threading.local = field(init=False, default_factory=threading.local)  # scripts used per read()

    def __post_init__(self) -> None:
        self.runner = SyncRunner(self.redis)

    def now(self) -> float:
        return float(self.clock())

    def read(self, fill: Callable[[Pipeline], object]) -> list[Any]:
        """Run the read-only commands fill() queues, in one round trip. Scripts are queued with
        self.script(pipe, call); on NOSCRIPT (a fresh or flushed server) the scripts this pipeline used are
        loaded and it runs once more, so no list of scripts to preload can be forgotten.

        Raises the first error reply (or redis.ConnectionError when Redis cannot be reached).
        """
        for attempt in range(2):
            used: set[Script] = set()
            self._local.used = used
            pipe = self.redis.pipeline(transaction=False)
            fill(pipe)
            out = list(pipe.execute(raise_on_error=False))
            if attempt == 0 and any(isinstance(x, NoScriptError) for x in out):
                self._load(used)
                continue
            for x in out:
                if isinstance(x, Exception):
                    raise x
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    def script(self, pipe: Pipeline, call: Call[Any]) -> Pipeline:
        """Queue one script Call on the pipeline of read() (EVALSHA; read() loads it on NOSCRIPT)."""
        self._local.used.add(call.script)
        queue_call(pipe, call)
        return pipe

    def read_script(self, call: Call[T]) -> T:
        """Run one read-only script Call on its own and return its parsed reply."""
        (raw,) = self.read(lambda p: self.script(p, call))
        return call.parse(raw)

    def _load(self, scripts: set[Script]) -> None:
        for s in scripts:  # one by one: a cluster client loads each on every primary
            self.redis.script_load(s.text)

    def run(self, call: Call[T]) -> T:
        """Run one (mutating) script Call: EVALSHA, EVAL on NOSCRIPT."""
        return self.runner.run(call)

    def require_queue(self, q: str) -> None:
        """Raises QueueNotFoundError unless q is registered in asynq:queues."""
        if not self.redis.sismember(keys.QUEUES, q):
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
    return datetime.fromtimestamp(t, tz=UTC) if t is not None else None


def text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
