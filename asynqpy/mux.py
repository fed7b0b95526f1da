"""ServeMux: routes a task type to its handler (exact match, else longest prefix) through middleware."""

from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asynqpy import typed
from asynqpy.errors import HandlerNotFound, InvalidArgumentError
from asynqpy.options import TaskOptions, options_from
from asynqpy.task import ReceivedTask
from asynqpy.typed import TypedTask

P = ParamSpec("P")
R = TypeVar("R")
Handler = Callable[[ReceivedTask], Any]
AsyncHandler = Callable[[ReceivedTask], Awaitable[Any]]
# A middleware gets the task and the next step, and must await call_next(task) to go on.
Middleware = Callable[[ReceivedTask, AsyncHandler], Awaitable[Any]]
# Task types whose route is remembered (least recently used go first): a worker fed unbounded distinct types
# (ids in the type, a typo loop) keeps a bounded cache; the handlers themselves are wrapped once per pattern.
ROUTE_CACHE_SIZE = 4096


class ServeMux:
    """Patterns to handlers. `@mux.handler("email:")` matches "email:send" unless a longer pattern does."""

    def __init__(self) -> None:
        self._routes: dict[str, Handler] = {}
        self._middleware: list[Middleware] = []
        self._typed: dict[str, TypedTask[Any, Any]] = {}

    def handle(self, pattern: str, fn: Handler | TypedTask[Any, Any]) -> None:
        """Register fn for pattern. Raises InvalidArgumentError (a ValueError) for a blank or repeated pattern or
        a handler that is not callable."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise InvalidArgumentError("handler pattern must be a non-blank string", argument="pattern")
        typed_task = fn if isinstance(fn, typed.TypedTask) else None
        if typed_task is not None:  # made by typed.task() elsewhere: run its payload-decoding handler
            fn = typed_task.handler
        if not callable(fn):
            raise InvalidArgumentError(f"handler for {pattern!r} is not callable", argument="handler")
        if pattern in self._routes:
            raise InvalidArgumentError(f"a handler for {pattern!r} is registered already", argument="pattern")
        self._routes[pattern] = fn
        if typed_task is not None:
            self._typed[pattern] = typed_task

    def task(self, task_type: str, /, options: TaskOptions | None = None,
             **fields: Any) -> Callable[[Callable[P, R]], TypedTask[P, R]]:
        """Decorator: handle task_type with a plain or async function whose arguments travel as a JSON object
        by name (see asynqpy.typed); options and fields (TaskOptions' names) are the defaults of its enqueues.

        `@mux.task("email:welcome", queue="critical")` over `def send_welcome(to: str)` gives a TypedTask:
        `send_welcome.enqueue(client, to=...)`, `send_welcome.options(process_in=60).enqueue(...)`, and
        `send_welcome(...)` still calls the function.
        """
        defaults = options_from(options, fields)

        def register(fn: Callable[P, R]) -> TypedTask[P, R]:
            t = TypedTask(fn, task_type, defaults)
            self.handle(task_type, t)
            return typed.remember(t)  # once the mux took it
        return register

    def handler(self, pattern: str) -> Callable[[Handler], Handler]:
        """Decorator form of handle()."""
        def register(fn: Handler) -> Handler:
            self.handle(pattern, fn)
            return fn
        return register

    def use(self, *middleware: Middleware) -> None:
        """Add middleware; the first added is the outermost."""
        self._middleware.extend(middleware)

    def patterns(self) -> list[str]:
        return sorted(self._routes)

    def typed_tasks(self) -> list[TypedTask[Any, Any]]:
        """The typed tasks this mux handles, in the order they were registered."""
        return list(self._typed.values())

    def serves_anything(self) -> bool:
        """Whether a task can reach anything but "handler not found": a pattern is registered, or middleware is
        (which may answer tasks itself, as a catch-all)."""
        return bool(self._routes or self._middleware)

    def resolve(self, task_type: str) -> Handler | None:
        """The handler for task_type: exact pattern first, else the longest pattern that is a prefix."""
        pattern = self._pattern_for(task_type)
        return self._routes[pattern] if pattern else None

    def compile(self, run_sync: Callable[[Handler, ReceivedTask], Awaitable[Any]]) -> AsyncHandler:
        """One async callable that routes, runs plain functions through run_sync, and applies middleware."""
        router = _Router(self, run_sync)
        chain: AsyncHandler = router
        for mw in reversed(self._middleware):
            chain = functools.partial(_step, mw, chain)
        return chain

    def _pattern_for(self, task_type: str) -> str | None:
        if task_type in self._routes:
            return task_type
        best = ""
        for p in self._routes:
            if task_type.startswith(p) and len(p) > len(best):
                best = p
        return best or None


class _Router:
    """Routes a task to its pattern's handler: one wrapped handler per pattern, and an LRU of at most
    ROUTE_CACHE_SIZE task types to their pattern (the longest-prefix search is not repeated per task)."""

    def __init__(self, mux: ServeMux, run_sync: Callable[[Handler, ReceivedTask], Awaitable[Any]]) -> None:
        self.mux = mux
        self.types: OrderedDict[str, AsyncHandler] = OrderedDict()
        self.wrapped: dict[str | None, AsyncHandler] = {None: _as_async(None, run_sync)}
        for p, fn in mux._routes.items():
            self.wrapped[p] = _as_async(fn, run_sync)
        self.run_sync = run_sync

    def handler_for(self, task_type: str) -> AsyncHandler:
        call = self.types.get(task_type)
        if call is not None:
            self.types.move_to_end(task_type)
            return call
        pattern = self.mux._pattern_for(task_type)
        call = self.wrapped.get(pattern)
        if call is None:  # a pattern registered after compile()
            call = self.wrapped[pattern] = _as_async(self.mux._routes[pattern] if pattern else None, self.run_sync)
        self.types[task_type] = call
        if len(self.types) > ROUTE_CACHE_SIZE:
            self.types.popitem(last=False)
        return call

    async def __call__(self, task: ReceivedTask) -> Any:
        return await self.handler_for(task.type)(task)


def route_of(handler: AsyncHandler) -> Callable[[str], AsyncHandler] | None:
    """The route lookup (task type -> its pattern's handler) of a compiled handler that is the router alone (no
    middleware wraps it), so the processor can call the task's handler without the router's own coroutine; None
    for any other handler."""
    return handler.handler_for if isinstance(handler, _Router) else None


async def _step(mw: Middleware, nxt: AsyncHandler, task: ReceivedTask) -> Any:
    return await mw(task, nxt)


def _as_async(fn: Handler | None, run_sync: Callable[[Handler, ReceivedTask], Awaitable[Any]]) -> AsyncHandler:
    if fn is None:
        async def missing(task: ReceivedTask) -> Any:
            raise HandlerNotFound(task.type)
        return missing
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        return fn

    async def threaded(task: ReceivedTask) -> Any:
        result = await run_sync(fn, task)
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            return await result
        return result
    return threaded


__all__ = ["HandlerNotFound", "Middleware", "ServeMux", "route_of"]
