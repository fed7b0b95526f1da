"""Tasks as functions: a decorated function whose calls are enqueued as a JSON object of its arguments by name.

`@mux.task("email:welcome", queue="critical")` (or `@typed.task(...)` with no mux, for producer-only code)
turns a plain or async function into a TypedTask. The payload is `{"to": "ada@example.com"}`, what Go's
json.Marshal writes for a struct with those `json` tags, so Go producers and handlers share the task.

Per-call options never take a name from the function: `send_welcome.options(queue="low").enqueue(client, ...)`
returns a bound copy with those options merged over the decorator's (`.options(TaskOptions(...))` too), and the
client is enqueue's positional-only first argument.

Every TypedTask is also kept in a registry by task type, so readers in this process (the Inspector and the
dashboard) show its payloads as the call they are: `send_welcome(to='ada@example.com')`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import sys
import typing
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from asynqpy.convert import Mismatch, encode, fit, unresolved
from asynqpy.errors import HandlerNotFound, InvalidArgumentError, SkipRetry, UsageError
from asynqpy.options import TaskOptions, options_from
from asynqpy.task import ReceivedTask, Task, TaskInfo

if TYPE_CHECKING:
    from asynqpy.client import AsyncClient, Client

P = ParamSpec("P")
R = TypeVar("R")

_REGISTRY: dict[str, TypedTask[Any, Any]] = {}
TASKS_ENV = "ASYNQPY_TASKS"  # modules to import for their typed tasks, in processes that only read payloads
log = logging.getLogger("asynqpy.typed")


class PayloadMismatch(SkipRetry):
    """A payload that does not fit the function's signature. A SkipRetry: the task is archived at once.

    field: the argument (or path inside one, e.g. `order.lines[0].qty`) that does not fit; "" for the payload.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class _Param:
    __slots__ = ("annotation", "kind", "name", "required")

    def __init__(self, p: inspect.Parameter, annotation: Any) -> None:
        self.name = p.name
        self.kind = p.kind
        self.annotation = annotation
        self.required = p.default is inspect.Parameter.empty


