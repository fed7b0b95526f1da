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
    """Redis could not be reached (refused, timed out, authentication failed...).

    .url is the server's URL with its password masked; .reason what redis-py said. Layers above the core
    catch this, never redis-py's exceptions.
    """

    def __init__(self, url: str, reason: object = "") -> None:
        self.url = mask_url(url)
        self.reason = str(reason)
        super().__init__(f"cannot reach Redis at {self.url}" + (f": {self.reason}" if self.reason else ""))

    def __reduce__(self) -> tuple[type[RedisUnavailableError], tuple[str, str]]:
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
