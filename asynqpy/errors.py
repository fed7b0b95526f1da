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
    """The worker no longer holds the task: it is not in active or its lease entry is gone."""


class RedisUnavailableError(AsynqError):
    """The broker could not be reached."""


class NotDurableError(AsynqError):
    """A durable write reached the primary but too few replicas confirmed it in time (Redis WAIT)."""


class SkipRetry(Exception):
    """Raise from a handler to archive the task at once, without further retries."""


class RevokeTask(Exception):
    """Raise from a handler to drop the task: no retry, no archive, it is deleted."""