def dumps(obj: Any) -> bytes:
    """Compact JSON as Go's json.Marshal writes it (same bytes for the same fields in the same order, so unique
    locks of Go and Python producers collide): UTF-8, and <, >, &, U+2028, U+2029 escaped."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, esc in _GO_ESCAPES:
        if ch in text:
            text = text.replace(ch, esc)
    return text.encode()


_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


class TypedTask(Generic[P, R]):
    """A function registered as task type `type`, with default enqueue options `defaults` (a TaskOptions).

    Calling it runs the function (for tests). `enqueue(client, *args, **kwargs)` checks the arguments against
    the signature and enqueues them; `options(...)` gives a copy with other enqueue options; `handler` is what
    the ServeMux runs: it checks and converts the payload to the annotated types and calls the function.

    A parameter annotated `ReceivedTask` is not part of the payload: the worker passes the task being run
    (its id, retry count, cancelled event and write_result).
    """

    def __init__(self, fn: Callable[P, R], task_type: str, defaults: TaskOptions) -> None:
        if not callable(fn):
            raise InvalidArgumentError(f"task {task_type!r} needs a function, not {type(fn).__name__}",
                                       argument="fn")
        Task(task_type)  # checks the type (InvalidArgumentError naming it)
        self.fn = fn
        self.type = task_type
        self.defaults = defaults
        self.name: str = getattr(fn, "__name__", task_type)  # in messages and the call form
        self.is_async = inspect.iscoroutinefunction(fn)
        self.__wrapped__ = fn
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(fn, attr):
                setattr(self, attr, getattr(fn, attr))
        self._signature = inspect.signature(fn)
        self._params, self._extra, self._task_param = _parameters(fn, self._signature, task_type)
        self._by_name = {p.name: p for p in self._params}

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<TypedTask {self.type!r}: {self.name}{self._signature}>"

    def options(self, options: TaskOptions | None = None, /, **fields: Any) -> TypedTask[P, R]:
        """A copy of this task whose enqueues use options and fields (keywords win) over this one's defaults.
        Raises InvalidArgumentError for an unknown or bad option."""
        merged = self.defaults
        if options is not None:
            if not isinstance(options, TaskOptions):
                raise InvalidArgumentError(f"options must be a TaskOptions, not {type(options).__name__}",
                                           argument="options")
            merged = merged.merge({f: getattr(options, f) for f in _given(options)})
        merged = options_from(merged, fields)
        bound: TypedTask[P, R] = object.__new__(TypedTask)
        bound.__dict__.update(self.__dict__)
        bound.defaults = merged
        return bound

    def arguments(self, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """The JSON object of a call: positional arguments bound to their names, values in their JSON forms.

        Raises InvalidArgumentError naming a missing, unknown, repeated or non-JSON-able argument, or one that
        does not fit its annotation.
        """
        given: dict[str, Any] = {}
        positional = [p for p in self._params if p.kind in _POSITIONAL]
        if len(args) > len(positional):
            raise InvalidArgumentError(
                f"{self.name}() takes {len(positional)} positional arguments but {len(args)} were given",
                argument=f"#{len(positional) + 1}")
        for p, v in zip(positional, args, strict=False):
            given[p.name] = v
        for name, v in kwargs.items():
            known = self._by_name.get(name)
            if name == self._task_param:
                raise InvalidArgumentError(f"{self.name}(): {name} is passed by the worker, not enqueued",
                                           argument=name)
            if (known is None and self._extra is None) or (known is not None and known.kind is _POS_ONLY):
                raise InvalidArgumentError(f"{self.name}() got an unexpected argument {name!r}", argument=name)
            if name in given:
                raise InvalidArgumentError(f"{self.name}() got multiple values for argument {name!r}",
                                           argument=name)
            given[name] = v
        for p in self._params:
            if p.required and p.name not in given:
                raise InvalidArgumentError(f"{self.name}() is missing the required argument {p.name!r}",
                                           argument=p.name)
        out = {}
        for name, v in given.items():
            param = self._by_name.get(name)
            try:
                out[name] = encode(v, name)
                # a value that would not fit on the worker fails here, before anything is written
                fitted = fit(out[name], param.annotation if param is not None else self._extra, name)
                if isinstance(fitted, Decimal) and not isinstance(out[name], str):
                    out[name] = str(fitted)  # a number given for a Decimal: its documented form, a string
            except Mismatch as exc:
                raise InvalidArgumentError(f"{self.name}() argument {exc}", argument=name) from None
        return out

    def to_task(self, *args: P.args, **kwargs: P.kwargs) -> Task:
        """The explicit Task of a call (for enqueue_many, the Scheduler or a Go-style client)."""
        return Task(self.type, dumps(self.arguments(*args, **kwargs)))

    def enqueue(self, client: Client, /, *args: P.args, **kwargs: P.kwargs) -> TaskInfo:
        """Enqueue a call with client (an asynqpy Client) and this task's options; returns its TaskInfo.

        Raises InvalidArgumentError for arguments that do not fit, or a client that is not one (an AsyncClient
        goes to enqueue_async) (nothing is written), and what Client.enqueue raises (DuplicateTaskError,
        RedisUnavailableError, ...).
        """
        self._check_client(client, sync=True)
        return client.enqueue(self.to_task(*args, **kwargs), self.defaults)

    async def enqueue_async(self, client: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> TaskInfo:
        """enqueue() with an AsyncClient."""
        self._check_client(client, sync=False)
        return await client.enqueue(self.to_task(*args, **kwargs), self.defaults)

    def _check_client(self, client: Any, *, sync: bool) -> None:
        """A client of the other kind would enqueue nothing (an AsyncClient's coroutine, never awaited) or fail
        after enqueueing (awaiting a sync Client's TaskInfo); no client at all (the first argument forgotten)
        would fail on a missing attribute. Anything else with an enqueue method is taken as a client."""
        from asynqpy.client import AsyncClient, Client

        wrong, right, method = (AsyncClient, "a Client", "enqueue") if sync else (Client, "an AsyncClient",
                                                                               "enqueue_async")
        if isinstance(client, wrong):
            other = "await .enqueue_async(...)" if sync else ".enqueue(...)"
            raise InvalidArgumentError(f"{self.name}.{method}() takes {right} as its first argument, not "
                                       f"{type(client).__name__} (for that: {other})", argument="client")
        if not callable(getattr(client, "enqueue", None)):
            raise InvalidArgumentError(f"{self.name}.{method}() takes {right} as its first argument, not "
                                       f"{type(client).__name__}: {method}(client, *args, **kwargs)",
                                       argument="client")

    def decode(self, payload: bytes) -> dict[str, Any]:
        """The keyword arguments of a payload, converted to the annotated types.

        Raises PayloadMismatch naming the field: not a JSON object, a required argument missing, a value that
        does not fit its annotation. Names the function does not take are ignored (as Go's json.Unmarshal
        ignores fields a struct lacks), unless it takes **kwargs.
        """
        try:
            obj = json.loads(payload) if payload else None
        except (ValueError, RecursionError):
            raise PayloadMismatch(f"payload of {self.type!r} for {self.name}() is not JSON") from None
        if not isinstance(obj, dict):
            raise PayloadMismatch(f"payload of {self.type!r} for {self.name}() must be a JSON object of its "
                                  f"arguments, not {_kind(obj)}")
        out: dict[str, Any] = {}
        try:
            for p in self._params:
                if p.name in obj:
                    out[p.name] = fit(obj[p.name], p.annotation, p.name)
                elif p.required:
                    raise Mismatch(p.name, "required argument is missing")
            if self._extra is not None:
                for name, v in obj.items():
                    if name not in self._by_name and name != self._task_param:
                        out[name] = fit(v, self._extra, name)
        except Mismatch as exc:
            raise PayloadMismatch(f"payload of {self.type!r} does not fit {self.name}(): {exc}",
                                  field=exc.path) from None
        return out

    def _call_args(self, task: ReceivedTask) -> tuple[list[Any], dict[str, Any]]:
        if task.type != self.type:
            # reached through a ServeMux prefix ("report:deliver" for "report:deliver:v3"): another task's
            # payload, so not ours to run; retried like any task without a handler
            raise HandlerNotFound(task.type)
        kwargs = self.decode(task.payload)
        if self._task_param is not None:
            kwargs[self._task_param] = task
        args = [kwargs.pop(p.name) for p in self._params if p.kind is inspect.Parameter.POSITIONAL_ONLY
                and p.name in kwargs]
        return args, kwargs

    @property
    def handler(self) -> Callable[[ReceivedTask], Any]:
        """The ServeMux handler: async for an async function, plain (run in a worker thread) otherwise.

        It runs tasks of exactly this type: one that reaches it as a prefix match raises HandlerNotFound.
        """
        if self.is_async:
            async def run_async(task: ReceivedTask) -> Any:
                args, kwargs = self._call_args(task)
                return await self.fn(*args, **kwargs)  # type: ignore[misc]
            return run_async

        def run(task: ReceivedTask) -> Any:
            args, kwargs = self._call_args(task)
            return self.fn(*args, **kwargs)
        return run

    def describe(self, payload: bytes, *, pretty: bool = False) -> str | None:
        """The call a payload stands for, `send_welcome(to='ada@example.com')`, from its JSON values as they
        are (no conversion, no user code runs); None when the payload is not a JSON object."""
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return None
        if not isinstance(obj, dict):
            return None
        name = self.name
        parts = [f"{k}={v!r}" for k, v in obj.items()]
        one_line = f"{name}({', '.join(parts)})"
        if not pretty or len(one_line) <= 88 or not parts:
            return one_line
        return name + "(\n" + "".join(f"    {p},\n" for p in parts) + ")"


_POS_ONLY = inspect.Parameter.POSITIONAL_ONLY
_POSITIONAL = (_POS_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _parameters(fn: Callable[..., Any], sig: inspect.Signature,
                task_type: str) -> tuple[tuple[_Param, ...], Any, str | None]:
    """The payload's parameters, the annotation of **kwargs (None if the function has none) and the name of
    a ReceivedTask parameter. Raises InvalidArgumentError for *args (a JSON object has no place for them)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # an annotation that does not resolve
        raise InvalidArgumentError(f"task {task_type!r}: the annotations of {fn!r} do not resolve: {exc}",
                                   argument="fn") from None
    first = next(iter(sig.parameters.values()), None)
    owner = getattr(fn, "__qualname__", "").split(".")[-2:-1]
    if first is not None and first.name in ("self", "cls") and owner and owner[0] != "<locals>":
        # a function of a class body: the worker would call it without its instance or class
        raise InvalidArgumentError(
            f"task {task_type!r}: {fn.__qualname__} is a method ({first.name!r} cannot travel in a payload); "
            f"make the task a module-level function or a @staticmethod, or decorate a bound method "
            f"(mux.task(...)(instance.method))", argument="fn")
    params, extra, task_param = [], None, None
    for p in sig.parameters.values():
        ann = hints.get(p.name, inspect.Parameter.empty)
        why = unresolved(ann)
        if why is not None:  # found now, not as a NameError in every enqueue and every run
            raise InvalidArgumentError(f"task {task_type!r}: parameter {p.name}: {why}", argument=p.name)
        if ann is ReceivedTask:
            task_param = p.name
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            raise InvalidArgumentError(
                f"task {task_type!r}: *{p.name} cannot be sent by name; use named parameters (or a list)",
                argument=p.name)
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = ann
        else:
            params.append(_Param(p, ann))
    return tuple(params), extra, task_param


def _given(options: TaskOptions) -> list[str]:
    """The fields of options that differ from the defaults (so .options(TaskOptions(queue=...)) keeps the
    decorator's max_retry)."""
    base = TaskOptions()
    return [f for f in options.__dataclass_fields__ if getattr(options, f) != getattr(base, f)]


def _kind(obj: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(obj), "a number")


def task(task_type: str, /, options: TaskOptions | None = None,
         **fields: Any) -> Callable[[Callable[P, R]], TypedTask[P, R]]:
    """Decorator: the function as a TypedTask of task_type with these default options (no mux; see
    ServeMux.task to also handle it). Raises InvalidArgumentError for a bad type, option or signature."""
    defaults = options_from(options, fields)

    def make(fn: Callable[P, R]) -> TypedTask[P, R]:
        return remember(TypedTask(fn, task_type, defaults))
    return make


def remember(t: TypedTask[P, R]) -> TypedTask[P, R]:
    """Keep t in this process's registry under its type (replacing an earlier one); returns t."""
    _REGISTRY[t.type] = t
    return t


def registered(task_type: str) -> TypedTask[Any, Any] | None:
    """The TypedTask of task_type made in this process (the last one, if several were), or None."""
    return _REGISTRY.get(task_type)


def import_tasks(modules: str) -> list[str]:
    """Import the comma-separated modules (e.g. "app.tasks,billing.jobs") so their typed tasks register here,
    the current directory first on sys.path as for `asynqpy worker`. Returns the names imported.
    Raises UsageError naming a module that cannot be imported."""
    names = [m.strip() for m in modules.split(",") if m.strip()]
    if names and "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise UsageError(f"cannot import the tasks module {name!r}: {exc}") from exc
    return names


_env_loaded = False


def _load_env() -> None:
    """Once per process: import the modules named by ASYNQPY_TASKS, so readers that never import the app's
    code (the CLI, the dashboard) know its typed tasks. A module that fails to import is logged, not raised."""
    global _env_loaded
    if _env_loaded:
        return
    _env_loaded = True
    try:
        import_tasks(os.environ.get(TASKS_ENV, ""))
    except UsageError as exc:
        log.warning("%s: %s; its payloads are shown as JSON", TASKS_ENV, exc)


def describe(task_type: str, payload: bytes, *, pretty: bool = False) -> str | None:
    """The call form of a payload when task_type is registered in this process (or in a module named by
    ASYNQPY_TASKS) and the payload is a JSON object, else None (the Inspector then shows JSON)."""
    _load_env()
    t = _REGISTRY.get(task_type)
    return t.describe(payload, pretty=pretty) if t is not None and payload else None


def registry() -> Mapping[str, TypedTask[Any, Any]]:
    """The typed tasks of this process by task type (read-only view)."""
    from types import MappingProxyType
    return MappingProxyType(_REGISTRY)


__all__ = ["PayloadMismatch", "TypedTask", "describe", "dumps", "import_tasks", "registered", "registry", "task"]
