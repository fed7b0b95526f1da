"""Finisher: records a finished handler's outcome (ack, retry or archive); asynq's deadline rule and error texts."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable

from asynqpy.acker import Acker
from asynqpy.errors import RevokeTask, SkipRetry
from asynqpy.mux import HandlerNotFound
from asynqpy.outcome import Outcome, OutcomeHook, call_hooks, task_outcome
from asynqpy.rdb.failures import TroubleLog, is_transient
from asynqpy.rdb.scripts import Call
from asynqpy.retry import failure_call
from asynqpy.runtime import ActiveTask, Runtime
from asynqpy.syncer import Syncer
from asynqpy.wire import TaskMessage

log = logging.getLogger("asynqpy")

DEFAULT_DEADLINE = 1800.0  # asynq: a task with neither timeout nor deadline gets 30 minutes
# The error texts asynq stores, so Go's tools and ours read them alike.
ERR_DEADLINE = "context deadline exceeded"
ERR_CANCELED = "context canceled"
ERR_LEASE = "asynq: task lease expired"


def _str_of(exc: BaseException) -> str:
    """str(exc), as valid UTF-8: a lone surrogate (from a surrogateescape'd file name or argv, or a JSON string
    cut inside an emoji) becomes its \\udcxx escape, since a TaskMessage's error_msg is a protobuf string that must
    encode (and that Go rejects on decode if it is not UTF-8); a __str__ that raises gives a note saying so."""
    try:
        text = str(exc)
    except Exception as err:  # the exception's own bug must not keep its task from being recorded
        return f"<str() of the exception raised {type(err).__name__}>"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def error_text(exc: BaseException) -> str:
    """The error_msg stored for a failed handler: asynq's text for a missing handler, else "<type>: <str>"."""
    if isinstance(exc, HandlerNotFound):
        return _str_of(exc)
    text = _str_of(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def task_deadline(msg: TaskMessage, now: float) -> float:
    """asynq's rule: min(now + timeout, deadline) of those set; 30 minutes when neither is."""
    timeout, deadline = msg.timeout, msg.deadline  # (each read of a message's field decodes it anew)
    if timeout > 0:
        return float(deadline) if 0 < deadline < now + timeout else now + timeout
    return float(deadline) if deadline > 0 else now + DEFAULT_DEADLINE


class StopRequested(Exception):
    """A handler cancelled for reason: "canceled" (asynq:cancel), "lease" or "shutdown"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeadlineExceeded(Exception):
    """A handler cancelled at its task's deadline."""


class Finisher:
    """The outcome of a task whose handler returned or raised: the outcome hooks, then the acker (success, revoked)
    or one retry or archive script (failure); writes that meet transient trouble go to the syncer."""

    def __init__(self, rt: Runtime, acker: Acker, syncer: Syncer, on_retry: Callable[[], None],
                 hooks: tuple[OutcomeHook, ...]) -> None:
        self.rt = rt
        self.cfg = rt.config
        self.acker = acker
        self.syncer = syncer
        self.on_retry = on_retry
        self.hooks = hooks
        self.write_trouble = TroubleLog("processor")  # writes of task outcomes
        self._writes: set[asyncio.Task[None]] = set()

    def _outcome(self, at: ActiveTask, outcome: Outcome, error: str = "") -> None:
        hooks = self.hooks
        if hooks:
            ended = at.ended or time.time()
            call_hooks(hooks, task_outcome(at.queue, at.msg.type, at.msg.id, outcome, at.started,
                                           max(0.0, ended - at.started), at.wait, error, at.limit))

    def succeeded(self, at: ActiveTask) -> None:
        """The handler returned: the outcome hooks, then the acker (done, or completed with retention)."""
        msg, received = at.msg, at.received  # (the task's type and id read from the ReceivedTask: a message's
        at.ended = ended = time.time()       # fields are decoded anew at each read)
        hooks = self.hooks
        if hooks:
            started = at.started
            call_hooks(hooks, task_outcome(at.queue, received.type, received.id, "success", started,
                                           ended - started if ended > started else 0.0, at.wait, "", at.limit))
        retention = msg.retention
        if retention > 0:
            msg.completed_at = int(ended)
            self.acker.complete(at.queue, received.id, ended + retention, msg.SerializeToString(), msg.unique_key)
        else:
            self.acker.done(at.queue, received.id, msg.unique_key)

    async def finish(self, at: ActiveTask, outcome: BaseException | None) -> None:
        q, msg = at.queue, at.msg
        if outcome is None:
            self.succeeded(at)
            return
        at.ended = time.time()
        if isinstance(outcome, RevokeTask):
            self._outcome(at, "revoked", _str_of(outcome))
            self.acker.done(q, msg.id, msg.unique_key)
            return
        if isinstance(outcome, StopRequested):
            if outcome.reason == "canceled":
                await self._fail(at, outcome, ERR_CANCELED)
            elif outcome.reason == "lease":
                log.warning("processor: lease of task %s lapsed; leaving it to the recoverer", msg.id)
                self.rt.active.pop(msg.id, None)
            return  # "shutdown": the server requeues it
        if isinstance(outcome, DeadlineExceeded):
            await self._fail(at, outcome, ERR_DEADLINE)
            return
        await self._fail(at, outcome, error_text(outcome), skip=isinstance(outcome, SkipRetry))

    async def _fail(self, at: ActiveTask, exc: BaseException, err: str, *, skip: bool = False) -> None:
        msg, q = at.msg, at.queue
        await self._report(at, exc)
        call, decision = failure_call(self.cfg, q, msg, exc, at.received, error=err, now=self.rt.redis_now(),
                                      skip=skip)  # the retry is due by Redis's clock
        canceled = isinstance(exc, StopRequested) and exc.reason == "canceled"
        self._outcome(at, "canceled" if canceled else "archived" if decision.archive else "retry", err)
        await self.write_now(call, what=call.script.name, task_id=msg.id)
        self.rt.active.pop(msg.id, None)  # written, or held by the syncer: nobody renews its lease any more
        if not decision.archive:
            self.on_retry()

    async def _report(self, at: ActiveTask, exc: BaseException) -> None:
        handler = self.cfg.error_handler
        if handler is None:
            return
        try:
            res = handler(at.received, exc)
            if inspect.isawaitable(res):
                await res
        except Exception:
            log.exception("processor: error_handler raised")

    async def write_now(self, call: Call[object], *, what: str, task_id: str) -> None:
        """Run a task's state write now; on transient trouble hand it to the syncer (held until the task's lease
        would lapse); a write that fails as a bug is logged, and the recoverer retries the task after its lease."""
        try:
            await self.rt.runner.run(call)
        except Exception as exc:
            self._not_written(call, exc, what=what, task_id=task_id)
        else:
            self.write_trouble.ok()

    async def write_all_now(self, writes: list[tuple[str, Call[object]]], *, what: str) -> None:
        """write_now for (task id, write) pairs in one round trip: while Redis does not answer, they all wait one
        socket timeout, not one each."""
        try:
            results: list[object] = list(await self.rt.runner.run_many([call for _, call in writes]))
        except Exception as exc:
            results = [exc] * len(writes)
        failed = [(tid, call, res) for (tid, call), res in zip(writes, results, strict=True)
                  if isinstance(res, Exception)]
        for tid, call, res in failed:
            self._not_written(call, res, what=what, task_id=tid)
        if not failed:
            self.write_trouble.ok()

    def _not_written(self, call: Call[object], exc: BaseException, *, what: str, task_id: str) -> None:
        if is_transient(exc):
            self.write_trouble.note(exc, f"{what} of task {task_id} held for the syncer")
            self.syncer.add(call, give_up_at=time.time() + self.cfg.lease_duration, what=what, task_ids=(task_id,))
        else:
            log.error("processor: %s of task %s failed (%s: %s); the recoverer retries it once its lease lapses",
                      what, task_id, type(exc).__name__, exc)

    def write(self, call: Call[object], *, what: str, task_id: str) -> None:
        t = asyncio.create_task(self.write_now(call, what=what, task_id=task_id))
        self._writes.add(t)  # keep a reference until it is done
        t.add_done_callback(self._writes.discard)
