"""The one retry decision: after a failure, retry (when, and whether it counts) or archive; used by the
processor for a failed handler and by the recoverer for a task whose worker died."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from asynqpy.config import ServerConfig
from asynqpy.rdb import broker
from asynqpy.rdb.scripts import Call
from asynqpy.task import ReceivedTask
from asynqpy.wire import TaskMessage

log = logging.getLogger("asynqpy")


@dataclass(frozen=True)
class RetryDecision:
    """archive: out of retries (or SkipRetry). delay: seconds until the retry. is_failure: it counts as an
    attempt (retried + 1, failed stats); False retries without counting."""

    archive: bool
    delay: float = 0.0
    is_failure: bool = True


def fallback_delay(retried: int) -> float:
    """The delay when the user's retry_delay raises: asynq's formula without its random part."""
    return float(retried**4 + 15)


def decide(cfg: ServerConfig, msg: TaskMessage, exc: BaseException, task: ReceivedTask, *,
           skip: bool = False) -> RetryDecision:
    """What to do with a task that failed with exc. Calls cfg.retry_delay(retried, exc, task) and
    cfg.is_failure(exc); if either raises (or returns something that is not a number), the task is still
    retried, with asynq's delay, and the error is logged: a broken function must never lose a task."""
    if skip or msg.retried >= msg.retry:
        return RetryDecision(archive=True)
    try:
        delay = max(0.0, float(cfg.retry_delay(msg.retried, exc, task)))
        is_failure = bool(cfg.is_failure(exc))
    except Exception:
        log.exception("retry_delay/is_failure raised for task %s (%s); using asynq's defaults", msg.id, msg.type)
        return RetryDecision(archive=False, delay=fallback_delay(msg.retried), is_failure=True)
    return RetryDecision(archive=False, delay=delay, is_failure=is_failure)


def failure_call(cfg: ServerConfig, q: str, msg: TaskMessage, exc: BaseException, task: ReceivedTask, *,
                 error: str, now: float, skip: bool = False,
                 lease_cutoff: float | None = None) -> tuple[Call[bool], RetryDecision]:
    """The script Call that records the failure (msg is updated: error, last failure, attempts) and the
    decision behind it. lease_cutoff: the recoverer's check that the lease is still expired."""
    decision = decide(cfg, msg, exc, task, skip=skip)
    if not decision.archive and decision.is_failure:
        msg.retried += 1
    msg.error_msg = error
    msg.last_failed_at = int(now)
    data = msg.SerializeToString()
    if decision.archive:
        return broker.archive(q, msg.id, data, now=now, lease_cutoff=lease_cutoff), decision
    return broker.retry(q, msg.id, data, retry_at=now + decision.delay, now=now, is_failure=decision.is_failure,
                        lease_cutoff=lease_cutoff), decision
