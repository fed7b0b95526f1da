"""`asynqpy task run|archive|delete --all --rate N`: the action as a background-job record (visible and cancellable
in the dashboard) run in this process at N tasks per second, with a progress bar on stderr."""

from __future__ import annotations

import sys
from typing import TextIO

from asynqpy.task import TaskState
from asynqpy.terminal import printable
from inspector.api import Inspector
from inspector.jobs import Job

BAR = 30


def bar(job: Job) -> str:
    filled = BAR * job.percent // 100
    return (f"[{'#' * filled}{'.' * (BAR - filled)}] {job.done}/{job.total} {job.percent:3d}% "
            f"{job.changed_text} changed ({job.status})")


def run_with_progress(insp: Inspector, action: str, queue: str, state: TaskState | str, *, rate: float,
                      group: str = "", out: TextIO | None = None) -> Job:
    """Create the job, run it here, draw the bar (a line per update when out is not a terminal).

    Raises QueueNotFoundError, FailedPreconditionError, ValueError before anything moves.
    """
    stream = out or sys.stderr
    tty = stream.isatty()
    job = insp.start_job(action, queue, state, rate=rate, group=group, user="cli")

    def show(j: Job) -> None:
        stream.write(("\r" if tty else "") + printable(bar(j)) + ("" if tty else "\n"))
        stream.flush()

    try:
        final = insp.run_job(job.id, progress=show)
    except KeyboardInterrupt:
        insp.cancel_job(job.id)
        final = insp.run_job(job.id)
    if tty:
        stream.write("\n")
    return final
