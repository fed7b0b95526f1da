"""ServeMux: routes a task type to its handler (exact match, else longest prefix) through middleware."""

from __future__ import annotations

import functools
import inspect
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


class ServeMux:
    """Patterns to handlers. `@mux.handler("email:")` matches "email:send" unless a longer pattern does."""

    def __init__(self) -> None:
        self._routes: dict[str, Handler] = {}
        self._middleware: list[Middleware] = []

    def handle(self, pattern: str, fn: Handler | TypedTask[Any, Any]) -> None:
        """Register fn for pattern. Raises InvalidArgumentError (a ValueError) for a blank or repeated pattern or
        a handler that is not callable."""
        if not isinstance(pattern, str) or not pattern.strip():
            raise InvalidArgumentError("handler pattern must be a non-blank string", argument="pattern")
        if isinstance(fn, typed.TypedTask):  # made by typed.task() elsewhere: run its payload-decoding handler
            fn = fn.handler
        if not callable(fn):
            raise InvalidArgumentError(f"handler for {pattern!r} is not callable", argument="handler")
        if pattern in self._routes:
            raise InvalidArgumentError(f"a handler for {pattern!r} is registered already", argument="pattern")
        self._routes[pattern] = fn

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

    def resolve(self, task_type: str) -> Handler | None:
        """The handler for task_type: exact pattern first, else the longest pattern that is a prefix."""
        fn = self._routes.get(task_type)
        if fn is not None:
            return fn
        best = ""
        for p in self._routes:
            if task_type.startswith(p) and len(p) > len(best):
                best = p
        return self._routes[best] if best else None

    def compile(self, run_sync: Callable[[Handler, ReceivedTask], Awaitable[Any]]) -> AsyncHandler:
        """One async callable that routes, runs plain functions through run_sync, and applies middleware."""
        cache: dict[str, AsyncHandler] = {}

        async def route(task: ReceivedTask) -> Any:
            call = cache.get(task.type)
            if call is None:
                call = cache[task.type] = _as_async(self.resolve(task.type), run_sync)
            return await call(task)

        chain: AsyncHandler = route
        for mw in reversed(self._middleware):
            chain = functools.partial(_step, mw, chain)
        return chain


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


__all__ = ["HandlerNotFound", "Middleware", "ServeMux"]
