"""Testing helpers for your own tasks: run_task (one handler, in-process, no server), TestWorker (a real server
with drain() and advance()), and a pytest plugin (asynqpy.testing.plugin, loaded by the `testing` extra) with
the fixtures asynqpy_redis, asynqpy_client, asynqpy_inspector and asynqpy_worker."""

from asynqpy.testing.results import Attempt, DrainReport, TaskResult, TaskRun
from asynqpy.testing.runtask import run_task, run_task_async
from asynqpy.testing.worker import DrainTimeout, TestWorker

__all__ = ["Attempt", "DrainReport", "DrainTimeout", "TaskResult", "TaskRun", "TestWorker", "run_task",
           "run_task_async"]
