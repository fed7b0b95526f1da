"""asynqpy's errors: one root, typed broker errors carrying queue and task id, and handler signals."""

from __future__ import annotations


class AsynqError(Exception):
    """Root of every error asynqpy raises on purpose."""

    def __init__(self, message: str, *, queue: str = "", task_id: str = "") -> None:
        super().__init__(message)
        self.queue = queue
        self.task_id = task_id


class InvalidArgumentError(AsynqError, ValueError):
    """A bad argument (wrong type or value); .argument names it."""

    def __init__(self, message: str, *, argument: str = "", queue: str = "", task_id: str = "") -> None:
        super().__init__(message, queue=queue, task_id=task_id)
        self.argument = argument


class UsageError(AsynqError):
    """A command-line argument is wrong; the CLI prints it as one line and exits 2."""


class DuplicateTaskError(AsynqError):
    """A task with the same uniqueness key is already enqueued (asynq's ErrDuplicateTask)."""


class TaskIDConflictError(AsynqError):
    """A task with the same id already exists in the queue (asynq's ErrTaskIDConflict)."""


class QueueFullError(AsynqError):
    """The queue is past its backpressure limit (`asynqpy queue limit`): the task was not enqueued.
    .limit_kind is "size" (tasks pending, scheduled, retry and active) or "latency" (seconds the oldest pending
    task has waited); .limit the configured value; .current the value found."""

    def __init__(self, message: str, *, queue: str, limit_kind: str, limit: float, current: float,
                 task_id: str = "") -> None:
        super().__init__(message, queue=queue, task_id=task_id)
        self.limit_kind = limit_kind
        self.limit = limit
        self.current = current


def queue_full(queue: str, reply: bytes | str, task_id: str = "") -> QueueFullError:
    """The QueueFullError of an enqueue script's "full:<kind>:<limit>:<current>" reply (rdb/lua/_room.lua)."""
    text = reply.decode() if isinstance(reply, bytes) else reply
    _, kind, limit, current = text.split(":")
    what = (f"{float(current):g} tasks, limit {float(limit):g}" if kind == "size"
            else f"oldest pending task waited {float(current):.1f} s, limit {float(limit):g} s")
    return QueueFullError(f"queue {queue!r} is full ({what}): task not enqueued", queue=queue, limit_kind=kind,
                          limit=float(limit), current=float(current), task_id=task_id)


class QueueNotFoundError(AsynqError):
    """The queue is not registered in asynq:queues."""


class QueueNotEmptyError(AsynqError):
    """The queue still holds tasks and force was not given."""


class TaskNotFoundError(AsynqError):
    """No task with that id exists in the queue."""


class TaskAlreadyArchivedError(AsynqError):
    """The task is archived already."""


class FailedPreconditionError(AsynqError):
    """The task is in a state that does not allow the action (e.g. deleting an active task)."""


class QueueAlreadyPausedError(AsynqError):
    """pause() on a queue that is paused."""


class QueueNotPausedError(AsynqError):
    """unpause() on a queue that is not paused."""


class MalformedTaskError(AsynqError):
    """A stored task message cannot be decoded."""


class LeaseExpiredError(AsynqError):
    """A task's worker died (its lease ran out): what the recoverer hands to retry_delay and is_failure, as Go
    asynq hands them ErrLeaseExpired. Its text is asynq's, stored as the task's last error."""

    def __init__(self, message: str = "asynq: task lease expired", *, queue: str = "", task_id: str = "") -> None:
        super().__init__(message, queue=queue, task_id=task_id)


class RedisUnavailableError(AsynqError):
    """Redis could not be reached, or answered "not now" (transient trouble: asynqpy.rdb.failures).

    .url is the server's URL with its passwords masked; .reason what redis-py (or the server) said; .kind the
    kind of trouble: "connection", "timeout", "auth", or an error-reply code such as "BUSY", "OOM",
    "READONLY", "LOADING", "MASTERDOWN", "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN", "MISCONF". A subclass per
    reply code (RedisBusyError, RedisOutOfMemoryError, ...) for those who catch one. Layers above the core catch
    this, never redis-py's exceptions.
    """

    kind_default = "connection"

    def __init__(self, url: str, reason: object = "", kind: str = "") -> None:
        self.url = mask_url(url)
        self.reason = str(reason)
        self.kind = kind or self.kind_default
        super().__init__(self._headline() + (f": {self.reason}" if self.reason else ""))

    def _headline(self) -> str:
        if self.kind in ("connection", "timeout", "auth"):
            return f"cannot reach Redis at {self.url}"
        return f"Redis at {self.url} answers {self.kind} (transient)"

    def __reduce__(self) -> tuple[type[RedisUnavailableError], tuple[str, str, str]]:
        return type(self), (self.url, self.reason, self.kind)


class RedisBusyError(RedisUnavailableError):
    """Redis answers BUSY: a script (anyone's) runs past busy-reply-threshold."""

    kind_default = "BUSY"


class RedisLoadingError(RedisUnavailableError):
    """Redis answers LOADING: it is loading its dataset after a restart."""

    kind_default = "LOADING"


class RedisOutOfMemoryError(RedisUnavailableError):
    """Redis answers OOM: maxmemory reached under a noeviction policy; writes are refused."""

    kind_default = "OOM"


class RedisReadOnlyError(RedisUnavailableError):
    """Redis answers READONLY (a replica) or MASTERDOWN / NOREPLICAS / MISCONF: it refuses writes for now."""

    kind_default = "READONLY"


class RedisClusterDownError(RedisUnavailableError):
    """A Redis Cluster answers CLUSTERDOWN or TRYAGAIN: resharding or electing a new primary."""

    kind_default = "CLUSTERDOWN"


_KIND_CLASSES: dict[str, type[RedisUnavailableError]] = {
    "BUSY": RedisBusyError, "LOADING": RedisLoadingError, "OOM": RedisOutOfMemoryError,
    "READONLY": RedisReadOnlyError, "MASTERDOWN": RedisReadOnlyError, "NOREPLICAS": RedisReadOnlyError,
    "MISCONF": RedisReadOnlyError, "CLUSTERDOWN": RedisClusterDownError, "TRYAGAIN": RedisClusterDownError,
}


def unavailable_error(url: str, reason: object, kind: str) -> RedisUnavailableError:
    """The RedisUnavailableError (subclass) for one kind of transient trouble."""
    return _KIND_CLASSES.get(kind, RedisUnavailableError)(url, reason, kind)


class RedisCommandError(AsynqError):
    """Redis refused a command for good (a script error, WRONGTYPE, an unknown command): a bug, ours or the
    data's, not trouble that passes. .url (masked) and .reason as RedisUnavailableError's."""

    def __init__(self, url: str, reason: object = "") -> None:
        self.url = mask_url(url)
        self.reason = str(reason)
        super().__init__(f"Redis at {self.url} refused a command: {self.reason}")

    def __reduce__(self) -> tuple[type[RedisCommandError], tuple[str, str]]:
        return type(self), (self.url, self.reason)


def mask_url(url: str) -> str:
    """The URL with its passwords replaced by ***: "redis://:***@host:6379/0", and query options whose name ends
    in "password" (e.g. a Sentinel URL's sentinel_password=) too."""
    head, q, query = url.partition("?")
    scheme, sep, rest = head.partition("://")
    if sep:
        netloc, slash, path = rest.partition("/")
        if "@" in netloc:
            creds, _, hosts = netloc.rpartition("@")
            user, colon, _ = creds.partition(":")
            netloc = f"{user}{':***' if colon else ''}@{hosts}"
        head = f"{scheme}://{netloc}{slash}{path}"
    if not q:
        return head
    opts = [f"{p.partition('=')[0]}=***" if p.partition("=")[0].lower().endswith("password") else p
            for p in query.split("&")]
    return f"{head}?{'&'.join(opts)}"


class NotDurableError(AsynqError):
    """A durable write reached the primary but too few replicas confirmed it in time (Redis WAIT)."""


class HandlerNotFound(Exception):
    """No handler for the task type (retried, as asynq does); stored as asynq's text so Go tools read it alike."""

    def __init__(self, task_type: str) -> None:
        super().__init__(f'handler not found for task "{task_type}"')


class SkipRetry(Exception):
    """Raise from a handler to archive the task at once, without further retries."""


class RevokeTask(Exception):
    """Raise from a handler to drop the task: no retry, no archive, it is deleted."""
